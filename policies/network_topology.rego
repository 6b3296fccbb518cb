# Network topology: a Volcano gang that must stay inside one network domain (HyperNode).
#
# Volcano's HyperNodes (topology.volcano.sh/v1alpha1) are tiers of NVLink domains and leaf
# and spine switches: tier 1 is closest to the nodes. A PodGroup's networkTopology
# {mode: hard, highestTierAllowed: N} makes vc-scheduler place every pod of the gang inside
# one HyperNode of tier <= N (highestTierName: up to the tier of that name), and hold the
# gang whole, forever, when no such HyperNode can take it, however much room the cluster has.
# The controller writes it from the job's annotation gangplank.dev/network-topology
# (hard:N, hard:TIER-NAME, soft, soft:N, or Volcano's JSON); a TrainJob's runtime carries it
# in podGroupPolicy.volcano.networkTopology.
#
# With data.cluster.hypernodes (the inventory resolves each HyperNode to its nodes, as node
# classes), a hard gang is refused when no allowed HyperNode can hold all its pods, naming
# the tiers and the largest one's room. A HyperNode holds the gang when, for every replica
# type, the nodes it admits (nodeSelector, tolerations) hold that type's pods, each node
# floor(allocatable / request) of them with the scarcest resource deciding, and when the
# gang's summed requests of every resource fit what those nodes have: both are necessary,
# so a refusal is sure; types sharing nodes are not searched further (admitted). Gangs that
# start below their pod count (minAvailable) are not judged. A value of the annotation that
# is no network topology is refused, with the forms that are.
package gangplank.policies.network_topology

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Gangs one network domain can hold",
	"description": "Refuses a Volcano gang with a hard networkTopology (annotation gangplank.dev/network-topology, or a TrainJob runtime's podGroupPolicy.volcano.networkTopology) when no HyperNode of an allowed tier can hold all its pods, naming the tiers and the largest one's room; refuses an annotation value that is no network topology.",
	"action": "deny",
	"params": {},
}

annotation := "gangplank.dev/network-topology"

annotation_path := lib.ptrs("/metadata", ["annotations", annotation])

forms := "hard:N (N a tier >= 1), hard:TIER-NAME, soft, soft:N, or JSON such as {\"mode\":\"hard\",\"highestTierAllowed\":2}"

# --- The value: parsed as src/job/network_topology.rs parses it. ---

written := v if {
	v := input.object.metadata.annotations[annotation]
	is_string(v)
}

violation contains {"path": annotation_path, "msg": msg} if {
	written
	not parse(trim_space(written))
	msg := sprintf("annotation %s is %q, which is no network topology: use %s", [annotation, written, forms])
}

parse(v) := {"mode": "soft"} if v == "soft"

parse(v) := t if {
	not startswith(v, "{")
	parts := split(v, ":")
	count(parts) == 2
	parts[0] in {"hard", "soft"}
	t := object.union({"mode": parts[0]}, tier_field(trim_space(parts[1])))
}

parse(v) := t if {
	startswith(v, "{")
	json.is_valid(v)
	doc := json.unmarshal(v)
	is_object(doc)
	count([k | some k, _ in doc; not k in {"mode", "highestTierAllowed", "highestTierName"}]) == 0
	mode := object.get(doc, "mode", "hard")
	mode in {"hard", "soft"}
	count({k | some k in ["highestTierAllowed", "highestTierName"]; doc[k]}) <= 1
	good_tiers(doc)
	hard_has_tier(mode, doc)
	t := object.union(doc, {"mode": mode})
}

tier_field(s) := {"highestTierAllowed": to_number(s)} if {
	regex.match(`^[0-9]+$`, s)
	to_number(s) >= 1
}

tier_field(s) := {"highestTierName": s} if {
	not regex.match(`^-?[0-9]+$`, s)
	count(s) > 0
	count(s) <= 253
}

good_tiers(doc) if {
	not doc.highestTierAllowed
	not doc.highestTierName
}

good_tiers(doc) if {
	n := doc.highestTierAllowed
	is_number(n)
	n == floor(n)
	n >= 1
}

good_tiers(doc) if {
	s := doc.highestTierName
	is_string(s)
	count(s) > 0
	count(s) <= 253
}

hard_has_tier("soft", _) := true

hard_has_tier("hard", doc) if doc.highestTierAllowed

hard_has_tier("hard", doc) if doc.highestTierName

# --- Which gang, and its topology. ---

# Some topology is asked for: the annotation, or a runtime's (a cheap guard: most jobs have
# neither, and then no rule below is evaluated).
asked_for if written

asked_for if input.job.trainer.networkTopology

volcano_scheduled if {
	some r in input.job.replicas
	r.schedulerName == "volcano"
}

# From the annotation on a Volcano-scheduled job (the controller's PodGroup) ...
topology := {"value": t, "path": annotation_path, "said": sprintf("%s %s", [annotation, written])} if {
	t := parse(trim_space(written))
	volcano_scheduled
} else := {"value": t, "path": path, "said": sprintf("%s %s's podGroupPolicy.volcano.networkTopology", [input.job.trainer.runtime.kind, input.job.trainer.runtime.name])} if {
	# ... or from a TrainJob's runtime (the Trainer's Volcano PodGroup).
	input.job.trainer.podGroupPolicy == "volcano"
	t := input.job.trainer.networkTopology
	is_object(t)
	object.get(t, "mode", "hard") == "hard"
	path := sprintf("%s/volcano/networkTopology", [input.job.trainer.podGroupPolicyPath])
}

hard if object.get(topology.value, "mode", "hard") == "hard"

