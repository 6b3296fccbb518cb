# MIG against the nodes: a pod asking for a MIG slice no node advertises waits forever.
#
# Under the NVIDIA device plugin's mixed strategy each MIG profile is its own resource
# (nvidia.com/mig-1g.10gb); under the single strategy every slice is advertised as
# nvidia.com/gpu and nodes carry nvidia.com/mig.strategy=single. Reads data.cluster (silent
# without a cluster inventory) and names what the nodes do advertise.
# METADATA
# custom:
#   applies_when:
#     all: [cluster, mig]
package gangplank.policies.mig_inventory

import rego.v1

import data.gangplank.lib

meta := {
	"title": "MIG resources the nodes advertise",
	"description": "With a cluster inventory, refuses MIG resources (nvidia.com/mig-*) that no node advertises (a cordoned node counts: a pod may tolerate the cordon; the capacity policy judges which nodes it may use), naming the MIG resources that are advertised, and refuses MIG requests on clusters whose nodes use the single strategy (slices appear as nvidia.com/gpu there).",
	"action": "deny",
	"params": {},
}

cluster := data.cluster

stale_note := lib.inventory_stale_note

advertised := sort([name | some name, _ in lib.offered_resources; startswith(name, "nvidia.com/mig-")])

single_strategy if "single" in cluster.mig_strategies

asked contains {"r": r, "c": c, "name": g.name} if {
	is_object(cluster)
	cluster.node_count > 0
	some r in input.job.replicas
	some c in r.containers
	some g in c.gpuResources
	startswith(g.name, "nvidia.com/mig-")
	not lib.offered_resources[g.name]
}

violation contains {"path": lib.ptr(a.c.path, "resources"), "msg": msg} if {
	some a in asked
	single_strategy
	msg := sprintf("%s asks for %s, but this cluster's MIG nodes use the single strategy: their slices are advertised as nvidia.com/gpu; ask for nvidia.com/gpu and select the GPU model with a nodeSelector%s", [a.r.type, a.name, stale_note])
}

violation contains {"path": lib.ptr(a.c.path, "resources"), "msg": msg} if {
	some a in asked
	not single_strategy
	msg := sprintf("%s asks for %s, which no node advertises; MIG resources on offer: %s%s", [a.r.type, a.name, offered, stale_note])
}

offered := "none" if {
	count(advertised) == 0
} else := concat(", ", advertised)
