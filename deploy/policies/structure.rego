# A job whose structure cannot be read is refused with a precise pointer, instead of being
# half-understood by every other policy (and crashing the upstream webhook: a null replica
# spec is a nil dereference there). The problems come from the JobView, which records
# anything it cannot read: a missing spec or replica map, null replica specs, wrong types
# (replicas: "2"), keys that differ only in case (Worker and WORKER), malformed containers
# and GPU quantities.
package gangplank.policies.structure

import rego.v1

meta := {
	"title": "Readable job structure",
	"description": "Refuses jobs the JobView cannot read: missing spec or replica map (upstream R1, e.g. Required spec.paddleReplicaSpecs), null or non-object replica specs, replica-type keys that differ only in case, non-integer replicas, non-list containers and non-whole GPU quantities.",
	"action": "deny",
	"params": {},
}

violation contains {"path": p.path, "msg": concat("", [p.msg, hint(p)])} if {
	some p in input.job.problems
}

types := concat(", ", input.job.allowedTypes)

hint(p) := sprintf("; add spec.%s, a map from replica type (%s) to replica spec", [input.job.replicaField, types]) if {
	p.path in {"/spec", input.job.replicaSpecsPath}
	startswith(p.msg, "is required")
} else := sprintf("; write spec.%s as a map from replica type (%s) to replica spec", [input.job.replicaField, types]) if {
	contains(p.msg, "must be a map of replica specs")
} else := "; spec must be an object holding the replica specs" if {
	p.path == "/spec"
} else := "; keep one of the two keys: replica types are matched ignoring case, so both would describe the same pods" if {
	startswith(p.msg, "duplicate replica type")
} else := "; write a whole number without quotes, e.g. replicas: 2" if {
	endswith(p.path, "/replicas")
} else := "; write a list of container objects, each with at least a name and an image" if {
	contains(p.msg, "must be a list of containers")
} else := "; each list item must be a container object with at least a name and an image" if {
	contains(p.msg, "must be a container object")
} else := "; devices are not shared fractionally: request a whole number such as 1 or \"1\"" if {
	contains(p.msg, "whole number of devices")
} else := "; check the indentation of the manifest" if {
	contains(p.msg, "must be an object")
} else := ""
