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
# Admitted is not placed: Kueue admits a workload when its quota can be reserved, then lets
# its pods go to the scheduler, which places them one by one. Without waitForPodsReady in
# Kueue's configuration (params.waitForPodsReady: disabled, or unknown) a gang with no gang
# scheduler of its own may run half placed, holding its GPUs while the rest pend: warned
# (refused with admittedNotPlaced: deny, where disabled). With Topology Aware Scheduling (a flavor's topologyName, a Topology's
# levels), a pod set annotated kueue.x-k8s.io/podset-required-topology: LEVEL is admitted
# only into one domain of that level (the nodes that share its label, and every outer
# level's): refused when no domain of any flavor that could take it can hold the pod set,
# warned for podset-preferred-topology (Kueue then spreads it). A Topology that cannot be
# read or is absent, or a level that is not one of the Topology's, is never the job's fault:
# not judged (the inventory's problems, or a warning, say it).
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
	"params": {
		# Whether the platform's Kueue runs with waitForPodsReady (its kueue-manager
		# configuration, ConfigMap kueue-system/kueue-manager-config): "enabled", "disabled"
		# or "unknown". gangplank does not read it, and Kueue's default changed (on from
		# v0.19 with a v1beta2 configuration, off before): unknown until the platform says.
		"waitForPodsReady": "unknown",
		# A multi-pod Kueue job with no gang scheduler of its own, where Kueue's
		# waitForPodsReady is disabled (admitted is not placed): "warn" or "deny". Where it
		# is unknown such a job is warned only.
		"admittedNotPlaced": "warn",
	},
}

params := data.params.kueue_queue

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

# --- Admitted is not placed. ---

# Kueue's gang is of quota only: with waitForPodsReady, Kueue evicts and requeues a workload
# whose pods are not all ready in time; without it nothing undoes a half-placed gang.
gang_schedulers := lib.gang_schedulers(object.get(data.params, "gang_scheduling", {}))

# Every pod template names a gang scheduler (one naming none runs on the default scheduler,
# the native gang's), or a Trainer runtime's podGroupPolicy gangs it.
own_gang if count([r | some r in podsets; not object.get(r, "schedulerName", "default-scheduler") in gang_schedulers]) == 0

own_gang if input.job.trainer.podGroupPolicy

unplaced_gang_msg := sprintf("Kueue admits this %d-pod job by quota, not placement: once admitted, the scheduler places its pods one by one, and with no gang scheduler of its own the gang may be half placed, holding its resources while the rest of its pods pend, %s. Fix: enable waitForPodsReady in Kueue's configuration (kueue-manager-config), so that Kueue evicts and requeues a gang not all ready in time, and say so in gangplank's params (kueue_queue waitForPodsReady: enabled); or name a gang scheduler in schedulerName (one of %s)", [sum([r.replicas | some r in podsets]), kueue_ready_words, shown(gang_schedulers)]) if {
	local_queue
	params.waitForPodsReady != "enabled"
	sum([r.replicas | some r in podsets]) > 1
	not own_gang
}

kueue_ready_words := "for Kueue here runs without waitForPodsReady (gangplank's kueue_queue params)" if {
	params.waitForPodsReady == "disabled"
} else := "unless Kueue runs with waitForPodsReady (its default from v0.19 with a v1beta2 configuration, off before; gangplank's kueue_queue params do not say which)"

# Refused only where Kueue is known to run without waitForPodsReady.
unplaced_refused if {
	params.admittedNotPlaced == "deny"
	params.waitForPodsReady == "disabled"
}

violation contains {"path": path, "msg": unplaced_gang_msg} if unplaced_refused

warning contains {"path": path, "msg": unplaced_gang_msg} if not unplaced_refused

# --- Topology Aware Scheduling. ---

required_annotation := "kueue.x-k8s.io/podset-required-topology"

preferred_annotation := "kueue.x-k8s.io/podset-preferred-topology"

topologies := kueue.topologies

hostname := "kubernetes.io/hostname"

# Pod set r's topology request: the level, and whether it is required.
asked(r) := {"level": l, "required": true, "annotation": required_annotation} if {
	l := r.annotations[required_annotation]
	is_string(l)
} else := {"level": l, "required": false, "annotation": preferred_annotation} if {
	l := r.annotations[preferred_annotation]
	is_string(l)
}

asked_path(r) := lib.ptrs(concat("", [r.templatePath, "/metadata"]), ["annotations", asked(r).annotation])

# The flavors Kueue could put pod set r into: they can take its quota and match it.
tas_candidates(r) := {f |
	some at, fitting in quota_flavors
	at[0] == r.key
	some f in fitting
	count(flavor_fails(r, f)) == 0
}

# Flavor f's Topology levels, when known and readable.
levels(f) := topologies[flavors[f].topology_name].levels if {
	flavors[f].readable
	topologies[flavors[f].topology_name].readable
}

