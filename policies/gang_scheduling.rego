# A job with more than one pod must be gang-scheduled: either all of its pods start or none
# do. Without a gang, half a job can be placed while the rest waits forever, holding GPUs.
package gangplank.policies.gang_scheduling

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Gang scheduling for multi-pod jobs",
	"description": "Multi-pod jobs get a gang scheduler and a PodGroup minAvailable; non-gang schedulers, mixed schedulers, impossible minAvailable and unknown queues are refused.",
	"action": "deny",
	"params": {
		# Scheduler set on templates that name none.
		"scheduler": "volcano",
		# Scheduler names that provide gang semantics (Volcano, scheduler-plugins coscheduling).
		"gangSchedulers": ["volcano", "scheduler-plugins-scheduler"],
		# Queues jobs may name in runPolicy.schedulingPolicy.queue; empty allows any.
		"allowedQueues": [],
	},
}

params := data.params.gang_scheduling

# Kueue admits all pod sets of a workload at once, so a Kueue-queued job is a gang already.
needs_scheduler if {
	input.job.totalPods > 1
	not lib.kueue_managed(input.object)
}

scheduling_policy := object.get(lib.run_policy(input.object), "schedulingPolicy", {})

min_available_path := "/spec/runPolicy/schedulingPolicy/minAvailable"

# The gang size: every pod, or for an elastic job the pods that must exist for it to start.
# A minReplicas outside [1, Workers] is the replicas policy's to refuse, with its own message;
# the gang is then every pod, so no second, indirect message about minAvailable follows.
gang_size := n if {
	min := input.object.spec.elasticPolicy.minReplicas
	is_number(min)
	min >= 1
	min <= sum([r.replicas | some r in input.job.replicas; r.role == "worker"])
	n := min + sum([r.replicas | some r in input.job.replicas; r.role != "worker"])
} else := input.job.totalPods

# minAvailable can be written where runPolicy and its schedulingPolicy are absent, null or
# objects; under anything else the default could not be applied and the request would be
# refused for it (run_policy refuses a runPolicy that is not an object).
min_available_writable if object.get(input.object, ["spec", "runPolicy"], null) == null

min_available_writable if {
	is_object(input.object.spec.runPolicy)
	lib.writable_object_field(input.object.spec.runPolicy, "schedulingPolicy")
}

mutation contains {"op": "default", "path": concat("", [r.podSpecPath, "/schedulerName"]), "value": params.scheduler} if {
	needs_scheduler
	some r in input.job.replicas
	not r.schedulerName
}

# Derived: computed from the replica counts, so recomputed when they change (README,
# "Derived defaults") while the field still holds the value written here.
mutation contains {"op": "default", "path": min_available_path, "value": gang_size, "derived": true} if {
	needs_scheduler
	min_available_writable
}

violation contains {"path": concat("", [r.podSpecPath, "/schedulerName"]), "msg": msg} if {
	needs_scheduler
	some r in input.job.replicas
	msg := scheduler_problem(r)
}

scheduler_problem(r) := sprintf("%s pods name no scheduler; a %v-pod job needs a gang scheduler (one of %v) or the kueue.x-k8s.io/queue-name label", [r.type, input.job.totalPods, params.gangSchedulers]) if {
	not r.schedulerName
}

scheduler_problem(r) := sprintf("scheduler \"%s\" does not gang-schedule; this %v-pod job could start partly and deadlock. Use one of %v, or queue it with Kueue (label kueue.x-k8s.io/queue-name)", [r.schedulerName, input.job.totalPods, params.gangSchedulers]) if {
	r.schedulerName
	not r.schedulerName in params.gangSchedulers
}

violation contains {"path": input.job.replicaSpecsPath, "msg": msg} if {
	names := {r.schedulerName | some r in input.job.replicas; r.schedulerName}
	count(names) > 1
	msg := sprintf("replica templates name different schedulers %v; one gang needs one scheduler", [sort(names)])
}

violation contains {"path": min_available_path, "msg": msg} if {
	min := scheduling_policy.minAvailable
	min < 1
	msg := sprintf("minAvailable is %v; it must be at least 1", [min])
}

violation contains {"path": min_available_path, "msg": msg} if {
	min := scheduling_policy.minAvailable
	min > input.job.totalPods
	msg := sprintf("minAvailable is %v but the job has only %v pods; the gang could never be scheduled", [min, input.job.totalPods])
}

violation contains {"path": "/spec/runPolicy/schedulingPolicy/queue", "msg": msg} if {
	count(params.allowedQueues) > 0
	queue := scheduling_policy.queue
	not queue in params.allowedQueues
	msg := sprintf("queue %s is not one of the allowed queues %v", [lib.shown(queue), params.allowedQueues])
}
