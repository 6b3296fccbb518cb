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

allowed := ["Never", "OnFailure"] if lib.mpi_v2beta1

allowed := ["Always", "OnFailure", "Never", "ExitCode"] if not lib.mpi_v2beta1

violation contains {"path": lib.ptr(r.path, "restartPolicy"), "msg": msg} if {
	some r in input.job.replicas
	value := lib.replica_field_of(r, "restartPolicy")
	value != null
	value != ""
	not value in allowed
	msg := sprintf("restartPolicy %s is not supported for %s %s pods; use one of %s%s", [lib.shown(value), lib.job_kind_label, r.type, concat(", ", allowed), hint(value)])
}

hint(v) := sprintf(" (did you mean \"%s\"?)", [a]) if {
	is_string(v)
	some a in allowed
	lower(a) == lower(v)
} else := "; the mpi-operator runs the launcher as a batch Job, which only supports these" if {
	lib.mpi_v2beta1
	v in {"Always", "ExitCode"}
} else := ""
