# Fields of the mpi-operator's kubeflow.org/v2beta1 MPIJob that its controller validates only
# after the job is stored: an invalid job is then accepted and silently never runs (event
# ValidationError, no requeue). Refusing them at admission puts the error in front of the user.
# METADATA
# custom:
#   applies_when:
#     kinds: [MPIJob]
package gangplank.policies.mpi_v2

import rego.v1

import data.gangplank.lib

meta := {
	"title": "MPIJob v2beta1 fields",
	"description": "For kubeflow.org/v2beta1 MPIJob, when set: slotsPerWorker is a whole number >= 0, mpiImplementation is OpenMPI, Intel or MPICH, launcherCreationPolicy is AtStartup or WaitForWorkersReady, sshAuthMountPath is a non-empty path. Unset fields get the CRD defaults (1, OpenMPI, AtStartup, /root/.ssh).",
	"action": "deny",
	"params": {},
}

# The spec of a v2beta1 MPIJob; undefined for every other kind, so each rule below stops at
# its first line. A field counts as set when it is present and not null.
spec := input.object.spec if {
	lib.mpi_v2beta1(input.job)
	is_object(input.object.spec)
}

enums := {
	"mpiImplementation": ["OpenMPI", "Intel", "MPICH"],
	"launcherCreationPolicy": ["AtStartup", "WaitForWorkersReady"],
}

defaults := {
	"mpiImplementation": "OpenMPI",
	"launcherCreationPolicy": "AtStartup",
}

violation contains {"path": "/spec/slotsPerWorker", "msg": msg} if {
	value := spec.slotsPerWorker
	value != null
	not whole_non_negative(value)
	msg := sprintf("slotsPerWorker is %s; it must be a whole number of 0 or more: the MPI slots (processes) per worker in the hostfile, usually its GPU count. Remove it for the default 1", [lib.shown(value)])
}

whole_non_negative(n) if {
	is_number(n)
	floor(n) == n
	n >= 0
}

violation contains {"path": concat("/", ["/spec", field]), "msg": msg} if {
	spec
	some field, values in enums
	value := spec[field]
	value != null
	not value in values
	msg := sprintf("%s %s is not supported; use one of %s%s, or remove it for the default %s", [field, lib.shown(value), concat(", ", values), case_hint(value, values), defaults[field]])
}

case_hint(v, values) := sprintf(" (did you mean \"%s\"?)", [by_lower[lower(v)]]) if {
	is_string(v)
	by_lower := {lower(x): x | some x in values}
	by_lower[lower(v)]
} else := ""

violation contains {"path": "/spec/sshAuthMountPath", "msg": msg} if {
	value := spec.sshAuthMountPath
	value != null
	not non_empty_string(value)
	msg := sprintf("sshAuthMountPath is %s; the SSH key secret has to be mounted somewhere. Remove it for the default /root/.ssh, or set the .ssh directory of the user the containers run as, e.g. /home/mpiuser/.ssh", [empty_shown(value)])
}

non_empty_string(v) if {
	is_string(v)
	v != ""
}

empty_shown(v) := "empty" if v == ""

empty_shown(v) := lib.shown(v) if v != ""
