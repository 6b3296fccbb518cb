# Preemptible (spot) capacity: a job whose pods target preemptible nodes, with neither an
# elasticPolicy nor a checkpoint location, loses all its progress at every eviction, and a
# gang loses it when any one of its pods is evicted. Warned; with `refuseNeverRestart`, a job
# with a `restartPolicy: Never` replica there is refused (it is not even restarted).
#
# "Targets" means a nodeSelector entry or a required node-affinity expression (`In`) naming a
# preemptible label value, or a toleration of a preemptible taint. A checkpoint location is an
# env var or a volume mount path the params name, in any container of the job.
# METADATA
# custom:
#   applies_when:
#     all: [placement]
package gangplank.policies.spot_capacity

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Preemptible capacity needs elasticity or checkpoints",
	"description": "A job targeting preemptible nodes (params labels and taints; GKE spot/preemptible, EKS and Karpenter spot, AKS spot by default) without elasticPolicy and without a checkpoint env var or mount (params) is warned; refuseNeverRestart refuses it when a replica there has restartPolicy Never.",
	"action": "deny",
	"params": {
		# Node label → values that mark preemptible capacity.
		"labels": {
			"cloud.google.com/gke-spot": ["true"],
			"cloud.google.com/gke-preemptible": ["true"],
			"eks.amazonaws.com/capacityType": ["SPOT"],
			"karpenter.sh/capacity-type": ["spot"],
			"kubernetes.azure.com/scalesetpriority": ["spot"],
		},
		# Taint keys of preemptible nodes; a toleration of one targets them.
		"taints": ["cloud.google.com/gke-spot", "cloud.google.com/gke-preemptible", "kubernetes.azure.com/scalesetpriority"],
		# Env var names and volume mount paths that say where checkpoints go.
		"checkpointEnv": ["CHECKPOINT_DIR", "CHECKPOINT_PATH", "CKPT_DIR", "SAVE_DIR"],
		"checkpointMountPaths": ["/checkpoints", "/checkpoint", "/ckpt"],
		# Refuse (not only warn) when a replica on preemptible nodes has restartPolicy Never.
		"refuseNeverRestart": false,
	},
}

params := data.params.spot_capacity

# How replica r targets preemptible nodes, for the message; empty when it does not.
# (Comprehensions, not an `else` chain: regorus's VM and interpreter disagree on `some`
# inside else branches.)
targets(r) := array.concat(
	array.concat(
		[sprintf("nodeSelector %s=%s", [k, v]) |
			some k, v in r.nodeSelector
			v in object.get(params.labels, k, [])
		],
		[sprintf("node affinity %s In %v", [e.key, e.values]) |
			some term in affinity_terms(r)
			some e in term.matchExpressions
			e.operator == "In"
			some v in e.values
			v in object.get(params.labels, e.key, [])
		],
	),
	[sprintf("a toleration of %s", [t.key]) |
		some t in r.tolerations
		t.key in params.taints
	],
)

affinity_terms(r) := terms if {
	terms := lib.raw_pod_spec(r).affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
	is_array(terms)
} else := []

target(r) := targets(r)[0]

preemptible := [r | some r in input.job.replicas; target(r)]

elastic if object.get(input.object.spec, "elasticPolicy", null) != null

checkpointed if {
	some r in input.job.replicas
	some c in r.containers
	some name in c.envNames
	name in params.checkpointEnv
}

checkpointed if {
	some r in input.job.replicas
	some c in r.containers
	some m in lib.raw_container(r, c).volumeMounts
	m.mountPath in params.checkpointMountPaths
}

exposed if {
	count(preemptible) > 0
	not elastic
	not checkpointed
}

finding := {"path": r.podSpecPath, "msg": msg} if {
	exposed
	r := preemptible[0]
	msg := sprintf("%s pods target spot nodes (%s) with no elasticPolicy or checkpoint env/mount: each eviction loses all progress", [r.type, target(r)])
}

never_restarted if {
	some r in preemptible
	r.restartPolicy == "Never"
}

violation contains finding if {
	params.refuseNeverRestart
	never_restarted
}

warning contains finding if {
	not refused
}

refused if {
	params.refuseNeverRestart
	never_restarted
}
