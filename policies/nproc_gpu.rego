# PyTorchJob nprocPerNode agrees with the GPUs of each pod.
#
# torchrun starts nprocPerNode processes in every pod, one per GPU by convention. Fewer
# processes than GPUs leaves GPUs idle; more makes ranks share a GPU (NCCL refuses that with
# "Duplicate GPU detected"). "gpu" means one process per visible CUDA device, so pods without
# GPUs start no training process (torchrun stops with "Cuda is not available"). The action
# is warn, so the job is admitted with a warning; platform teams can set it to deny in
# params.yaml.
# METADATA
# custom:
#   applies_when:
#     kinds: [PyTorchJob, TrainJob]
package gangplank.policies.nproc_gpu

import rego.v1

import data.gangplank.lib

meta := {
	"title": "nprocPerNode matches GPUs per pod",
	"description": "For PyTorchJob, an integer nprocPerNode (or the deprecated elasticPolicy.nProcPerNode) must equal the GPUs (whole GPUs plus MIG slices) per pod of every GPU replica, and nprocPerNode \"gpu\" needs GPUs in every pod.",
	"action": "warn",
	"params": {},
}

# The process count torchrun gets and where it is written: spec.nprocPerNode, else the
# deprecated elasticPolicy.nProcPerNode (upstream copies neither into the other when both
# are set; pytorch_nproc refuses that).
nproc := {"value": v, "path": "/spec/nprocPerNode", "name": "nprocPerNode"} if {
	input.job.kind == "PyTorchJob"
	v := input.object.spec.nprocPerNode
	v != null
} else := {"value": v, "path": "/spec/elasticPolicy/nProcPerNode", "name": "nprocPerNode"} if {
	input.job.kind == "PyTorchJob"
	v := input.object.spec.elasticPolicy.nProcPerNode
	v != null
} else := {"value": v, "path": "/spec/trainer/numProcPerNode", "name": "trainer.numProcPerNode"} if {
	# A TrainJob (Trainer v2.2+): PET_NPROC_PER_NODE for torchrun, the slots per node for MPI.
	input.job.kind == "TrainJob"
	v := input.object.spec.trainer.numProcPerNode
	v != null
}

gpu_replicas := lib.gpu_replicas(input.job)

# GPUs (and MIG slices) per pod of the GPU replicas that train, each count once: usually one.
device_counts := {d |
	some r in input.job.replicas
	r.role != "initializer"
	d := r.gpusPerPod + r.migSlicesPerPod
} - {0}

# The usual case, one device count that nprocPerNode states exactly ("8" or 8), tested
# without calling lib.whole_number.
nproc_fits if {
	count(device_counts) == 1
	some d in device_counts
	nproc.value in {d, format_int(d, 10)}
}

violation contains {"path": nproc.path, "msg": msg} if {
	not nproc_fits
	n := lib.whole_number(nproc.value)
	some r in input.job.replicas
	devices := r.gpusPerPod + r.migSlicesPerPod
	devices > 0
	devices != n
	r.role != "initializer"
	msg := sprintf("%s is %s but each %s pod has %s: %s. Set %s to %s", [nproc.name, lib.shown(nproc.value), r.type, plural(devices, "GPU"), effect(n, devices), nproc.name, suggestion(devices)])
}

# TrainJob's numProcPerNode is an integer (v2.2+); the v1 field is a string that also takes
# "auto".
suggestion(devices) := sprintf("%v", [devices]) if input.job.kind == "TrainJob"

else := sprintf("\"%v\" (or \"auto\", one process per GPU)", [devices])

effect(n, devices) := sprintf("torchrun starts %s and %s idle", [plural(n, "process"), idle(devices - n)]) if n < devices

# TrainJob's numProcPerNode is an integer (v2.2+); the v1 field is a string that also takes
# "auto".
suggestion(devices) := sprintf("%v", [devices]) if input.job.kind == "TrainJob"

else := sprintf("\"%v\" (or \"auto\", one process per GPU)", [devices])

effect(n, devices) := sprintf("torchrun starts %s on %s, so ranks share a GPU and NCCL fails with \"Duplicate GPU detected\"", [plural(n, "process"), plural(devices, "GPU")]) if n > devices

idle(1) := "1 GPU sits"

idle(n) := sprintf("%v GPUs sit", [n]) if n != 1

plural(1, word) := concat(" ", ["1", word])

plural(n, word) := sprintf("%v %s", [n, plural_word[word]]) if n != 1

plural_word := {"GPU": "GPUs", "process": "processes"}

# nprocPerNode "gpu": one body is entered for its two findings on other values.
violation contains {"path": nproc.path, "msg": msg} if {
	nproc.value == "gpu"
	some msg in gpu_findings
}

gpu_findings contains msg if {
	count(gpu_replicas) == 0
	msg := "nprocPerNode is \"gpu\" but no replica asks for GPUs: torchrun starts one process per visible CUDA device, finds none, and starts no training process. Set nprocPerNode to a number of processes (e.g. \"1\") or \"cpu\", or give the pods nvidia.com/gpu limits"
}

gpu_findings contains msg if {
	count(gpu_replicas) > 0
	some r in input.job.replicas
	lib.devices_per_pod(r) == 0
	msg := sprintf("nprocPerNode is \"gpu\" but %s pods have no GPUs: torchrun there finds no CUDA device and starts no training process. Give %s the same nvidia.com/gpu limit as the other replicas, or set nprocPerNode to a number", [r.type, r.type])
}
