# Capacity: refuse, at apply time, a gang kube-scheduler can never place; warn when it may not.
#
# Reads data.cluster, the Node inventory (present when `serve` reaches a cluster, or with
# `check --cluster FILE`; without it this policy says nothing). Nodes come grouped into
# classes of identical nodes (labels apart from the hostname, NoSchedule/NoExecute taints,
# the allocatable amount of every resource), so the cost does not grow with the node count.
# A cordoned node is a class with the taint node.kubernetes.io/unschedulable:NoSchedule: a
# pod that tolerates it may go there (kube-scheduler's NodeUnschedulable plugin).
#
# What a pod needs: every resource it requests (input.job.replicas[].podRequests: cpu,
# memory, GPUs, MIG slices, any extended resource, by Kubernetes' effective request rule)
# plus one of the node's `pods`. The nodes a replica type reaches are those whose labels
# satisfy its nodeSelector and whose taints it tolerates (node affinity, pod (anti-)affinity,
# topology spread and host ports are not evaluated). A node holds floor(allocatable /
# request) pods of one size, the scarcest resource deciding: 8 GPUs hold one pod of 5.
#
# Groups: replica types with the same per-pod demand and the same reachable nodes are one
# group (Master and Worker alike are counted together).
#   - A group whose nodes no other group reaches is decided exactly: it fits iff the sum over
#     its nodes of the pods each holds is at least its pods, whatever order kube-scheduler
#     places them in.
#   - Groups sharing nodes are refused when a necessary condition fails: a group does not fit
#     alone; for some set of groups and some resource, their summed requests exceed what all
#     the nodes any of them reaches have; for groups of one pod size, Hall's condition on the
#     pods those nodes hold. They are admitted when each group fits even after the others
#     took the most room they can take from its nodes (kube-scheduler then places every pod
#     in any order). Otherwise the verdict depends on kube-scheduler's one-pass greedy order
#     (a Master without a nodeSelector may take the A100 node the Workers need; pods of
#     different sizes spread by LeastAllocated fragment the nodes): a warning names the
#     replica types and the fix, and nothing is refused.
#   - schedulingPolicy.minAvailable below the total: the gang starts once that many pods run.
#     Refused when even the best choice cannot fit (each group at most what it holds alone);
#     admitted when that many are sure to be placed in any order; else a warning. Pods no node
#     can take are then a warning, not a refusal: the gang may start without them.
# Where the counts cannot decide, the placement search (data.cluster.kube_scheduler, see below
# and policies/README.md) plays kube-scheduler's pod group cycle in every order and tie.
# Capacity is what nodes have, not what is free now: a refused job could never run here (a
# refusal of the search: kube-scheduler never places it on these nodes idle); an admitted one
# may still queue. Not modelled, by design: the node lifecycle controller's
# condition taints (not-ready, pressure), which pass; pods already running.
# METADATA
# custom:
#   applies_when:
#     all: [cluster]
package gangplank.policies.capacity

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Gangs the cluster can hold",
	"description": "With a cluster inventory (data.cluster), refuses pods larger than every node their nodeSelector and tolerations allow (cpu, memory, GPUs, MIG, extended resources, pods), gangs (minAvailable pods) that those nodes cannot hold at once, and pods no node matches; warns when the gang fits but kube-scheduler's one-pass order may not find the placement. Messages give demand and capacity.",
	"action": "deny",
	"params": {
		# Share of a matching node class's capacity a gang may count on (0 < f <= 1): below
		# 1 keeps headroom for system pods and other tenants.
		"capacityFraction": 1,
		# Also check replicas without extended resources (cpu/memory only): their
		# nodeSelector/tolerations must match a node, and they take room from the others.
		"checkCpuReplicas": true,
	},
}

params := data.params.capacity

cluster := data.cluster

classes := cluster.node_classes

stale_note := lib.inventory_stale_note

# What the cluster must have known for any verdict: an inventory with nodes in it, all of
# them (past its memory bound, `serve` leaves nodes out and says so in `incomplete`).
inventory_known if {
	is_object(cluster)
	cluster.node_count > 0
	object.get(cluster, "incomplete", "") == ""
}

