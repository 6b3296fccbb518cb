# Priority classes a namespace's jobs may name. Naming one needs no RBAC, and a high class
# (gangplank-critical, system-cluster-critical) preempts other tenants' training and the
# cluster's add-ons. Judged: every pod template (a TrainJob's as its runtime renders it, a
# namespaced TrainingRuntime's own; not ClusterTrainingRuntimes, the platform's) and
# runPolicy.schedulingPolicy.priorityClass (the PodGroup's). Allowed: values up to maxValue,
# else up to the cluster's default class (0 without one); what the namespace's entries add;
# gangplank-critical never. Values from data.cluster.priority_classes; without them only the
# reserved class and the system-* classes (values fixed by Kubernetes) are judged, and
# refusals say so. A class the cluster lacks is refused: the API server refuses its pods.
# METADATA
# custom:
#   applies_when:
#     all: [priority_class]
package gangplank.policies.priority

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Priority classes a namespace may use",
	"description": "Refuses jobs whose pod templates (a TrainJob's as its runtime renders them) or runPolicy.schedulingPolicy.priorityClass name gangplank-critical, a PriorityClass the cluster lacks, or one the namespace may not use: by default any above the cluster's default class (0 without one); params allow classes or values per namespace. Refusals name the class, its value and the classes allowed.",
	"action": "deny",
	"params": {
		# Namespace (name or * glob) → {classes: [names], maxValue: N}: what its jobs may name
		# besides what maxValue allows. Every matching entry counts.
		"namespaces": {},
		# The highest value any namespace may use; null: the default class's (0 without one).
		"maxValue": null,
	},
}

params := data.params.priority

# gangplank's own class (deploy/priorityclass.yaml), for its pods in gangplank-system.
reserved := "gangplank-critical"

# kube-apiserver's own classes: above any user class (highest_user_value), so any default.
builtin := {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}

highest_user_value := 1000000000

inventory := data.cluster.priority_classes

known if is_object(inventory)

namespace := input.job.namespace

# Where the job names a class; runtime: a TrainJob's runtime gives it.
named contains {"class": c, "path": path, "what": what, "runtime": from_runtime} if {
	input.job.kind != "ClusterTrainingRuntime"
	some r in input.job.replicas
	c := r.placement.priorityClassName
	c != ""
	path := concat("", [r.podSpecPath, "/priorityClassName"])
	from_runtime := startswith(path, "/") == false
	what := sprintf("its %s pods", [r.type])
}

named contains {"class": c, "path": "/spec/runPolicy/schedulingPolicy/priorityClass", "what": "its PodGroup (runPolicy.schedulingPolicy.priorityClass)", "runtime": false} if {
	not input.job.trainer
	c := lib.run_policy(input.object).schedulingPolicy.priorityClass
	is_string(c)
	c != ""
}

# The entries of `namespaces` that match the job's namespace.
entries := [e |
	some pattern, e in params.namespaces
	is_string(pattern)
	is_object(e)
	matches(pattern, namespace)
]

matches(pattern, ns) if pattern == ns

matches(pattern, ns) if {
	lib.is_glob(pattern)
	glob.match(pattern, null, ns)
}

listed := {c | some e in entries; some c in object.get(e, "classes", []); is_string(c)}

entry_limits := [m | some e in entries; m := object.get(e, "maxValue", null); is_number(m)]

# The highest value any namespace may use, and how a message says it.
limit := {"value": params.maxValue, "said": sprintf("its value is above %v, the highest value params.yaml allows (priority maxValue)", [params.maxValue])} if {
	is_number(params.maxValue)
} else := {"value": inventory.default.value, "said": sprintf("its value is above that of the cluster's default PriorityClass %q (value %v), which pods naming no class get", [inventory.default.name, inventory.default.value])} if {
	known
	inventory.default.name != ""
} else := {"value": 0, "said": "its value is above 0, what pods naming no class get (no globalDefault PriorityClass)"} if {
	known
} else := {"value": highest_user_value, "said": sprintf("its value is above %v, the most a user's class may have, so above any default", [highest_user_value])}

# A class's value: the inventory's, else a built-in's; undefined when unknown.
value_of(c) := inventory.classes[c].value if known

value_of(c) := builtin[c] if not known

# Up to the limit anywhere (no more than naming no class gives), and what entries add.
allowed(_, v) if v <= limit.value

allowed(c, _) if c in listed

allowed(_, v) if {
	some m in entry_limits
	v <= m
}

# Why the namespace may not use a class, for messages.
rule := concat("", [limit.said, "; its priority namespaces entries neither list the class nor allow its value"]) if {
	count(entries) > 0
} else := concat("", [limit.said, "; no priority namespaces entry matches the namespace"]) if {
	count(params.namespaces) > 0
} else := limit.said

# The classes allowed here, with their values when known.
allowed_here := [sprintf("%s (%v)", [c, v.value]) |
	some c, v in inventory.classes
	c != reserved
	allowed(c, v.value)
] if known

allowed_here := [c | some c in listed; c != reserved] if not known

allowed_said := sprintf("allowed here: %s", [concat(", ", sort(allowed_here))]) if {
	count(allowed_here) > 0
} else := "no class is allowed here" if {
	known
} else := "allowed classes unknown without the cluster's PriorityClasses"

# gangplank-critical's value as deploy/priorityclass.yaml sets it.
value_said(c) := sprintf("value %v", [inventory.classes[c].value]) if {
	known
	inventory.classes[c]
} else := "value 1000000000 as gangplank installs it" if {
	c == reserved
} else := "value unknown"

note := lib.inventory_stale_note if known

note := "; judged against params.yaml alone (no PriorityClasses known)" if not known

ask(c) := sprintf("or ask the platform team to allow %q for namespace %q (params.yaml policies.priority.params.namespaces)", [c, namespace])

# A TrainJob cannot change what its runtime sets, only pick another.
instead(n) := sprintf("run the TrainJob on a runtime whose pods name an allowed class or none (%s)", [allowed_said]) if {
	n.runtime
} else := sprintf("name an allowed class, or none and the pods get the cluster's default (%s)", [allowed_said])

violation contains {"path": n.path, "msg": msg} if {
	some n in named
	n.class == reserved
	msg := sprintf("%s would run at PriorityClass %q (%s): it is reserved for gangplank's own pods in gangplank-system and would preempt every other tenant's pods, so no job may use it. To change: %s", [n.what, n.class, value_said(n.class), instead(n)])
}

violation contains {"path": n.path, "msg": msg} if {
	known
	some n in named
	n.class != reserved
	not inventory.classes[n.class]
	msg := sprintf("%s name PriorityClass %q, which the cluster does not have: the API server refuses every such pod (no PriorityClass with name %s was found), so the job would never start. To change: %s%s", [n.what, n.class, n.class, instead(n), note])
}

violation contains {"path": n.path, "msg": msg} if {
	some n in named
	n.class != reserved
	v := value_of(n.class)
	not allowed(n.class, v)
	msg := sprintf("%s would run at PriorityClass %q (value %v), which namespace %q may not use (it could preempt other tenants' pods): %s. To change: %s, %s%s", [n.what, n.class, v, namespace, rule, instead(n), ask(n.class), note])
}
