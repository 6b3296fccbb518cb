# Every GPU replica of a job asks for the same number of GPUs (and of MIG slices) per pod.
#
# Data-parallel ranks run each step in lockstep: with 8 GPUs in one pod type and 4 in the
# other, the job runs at the pace of the smaller pods, the per-rank batch size and learning
# rate math no longer holds, and torchrun's nprocPerNode (one value for every pod) cannot fit
# both. Replicas without GPUs (a CPU launcher, parameter servers) are not compared, nor roles
# listed in ignoredRoles (an Evaluator runs outside the collective).
# METADATA
# custom:
#   applies_when:
#     all: [gpus]
package gangplank.policies.gpu_uniformity

import rego.v1

meta := {
	"title": "Uniform GPUs per pod",
	"description": "Replicas that use GPUs must ask for the same number of whole GPUs and of MIG slices per pod; the message names each replica type with its GPUs (or MIG slices) per pod and its pod count. The action decides whether that is refused or a warning.",
	"action": "deny",
	"params": {
		# Replica roles (coordinator, launcher, worker, ps, evaluator) left out of the comparison.
		"ignoredRoles": ["evaluator"],
	},
}

params := data.params.gpu_uniformity

# GPU replicas in the order the manifest lists them.
compared := [r |
	some r in input.job.replicas
	r.gpusPerPod + r.migSlicesPerPod > 0
	not r.role in params.ignoredRoles
]

# [GPUs, MIG slices] per pod of the compared replicas, each once: the test, in one pass over
# the replicas; `compared` is built only for the message. Two shapes imply two replicas.
shapes := {[r.gpusPerPod, r.migSlicesPerPod] |
	some r in input.job.replicas
	r.gpusPerPod + r.migSlicesPerPod > 0
	not r.role in params.ignoredRoles
}

violation contains {"path": input.job.replicaSpecsPath, "msg": msg} if {
	count(shapes) > 1
	listing := concat(", ", [sprintf("%s %s × %v", [r.type, devices(r), plural(r.replicas, "pod")]) | some r in compared])
	msg := sprintf("replicas that use GPUs ask for different GPUs per pod: %s. Data-parallel ranks step in lockstep, so the job would run at the pace of the smallest pods, and one nprocPerNode cannot fit them all; give every GPU replica the same nvidia.com/gpu (or nvidia.com/mig-*) limits", [listing])
}

# "8 GPUs", "1 MIG slice", "1 GPU + 1 MIG slice"
devices(r) := plural(r.gpusPerPod, "GPU") if r.migSlicesPerPod == 0

devices(r) := plural(r.migSlicesPerPod, "MIG slice") if r.gpusPerPod == 0

devices(r) := concat(" + ", [plural(r.gpusPerPod, "GPU"), plural(r.migSlicesPerPod, "MIG slice")]) if {
	r.gpusPerPod > 0
	r.migSlicesPerPod > 0
}

plural(1, word) := concat(" ", ["1", word])

plural(n, word) := sprintf("%v %ss", [n, word]) if n != 1