# Capacity unknown: the inventory leaves nodes out, so nothing is refused for capacity; a
# gang is admitted with a warning saying why it was not checked.
warning contains {"path": "", "msg": msg} if {
	is_object(cluster)
	object.get(cluster, "incomplete", "") != ""
	count(input.job.replicas) > 0
	msg := sprintf("capacity unknown, not checked: %s", [cluster.incomplete])
}

# Per pod of replica r: resource -> amount, plus the pod itself. MIG resources that no node
# advertises (cordoned ones included) are left to the mig_inventory policy, which says what
# the nodes offer.
demand(r) := object.union({name: n | some name, n in r.podRequests; counted(name)}, {"pods": 1})

counted(name) if not startswith(name, "nvidia.com/mig-")

counted(name) if lib.offered_resources[name]

# Computed once per evaluation, by replica key: functions with arguments are not memoised.
demands := {r.key: demand(r) | some r in input.job.replicas}

# Replica types that ask for an extended resource (GPUs, MIG slices, RDMA, ...).
extended(r) if {
	some name, _ in demands[r.key]
	contains(name, "/")
}

checked(r) if extended(r)

checked(r) if params.checkCpuReplicas

# The replica types whose pods are counted.
placed := [r | some r in input.job.replicas; r.replicas > 0; checked(r)]

# Pods left out of the count (checkCpuReplicas off): assumed to find room.
unchecked_pods := sum([r.replicas | some r in input.job.replicas; r.replicas > 0; not checked(r)])

total_pods := sum([r.replicas | some r in input.job.replicas; r.replicas > 0])

# By replica key: the indices of the node classes its pods may use.
reach := {r.key: {i | some i, c in classes; lib.node_admits(r, c)} | some r in input.job.replicas}

# More pods than the gang has: what "no limit" means here.
unbounded := total_pods + 1

# Pods asking for `d` one node with `allocatable` holds: the scarcest resource decides.
per_node(d, allocatable) := lib.pods_per_node(d, allocatable, unbounded)

# Groups: replica types with the same demand and the same reachable classes, in a fixed
# order. Each carries its members, pods, and the pods one node of each reachable class holds.
group_keys := sort([k | some k in {{"demand": demands[r.key], "reach": reach[r.key]} | some r in placed}])

groups := [g |
	some key in group_keys
	members := [r | some r in placed; demands[r.key] == key.demand; reach[r.key] == key.reach]
	g := {
		"demand": key.demand,
		"reach": key.reach,
		"members": members,
		"pods": sum([r.replicas | some r in members]),
		"per_node": {i: per_node(key.demand, classes[i].allocatable) | some i in key.reach},
	}
]

group_of := {r.key: i | some i, g in groups; some r in g.members}

# Pods of group g that the classes `within` (indices) hold at once, within capacityFraction.
slots(g, within) := floor(params.capacityFraction * sum([n |
	some i in within
	n := classes[i].size * g.per_node[i]
]))

alone := [slots(g, g.reach) | some g in groups]

# Whether group i fits its nodes when no other group is there.
fits_alone(i) if groups[i].pods <= alone[i]

# --- What other groups can take from group i's nodes (the any-order guarantee). ---

# By group: the other groups that reach one of its classes.
overlaps := [[j | some j, h in groups; j != i; count(h.reach & g.reach) > 0] | some i, g in groups]

others(i) := overlaps[i]

# Each pod of h on a node takes room for at most w pods of g there (per resource, rounded up;
# this bound adds up over any mix of pods).
weight(h, g) := max([ceil(object.get(h.demand, name, 0) / n) | some name, n in g.demand])

linear_bound(i) := sum([n |
	some j in others(i)
	h := groups[j]
	n := weight(h, groups[i]) * min([h.pods, slots(h, h.reach & groups[i].reach)])
])

# On one node of class c, the others can put at most min(pods, what the node holds) each;
# the room for g that load leaves is a lower bound, so the loss per node is an upper bound.
loss_per_node(i, c) := max([0, groups[i].per_node[c] - per_node(groups[i].demand, left)]) if {
	load := [{"pods": min([h.pods, h.per_node[c]]), "demand": h.demand} |
		some j in others(i)
		h := groups[j]
		c in h.reach
	]
	left := {name: n |
		some name, _ in groups[i].demand
		lib.node_limits(classes[c].allocatable, name)
		n := object.get(classes[c].allocatable, name, 0) - sum([x | some l in load; x := l.pods * object.get(l.demand, name, 0)])
	}
}

