# Helpers shared by the built-in policies. No verdicts here: only functions.
package gangplank.lib

import rego.v1

# ptr(base, key) appends one key to a JSON pointer, escaping "~" and "/" as RFC 6901
# requires: ptr("/limits", "nvidia.com/gpu") == "/limits/nvidia.com~1gpu".
ptr(base, key) := concat("/", [base, replace(replace(key, "~", "~0"), "/", "~1")])

# ptrs(base, keys) appends several keys.
ptrs(base, keys) := concat("", array.concat([base], [concat("", ["/", replace(replace(k, "~", "~0"), "/", "~1")]) | some k in keys]))

# The container of a replica that the operator configures (env, port), if any.
default_container(r) := r.containers[r.defaultContainerIndex]

# Replicas that run GPU work: whole GPUs or MIG slices.
gpu_replicas contains r if {
	some r in input.job.replicas
	r.gpusPerPod + r.migSlicesPerPod > 0
}

# Whether the job is a Kueue workload (Kueue admits all pods at once: a gang at quota level).
kueue_managed if input.object.metadata.labels["kueue.x-k8s.io/queue-name"]

# The job's runPolicy, wherever the kind keeps it ({} when absent).
run_policy := object.get(input.object, ["spec", "runPolicy"], {})
