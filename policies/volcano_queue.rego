# Volcano queues: a job queued on a Queue that does not exist, is not Open, or whose
# capability is smaller than the gang waits forever in Pending, holding nothing and telling
# no one. Reads data.cluster.volcano_queues (present when the Queue CRD is installed and a
# cluster inventory is known); silent otherwise.
package gangplank.policies.volcano_queue

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Volcano queues that can take the gang",
	"description": "With a cluster inventory that has Volcano Queues, refuses Volcano-scheduled jobs whose queue (runPolicy.schedulingPolicy.queue, else the job's scheduling.volcano.sh/queue-name annotation, else default) does not exist, is not Open, or has a capability below the gang's total demand of a resource.",
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
	need := lib.gang_total(name)
	need > cap
	msg := sprintf("the gang needs %d %s; Volcano queue %q's capability is %d, so it can never start there%s", [need, name, queue, cap, stale_note])
}
