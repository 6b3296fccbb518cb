# A job with more than one pod must be gang-scheduled: either all of its pods start or none
# do. Without a gang, half a job can be placed while the rest waits forever, holding GPUs.
#
# With `scheduler: kubernetes` the gang is Kubernetes' own (1.36, scheduling.k8s.io/v1alpha2
# PodGroups made by `gangplank controller --gang-scheduler kubernetes`): pods keep the default
# scheduler, so no schedulerName is written or required, and a job is refused when the
# cluster inventory says the API server does not serve those PodGroups
# (data.cluster.native_gang_api false; null or no inventory: not judged). With
# `nativeTopologyKey` set, such a gang is also given the job annotation
# gangplank.dev/topology-key (unless the user wrote one), which the controller copies into the
# PodGroup's schedulingConstraints.topology: kube-scheduler then places the whole gang within
# one domain of that node label (TopologyAwareWorkloadScheduling). Where the placement search
# finds that kube-scheduler places such a gang in some orders of its pods and never in others,
# it is given the release order that places it (gangplank.dev/release-order, below).
package gangplank.policies.gang_scheduling

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Gang scheduling for multi-pod jobs",
	"description": "Multi-pod jobs get a gang scheduler and a PodGroup minAvailable; non-gang schedulers, mixed schedulers, impossible minAvailable, unknown queues and (with scheduler kubernetes) a cluster without the native PodGroup API are refused. A native gang whose placement depends on the order of its pods gets the release order that places it (gangplank.dev/release-order); a release order naming no replica type is refused.",
	"action": "deny",
	"params": {
		# Scheduler set on templates that name none; "kubernetes" selects the native gang
		# (pods keep the default scheduler, nothing is set).
		"scheduler": "volcano",
		# Scheduler names that provide gang semantics (Volcano, scheduler-plugins coscheduling).
		"gangSchedulers": ["volcano", "scheduler-plugins-scheduler"],
		# Queues jobs may name in runPolicy.schedulingPolicy.queue; empty allows any.
		"allowedQueues": [],
		# With scheduler "kubernetes": the node label key (rack, NVLink domain) one of whose
		# domains must hold each native gang; "" puts no such constraint.
		"nativeTopologyKey": "",
	},
}

params := data.params.gang_scheduling

# The gang is Kubernetes' own: the default scheduler's GangScheduling plugin places it.
native if params.scheduler == "kubernetes"

# The scheduler names that give a gang: the configured ones, and with the native gang the
# default scheduler (a template naming none runs there too).
gang_schedulers := lib.gang_schedulers(params)

NATIVE_SCHEDULER := "default-scheduler"

# A template whose pods the native gang would place: it names no scheduler, or the default.
on_native_gang(r) if {
	native
	not r.schedulerName
}

on_native_gang(r) if {
	native
	r.schedulerName == NATIVE_SCHEDULER
}

# Kueue admits all pod sets of a workload at once, so a Kueue-queued job is a gang already.
# Trainer v2 jobs get their gang from the runtime's podGroupPolicy: the trainer_gang policy.
needs_scheduler if {
	not input.job.trainer
	input.job.totalPods > 1
	# lib.kueue_managed(input.object) written out: no call.
	not input.object.metadata.labels["kueue.x-k8s.io/queue-name"]
}

# runPolicy.schedulingPolicy as written; only its fields are read, and a field of anything
# but an object is undefined, so no type test (lib.run_policy) is needed.
scheduling_policy := input.object.spec.runPolicy.schedulingPolicy

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
	not native
	some r in input.job.replicas
	not r.schedulerName
}

# Derived: computed from the replica counts, so recomputed when they change (policies/README.md,
# "Derived defaults") while the field still holds the value written here.
mutation contains {"op": "default", "path": min_available_path, "value": gang_size, "derived": true} if {
	needs_scheduler
	min_available_writable
}

# The native gang's topology domain: an intent the controller reads from the job's
# annotation when it creates the PodGroup. Not derived: it follows the cluster, not the
# job's shape; a user's value (even "", for no constraint) is kept.
topology_annotation := "gangplank.dev/topology-key"

mutation contains {"op": "default", "path": lib.ptrs("/metadata", ["annotations", topology_annotation]), "value": params.nativeTopologyKey} if {
	needs_scheduler
	params.nativeTopologyKey != ""
	some r in input.job.replicas
	on_native_gang(r)
	lib.writable_object_field(input.object.metadata, "annotations")
}

# The native gang's release order. kube-scheduler's pod group cycle takes a gang's pods in
# the order they first entered its queue, which for pods released together is random, drawn
# once per gang and kept across retries: some gangs are placed in one order and never in
# another (data.cluster.kube_scheduler says "either"). For those the placement search names a
# release order that places the gang (placingOrder), and the controller, reading this
# annotation, creates the pods behind a scheduling gate and lifts it one replica type after
# the other in that order (src/job/release_order.rs). Derived: it follows the job's shape
# (and the cluster), so it is computed afresh on every change and dropped when no longer
# needed; a user's own value is kept and judged by the capacity policy in its order only.
release_annotation := "gangplank.dev/release-order"

