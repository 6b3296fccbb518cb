# Replica types and counts: which replica types a kind may have, which it must have, and how
# many replicas each may run. A job with two rank-0 pods, no launcher or zero workers never
# trains; upstream catches only some of these, per kind, and loops forever on others (#1709).
package gangplank.policies.coordinator

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Replica types and counts",
	"description": "Only the kind's replica types; exactly one coordinator (PyTorch/XGBoost/Paddle Master, TF Chief or Master, MPI Launcher), defaulted to 1 replica when unset where upstream rejects it; one of TF Chief/Master; MPI Launcher and XGBoost Master required; elastic PyTorchJobs need a Worker and no Master; every replica type at least 1 replica (upstream #1709), MPI Worker replicas explicit.",
	"action": "deny",
	"params": {},
}

kind := lib.job_kind_label(input.job)

mpi_v2 if lib.mpi_v2beta1(input.job)

# "a PyTorchJob", "an MPIJob", "an XGBoostJob".
a_kind := concat(" ", [article, kind])

article := "an" if {
	startswith(kind, "MPI")
} else := "an" if {
	startswith(kind, "XGB")
} else := "a"

pytorch_elastic if {
	input.job.kind == "PyTorchJob"
	input.object.spec.elasticPolicy != null
}

# mpi-operator: with runLauncherAsWorker the launcher also runs ranks, so zero workers is valid.
launcher_runs_ranks if {
	mpi_v2
	input.object.spec.runLauncherAsWorker == true
}

# Replica types the job cannot run without.
required contains "Launcher" if input.job.kind == "MPIJob"

required contains "Master" if input.job.kind == "XGBoostJob"

required contains "Worker" if pytorch_elastic

# What the coordinator of each kind does, for messages.
duty := {
	"PyTorchJob": "rank 0 and the rendezvous host every pod reaches as MASTER_ADDR=<job>-master-0",
	"XGBoostJob": "rank 0 and the tracker every worker reaches as MASTER_ADDR=<job>-master-0",
	"PaddleJob": "the endpoint every trainer reaches as PADDLE_MASTER=<job>-master-0",
	"TFJob": "the chief that coordinates training and writes checkpoints; success is judged on it",
	"MPIJob": "the pod that runs mpirun against the workers",
}

missing_msg := {
	"Launcher": sprintf("%s needs a Launcher: it is %s. Add spec.mpiReplicaSpecs.Launcher with replicas: 1", [a_kind, duty.MPIJob]),
	"Master": sprintf("an XGBoostJob needs a Master: it is %s. Add spec.xgbReplicaSpecs.Master with replicas: 1", [duty.XGBoostJob]),
	"Worker": "an elastic PyTorchJob (spec.elasticPolicy is set) needs a Worker: the workers rendezvous at <job>-worker-0 and elasticPolicy scales them. Add spec.pytorchReplicaSpecs.Worker, or remove spec.elasticPolicy",
}

# Every coordinator/launcher without replicas runs exactly one pod. Upstream rejects an unset
# PyTorch/XGBoost Master because it never persists its defaults; writing the 1 is kinder.
mutation contains {"op": "default", "path": lib.ptr(r.path, "replicas"), "value": 1} if {
	some r in input.job.replicas
	r.coordinator
	not r.replicasSet
}

# The findings that only some kinds can have (a required replica type, MPI Worker counts,
# TF Chief and Master, elastic PyTorchJobs) or a job without replicas: one body is entered
# for them on other jobs (a body costs the VM thousands of instructions even when its first
# test fails).
violation contains f if {
	kind_rules
	some f in kind_violations
}

# Whether a kind_violations body can hold: `required` is empty, and the kind tests below
# false, for every other job.
kind_rules if input.job.kind in {"MPIJob", "TFJob", "XGBoostJob"}

kind_rules if pytorch_elastic

kind_rules if count(input.job.replicas) == 0

violation contains {"path": r.path, "msg": msg} if {
	some r in input.job.replicas
	not r.known
	msg := sprintf("\"%s\" is not a %s replica type; use one of %s (keys are matched ignoring case)", [r.key, kind, concat(", ", input.job.allowedTypes)])
}