# The annotation on a job Volcano does not schedule: no PodGroup carries it.
warning contains {"path": annotation_path, "msg": msg} if {
	written
	not volcano_scheduled
	schedulers := {r.schedulerName | some r in input.job.replicas; r.schedulerName}
	count(schedulers) > 0
	msg := sprintf("annotation %s is read for Volcano gangs only, and this job's pods use %s: it has no effect here (for Kubernetes' native gang, gangplank.dev/topology-key keeps the gang in one domain of a node label)", [annotation, concat(", ", sort(schedulers))])
}

hypernodes := data.cluster.hypernodes

# The gang starts with all its pods (minAvailable below the count: not judged).
whole_gang if not lib.run_policy(input.object).schedulingPolicy.minAvailable

whole_gang if lib.run_policy(input.object).schedulingPolicy.minAvailable >= total_pods

judged if {
	hard
	is_object(hypernodes)
	count(hypernodes) > 0
	object.get(data.cluster, "incomplete", "") == ""
	whole_gang
	total_pods > 0
}

# The highest tier allowed: the number, or the tier of the HyperNodes of that tier name.
highest := topology.value.highestTierAllowed

highest := max([hn.tier | some hn in hypernodes; hn.tier_name == topology.value.highestTierName])

violation contains {"path": topology.path, "msg": msg} if {
	asked_for
	judged
	name := topology.value.highestTierName
	not highest
	names := sort({hn.tier_name | some hn in hypernodes; hn.tier_name != ""})
	msg := sprintf("%s keeps the gang inside one HyperNode up to tier %q, but no HyperNode has that tierName (tier names: %s), so Volcano never places it; use one of them, or highestTierAllowed", [topology.said, name, concat(", ", names)])
}

# --- Capacity per HyperNode. ---

placed := [r | some r in input.job.replicas; r.replicas > 0]

total_pods := sum([r.replicas | some r in placed])

demands := {r.key: object.union({name: n | some name, n in r.podRequests; n > 0}, {"pods": 1}) | some r in placed}

per_node(d, allocatable) := lib.pods_per_node(d, allocatable, total_pods + 1)

# Pods of demand `d` the nodes of class `c` hold.
class_pods(c, d) := c.size * per_node(d, c.allocatable)

# Per HyperNode: the pods of each replica type its nodes hold, and whether the gang fits.
room := {name: {"tier": hn.tier, "fits": fits, "summed": summed} |
	some name, hn in hypernodes
	fits := {r.key: sum([class_pods(c, demands[r.key]) |
		some c in hn.node_classes
		lib.node_admits(r, c)
	]) |
		some r in placed
	}
	summed := summed_fit(hn)
}

# The gang's summed requests of every resource fit what the nodes any type admits have.
summed_fit(hn) := count(short) == 0 if {
	reachable := {i | some i, c in hn.node_classes; some r in placed; lib.node_admits(r, c)}
	short := {name |
		some d in demands
		some name, _ in d
		sum([asked(r, name) | some r in placed]) > sum([offered(hn.node_classes[i], name) | some i in reachable])
	}
}

asked(r, name) := r.replicas * object.get(demands[r.key], name, 0)

offered(c, name) := c.size * object.get(c.allocatable, name, 0)

holds_gang(name) if {
	count([r | some r in placed; room[name].fits[r.key] < r.replicas]) == 0
	room[name].summed
}

allowed := {name | some name, hn in hypernodes; hn.tier <= highest}

violation contains {"path": topology.path, "msg": msg} if {
	asked_for
	judged
	highest
	not any_allowed_holds
	msg := sprintf("%s keeps all %d pods of the gang (%s) inside one HyperNode of tier <= %d, but none can hold them: %s; the largest, %s. Volcano would hold the gang whole, forever. %s", [topology.said, total_pods, gang_said, highest, tiers_said, largest_room, fix])
}

any_allowed_holds if {
	some name in allowed
	holds_gang(name)
}

tiers_said := "no HyperNode has such a tier" if count(allowed) == 0

tiers_said := concat("; ", [sprintf("tier %d: %s", [t, concat(", ", sort([n | some n in allowed; hypernodes[n].tier == t]))]) |
	some t in sort({hypernodes[n].tier | some n in allowed})
]) if count(allowed) > 0

# The largest allowed HyperNode (most nodes; ties: the first by name); any HyperNode when
# none is allowed.
candidates := allowed if {
	count(allowed) > 0
} else := object.keys(hypernodes)

largest := [n | some n in sort(candidates); hypernodes[n].node_count == max([hypernodes[m].node_count | some m in candidates])][0]

# Its room: per replica type the pods its nodes hold (each type counted alone).
largest_room := sprintf("%s (tier %d, %d nodes) has room for %s%s", [largest, hypernodes[largest].tier, hypernodes[largest].node_count, concat(" or ", [sprintf("%d %s pods", [room[largest].fits[r.key], r.key]) | some r in placed]), alone_note])

alone_note := ", each type counted alone" if count(placed) > 1 else := ""

gang_said := concat(" + ", [sprintf("%d %s", [r.replicas, r.key]) | some r in placed])

# A higher tier whose HyperNode holds the gang, if any.
fix := sprintf("Allow tier %d (%s holds the gang), use soft mode, or ask for fewer or smaller pods", [t, n]) if {
	fitting := [[hypernodes[n].tier, n] | some n, _ in hypernodes; not n in allowed; holds_gang(n)]
	count(fitting) > 0
	[t, n] := min(fitting)
} else := "No HyperNode of any tier holds it: ask for fewer or smaller pods, or use soft mode"

