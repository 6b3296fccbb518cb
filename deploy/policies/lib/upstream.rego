# Helpers for the policies that port (and tighten) the upstream training-operator and
# mpi-operator validation: structure, coordinator, names, containers, managed_by,
# pytorch_nproc, restart_policy, mpi_v2. Functions only, no verdicts, no rules.
#
# Raw manifest values can have any JSON type; regorus string builtins fail the whole
# evaluation on a non-string argument, so every helper here checks types first.
package gangplank.lib

import rego.v1

# The map of replica specs of `obj` exactly as written, when it is a map; `job` is its
# JobView.
replica_specs(obj, job) := m if {
	m := obj.spec[job.replicaField]
	is_object(m)
}

# The replica spec a JobView replica was read from (always an object: JobView skips others).
replica_spec_of(r) := input.object.spec[input.job.replicaField][r.key]

# kubeflow.org/v2beta1 MPIJob (mpi-operator), as opposed to the v1 MPIJob of the
# training-operator; `job` is a JobView.
mpi_v2beta1(job) if {
	job.kind == "MPIJob"
	job.apiVersion == "kubeflow.org/v2beta1"
}

# The kind as users know it; the two MPIJob versions follow different rules.
job_kind_label(job) := "MPIJob (kubeflow.org/v2beta1)" if {
	mpi_v2beta1(job)
} else := job.kind

# Canonical replica types (allowedTypes spelling) whose keys appear in the replica map of
# `obj`, even when the spec under the key is null or malformed: structure reports those, and
# rules that require a type must not report it missing a second time.
declared_replica_types(obj, job) := {t |
	some key, _ in replica_specs(obj, job)
	some t in job.allowedTypes
	lower(t) == lower(key)
}

# RFC 1035 label: what upstream requires of job names (Services are named after the job):
# ^[a-z]([-a-z0-9]*[a-z0-9])?$ and at most 63 characters, with string builtins (the first
# regex.match of a request costs several times more than these six).
dns1035_label(s) if {
	dns_label_shape(s)
	trim_left(substring(s, 0, 1), "abcdefghijklmnopqrstuvwxyz") == ""
}

# RFC 1123 label: what Kubernetes requires of container names:
# ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ and at most 63 characters.
dns1123_label(s) if {
	dns_label_shape(s)
	not startswith(s, "-")
}

# 1 to 63 characters, lowercase letters, digits and '-', not ending in '-'.
dns_label_shape(s) if {
	is_string(s)
	s != ""
	count(s) <= 63
	trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
	not endswith(s, "-")
}
