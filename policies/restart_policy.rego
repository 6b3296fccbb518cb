# restartPolicy of each replica type. The CRDs have no enum, so a typo ("Onfailure") is
# stored, and the operator then treats the replica as if it had no restart policy at all.
package gangplank.policies.restart_policy

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Replica restartPolicy values",
	"description": "restartPolicy must be Always, OnFailure, Never or ExitCode for kubeflow.org/v1 kinds, and Never or OnFailure for the mpi-operator's MPIJob v2beta1 (whose launcher is a batch Job). Unset or empty means the kind's default.",
	"action": "deny",
	"params": {},
}

mpi_v2 if lib.mpi_v2beta1(input.job)

allowed := ["Never", "OnFailure"] if mpi_v2

allowed := ["Always", "OnFailure", "Never", "ExitCode"] if not mpi_v2

# The restartPolicy written on replica r; unset and "" mean the kind's default. JobView has
# the declared strings; any other type (reported by structure too) is read as written. Two
# bodies rather than a call per replica: most replicas declare an allowed string, and the
# first body stops for them without a call.
violation contains {"path": lib.ptr(r.path, "restartPolicy"), "msg": refusal(r, value)} if {
	some r in input.job.replicas
	r.restartPolicySet
	value := r.restartPolicy
	not value in allowed
	value != ""
}

violation contains {"path": lib.ptr(r.path, "restartPolicy"), "msg": refusal(r, value)} if {
	some r in input.job.replicas
	not r.restartPolicySet
	value := object.get(lib.replica_spec_of(r), "restartPolicy", null)
	value != null
	not is_string(value)
}

refusal(r, value) := sprintf("restartPolicy %s is not supported for %s %s pods; use one of %s%s", [lib.shown(value), lib.job_kind_label(input.job), r.type, concat(", ", allowed), hint(value)])

# The allowed values by their lower-case spelling, for "did you mean".
allowed_by_lower := {lower(a): a | some a in allowed}

hint(v) := sprintf(" (did you mean \"%s\"?)", [allowed_by_lower[lower(v)]]) if {
	is_string(v)
	allowed_by_lower[lower(v)]
} else := "; the mpi-operator runs the launcher as a batch Job, which only supports these" if {
	mpi_v2
	v in {"Always", "ExitCode"}
} else := ""
