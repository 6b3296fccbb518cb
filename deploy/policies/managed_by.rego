# spec.runPolicy.managedBy hands a job to another controller (MultiKueue) instead of the
# operator. An unknown value means no controller ever runs the job; changing it on a live job
# makes two controllers, or none, own it.
package gangplank.policies.managed_by

import rego.v1

import data.gangplank.lib

meta := {
	"title": "managedBy values and immutability",
	"description": "spec.runPolicy.managedBy must be one the kind's operator accepts (upstream C2) and cannot change on UPDATE (upstream C3), for every kind. Upstream never enforces C3 for PyTorchJob (its UPDATE handler passes the new object as the old one, so the check is dead code), skips C2 and C3 for JAXJob, and has no webhook at all for MPIJob v1; gangplank checks them all.",
	"action": "deny",
	"params": {},
}

path := "/spec/runPolicy/managedBy"

managed_by(obj) := object.get(obj, ["spec", "runPolicy", "managedBy"], null)

controller := "mpi-operator" if {
	lib.mpi_v2beta1(input.job)
} else := "training-operator"

violation contains {"path": path, "msg": msg} if {
	value := managed_by(input.object)
	value != null
	not value in input.job.managedByAllowed
	msg := sprintf("managedBy %s is not supported for %s, so no controller would run the job; use one of %s, or remove it to let the %s run the job", [lib.shown(value), lib.job_kind_label(input.job), concat(", ", input.job.managedByAllowed), controller])
}

violation contains {"path": path, "msg": msg} if {
	input.request.operation == "UPDATE"
	old := managed_by(input.oldObject)
	new := managed_by(input.object)
	old != new
	msg := sprintf("managedBy is immutable: it was %s and is now %s. The controller that owns a job cannot change after creation; %s, or delete the job and create it again", [lib.shown(old), lib.shown(new), restore(old)])
}

restore(old) := "remove it again" if old == null

restore(old) := sprintf("set it back to %s", [lib.shown(old)]) if old != null
