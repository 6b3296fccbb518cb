# Helpers shared by the built-in policies. No verdicts here: only functions.
#
# Every helper under lib/ is a function, never a rule: a rule here (`lib.x` without
# arguments) is read through the import alias `lib`, which regorus resolves by evaluating the
# whole data.gangplank.lib document (every rule of every lib file) on each reference, 15-25
# µs per policy. Helpers take the documents they read as arguments (kueue_managed(obj)),
# except the raw_* readers of input.object. See "Performance" in policies/README.md.
package gangplank.lib

import rego.v1

# ptr(base, key) appends one key to a JSON pointer, escaping "~" and "/" as RFC 6901
# requires: ptr("/limits", "nvidia.com/gpu") == "/limits/nvidia.com~1gpu".
ptr(base, key) := concat("/", [base, replace(replace(key, "~", "~0"), "/", "~1")])

# ptrs(base, keys) appends several keys.
ptrs(base, keys) := concat("", array.concat([base], [concat("", ["/", replace(replace(k, "~", "~0"), "/", "~1")]) | some k in keys]))

# A manifest value for messages: strings quoted, null as "unset", anything else as JSON.
shown(v) := "unset" if v == null

shown(v) := sprintf("\"%s\"", [v]) if is_string(v)

shown(v) := sprintf("%v", [v]) if {
	v != null
	not is_string(v)
}

# Whether messages may say what other objects of the request's namespace hold (a claim's
# modes and class, a NetworkPolicy's name and ports): only to an authenticated caller
# (input.caller.authenticated: a local run, or the apiserver with the client certificate
# `gangplank serve --client-ca` verifies). Anyone who reaches the webhook port can post a
# review naming any namespace: the verdict is the same for them, the words name nothing
# the job itself does not. Inputs written without `caller` (Rego unit tests) are local.
names_shown(inp) if object.get(inp, ["caller", "authenticated"], true) == true

# `full` when names_shown(inp), else `withheld` followed by a note saying why.
# Short: kubectl shows warnings, and the API server may cut those over 256 characters.
for_caller(inp, full, withheld) := full if names_shown(inp)

else := sprintf("%s (details withheld: caller not verified as the API server)", [withheld])

# The container of a replica that the operator configures (env, port), if any.
default_container(r) := r.containers[r.defaultContainerIndex]

# Whether replica r runs GPU work: whole GPUs or MIG slices.
uses_gpus(r) if r.gpusPerPod + r.migSlicesPerPod > 0

# The replicas of `job` (a JobView) that run GPU work, in manifest order. A list, not a set:
# a set of replicas compares whole replica objects on every insert. A policy that needs it
# in several rules binds it once: gpu_replicas := lib.gpu_replicas(input.job).
gpu_replicas(job) := [r | some r in job.replicas; r.gpusPerPod + r.migSlicesPerPod > 0]

# Whether `obj` is a Kueue workload (Kueue admits all pods at once: a gang at quota level).
kueue_managed(obj) if obj.metadata.labels["kueue.x-k8s.io/queue-name"]

# The runPolicy of `obj` as written; {} when it is absent or not an object (the run_policy
# policy reports a malformed one), so callers can index it without a type check.
run_policy(obj) := rp if {
	rp := obj.spec.runPolicy
	is_object(rp)
} else := {}

# The scheduler names that give a gang, from gang_scheduling's params `p`: the configured
# ones, and with the native gang (`scheduler: kubernetes`) the default scheduler, which pods
# naming no scheduler run on. Shared by gang_scheduling and kueue_queue.
gang_schedulers(p) := object.get(p, "gangSchedulers", []) if {
	object.get(p, "scheduler", "") != "kubernetes"
} else := array.concat(object.get(p, "gangSchedulers", []), ["default-scheduler"])