node_bound(i) := sum([n |
	some c in groups[i].reach
	foreign := sum([h.pods | some j in others(i); h := groups[j]; c in h.reach])
	n := min([classes[c].size, foreign]) * loss_per_node(i, c)
])

shared_bound(i) := slots(groups[i], groups[i].reach & union({groups[j].reach | some j in others(i)}))

# Room for group i's pods the other groups may take, at most.
interference := [n | some i, _ in groups; n := interference_of(i)]

interference_of(i) := 0 if {
	count(overlaps[i]) == 0
} else := min([linear_bound(i), node_bound(i), shared_bound(i)])

# Pods of group i kube-scheduler places whatever the order.
sure := [max([0, min([g.pods, alone[i] - interference[i]])]) | some i, g in groups]

# --- kube-scheduler's order, searched. ---
# Where the counts above leave the verdict to the order (`unsure`), gangplank searched every
# order and tie of kube-scheduler's pod group cycle with its default scores, on the idle
# nodes (src/placement): data.cluster.kube_scheduler says "always", "never", "either" or
# "unknown" (and why). Trusted only on the counts' own terms: the same reach for every
# replica type, every pod counted, the whole capacity.
search := object.get(cluster, "kube_scheduler", {})

search_trusted if {
	params.capacityFraction == 1
	unchecked_pods == 0
	count([r | some r in placed; object.get(search.reach, r.key, null) != sort(reach[r.key])]) == 0
}

# Who places the pods, in the messages: the search says when it played Volcano.
scheduler_words := "Volcano" if {
	search.scheduler == "volcano"
} else := "kube-scheduler"

# How it picks a node, and when it tries a failed gang again.
binding_words := "pod 0 of every type first, then pod 1, and so on, each to the node nodeorder and binpack score highest (ties at random)" if {
	search.scheduler == "volcano"
} else := sprintf("the pods one at a time in the order the controller releases them (annotation %s: %s), each to the node it scores highest (the most cpu and memory left; ties at random)", [release_annotation, concat(",", search.release)]) if {
	search.release
} else := "the pods one at a time, each to the node it scores highest (the most cpu and memory left; ties at random)"

# The orders the search played: the one the controller releases the pods in, or every one.
order_words := "in that order" if {
	search.release
} else := "in every order it may take them"

# The native gang's release order (gang_scheduling writes it where the order decides; the
# controller lifts the pods' scheduling gate one type after the other in it).
release_annotation := "gangplank.dev/release-order"

# A release order the search found to place the gang, as the fix.
release_fix := sprintf("release them in an order that places the gang: annotation %s: %s", [release_annotation, concat(",", search.placingOrder.types)]) if {
	search.placingOrder.outcome == "always"
}

retry_words := "Volcano tries the gang again every scheduling session (each second) in the same order, with ties drawn anew" if {
	search.scheduler == "volcano"
} else := "a failed attempt is retried on the next change in the cluster, at the latest after 5 minutes"

# Why the search left a warning undecided, for the warning.
search_note := sprintf(" (the placement search cannot decide: %s)", [search.why]) if {
	search.outcome == "unknown"
} else := sprintf(" (searched: in some orders of its pods %s never places the gang, in others it does, as the order of its first attempt falls; released in the order %s, gangplank controller's native gang places it)", [scheduler_words, concat(",", search.placingOrder.types)]) if {
	search_trusted
	search.outcome == "either"
	search.placingOrder.outcome == "always"
} else := " (searched: in some orders of its pods within one replica index Volcano never places the gang, in others it does; that order is fixed when the pods are created, and not known before)" if {
	search_trusted
	search.outcome == "either"
	search.scheduler == "volcano"
} else := " (searched: in some orders of its pods kube-scheduler never places the gang, in others it does, as the order of its first attempt falls; no order of whole replica types always does)" if {
	search_trusted
	search.outcome == "either"
} else := ""

