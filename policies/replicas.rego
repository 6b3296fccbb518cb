# Replica counts within bounds. A count no cluster could run (Worker: 9223372036854775807) is
# refused with its own message rather than left to arithmetic further on, and an elastic
# PyTorchJob's range must make sense: minReplicas <= maxReplicas, and the Worker count it
# starts with inside it (the operator scales Workers only within the range).
package gangplank.policies.replicas

import rego.v1

meta := {
	"title": "Replica counts within bounds",
	"description": "Refuses a replica type with more replicas than maxReplicasPerType; for an elastic PyTorchJob, refuses elasticPolicy.minReplicas above maxReplicas and Worker replicas outside [minReplicas, maxReplicas].",
	"action": "deny",
	"params": {
		# Most replicas one replica type may declare. 10,000 pods is beyond any training job
		# run today and far below where pod totals or GPU totals could overflow.
		"maxReplicasPerType": 10000,
	},
}

params := data.params.replicas

violation contains {"path": concat("", [r.path, "/replicas"]), "msg": msg} if {
	some r in input.job.replicas
	r.replicas > params.maxReplicasPerType
	msg := sprintf("%s has %v replicas, above the limit of %v per replica type (replicas.maxReplicasPerType)", [r.type, r.replicas, params.maxReplicasPerType])
}

elastic := e if {
	input.job.kind == "PyTorchJob"
	e := input.object.spec.elasticPolicy
	is_object(e)
}

# elasticPolicy.<name> when it is a number; other types are the CRD schema's to refuse.
bound(name) := v if {
	v := elastic[name]
	is_number(v)
}

# Only an elastic PyTorchJob has a range: one body is entered for the three findings below
# when it has none (a body costs the VM thousands of instructions even when its first test
# fails).
violation contains f if {
	is_object(elastic)
	some f in elastic_violations
}

elastic_violations contains {"path": "/spec/elasticPolicy/minReplicas", "msg": msg} if {
	min := bound("minReplicas")
	is_number(min)
	max := bound("maxReplicas")
	is_number(max)
	min > max
	msg := sprintf("elastic minReplicas %v is above maxReplicas %v; set minReplicas <= maxReplicas", [min, max])
}

elastic_violations contains {"path": concat("", [r.path, "/replicas"]), "msg": msg} if {
	some r in input.job.replicas
	r.type == "Worker"
	min := bound("minReplicas")
	is_number(min)
	r.replicas < min
	msg := sprintf("Worker replicas %v is below elasticPolicy.minReplicas %v; set replicas within [minReplicas, maxReplicas]", [r.replicas, min])
}

elastic_violations contains {"path": concat("", [r.path, "/replicas"]), "msg": msg} if {
	some r in input.job.replicas
	r.type == "Worker"
	max := bound("maxReplicas")
	is_number(max)
	r.replicas > max
	msg := sprintf("Worker replicas %v is above elasticPolicy.maxReplicas %v; set replicas within [minReplicas, maxReplicas]", [r.replicas, max])
}
