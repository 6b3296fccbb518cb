# Volcano queues: a job queued on a Queue that does not exist, is not Open, or whose
# capability (or what other queues' guarantees leave it) is smaller than the gang waits
# forever in Pending, holding nothing and telling no one. Reads data.cluster.volcano_queues (present when the Queue CRD is installed and a
# cluster inventory is known); silent otherwise.
# METADATA
# custom:
#   applies_when:
#     all: [cluster]
package gangplank.policies.volcano_queue

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Volcano queues that can take the gang",
	"description": "With a cluster inventory that has Volcano Queues, refuses Volcano-scheduled jobs whose queue (runPolicy.schedulingPolicy.queue, else the job's scheduling.volcano.sh/queue-name annotation, else default) does not exist, is not Open, or has a capability (or room left by other queues' guarantees) below the gang's demand of a resource.",
	"action": "deny",
	"params": {
		# Queue Volcano uses for jobs that name none.
		"defaultQueue": "default",
	},
}

params := data.params.volcano_queue

queues := data.cluster.volcano_queues

stale_note := lib.inventory_stale_note

# A cluster inventory with no Node yet is one still being read (or a broken one): judging
# queues then would refuse jobs for a view that is not there.
volcano_job if {
	is_object(queues)
	data.cluster.node_count > 0
	some r in input.job.replicas
	r.schedulerName == "volcano"
}

queue := q if {
	q := input.object.spec.runPolicy.schedulingPolicy.queue
	is_string(q)
	q != ""
} else := q if {
	q := input.object.metadata.annotations["scheduling.volcano.sh/queue-name"]
	is_string(q)
	q != ""
} else := params.defaultQueue

queue_path := "/spec/runPolicy/schedulingPolicy/queue"

violation contains {"path": queue_path, "msg": msg} if {
	volcano_job
	not queues[queue]
	msg := sprintf("Volcano queue %q does not exist; queues: %s%s", [queue, concat(", ", sort(object.keys(queues))), stale_note])
}

violation contains {"path": queue_path, "msg": msg} if {
	volcano_job
	state := queues[queue].state
	state != "Open"
	msg := sprintf("Volcano queue %q is %s: it admits no new jobs%s", [queue, state, stale_note])
}

violation contains {"path": queue_path, "msg": msg} if {
	volcano_job
	some name, cap in queues[queue].capability
	is_number(cap)
	not explicit_min_resources[name]
	need := gang_need(name)
	need > cap
	msg := sprintf("the gang needs %d %s%s; Volcano queue %q's capability is %d, so it can never start there%s", [need, name, minimum_note, queue, cap, stale_note])
}

# Another queue's guarantee is taken from this one: Volcano's proportion plugin caps every
# queue at realCapability = max(0, cluster total - every queue's guarantee) + its own
# guarantee (and its capability), and enqueues a gang only if its minResources fit under that
# ("queue resource quota insufficient"), whether or not the other queue runs anything. The
# total is every node's allocatable, cordoned ones included, as Volcano counts them (it leaves
# out nodes that are not Ready, which the inventory does not: so this is never stricter).
violation contains {"path": queue_path, "msg": msg} if {
	volcano_job
	own := queues[queue]
	some name in guaranteed
	not explicit_min_resources[name]
	not over_capability(own, name)
	others := sum([g | some other, q in queues; other != queue; g := guarantee(q, name)])
	others > 0
	mine := guarantee(own, name)
	total := cluster_total(name)
	room := max([0, total - others - mine]) + mine
	need := gang_need(name)
	need > room
	msg := sprintf("the gang needs %d %s%s; Volcano queue %q can hold at most %d of the cluster's %d, since other queues' guarantees reserve %d (%s), so it can never start there (Volcano's proportion plugin: realCapability)%s", [need, name, minimum_note, queue, room, total, others, guarantors(name), stale_note])
}

guaranteed contains name if {
	some q in queues
	some name, g in q.guarantee
	is_number(g)
}

guarantee(q, name) := g if {
	g := q.guarantee[name]
	is_number(g)
} else := 0

guarantors(name) := concat(", ", sort([sprintf("%s: %d", [other, g]) |
	some other, q in queues
	other != queue
	g := guarantee(q, name)
	g > 0
]))

# Said by the capability rule already.
over_capability(q, name) if {
	cap := q.capability[name]
	is_number(cap)
	gang_need(name) > cap
}

cluster_total(name) := sum([n |
	some c in data.cluster.node_classes
	a := c.allocatable[name]
	is_number(a)
	n := a * c.size
])

total_pods := sum([r.replicas | some r in input.job.replicas])

# The pods the gang starts with: minAvailable when it is below the pod count, else all.
gang_min := n if {
	n := input.object.spec.runPolicy.schedulingPolicy.minAvailable
	is_number(n)
	n < total_pods
} else := total_pods

# Volcano enqueues a gang once its queue can hold the PodGroup's minResources, which the
# controller writes as the requests of the first gang_min pods in rank order (Master first,
# src/controller/podgroup.rs); the pods beyond them start as the queue allows. So that, not
# every pod, is what must fit under the capability.
gang_need(name) := sum([n |
	some i, r in input.job.replicas
	some c in r.containers
	some g in c.gpuResources
	g.name == name
	n := gang_pods(i) * lib.gpu_amount(g)
])

# Pods of replica type i among the first gang_min in rank order.
gang_pods(i) := max([0, min([input.job.replicas[i].replicas, gang_min - pods_before(i)])])

pods_before(i) := sum([r.replicas | some j, r in input.job.replicas; j < i])

# minResources written by the user are the PodGroup's as they are: not judged here (the
# controller copies them; a quantity string is not compared in Rego).
explicit_min_resources contains name if {
	some name, _ in input.object.spec.runPolicy.schedulingPolicy.minResources
}

minimum_note := "" if {
	gang_min == total_pods
} else := sprintf(" for the %d pods it starts with (minAvailable; the first in rank order, as the PodGroup's minResources count them)", [gang_min])
