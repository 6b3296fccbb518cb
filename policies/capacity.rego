# Capacity: refuse, at apply time, a gang the cluster can never place.
#
# Reads data.cluster, the Node inventory (present when `serve` reaches a cluster, or with
# `check --cluster FILE`; without it this policy says nothing). Nodes come grouped into
# classes of identical nodes (labels apart from the hostname, NoSchedule/NoExecute taints,
# extended resources), so the cost does not grow with the node count.
#
# For every replica type that asks for GPUs or MIG slices, the schedulable nodes its pods
# may land on are those whose labels satisfy the pod's nodeSelector and whose taints the pod
# tolerates (node affinity is not evaluated). On those, the pods are packed node by node:
# a node with 8 GPUs holds one pod of 5 GPUs, not 1.6. Replica types asking for the same
# resources with the same selector and tolerations share nodes and are counted together.
# Refused: a pod larger than every matching node, a gang (its minAvailable pods) that the
# matching nodes cannot hold all at once, and pods no schedulable node matches at all. The
# demand and the capacity are in the message. Capacity is what nodes have, not what is
# free now: a refused job could never run here; an admitted one may still queue.
package gangplank.policies.capacity

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Gangs the cluster can hold",
	"description": "With a cluster inventory (data.cluster), refuses pods larger than every schedulable node their nodeSelector and tolerations allow, gangs (minAvailable pods) that those nodes cannot hold at once when packed node by node, and pods no schedulable node matches; messages give demand and capacity.",
	"action": "deny",
	"params": {
		# Share of a matching node class's capacity a gang may count on (0 < f <= 1): below
		# 1 keeps headroom for system pods and other tenants.
		"capacityFraction": 1,
		# Also refuse replicas without GPUs whose nodeSelector/tolerations match no node.
		"checkCpuReplicas": true,
	},
}

params := data.params.capacity

cluster := data.cluster

stale_note := lib.inventory_stale_note

# What the cluster must have known for any verdict: an inventory with nodes in it.
inventory_known if {
	is_object(cluster)
	cluster.node_count > 0
}

# Per pod of replica r: resource -> amount, over regular containers. MIG resources that no
# node advertises are left to the mig_inventory policy, which says what the nodes offer.
demand(r) := {name: total |
	some c in r.containers
	some g in c.gpuResources
	name := g.name
	counted(name)
	total := sum([lib.gpu_amount(h) | some d in r.containers; some h in d.gpuResources; h.name == name])
	total > 0
}

counted(name) if not startswith(name, "nvidia.com/mig-")

counted(name) if cluster.resources[name]

gpu_replicas := [r | some r in input.job.replicas; count(demand(r)) > 0]

# The node class admits the pods of r: labels satisfy the nodeSelector, taints are tolerated.
matches(r, class) if {
	not unselected(r, class)
	not untolerated(r, class)
}

unselected(r, class) if {
	some k, v in r.nodeSelector
	not selects(class, k, v)
}

selects(class, k, v) if class.labels[k] == v

selects(class, "kubernetes.io/hostname", v) if v in class.names

untolerated(r, class) if {
	some taint in class.taints
	not tolerated(r.tolerations, taint)
}

tolerated(tolerations, taint) if {
	some t in tolerations
	tolerates(t, taint)
}

tolerates(t, taint) if {
	object.get(t, "operator", "Equal") == "Exists"
	key_matches(t, taint)
	effect_matches(t, taint)
}

tolerates(t, taint) if {
	object.get(t, "operator", "Equal") == "Equal"
	object.get(t, "key", "") == taint.key
	object.get(t, "value", "") == taint.value
	effect_matches(t, taint)
}

key_matches(t, _) if object.get(t, "key", "") == ""

key_matches(t, taint) if t.key == taint.key

effect_matches(t, _) if object.get(t, "effect", "") == ""

effect_matches(t, taint) if t.effect == taint.effect

matching_classes(r) := [c | some c in cluster.node_classes; matches(r, c)]

# Pods of r one node of the class holds: the scarcest resource decides.
per_node(r, class) := min([floor(object.get(class.allocatable, name, 0) / n) | some name, n in demand(r)])

# Pods of r the matching nodes hold at once, within capacityFraction.
placeable(r) := floor(params.capacityFraction * sum([n | some c in matching_classes(r); n := c.size * per_node(r, c)]))

