# Trainer v2 (TrainJob): the gang comes from the runtime. The Trainer creates a PodGroup only
# when the runtime has a podGroupPolicy (coscheduling or volcano); without one a multi-node
# TrainJob's pods are placed one by one and can deadlock half placed, as any v1 job.
#
# And with one, the Trainer (v2.3.0, plugins coscheduling and volcano) sets the PodGroup's
# minMember to the pods of every replicatedJob, while JobSet creates a job that dependsOn
# another only once that one is Complete or Ready: the gang then never has minMember pods,
# and the TrainJob waits forever (Kubeflow's torchtune and data-cache runtimes with a gang;
# the MPI runtimes, whose launcher waits for the nodes to be Ready).
# METADATA
# custom:
#   applies_when:
#     kinds: [TrainJob, TrainingRuntime, ClusterTrainingRuntime]
package gangplank.policies.trainer_gang

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Gangs for TrainJobs and their runtimes",
	"description": "A TrainJob with more than one trainer pod needs a runtime with podGroupPolicy (or a scheduler that gangs by itself, or Kueue); a podGroupPolicy on a runtime whose replicatedJobs dependsOn others can never form its gang (minMember counts pods that are not created yet) and is refused on the runtime and its TrainJobs.",
	"action": "deny",
	"params": {
		# Schedulers that form gangs without a Trainer PodGroup (KAI builds its own groups).
		"gangSchedulers": ["kai-scheduler"],
		# "runtime": a multi-node TrainJob needs its runtime's podGroupPolicy. "kubernetes":
		# where the runtime has none, gangplank gives the TrainJob Kubernetes' native gang
		# (1.36 scheduling.k8s.io/v1alpha2 PodGroup made by `gangplank controller --trainjobs`,
		# pods joined to it by the webhook; docs/src/trainjob.md).
		"gang": "runtime",
	},
}

params := data.params.trainer_gang

t := input.job.trainer

trainjob if input.job.kind == "TrainJob"

runtime if input.job.kind in {"TrainingRuntime", "ClusterTrainingRuntime"}

# Pods that train together: every replicatedJob but the initializers.
trainer_pods := sum([r.replicas | some r in input.job.replicas; r.role != "initializer"])

self_ganged if {
	count([r | some r in input.job.replicas; not r.schedulerName in params.gangSchedulers]) == 0
}

no_gang if {
	not t.podGroupPolicy
	not self_ganged
	not lib.kueue_managed(input.object)
}

violation contains {"path": t.podGroupPolicyPath, "msg": msg} if {
	trainjob
	t.runtime.found
	trainer_pods > 1
	no_gang
	not native
	msg := sprintf("%s %s has no podGroupPolicy, so the Trainer makes no PodGroup for this %v-pod TrainJob: its pods are placed one by one, and when only some fit they hold their GPUs while the rest wait forever. Run on a runtime with podGroupPolicy (volcano: {} or coscheduling: {}), or queue the TrainJob with Kueue (label kueue.x-k8s.io/queue-name)", [t.runtime.kind, t.runtime.name, trainer_pods])
}

warning contains {"path": "/spec/podGroupPolicy", "msg": msg} if {
	runtime
	no_gang
	not native
	msg := "no podGroupPolicy: TrainJobs with numNodes > 1 on this runtime are refused (they could deadlock half placed) unless Kueue queues them; add podGroupPolicy (volcano: {} or coscheduling: {})"
}

# The runtime comes from the webhook's watch cache; while the watch fails, the last listing.
warning contains {"path": "/spec/runtimeRef", "msg": msg} if {
	trainjob
	reason := t.runtime.stale
	msg := sprintf("judged on %s %s as last listed: %s", [t.runtime.kind, t.runtime.name, reason])
}

# The first job that waits on another, with the pods created before it.
violation contains {"path": concat("", [r.path, "/dependsOn"]), "msg": msg} if {
	t.podGroupPolicy
	t.firstWave < t.minMember
	some r in input.job.replicas
	not r.step.firstWave
	dep := r.step.dependsOn[0]
	members := concat(" + ", [sprintf("%s %v", [x.key, x.replicas]) | some x in input.job.replicas])
	msg := sprintf("podGroupPolicy %s makes the Trainer ask its PodGroup for minMember %v (%s), but %s dependsOn %s (%s) and is created only after it: until then %v pods exist, so the gang never forms and the TrainJob waits forever. Remove podGroupPolicy from %s %s, or the dependsOn", [t.podGroupPolicy, t.minMember, members, r.key, object.get(dep, "name", "?"), object.get(dep, "status", "?"), t.firstWave, t.runtime.kind, t.runtime.name])
}

# --- gang: kubernetes. The native gang holds the replicatedJobs that start together: not the
# initializers, and not a job that waits for another gang member (the MPI launcher waits for
# the nodes to be Ready: in the gang it would hold them back forever, as above).
native if params.gang == "kubernetes"

MIN_COUNT := "gangplank.dev/native-gang-min-count"

POD_GROUP_LABEL := "gangplank.dev/pod-group"

PATCH_MANAGER := "gangplank.dev/native-gang"

in_native_gang(r) if {
	r.role != "initializer"
	is_array(r.step.dependsOn)
	count([d | some d in r.step.dependsOn; not initializer_step(d.name)]) == 0
}

initializer_step(name) if {
	some x in input.job.replicas
	x.key == name
	x.role == "initializer"
}

native_members := [r | some r in input.job.replicas; in_native_gang(r)]

native_min := sum([r.replicas | some r in native_members])

gives_native if {
	trainjob
	native
	t.runtime.found
	no_gang
	native_min > 1
	not input.job.nameGenerated
}

# Derived: it follows numNodes (immutable in the Trainer, but a recreated job may change it).
mutation contains {"op": "default", "path": lib.ptrs("/metadata", ["annotations", MIN_COUNT]), "value": sprintf("%v", [native_min]), "derived": true} if {
	gives_native
	lib.writable_object_field(input.object.metadata, "annotations")
}

has_patch_entry if {
	some p in object.get(input.object.spec, "runtimePatches", [])
	p.manager == PATCH_MANAGER
}

# gangplank's own entry (the Trainer merges each entry into the JobSet, and JobSet copies the
# pod template labels onto the pods); written once: the Trainer stamps a time into entries.
mutation contains {"op": "merge", "path": "/spec/runtimePatches", "value": [entry]} if {
	gives_native
	not has_patch_entry
	jobs := [{"name": r.key, "template": {"spec": {"template": {"metadata": {"labels": {POD_GROUP_LABEL: input.job.name}}}}}} |
		some r in native_members
	]
	entry := {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}
}

violation contains {"path": t.podGroupPolicyPath, "msg": msg} if {
	gives_native
	data.cluster.native_gang_api == false
	msg := sprintf("%s %s has no podGroupPolicy and trainer_gang gives such TrainJobs Kubernetes' native gang, but the cluster does not serve scheduling.k8s.io/v1alpha2 podgroups, so the %v pods would never start: the cluster admin enables the API (kube-apiserver --feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1alpha2=true, kube-scheduler --feature-gates=GenericWorkload=true,GangScheduling=true), or run on a runtime with podGroupPolicy", [t.runtime.kind, t.runtime.name, native_min])
}