# Why Kueue never puts pod set r into flavor f with its topology; "" when some domain holds
# it. Undefined when it cannot be judged (flavor or Topology unknown, level not in it).
tas_fails(r, f) := "it has no topologyName (Kueue's Topology Aware Scheduling uses only flavors with one)" if {
	flavors[f].readable
	flavors[f].topology_name == ""
} else := sprintf("its largest %q domain (Topology %q) holds %d", [asked(r).level, flavors[f].topology_name, largest_domain(r, f)]) if {
	asked(r).level in levels(f)
	largest_domain(r, f) < r.replicas
} else := "" if {
	asked(r).level in levels(f)
}

tas_demand(r) := object.union({name: n | some name, n in r.podRequests; n > 0}, {"pods": 1})

# The node classes of flavor f that take r's pods and carry every level label (Kueue's TAS
# leaves out nodes that do not); the hostname is every node's.
tas_classes(r, f) := [c |
	some c in data.cluster.node_classes
	count([l | some l in levels(f); l != hostname; not c.labels[l]]) == 0
	lib.node_admits(in_flavor(r, f), c)
]

# The most pods of r one domain of the asked level holds in flavor f: one node at the
# hostname level; else the nodes sharing the level's label and every outer level's.
largest_domain(r, f) := max(array.concat([0], [lib.pods_per_node(tas_demand(r), c.allocatable, r.replicas + 1) | some c in tas_classes(r, f)])) if {
	asked(r).level == hostname
} else := max(array.concat([0], [n |
	outer := array.slice(levels(f), 0, index_of(levels(f), asked(r).level) + 1)
	some d in {[c.labels[l] | some l in outer] | some c in tas_classes(r, f)}
	n := sum([x |
		some c in tas_classes(r, f)
		[c.labels[l] | some l in outer] == d
		x := c.size * lib.pods_per_node(tas_demand(r), c.allocatable, r.replicas + 1)
	])
]))

index_of(list, x) := [i | some i, y in list; y == x][0]

# Pod sets asking for a domain whose every candidate flavor is judged and fails.
tas_refused contains r if {
	is_object(topologies)
	object.get(data.cluster, "incomplete", "") == ""
	some r in podsets
	asked(r)
	fs := tas_candidates(r)
	count(fs) > 0
	count([f | some f in fs; not tas_fails(r, f)]) == 0
	count([f | some f in fs; tas_fails(r, f) == ""]) == 0
}

tas_words(r) := concat("; ", [sprintf("flavor %q: %s", [f, tas_fails(r, f)]) | some f in sort(tas_candidates(r))])

violation contains {"path": asked_path(r), "msg": msg} if {
	some r in tas_refused
	asked(r).required
	full := sprintf("the %d %s pods must be in one %q domain (%s), but no flavor of Kueue ClusterQueue %q that can take them has one that holds them: %s; Kueue never admits the job: it would stay suspended. Ask for an outer level, podset-preferred-topology, or fewer or smaller pods", [r.replicas, r.type, asked(r).level, required_annotation, cluster_queue_name, tas_words(r)])
	withheld := sprintf("the %d %s pods must be in one %q domain (%s), but no flavor of the ClusterQueue of Kueue LocalQueue %q has one that holds them; Kueue never admits the job", [r.replicas, r.type, asked(r).level, required_annotation, local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

warning contains {"path": asked_path(r), "msg": msg} if {
	some r in tas_refused
	not asked(r).required
	full := sprintf("the %d %s pods prefer one %q domain (%s), but no flavor of Kueue ClusterQueue %q has one that holds them (%s): Kueue will spread them over several", [r.replicas, r.type, asked(r).level, preferred_annotation, cluster_queue_name, tas_words(r)])
	withheld := sprintf("the %d %s pods prefer one %q domain (%s), but no flavor of the ClusterQueue of Kueue LocalQueue %q has one that holds them: Kueue will spread them over several", [r.replicas, r.type, asked(r).level, preferred_annotation, local_queue])
	msg := lib.for_caller(input, full, withheld)
}

# A level that is not one of the flavor's Topology: Kueue does not use the flavor for the pod
# set. Said, not refused: the Topology may be the platform's to fix.
warning contains {"path": asked_path(r), "msg": msg} if {
	is_object(topologies)
	some r in podsets
	level := asked(r).level
	some f in tas_candidates(r)
	ls := levels(f)
	not level in ls
	full := sprintf("the %s pods ask for topology level %q, which is not a level of Topology %q of Kueue flavor %q (levels: %s): Kueue does not admit them into that flavor", [r.type, level, flavors[f].topology_name, f, concat(", ", ls)])
	withheld := sprintf("the %s pods ask for topology level %q, which is not a level of the Topology of a flavor of their ClusterQueue: Kueue does not admit them into that flavor", [r.type, level])
	msg := lib.for_caller(input, full, withheld)
}

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
