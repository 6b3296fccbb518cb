# Kueue queues: a job labelled kueue.x-k8s.io/queue-name is admitted by Kueue only through
# an existing LocalQueue pointing at an active ClusterQueue that can reserve quota for the
# whole gang (Kueue admits all pod sets at once). Otherwise it stays suspended forever. Reads
# data.cluster.kueue (present when Kueue's CRDs are installed and a cluster inventory is
# known); silent otherwise.
#
# What a ClusterQueue can ever reserve is Kueue's own bound (potentialAvailable, which its
# flavor assigner checks first: above it a workload is ExceedsMaxQuota whatever finishes),
# computed per flavor and resource by the inventory (src/cluster/kueue): nominal quota plus
# what the cohort tree can lend it (the other queues' and Cohorts' quota within their
# lendingLimits), capped by its borrowingLimit; without the Cohort objects, nominal +
# borrowingLimit (an upper bound), and unbounded without a borrowingLimit. Kueue gives each
# pod set (replica type) one flavor per resource group, so:
#   - the gang's total of a resource above the sum over the queue's flavors never fits;
#   - a pod set above every flavor of its resource group never fits, whatever the others do.
# Both are necessary conditions, so a refusal is exact. Past them, Kueue's flavor assigner
# decides: it takes the pod sets in its integration's order and gives each, per resource
# group, the first flavor (in the group's order, among those that match the pods) whose quota
# less what the pod sets before it took there still holds it; where none does, the workload
# waits. That greedy choice is what Kueue reserves on an idle cohort (and, once its queue is
# idle again, what it retries from), so:
#   - it holds the gang: admitted;
#   - no choice of one flavor per pod set holds the gang (every choice searched, up to
#     search_budget of them): refused;
#   - some other choice holds it: a warning that Kueue's flavor order decides (it resumes
#     its flavor scan where the last attempt stopped only when something in the cohort
#     requeues the workload).
# The flavor Kueue picks adds its nodeLabels to the pods' nodeSelector and its tolerations to
# theirs; a pod set whose every flavor that can take its quota either does not match it
# (Kueue's check: the flavor's NoSchedule/NoExecute taints, its labels against the pods'
# nodeSelector) or selects no node that can hold one of its pods is admitted and never runs
# (or never admitted): refused, when the nodes outside those flavors could hold the pods (if
# none can, the capacity policy says so). Required node affinity is not read: a flavor it
# would rule out still counts, so no refusal rests on it.
# Amounts are in Kueue's units (cpu in millicores, the rest in units) and what a pod asks is
# its effective request; Kueue's LimitRange defaults, resource transformations and
# excludeResourcePrefixes (its configuration) are not applied.
# The namespace's other LocalQueues, the ClusterQueue a LocalQueue points at and its quotas are
# named only to an authenticated caller (lib.for_caller): the job names its LocalQueue only.
# METADATA
# custom:
#   applies_when:
#     all: [cluster, kueue]
package gangplank.policies.kueue_queue

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Kueue queues that can take the gang",
	"description": "With a cluster inventory that has Kueue's queues, refuses jobs whose kueue.x-k8s.io/queue-name names no LocalQueue of the namespace, whose ClusterQueue is missing, stopped, names a missing ResourceFlavor, does not cover a GPU resource the job asks for, can never reserve what the gang needs (per flavor: nominal quota plus what its cohort tree can lend, within its borrowing limit; a pod set in one flavor; no choice of one flavor per pod set that holds them all), or whose flavors' nodes cannot hold the pods. Warns when only a choice other than Kueue's greedy one (each pod set in turn takes the first flavor that still holds it) holds the gang.",
	"action": "deny",
	"params": {},
}

kueue := data.cluster.kueue

label := "kueue.x-k8s.io/queue-name"

path := "/metadata/labels/kueue.x-k8s.io~1queue-name"

local_queue := q if {
	is_object(kueue)
	# null until the inventory has listed the LocalQueues: none is called missing then.
	is_object(kueue.local_queues)
	data.cluster.node_count > 0
	q := input.object.metadata.labels[label]
	is_string(q)
}

key := sprintf("%s/%s", [input.job.namespace, local_queue])

cluster_queue_name := kueue.local_queues[key]

cluster_queue := kueue.cluster_queues[cluster_queue_name]

namespace_queues := [name |
	some k, _ in kueue.local_queues
	startswith(k, sprintf("%s/", [input.job.namespace]))
	name := substring(k, count(input.job.namespace) + 1, -1)
]

