# spec.runPolicy: persisted defaults and bounds, the same for every kind.
#
# Upstream defaults cleanPodPolicy to None in memory only (never persisted), so a job whose
# Worker failed keeps its Master and other pods running, holding GPUs (#1579); and without
# a backoffLimit or TTL a crash-looping job restarts forever and finished jobs pile up.
# mpi-operator's value rules (cleanPodPolicy in None|Running|All, counts ≥ 0) are applied
# to every kind, since the training-operator webhook checks none of them.
package gangplank.policies.run_policy

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Run policy defaults and bounds",
	"description": "Persists runPolicy defaults (cleanPodPolicy, backoffLimit, ttlSecondsAfterFinished; MPIJob v1's legacy spec.cleanPodPolicy is carried over) and refuses invalid or out-of-bounds values: cleanPodPolicy outside None|Running|All, negative counts, backoffLimit and activeDeadlineSeconds above the configured maxima.",
	"action": "deny",
	"params": {
		# Persisted when runPolicy.cleanPodPolicy is unset. Running deletes the pods still
		# running when the job ends (upstream's in-memory default None leaves them running).
		# null or "" : don't default.
		"cleanPodPolicy": "Running",
		# Persisted when runPolicy.backoffLimit is unset; null: don't default.
		"backoffLimit": 3,
		# Persisted when runPolicy.ttlSecondsAfterFinished is unset (one day); null: don't default.
		"ttlSecondsAfterFinished": 86400,
		# Largest backoffLimit accepted; null: no bound.
		"maxBackoffLimit": 10,
		# Largest activeDeadlineSeconds accepted (30 days); null: no bound.
		"maxActiveDeadlineSeconds": 2592000,
	},
}

params := data.params.run_policy

run_policy_path := "/spec/runPolicy"

clean_pod_policies := ["None", "Running", "All"]

count_fields := ["backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"]

# spec.runPolicy as written: an object, {} when absent or null, undefined when malformed.
run_policy := rp if {
	rp := input.object.spec.runPolicy
	is_object(rp)
} else := {} if {
	is_object(input.object.spec)
	object.get(input.object.spec, "runPolicy", null) == null
}

# kubeflow.org/v1 MPIJob keeps a legacy spec.cleanPodPolicy that the operator syncs with
# runPolicy.cleanPodPolicy (runPolicy wins).
legacy_mpi if {
	input.job.kind == "MPIJob"
	input.job.apiVersion == "kubeflow.org/v1"
}

legacy_clean_pod_policy := v if {
	legacy_mpi
	v := input.object.spec.cleanPodPolicy
	v != null
}

# --- defaults -----------------------------------------------------------------------------

# The cleanPodPolicy to persist: the legacy MPIJob v1 value when valid (so upstream's sync
# keeps what the user asked for), else the parameter.
clean_pod_policy_default := legacy_clean_pod_policy if {
	legacy_clean_pod_policy in clean_pod_policies
} else := params.cleanPodPolicy if {
	is_string(params.cleanPodPolicy)
	params.cleanPodPolicy != ""
}

mutation contains {"op": "default", "path": "/spec/runPolicy/cleanPodPolicy", "value": value} if {
	object.get(run_policy, "cleanPodPolicy", null) == null
	value := clean_pod_policy_default
}

mutation contains {"op": "default", "path": concat("/", [run_policy_path, field]), "value": value} if {
	some field in ["backoffLimit", "ttlSecondsAfterFinished"]
	object.get(run_policy, field, null) == null
	value := params[field]
	is_number(value)
}

# --- validation ---------------------------------------------------------------------------

violation contains {"path": run_policy_path, "msg": msg} if {
	rp := input.object.spec.runPolicy
	rp != null
	not is_object(rp)
	msg := sprintf("runPolicy must be an object (cleanPodPolicy, backoffLimit, ttlSecondsAfterFinished, ...), got %s; write it as a map or remove it", [lib.shown(rp)])
}

violation contains {"path": "/spec/runPolicy/cleanPodPolicy", "msg": msg} if {
	v := run_policy.cleanPodPolicy
	v != null
	not v in clean_pod_policies
	msg := sprintf("cleanPodPolicy %s is not one of None, Running, All; use Running to delete the pods still running when the job finishes (None leaves them holding their GPUs)", [lib.shown(v)])
}

violation contains {"path": "/spec/cleanPodPolicy", "msg": msg} if {
	v := legacy_clean_pod_policy
	v != null
	not v in clean_pod_policies
	msg := sprintf("the legacy spec.cleanPodPolicy %s is not one of None, Running, All; remove it and set spec.runPolicy.cleanPodPolicy instead (e.g. Running)", [lib.shown(v)])
}

warning contains {"path": "/spec/cleanPodPolicy", "msg": msg} if {
	legacy := legacy_clean_pod_policy
	legacy != null
	current := run_policy.cleanPodPolicy
	current != null
	legacy != current
	msg := sprintf("the legacy spec.cleanPodPolicy %s is ignored: the operator uses spec.runPolicy.cleanPodPolicy %s and overwrites the legacy field with it; remove spec.cleanPodPolicy", [lib.shown(legacy), lib.shown(current)])
}

# The count fields that hold a whole number ≥ 0, found without a call (the usual case: the
# defaults written above); count_problem is called only for the others.
valid_counts := {field |
	some field in count_fields
	v := run_policy[field]
	is_number(v)
	v >= 0
	floor(v) == v
}

violation contains {"path": concat("/", [run_policy_path, field]), "msg": msg} if {
	some field in count_fields
	not field in valid_counts
	v := run_policy[field]
	v != null
	msg := count_problem(field, v)
}

count_problem(field, v) := sprintf("%s must be a whole number of %s, got %s", [field, unit[field], lib.shown(v)]) if {
	not is_whole(v)
}

count_problem(field, v) := sprintf("%s is %v; it must be 0 or more (%s)", [field, v, meaning[field]]) if {
	is_whole(v)
	v < 0
}

violation contains {"path": "/spec/runPolicy/backoffLimit", "msg": msg} if {
	v := run_policy.backoffLimit
	is_number(v)
	max := params.maxBackoffLimit
	is_number(max)
	v > max
	msg := sprintf("backoffLimit is %v, above the maximum of %v: a crash-looping job would hold its GPUs through %v restarts. Set it to %v or less, and fix the cause of repeated failures", [v, max, v, max])
}

violation contains {"path": "/spec/runPolicy/activeDeadlineSeconds", "msg": msg} if {
	v := run_policy.activeDeadlineSeconds
	is_number(v)
	max := params.maxActiveDeadlineSeconds
	is_number(max)
	v > max
	msg := sprintf("activeDeadlineSeconds is %v (%s), above the maximum of %v (%s); set it to %v or less, and resume longer runs from a checkpoint in a new job", [v, days(v), max, days(max), max])
}

is_whole(v) if {
	is_number(v)
	floor(v) == v
}

unit := {
	"backoffLimit": "retries",
	"activeDeadlineSeconds": "seconds",
	"ttlSecondsAfterFinished": "seconds",
}

meaning := {
	"backoffLimit": "the number of retries before the job is marked Failed",
	"activeDeadlineSeconds": "seconds the job may run before it is failed",
	"ttlSecondsAfterFinished": "seconds a finished job is kept before it is deleted",
}

days(seconds) := sprintf("%v days", [round((seconds / 86400) * 10) / 10])