kind_violations contains {"path": lib.ptr(input.job.replicaSpecsPath, t), "msg": missing_msg[t]} if {
	some t in required
	not has_type(t)
	lib.replica_specs(input.object, input.job)
	not t in lib.declared_replica_types(input.object, input.job)
}

# A readable replica spec of type t (the cheap test; declared_replica_types also sees keys
# whose spec is null or malformed).
has_type(t) if {
	some r in input.job.replicas
	r.type == t
}

# No replica specs at all; an empty replica list is the cheap first test (null and malformed
# specs are structure's to report).
kind_violations contains {"path": input.job.replicaSpecsPath, "msg": msg} if {
	count(input.job.replicas) == 0
	count(lib.replica_specs(input.object, input.job)) == 0
	count(required) == 0
	msg := sprintf("the job has no replica specs, so it would never run a pod; add at least one of %s", [concat(", ", input.job.allowedTypes)])
}

violation contains {"path": lib.ptr(r.path, "replicas"), "msg": msg} if {
	some r in input.job.replicas
	r.coordinator
	r.replicasSet
	r.replicas != 1
	msg := sprintf("%s has %v replicas; %s runs exactly one %s, %s. Set replicas: 1%s", [r.type, r.replicas, a_kind, r.type, duty[input.job.kind], extra_pods_hint(r)])
}

extra_pods_hint(r) := "" if r.role == "launcher"

extra_pods_hint(r) := " and give the other pods to Worker" if {
	r.role != "launcher"
	r.replicas > 1
}

extra_pods_hint(r) := sprintf(", or remove the %s spec", [r.key]) if {
	r.role != "launcher"
	r.replicas < 1
	not r.type in required
}

extra_pods_hint(r) := "" if {
	r.role != "launcher"
	r.replicas < 1
	r.type in required
}

violation contains {"path": lib.ptr(r.path, "replicas"), "msg": msg} if {
	some r in input.job.replicas
	r.known
	not r.coordinator
	r.replicasSet
	r.replicas < 1
	not zero_allowed(r)
	msg := sprintf("%s replicas is %v; every replica type needs at least 1 replica (%s). Set replicas to 1 or more, or remove the %s spec", [r.type, r.replicas, zero_reason, r.key])
}

zero_allowed(r) if {
	r.type == "Worker"
	launcher_runs_ranks
	r.replicas == 0
}

zero_reason := "the mpi-operator rejects it unless spec.runLauncherAsWorker is true" if mpi_v2

zero_reason := "an MPIJob with no workers has no hosts to run on" if {
	input.job.kind == "MPIJob"
	not mpi_v2
}

zero_reason := "with 0 the training operator keeps creating and deleting a pod, upstream #1709" if input.job.kind != "MPIJob"

# The MPI operators default an unset Worker count to 0, not 1: say what was meant.
kind_violations contains {"path": lib.ptr(r.path, "replicas"), "msg": msg} if {
	input.job.kind == "MPIJob"
	some r in input.job.replicas
	r.type == "Worker"
	not r.replicasSet
	object.get(lib.replica_spec_of(r), "replicas", null) == null
	msg := sprintf("Worker replicas is not set; the MPI operator defaults it to 0 (no worker pods), not 1. Set replicas to the number of worker pods%s", [zero_workers_hint])
}

zero_workers_hint := " (0 if the launcher is the only worker)" if launcher_runs_ranks

zero_workers_hint := "" if not launcher_runs_ranks

kind_violations contains {"path": input.job.replicaSpecsPath, "msg": msg} if {
	input.job.kind == "TFJob"
	keys := [r.key | some r in input.job.replicas; r.type in {"Chief", "Master"}]
	count(keys) > 1
	msg := sprintf("a TFJob may have only one of Chief and Master (Master is an alias of Chief), found %s; keep one of them", [concat(" and ", keys)])
}

kind_violations contains {"path": r.path, "msg": msg} if {
	pytorch_elastic
	some r in input.job.replicas
	r.type == "Master"
	msg := "an elastic PyTorchJob must not have a Master: with spec.elasticPolicy the workers rendezvous among themselves at <job>-worker-0 and only Worker is scaled between minReplicas and maxReplicas, so a Master is an extra node outside that range. Move its pod to Worker, or remove spec.elasticPolicy"
}