violation contains {"path": path, "msg": msg} if {
	local_queue
	not kueue.local_queues[key]
	full := sprintf("Kueue LocalQueue %q does not exist in namespace %q (LocalQueues there: %s); Kueue would keep the job suspended forever", [local_queue, input.job.namespace, shown(namespace_queues)])
	withheld := sprintf("Kueue LocalQueue %q does not exist in namespace %q; Kueue would keep the job suspended forever", [local_queue, input.job.namespace])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

violation contains {"path": path, "msg": msg} if {
	local_queue
	name := kueue.local_queues[key]
	not kueue.cluster_queues[name]
	full := sprintf("Kueue LocalQueue %q points at ClusterQueue %q, which does not exist", [local_queue, name])
	withheld := sprintf("Kueue LocalQueue %q points at a ClusterQueue that does not exist", [local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

violation contains {"path": path, "msg": msg} if {
	cluster_queue.stop_policy != "None"
	full := sprintf("Kueue ClusterQueue %q is stopped (stopPolicy %s): it admits no new workloads", [cluster_queue_name, cluster_queue.stop_policy])
	withheld := sprintf("the ClusterQueue of Kueue LocalQueue %q is stopped: it admits no new workloads", [local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

violation contains {"path": path, "msg": msg} if {
	some name in lib.gang_resources
	cluster_queue.readable
	not cluster_queue.resources[name]
	full := sprintf("Kueue ClusterQueue %q has no quota for %s, which the job asks for: Kueue never admits it (covered: %s)", [cluster_queue_name, name, shown(object.keys(cluster_queue.resources))])
	withheld := sprintf("the ClusterQueue of Kueue LocalQueue %q has no quota for %s, which the job asks for: Kueue never admits it", [local_queue, name])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

# --- Quota that can never be reserved. ---

# The pod sets Kueue makes of the job: one per replica type with pods.
podsets := [r | some r in input.job.replicas; r.replicas > 0]

# What one pod of r counts against the queue: its effective requests and, when the queue
# covers `pods`, the pod itself.
pod_ask(r) := object.union(r.podRequests, {"pods": 1}) if {
	cluster_queue.resources.pods
} else := r.podRequests

# The whole gang's amount of resource `name`.
gang_need(name) := sum([n |
	some r in podsets
	n := r.replicas * object.get(pod_ask(r), name, 0)
])

# The most the queue can ever reserve of `name` over all its flavors; undefined when one is
# unbounded or not known.
ever(name) := sum([f.can_reserve | some f in cluster_queue.resources[name].flavors]) if {
	cluster_queue.readable
	count([f | some f in cluster_queue.resources[name].flavors; not is_number(f.can_reserve)]) == 0
}

# Resources the gang needs more of than the queue can ever reserve.
over_total contains name if {
	some name, _ in cluster_queue.resources
	gang_need(name) > ever(name)
}

violation contains {"path": path, "msg": msg} if {
	some name in over_total
	need := lib.amount(name, gang_need(name))
	full := sprintf("the gang needs %s at once; Kueue ClusterQueue %q can ever reserve at most %s (%s), so it never admits the job: it would stay suspended", [need, cluster_queue_name, lib.amount(name, ever(name)), reach_words(name, object.keys(cluster_queue.resources[name].flavors))])
	withheld := sprintf("the gang needs %s at once; the ClusterQueue of Kueue LocalQueue %q can never reserve that much, so it never admits the job", [need, local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

# Pod set r's need of the resources of group g it asks for, the whole set at once.
set_need(r, g) := {name: total |
	some name in g.resources
	n := object.get(pod_ask(r), name, 0)
	n > 0
	total := r.replicas * n
}

# Flavor f can never reserve `need` (one pod set's) of some resource.
short_in(need, f) if {
	some name, n in need
	q := cluster_queue.resources[name].flavors[f]
	is_number(q.can_reserve)
	n > q.can_reserve
}

# By pod set and resource group: the flavors that can ever take the pod set's quota.
quota_flavors := {[r.key, i]: [f | some f in g.flavors; not short_in(set_need(r, g), f)] |
	cluster_queue.readable
	some r in podsets
	some i, g in cluster_queue.groups
	count(set_need(r, g)) > 0
}

violation contains {"path": path, "msg": msg} if {
	some at, fitting in quota_flavors
	count(fitting) == 0
	some r in podsets
	r.key == at[0]
	g := cluster_queue.groups[at[1]]
	need := set_need(r, g)
	count({name | some name, _ in need; over_total[name]}) == 0
	asked := concat(" + ", [lib.amount(name, n) | some name, n in need])
	full := sprintf("the %d %s pods need %s at once, and Kueue gives a pod set one flavor of a resource group; no flavor of Kueue ClusterQueue %q can ever reserve that much (%s), so it never admits the job: it would stay suspended", [r.replicas, r.type, asked, cluster_queue_name, concat("; ", [reach_words(name, g.flavors) | some name, _ in need])])
	withheld := sprintf("the %d %s pods need %s at once in one flavor; no flavor of the ClusterQueue of Kueue LocalQueue %q can ever reserve that much, so it never admits the job", [r.replicas, r.type, asked, local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

# What the queue can ever reserve of `name` in each of `flavors`, and why.
reach_words(name, names) := concat(", ", [sprintf("flavor %q: %s", [f, reach(name, cluster_queue.resources[name].flavors[f])]) | some f in names])

# A flavor that can reserve without bound never appears here: it would take the pod set.
reach(name, q) := lib.amount(name, q.can_reserve) if {
	cluster_queue.cohort == ""
} else := sprintf("%s (nominal %s, borrowing limit %s, cohort %q)", [lib.amount(name, q.can_reserve), amount_or_none(name, q.nominal), amount_or_none(name, q.borrowing_limit), cluster_queue.cohort])

amount_or_none(name, n) := lib.amount(name, n) if is_number(n) else := "none"

# --- Flavors. ---

flavors := kueue.flavors

# Flavors the queue names that do not exist: Kueue keeps the queue inactive (FlavorNotFound).
missing_flavors := {f |
	is_object(flavors)
	some g in cluster_queue.groups
	some f in g.flavors
	not flavors[f]
}

violation contains {"path": path, "msg": msg} if {
	count(missing_flavors) > 0
	full := sprintf("Kueue ClusterQueue %q names ResourceFlavor(s) %s, which do not exist: Kueue keeps it inactive and admits nothing", [cluster_queue_name, shown(missing_flavors)])
	withheld := sprintf("the ClusterQueue of Kueue LocalQueue %q names a ResourceFlavor that does not exist: Kueue keeps it inactive and admits nothing", [local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

# Why Kueue never puts pod set r into flavor f (its checkFlavorForPodSets): a NoSchedule or
# NoExecute taint of the flavor that neither r nor the flavor tolerates, a label of the
# flavor that r's nodeSelector sets otherwise.
mismatches(r, f) := {sprintf("taint %s=%s:%s not tolerated", [t.key, t.value, t.effect]) |
	some t in flavors[f].node_taints
	t.effect in {"NoSchedule", "NoExecute"}
	not lib.tolerated(array.concat(r.tolerations, flavors[f].tolerations), t)
} | {sprintf("nodeSelector %s=%s against the flavor's %s", [k, r.nodeSelector[k], v]) |
	some k, v in flavors[f].node_labels
	r.nodeSelector[k] != v
}

# Pod set r as Kueue starts it in flavor f: the flavor's labels and tolerations added.
in_flavor(r, f) := object.union(r, {
	"nodeSelector": object.union(r.nodeSelector, flavors[f].node_labels),
	"tolerations": array.concat(r.tolerations, flavors[f].tolerations),
})

# A node of class c holds one pod of r: every resource it asks, and a pod slot.
holds_one(r, c) if {
	count([name | some name, n in r.podRequests; object.get(c.allocatable, name, 0) < n]) == 0
	object.get(c.allocatable, "pods", 1) >= 1
}

# Some node that r may use (its own nodeSelector and tolerations) holds one of its pods.
held_anywhere(r) if {
	some c in data.cluster.node_classes
	lib.node_admits(r, c)
	holds_one(r, c)
}

# Why flavor f can never run pod set r; nothing when it can, or when f is not known.
flavor_fails(r, f) := mismatches(r, f) if {
	flavors[f].readable
	count(mismatches(r, f)) > 0
} else := {"no node with its labels holds one pod"} if {
	flavors[f].readable
	not held_in_flavor(r, f)
} else := set()

held_in_flavor(r, f) if {
	some c in data.cluster.node_classes
	lib.node_admits(in_flavor(r, f), c)
	holds_one(r, c)
}

violation contains {"path": path, "msg": msg} if {
	is_object(flavors)
	count(missing_flavors) == 0
	# Every node known: past its memory bound the inventory leaves nodes out.
	object.get(data.cluster, "incomplete", "") == ""
	some at, candidates in quota_flavors
	count(candidates) > 0
	some r in podsets
	r.key == at[0]
	held_anywhere(r)
	count([f | some f in candidates; count(flavor_fails(r, f)) == 0]) == 0
	why := concat("; ", [sprintf("flavor %q (%s): %s", [f, labels_words(f), concat(", ", sort(flavor_fails(r, f)))]) | some f in candidates])
	full := sprintf("the %s pods can never run in a flavor of Kueue ClusterQueue %q: %s; Kueue admits pods only into a flavor that matches them, and adds its node labels to their nodeSelector, so they would stay suspended or pending", [r.type, cluster_queue_name, why])
	withheld := sprintf("the %s pods can never run in a flavor of the ClusterQueue of Kueue LocalQueue %q: no flavor that can take their quota matches them and has nodes that can hold one", [r.type, local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

labels_words(f) := "any node" if {
	count(flavors[f].node_labels) == 0
} else := concat(", ", [sprintf("%s=%s", [k, v]) | some k, v in flavors[f].node_labels])

shown(names) := "none" if {
	count(names) == 0
} else := concat(", ", sort(names))

# --- Kueue's flavor order. ---

# Kueue's pod set order: its integrations' replica type orders (kubeflow's
# OrderedReplicaTypes: Chief, Master, PS, Worker, Evaluator; the MPIJob's Launcher, Worker).
# Other types (a TrainJob's) come after, by key, in an order not known to be Kueue's.
type_rank := {"Chief": 0, "Launcher": 1, "Master": 2, "PS": 3, "Worker": 4, "Evaluator": 5}

kueue_podsets := [podsets[e[2]] |
	some e in sort([[object.get(type_rank, r.type, 9), r.key, i] | some i, r in podsets])
]

order_known if count([r | some r in podsets; not type_rank[r.type]]) == 0

# The flavors of group g Kueue may give pod set r: those whose taints and labels match it
# (every one when the ResourceFlavors are not known).
flavor_choices(r, g) := [f | some f in g.flavors; not flavor_mismatched(r, f)]

flavor_mismatched(r, f) if {
	is_object(flavors)
	flavors[f].readable
	count(mismatches(r, f)) > 0
}

# By resource group: the pod sets that ask for its resources, in Kueue's order, with their
# needs and candidate flavors.
group_sets := {i: sets |
	cluster_queue.readable
	some i, g in cluster_queue.groups
	sets := [{"type": r.type, "need": set_need(r, g), "flavors": flavor_choices(r, g)} |
		some r in kueue_podsets
		count(set_need(r, g)) > 0
	]
	count(sets) > 0
}

# `n` of resource `name` in flavor f is within what the queue can ever reserve there; a
# flavor without a bound (or whose bound is not known) holds anything.
within(name, f, _) if not is_number(cluster_queue.resources[name].flavors[f].can_reserve)

within(name, f, n) if n <= cluster_queue.resources[name].flavors[f].can_reserve

# The next pod set of `sets` fits flavor f beside what the pod sets before it took (`picks`).
fits_after(sets, picks, f) if {
	k := count(picks)
	short := [name |
		some name, n in sets[k].need
		taken := sum([object.get(sets[j].need, name, 0) | some j, p in picks; p == f])
		not within(name, f, taken + n)
	]
	count(short) == 0
}

# One step of the greedy scan: the next pod set's first fitting flavor; null when none fits,
# and the scan stops there.
greedy_step(sets, picks) := picks if {
	count(picks) >= count(sets)
} else := picks if {
	null in picks
} else := array.concat(picks, [first_fit(sets, picks)])

first_fit(sets, picks) := fitting[0] if {
	fitting := [f | some f in sets[count(picks)].flavors; fits_after(sets, picks, f)]
	count(fitting) > 0
} else := null

# Kueue's greedy picks for `sets`, in at most five steps (a kubeflow job has at most five
# replica types); undefined beyond.
greedy(sets) := p5 if {
	count(sets) <= 5
	p1 := greedy_step(sets, [])
	p2 := greedy_step(sets, p1)
	p3 := greedy_step(sets, p2)
	p4 := greedy_step(sets, p3)
	p5 := greedy_step(sets, p4)
}

# The order of `sets` is Kueue's, or no pod set has a choice of flavor.
ordered(_) if order_known

ordered(sets) if count([s | some s in sets; count(s.flavors) > 1]) == 0

# Groups whose greedy picks hold every pod set, in Kueue's order.
greedy_holds contains i if {
	some i, sets in group_sets
	ordered(sets)
	not null in greedy(sets)
}

# The most choices (one flavor per pod set) searched for one that holds a group's pod sets.
search_budget := 4096

# Pod set k of `sets` in flavor choice[k], for every k, stays within the queue's reach.
holds(sets, choice) if {
	short := [1 |
		some f in {c | some c in choice}
		some name in {n | some s in sets; some n, _ in s.need}
		total := sum([object.get(sets[k].need, name, 0) | some k, c in choice; c == f])
		not within(name, f, total)
	]
	count(short) == 0
}

# Groups the greedy picks do not hold, searched whole: a choice that holds their pod sets,
# or `false` when none does.
searched := {i: found |
	some i, sets in group_sets
	not greedy_holds[i]
	sizes := [count(s.flavors) | some s in sets]
	product(sizes) <= search_budget
	found := first_holding(sets, sizes)
}

first_holding(sets, sizes) := choices[0] if {
	product(sizes) > 0
	choices := [choice |
		some x in numbers.range(0, product(sizes) - 1)
		choice := [sets[k].flavors[d] |
			some k, size in sizes
			d := floor(x / product(array.slice(sizes, 0, k))) % size
		]
		holds(sets, choice)
	]
	count(choices) > 0
} else := false

# The quota refusals above, by resource or by pod set and group.
quota_refusals := over_total | {at | some at, fitting in quota_flavors; count(fitting) == 0}

violation contains {"path": path, "msg": msg} if {
	some i, found in searched
	found == false
	# The simpler refusals above say it when they can.
	count(quota_refusals) == 0
	sets := group_sets[i]
	full := sprintf("Kueue gives each pod set one flavor of a resource group, and no choice of flavors of Kueue ClusterQueue %q holds the pod sets together (%s; can ever reserve: %s), so it never admits the job: it would stay suspended", [cluster_queue_name, sets_words(sets), group_reach_words(cluster_queue.groups[i])])
	withheld := sprintf("Kueue gives each pod set one flavor of a resource group, and no choice of flavors of the ClusterQueue of Kueue LocalQueue %q holds the pod sets together, so it never admits the job", [local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

warning contains {"path": path, "msg": msg} if {
	some i, sets in group_sets
	not greedy_holds[i]
	not searched[i] == false
	count(violation) == 0
	full := sprintf("Kueue may not reserve quota for the gang: its flavor assigner gives each pod set in turn (%s) the first flavor of Kueue ClusterQueue %q that still holds it (can ever reserve: %s): %s; it reaches another choice only if a later attempt resumes its flavor scan past the first (as it may, when the workload is requeued). List the flavors so that the first ones hold the earlier pod sets, or make the pod sets alike", [sets_words(sets), cluster_queue_name, group_reach_words(cluster_queue.groups[i]), greedy_words(i, sets)])
	withheld := sprintf("Kueue may not reserve quota for the gang: the greedy flavor order of the ClusterQueue of Kueue LocalQueue %q may leave a pod set without a flavor", [local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

# How the greedy scan goes, and the choice that would hold the pod sets when one was found.
greedy_words(i, sets) := sprintf("%s, then no flavor holds the %s pods%s", [
	concat(", ", [sprintf("the %s pods take %q", [sets[k].type, f]) | some k, f in picks; f != null]),
	sets[count([f | some f in picks; f != null])].type,
	holding_words(i, sets),
]) if {
	ordered(sets)
	picks := greedy(sets)
} else := sprintf("in an order gangplank does not know for these replica types%s", [holding_words(i, sets)])

holding_words(i, sets) := sprintf(", though %s would hold them", [concat(", ", [sprintf("%s in %q", [sets[k].type, f]) | some k, f in searched[i]])]) if {
	is_array(searched[i])
} else := ""

sets_words(sets) := concat(", ", [sprintf("%s %s", [s.type, concat(" + ", [lib.amount(name, n) | some name, n in s.need])]) | some s in sets])

group_reach_words(g) := concat("; ", [sprintf("%q %s", [f, concat(" + ", [lib.amount(name, q.can_reserve) |
	some name in g.resources
	q := cluster_queue.resources[name].flavors[f]
	is_number(q.can_reserve)
])]) | some f in g.flavors])