search_says(outcome) if {
	search_trusted
	search.outcome == outcome
}

# The run the search reports, in words: which pods went to which nodes before some found none.
search_example := concat(", ", [sprintf("%d %s to %s", [n, types, class_words(c)]) |
	some step in {[s.types, s.class] | some s in search.example}
	[types, c] := step
	n := count([s | some s in search.example; s.types == types; s.class == c])
])

# A node class in words: the labels the job selects on and what it has of the gang's resources.
class_words(c) := sprintf("nodes of %s", [concat(", ", array.concat(
	[sprintf("%s=%s", [k, v]) | some k, v in classes[c].labels],
	[lib.amount(name, n) | some name, n in classes[c].allocatable; gang_resource(name)],
))])

gang_resource(name) if {
	name != "pods"
	some g in groups
	g.demand[name]
}

# --- Words. ---

shown_demand(d) := concat(" + ", [lib.amount(name, n) | some name, n in d; name != "pods"])

# The largest amount of each demanded resource on one node of `within`.
largest(d, within) := concat(", ", [lib.amount(name, m) |
	some name, _ in d
	name != "pods"
	m := max(array.concat([0], [object.get(classes[c].allocatable, name, 0) | some c in within]))
])

nodes_in(within) := sum([classes[c].size | some c in within])

# Which nodes the pods may use, in words.
selection(r) := "nodeSelector: none" if {
	count(r.nodeSelector) == 0
} else := sprintf("nodeSelector: %v", [r.nodeSelector])

group_names(g) := concat(" + ", [sprintf("%d %s", [r.replicas, r.type]) | some r in g.members])

type_names(g) := concat(" and ", [r.type | some r in g.members])

fraction_note := "" if {
	params.capacityFraction == 1
} else := sprintf(", counting %v of their capacity", [params.capacityFraction])

# The gang's minimum when schedulingPolicy.minAvailable asks for fewer than all pods.
min_available := n if {
	n := input.object.spec.runPolicy.schedulingPolicy.minAvailable
	is_number(n)
	n < total_pods
}

# --- Refusals. ---

# Pods no node may take. With minAvailable below the total they only warn (below).
violation contains {"path": lib.ptr(r.podSpecPath, "nodeSelector"), "msg": msg} if {
	inventory_known
	not min_available
	some r in placed
	count(reach[r.key]) == 0
	msg := unmatched_msg(r)
}

unmatched_msg(r) := sprintf("%s pods match no schedulable node: none of the cluster's %d nodes (%d cordoned) fits %s with taints the pods tolerate (tolerations: %v)%s", [r.type, cluster.node_count, cluster.unschedulable_nodes, selection(r), r.tolerations, stale_note])

violation contains {"path": r.podSpecPath, "msg": msg} if {
	inventory_known
	not min_available
	some r in placed
	too_large(r)
	msg := too_large_msg(r)
}

too_large(r) if {
	count(reach[r.key]) > 0
	max([n | some n in groups[group_of[r.key]].per_node]) == 0
}

too_large_msg(r) := sprintf("a %s pod asks for %s; no schedulable node it may use has that much (%d such nodes: %s; taints tolerated; the largest has %s)%s%s", [r.type, shown_demand(demands[r.key]), nodes_in(reach[r.key]), selection(r), largest(demands[r.key], reach[r.key]), mig_hint(r), stale_note])

# Whole GPUs asked of nodes partitioned into MIG slices (they advertise nvidia.com/mig-*, not
# nvidia.com/gpu): name the slices on offer and the largest one to ask for instead. Slices
# have no NVLink or peer-to-peer between them, so only a one-GPU pod becomes a one-slice pod;
# a pod of N GPUs becomes N one-slice pods.
mig_hint(r) := sprintf("; those nodes split their GPUs into MIG slices and offer %s: ask for %s: 1 instead of nvidia.com/gpu: 1", [mig_listing(r), mig_best(r)]) if {
	demands[r.key]["nvidia.com/gpu"] == 1
	mig_best(r)
} else := sprintf("; those nodes split their GPUs into MIG slices and offer %s; slices have no NVLink or peer-to-peer between them, so give each pod one slice (%s: 1, nprocPerNode 1, %d times the pods) or select nodes with whole GPUs", [mig_listing(r), mig_best(r), demands[r.key]["nvidia.com/gpu"]]) if {
	mig_best(r)
} else := ""

