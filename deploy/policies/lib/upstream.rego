# Helpers for the policies that port (and tighten) the upstream training-operator and
# mpi-operator validation: structure, coordinator, names, containers, managed_by,
# pytorch_nproc, restart_policy, mpi_v2. Functions only, no verdicts.
#
# Raw manifest values can have any JSON type; regorus string builtins fail the whole
# evaluation on a non-string argument, so every helper here checks types first.
package gangplank.lib

import rego.v1

# The map of replica specs exactly as written, when it is a map.
replica_spec_map := m if {
	m := input.object.spec[input.job.replicaField]
	is_object(m)
}

# The replica spec a JobView replica was read from (always an object: JobView skips others).
replica_spec_of(r) := input.object.spec[input.job.replicaField][r.key]

# The value of `field` in replica r's spec as written; null when absent.
replica_field_of(r, field) := object.get(replica_spec_of(r), field, null)

# kubeflow.org/v2beta1 MPIJob (mpi-operator), as opposed to the v1 MPIJob of the
# training-operator.
mpi_v2beta1 if {
	input.job.kind == "MPIJob"
	input.job.apiVersion == "kubeflow.org/v2beta1"
}

# The kind as users know it; the two MPIJob versions follow different rules.
job_kind_label := "MPIJob (kubeflow.org/v2beta1)" if mpi_v2beta1

job_kind_label := input.job.kind if not mpi_v2beta1

# Canonical replica types (allowedTypes spelling) whose keys appear in the replica map, even
# when the spec under the key is null or malformed: structure reports those, and rules that
# require a type must not report it missing a second time.
declared_replica_types contains t if {
	some key, _ in replica_spec_map
	some t in input.job.allowedTypes
	lower(t) == lower(key)
}

# A JSON value for messages: strings quoted, null as "unset", anything else as JSON.
shown(v) := "unset" if v == null

shown(v) := sprintf("\"%s\"", [v]) if is_string(v)

shown(v) := sprintf("%v", [v]) if {
	v != null
	not is_string(v)
}

# RFC 1035 label: what upstream requires of job names (Services are named after the job).
dns1035_label_pattern := `^[a-z]([-a-z0-9]*[a-z0-9])?$`

# RFC 1123 label: what Kubernetes requires of container names.
dns1123_label_pattern := `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`

# Longest DNS label (pod, Service and container names, label values).
max_dns_label_length := 63
