# Trainer v2 (TrainJob): the gang comes from the runtime. The Trainer creates a PodGroup only
# when the runtime has a podGroupPolicy (coscheduling or volcano); without one a multi-node
# TrainJob's pods are placed one by one and can deadlock half placed, as any v1 job.
#
# And with one, the Trainer (v2.3.0, plugins coscheduling and volcano) sets the PodGroup's
# minMember to the pods of every replicatedJob, while JobSet creates a job that dependsOn
# another only once that one is Complete or Ready: the gang then never has minMember pods,
# and the TrainJob waits forever (Kubeflow's torchtune and data-cache runtimes with a gang;
# the MPI runtimes, whose launcher waits for the nodes to be Ready).
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
	},
}

params := data.params.trainer_gang

t := input.job.trainer

trainjob if input.job.kind == "TrainJob"

runtime if input.job.kind in {"TrainingRuntime", "ClusterTrainingRuntime"}

# Pods that train together: every replicatedJob but the initializers.
trainer_pods := sum([r.replicas | some r in input.job.replicas; r.role != "initializer"])

self_ganged if {
	every r in input.job.replicas {
		r.schedulerName in params.gangSchedulers
	}
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
	msg := sprintf("%s %s has no podGroupPolicy, so the Trainer makes no PodGroup for this %v-pod TrainJob: its pods are placed one by one, and when only some fit they hold their GPUs while the rest wait forever. Run on a runtime with podGroupPolicy (volcano: {} or coscheduling: {}), or queue the TrainJob with Kueue (label kueue.x-k8s.io/queue-name)", [t.runtime.kind, t.runtime.name, trainer_pods])
}

warning contains {"path": "/spec/podGroupPolicy", "msg": msg} if {
	runtime
	no_gang
	msg := "no podGroupPolicy: TrainJobs with numNodes > 1 on this runtime are refused (they could deadlock half placed) unless Kueue queues them; add podGroupPolicy (volcano: {} or coscheduling: {})"
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