mig_listing(r) := concat(", ", [sprintf("%s (%d per node)", [name, n]) | some name, n in mig_offers(reach[r.key])])

# The largest profile (by compute slices) the pod's nodes offer.
mig_best(r) := max([[mig_compute_slices(name), name] | some name, _ in mig_offers(reach[r.key])])[1] if {
	demands[r.key]["nvidia.com/gpu"] > 0
	count(mig_offers(reach[r.key])) > 0
}

# MIG resource -> the most one node of `within` has.
mig_offers(within) := {name: max(ns) |
	some c in within
	some name, _ in classes[c].allocatable
	startswith(name, "nvidia.com/mig-")
	ns := [n | some d in within; n := object.get(classes[d].allocatable, name, 0)]
	max(ns) > 0
}

# The compute slices of a MIG profile: 3 for nvidia.com/mig-3g.40gb.
mig_compute_slices(name) := to_number(digits) if {
	digits := trim_suffix(split(trim_prefix(name, "nvidia.com/mig-"), ".")[0], "g")
	digits != ""
	trim(digits, "0123456789") == ""
} else := 0

# Without minAvailable below the total, every pod of a group must fit at once.
violation contains {"path": r.path, "msg": msg} if {
	inventory_known
	not min_available
	some i, g in groups
	r := g.members[0]
	max([n | some n in g.per_node]) > 0
	not fits_alone(i)
	fitting := sum([classes[c].size | some c, n in g.per_node; n > 0])
	msg := sprintf("the gang needs %s pods of %s each at once; %d schedulable nodes can take such a pod (%s; taints tolerated) and together they hold %d of them (at most %s per node, pods packed node by node%s)%s", [group_names(g), shown_demand(g.demand), fitting, selection(r), alone[i], largest(g.demand, g.reach), fraction_note, stale_note])
}

# Sets of two or more groups (by bit mask over `groups`) that share nodes, for the joint
# conditions; up to 6 groups (63 sets; a kind has at most 5 replica types).
joint_sets contains m if {
	n := count(groups)
	n >= 2
	n <= 6
	some m in numbers.range(3, bits.lsh(1, n) - 1)
	members := set_members(m)
	count(members) >= 2
	count([i | some i in members; count(overlaps[i]) == 0]) == 0
}

set_members(m) := [i | some i, _ in groups; bits.and(m, bits.lsh(1, i)) != 0]

# Per joint set: its groups, the classes any of them reaches, and what falls short there.
joint := {m: {"members": members, "reach": within, "short": short, "hall": hall} |
	some m in joint_sets
	members := set_members(m)
	count([i | some i in members; not fits_alone(i)]) == 0
	within := union({groups[i].reach | some i in members})
	short := [s |
		some name in {k | some i in members; some k, _ in groups[i].demand}
		limited(within, name)
		need := sum([x | some i in members; x := groups[i].pods * object.get(groups[i].demand, name, 0)])
		have := floor(params.capacityFraction * sum([x | some c in within; x := classes[c].size * object.get(classes[c].allocatable, name, 0)]))
		need > have
		s := {"name": name, "need": need, "have": have}
	]
	hall := hall_short(members, within)
}

limited(within, name) if {
	count([c | some c in within; not lib.node_limits(classes[c].allocatable, name)]) == 0
}

# Groups of one pod size: the pods the shared nodes hold (Hall's condition on node slots).
hall_short(members, within) := {"need": need, "have": have} if {
	d := groups[members[0]].demand
	count({groups[i].demand | some i in members}) == 1
	need := sum([groups[i].pods | some i in members])
	have := floor(params.capacityFraction * sum([x | some c in within; x := classes[c].size * per_node(d, classes[c].allocatable)]))
	need > have
} else := null

failing_sets := {m | some m, j in joint; joint_failure(j)}

joint_failure(j) if count(j.short) > 0

joint_failure(j) if j.hall != null