release_path := lib.ptrs("/metadata", ["annotations", release_annotation])

mutation contains {"op": "default", "path": release_path, "value": concat(",", order.types), "derived": true} if {
	needs_scheduler
	count([r | some r in input.job.replicas; not on_native_gang(r)]) == 0
	data.cluster.kube_scheduler.outcome == "either"
	order := data.cluster.kube_scheduler.placingOrder
	lib.writable_object_field(input.object.metadata, "annotations")
}

violation contains {"path": release_path, "msg": sprintf("annotation %s", [input.job.releaseOrder.error])}

# Only the controller's native gang releases pods in order: said where it changes nothing.
warning contains {"path": release_path, "msg": msg} if {
	count(input.job.releaseOrder.types) > 0
	not native
	msg := sprintf("annotation %s changes nothing here: only the native gang (gang_scheduling scheduler \"kubernetes\") has gangplank controller release a job's pods in order; this platform's gangs go to %s", [release_annotation, params.scheduler])
}

warning contains {"path": release_path, "msg": msg} if {
	count(input.job.releaseOrder.types) > 0
	native
	input.job.kind == "MPIJob"
	msg := sprintf("annotation %s changes nothing on an MPIJob: gangplank controller creates the launcher only once the workers run, and releases no pods in order", [release_annotation])
}

# A node label key (Kubernetes' qualified name): an optional lowercase DNS subdomain prefix
# (at most 253 characters) and "/", then a name of 1 to 63 alphanumerics, "-", "_", ".".
label_key_pattern := `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`

valid_label_key(k) if {
	regex.match(label_key_pattern, k)
	parts := split(k, "/")
	count(parts[count(parts) - 1]) <= 63
	count(k) - count(parts[count(parts) - 1]) <= 254
}

# The controller would not create a PodGroup for an invalid key (it says so on the job);
# here the user hears it before the job exists.
# The native gang's findings: one body is entered for them when the gang is another
# scheduler's (a body costs the VM thousands of instructions even when its first test fails).
violation contains f if {
	native
	needs_scheduler
	some f in native_violations
}

native_violations contains {"path": lib.ptrs("/metadata", ["annotations", topology_annotation]), "msg": msg} if {
	key := input.object.metadata.annotations[topology_annotation]
	key != ""
	not valid_label_key(key)
	msg := sprintf("annotation %s is %s, which is not a node label key (an optional DNS subdomain prefix and /, then 1 to 63 alphanumerics, -, _ or .); the native gang's PodGroup could not be created. Use a key such as topology.kubernetes.io/rack, or \"\" for no topology constraint", [topology_annotation, lib.shown(key)])
}

violation contains {"path": concat("", [r.podSpecPath, "/schedulerName"]), "msg": msg} if {
	needs_scheduler
	some r in input.job.replicas
	# Cheap test first: a template naming a gang scheduler (the usual case, once the default
	# is written) has no problem, and scheduler_problem is not called for it.
	not r.schedulerName in gang_schedulers
	msg := scheduler_problem(r)
}

scheduler_problem(r) := sprintf("%s pods name no scheduler; a %v-pod job needs a gang scheduler (one of %v) or the kueue.x-k8s.io/queue-name label", [r.type, input.job.totalPods, gang_schedulers]) if {
	not r.schedulerName
	not native
}

scheduler_problem(r) := sprintf("scheduler \"%s\" does not gang-schedule; this %v-pod job could start partly and deadlock. Use one of %v, or queue it with Kueue (label kueue.x-k8s.io/queue-name)", [r.schedulerName, input.job.totalPods, gang_schedulers]) if {
	r.schedulerName
	not r.schedulerName in gang_schedulers
}

# The native gang needs its API: without scheduling.k8s.io/v1alpha2 podgroups the controller
# cannot create the job's PodGroup, and pods that name it are never scheduled.
native_violations contains {"path": input.job.replicaSpecsPath, "msg": msg} if {
	data.cluster.native_gang_api == false
	types := [r.type | some r in input.job.replicas; on_native_gang(r)]
	count(types) > 0
	msg := sprintf("this %v-pod job is gang-scheduled by Kubernetes itself (gang_scheduling scheduler: kubernetes), but the cluster does not serve scheduling.k8s.io/v1alpha2 podgroups, so its %s pods would never start: the cluster admin enables the API (kube-apiserver --feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1alpha2=true, kube-scheduler --feature-gates=GenericWorkload=true,GangScheduling=true); or name another gang scheduler (one of %v) in schedulerName, or queue the job with Kueue (label kueue.x-k8s.io/queue-name)", [input.job.totalPods, concat("/", types), params.gangSchedulers])
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