matching_nodes(r) := sum([c.size | some c in matching_classes(r)])

shown_demand(r) := concat(" + ", [sprintf("%d %s", [n, name]) | some name, n in demand(r)])

# The largest amount of each demanded resource on one matching node.
largest(r) := concat(", ", [sprintf("%d %s", [m, name]) |
	some name, _ in demand(r)
	m := max(array.concat([0], [object.get(c.allocatable, name, 0) | some c in matching_classes(r)]))
])

# Which nodes the pods may use, in words.
selection(r) := "nodeSelector: none" if {
	count(r.nodeSelector) == 0
} else := sprintf("nodeSelector: %v", [r.nodeSelector])

# Matching nodes with room for at least one pod of r.
fitting_nodes(r) := sum([c.size | some c in matching_classes(r); per_node(r, c) > 0])

# Replica types that share nodes: same demand, selector and tolerations.
signature(r) := {"demand": demand(r), "selector": r.nodeSelector, "tolerations": r.tolerations}

groups contains signature(r) if some r in gpu_replicas

group_members(sig) := [r | some r in gpu_replicas; signature(r) == sig]

group_pods(sig) := sum([r.replicas | some r in group_members(sig)])

group_names(sig) := concat(" + ", [sprintf("%d %s", [r.replicas, r.type]) | some r in group_members(sig)])

total_pods := sum([r.replicas | some r in input.job.replicas])

# The gang's minimum when schedulingPolicy.minAvailable asks for fewer than all pods.
min_available := n if {
	n := input.object.spec.runPolicy.schedulingPolicy.minAvailable
	is_number(n)
	n < total_pods
}

violation contains {"path": lib.ptr(r.podSpecPath, "nodeSelector"), "msg": msg} if {
	inventory_known
	some r in input.job.replicas
	checked_for_selection(r)
	matching_nodes(r) == 0
	msg := sprintf("%s pods match no schedulable node: none of the cluster's %d nodes (%d cordoned) fits %s with taints the pods tolerate (tolerations: %v)%s", [r.type, cluster.node_count, cluster.unschedulable_nodes, selection(r), r.tolerations, stale_note])
}

checked_for_selection(r) if count(demand(r)) > 0

checked_for_selection(r) if params.checkCpuReplicas

violation contains {"path": r.podSpecPath, "msg": msg} if {
	inventory_known
	some r in gpu_replicas
	matching_nodes(r) > 0
	placeable_per_node_max(r) == 0
	msg := sprintf("a %s pod asks for %s; no schedulable node it may use has that much (%d such nodes: %s; taints tolerated; the largest has %s)%s", [r.type, shown_demand(r), matching_nodes(r), selection(r), largest(r), stale_note])
}

placeable_per_node_max(r) := max([per_node(r, c) | some c in matching_classes(r)])

# Without minAvailable below the total, every pod of a group must fit at once.
violation contains {"path": r.path, "msg": msg} if {
	inventory_known
	not min_available
	some sig in groups
	members := group_members(sig)
	r := members[0]
	placeable_per_node_max(r) > 0
	group_pods(sig) > placeable(r)
	msg := sprintf("the gang needs %s pods of %s each at once; %d schedulable nodes can take such a pod (%s; taints tolerated) and together they hold %d of them (at most %s per node, pods packed node by node%s)%s", [group_names(sig), shown_demand(r), fitting_nodes(r), selection(r), placeable(r), largest(r), fraction_note, stale_note])
}

# With minAvailable, the gang starts once that many pods run: count what each type can place.
violation contains {"path": "/spec/runPolicy/schedulingPolicy/minAvailable", "msg": msg} if {
	inventory_known
	n := min_available
	cpu_pods := sum([r.replicas | some r in input.job.replicas; count(demand(r)) == 0])
	gpu_pods := sum([n | some sig in groups; n := min([group_pods(sig), placeable(group_members(sig)[0])])])
	n > cpu_pods + gpu_pods
	msg := sprintf("minAvailable is %d, but the matching nodes hold at most %d of the gang's GPU pods at once (plus %d without GPUs)%s", [n, gpu_pods, cpu_pods, stale_note])
}

fraction_note := "" if {
	params.capacityFraction == 1
} else := sprintf(", counting %v of their capacity", [params.capacityFraction])