# Only the smallest failing sets are reported: a larger one fails because of them.
violation contains {"path": groups[j.members[0]].members[0].path, "msg": msg} if {
	inventory_known
	not min_available
	some m in failing_sets
	not smaller_failing(m)
	j := joint[m]
	gs := [groups[i] | some i in j.members]
	msg := sprintf("the gang needs %s pods at once (%s); each type fits its nodes alone, but together they need %s, and the %d nodes any of them may use have %s%s%s", [
		concat(" + ", [group_names(g) | some g in gs]),
		concat("; ", [sprintf("%s: %s each, %s", [type_names(g), shown_demand(g.demand), selection(g.members[0])]) | some g in gs]),
		joint_need(j), nodes_in(j.reach), joint_have(j), fraction_note, stale_note,
	])
}

smaller_failing(m) if {
	some k in failing_sets
	k != m
	bits.and(k, m) == k
}

joint_need(j) := concat(", ", [lib.amount(s.name, s.need) | some s in j.short]) if {
	count(j.short) > 0
} else := sprintf("room for %d pods of that size", [j.hall.need])

joint_have(j) := concat(", ", [lib.amount(s.name, s.have) | some s in j.short]) if {
	count(j.short) > 0
} else := sprintf("room for %d", [j.hall.have])

# With minAvailable, the gang starts once that many pods run: each group places at most
# what its nodes hold alone.
most_placeable := unchecked_pods + sum([min([g.pods, alone[i]]) | some i, g in groups])

surely_placed := unchecked_pods + sum(sure)

violation contains {"path": "/spec/runPolicy/schedulingPolicy/minAvailable", "msg": msg} if {
	inventory_known
	n := min_available
	n > most_placeable
	msg := sprintf("minAvailable is %d, but the matching nodes hold at most %d of the gang's pods at once%s%s", [n, most_placeable, unchecked_note, stale_note])
}

unchecked_note := "" if {
	unchecked_pods == 0
} else := sprintf(" (counting the %d pods without extended resources as placed: checkCpuReplicas is off)", [unchecked_pods])

# --- Warnings: the gang fits, but kube-scheduler's order decides. ---

refused if count(violation) > 0

# Groups kube-scheduler may leave pods of unplaced, with what the others may take.
unsure contains i if {
	some i, g in groups
	fits_alone(i)
	sure[i] < g.pods
}

warning contains {"path": g.members[0].podSpecPath, "msg": msg} if {
	inventory_known
	not min_available
	not refused
	not search_says("always")
	not search_says("eventually")
	some i in unsure
	g := groups[i]
	rivals := [groups[j] | some j in others(i)]
	msg := sprintf("%s may not place the whole gang: the %d nodes %s pods may use (%s each, %s) hold %d of them, but %s pods may land there first and take room for up to %d, leaving %d for %d; %s%s%s", [
		scheduler_words, nodes_in(g.reach), type_names(g), shown_demand(g.demand), selection(g.members[0]), alone[i],
		concat(" and ", [type_names(h) | some h in rivals]), interference[i], alone[i] - interference[i], g.pods,
		fix(g, rivals), search_note, stale_note,
	])
}

# The gang fits, but no order kube-scheduler may take its pods in finds the placement: it
# never starts on this cluster as it is idle.
violation contains {"path": g.members[0].podSpecPath, "msg": msg} if {
	inventory_known
	not min_available
	search_says("never")
	count(failing_sets) == 0
	count([i | some i, _ in groups; not fits_alone(i)]) == 0
	i := min(unsure)
	g := groups[i]
	rivals := [groups[j] | some j in others(i)]
	msg := sprintf("%s never places the whole gang: it binds %s, and %s %s pods find no node left: for one, %s, and then a %s pod has none; %s%s", [
		scheduler_words, binding_words, order_words, search.stuck, search_example, search.stuck, never_fix(g, rivals), stale_note,
	])
}

never_fix(_, _) := release_fix

never_fix(g, rivals) := fix(g, rivals) if not release_fix

# The gang fits, and in every order kube-scheduler may take its pods in some ties find the
# placement, others do not. A failed cycle is retried in the same order (each pod's first
# queueing time) with ties drawn anew (on the next cluster change that may help, at the
# latest after 5 minutes in the unschedulable queue), so the gang starts, perhaps late:
# admitted, with the fix that makes the first attempt certain.
warning contains {"path": g.members[0].podSpecPath, "msg": msg} if {
	inventory_known
	not min_available
	not refused
	search_says("eventually")
	i := min(unsure)
	g := groups[i]
	rivals := [groups[j] | some j in others(i)]
	msg := sprintf("%s may need more than one attempt to place the whole gang: when it breaks ties between equally good nodes one way, %s pods take the room %s pods need; %s, so the gang starts, perhaps late; to make the first attempt certain, %s%s", [
		scheduler_words,
		concat(" and ", [type_names(h) | some h in rivals]), type_names(g), retry_words, fix(g, rivals), stale_note,
	])
}

# Same size, wider reach: the others should select the same nodes (or none of these).
fix(g, rivals) := sprintf("give %s the same nodeSelector and tolerations as %s, or ones that keep it off %s's nodes", [concat(" and ", [type_names(h) | some h in rivals]), type_names(g), type_names(g)]) if {
	count([h | some h in rivals; h.demand != g.demand]) == 0
} else := sprintf("the gang's pods of different sizes share %d nodes; %s places them one at a time%s, and may not find the packing: give %s a nodeSelector for nodes of their own", [nodes_in(g.reach & union({h.reach | some h in rivals})), scheduler_words, spread_words, concat(" and ", [type_names(h) | some h in rivals])])

# kube-scheduler's LeastAllocated spreads pods; Volcano's binpack about cancels it.
spread_words := "" if {
	search.scheduler == "volcano"
} else := ", spreading them"

# minAvailable that the counts leave to the order: the search decides where it can.
min_unsure := n if {
	inventory_known
	n := min_available
	n <= most_placeable
	n > surely_placed
}

violation contains {"path": "/spec/runPolicy/schedulingPolicy/minAvailable", "msg": msg} if {
	n := min_unsure
	search_says("never")
	msg := sprintf("%s never places minAvailable %d pods at once: it binds %s, and %s fewer than %d find a node: for one, %s, and then a %s pod has none; %s%s", [
		scheduler_words, n, binding_words, order_words, n, search_example, search.stuck, min_fix, stale_note,
	])
}

warning contains {"path": "/spec/runPolicy/schedulingPolicy/minAvailable", "msg": msg} if {
	n := min_unsure
	search_says("eventually")
	msg := sprintf("%s may need more than one attempt to place minAvailable %d pods at once: when it breaks ties between equally good nodes one way, fewer find a node; %s, so the gang starts, perhaps late; to make the first attempt certain, %s%s", [
		scheduler_words, n, retry_words, min_fix, stale_note,
	])
}

min_fix := release_fix

min_fix := "give the replica types nodes of their own (a nodeSelector) or lower minAvailable" if not release_fix

warning contains {"path": "/spec/runPolicy/schedulingPolicy/minAvailable", "msg": msg} if {
	n := min_unsure
	not search_says("always")
	not search_says("eventually")
	not search_says("never")
	msg := sprintf("%s may not place minAvailable %d pods at once: the matching nodes hold up to %d of the gang's pods, but only %d whatever the order %s places them in (replica types share nodes); give the replica types nodes of their own (a nodeSelector) or lower minAvailable%s%s", [scheduler_words, n, most_placeable, surely_placed, scheduler_words, search_note, stale_note])
}

# With minAvailable below the total, pods no node takes do not stop the gang: say so.
warning contains {"path": lib.ptr(r.podSpecPath, "nodeSelector"), "msg": msg} if {
	inventory_known
	min_available
	some r in placed
	count(reach[r.key]) == 0
	msg := sprintf("%s; the gang may start without them (minAvailable %d), but they never run", [unmatched_msg(r), min_available])
}

warning contains {"path": r.podSpecPath, "msg": msg} if {
	inventory_known
	min_available
	some r in placed
	too_large(r)
	msg := sprintf("%s; the gang may start without them (minAvailable %d), but they never run", [too_large_msg(r), min_available])
}
