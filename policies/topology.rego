# GPU classes: node selectors for the GPU replicas of a job, one GPU model per job.
#
# A platform names classes of GPU nodes (gpuClasses: class -> nodeSelector labels, e.g. the
# GFD label nvidia.com/gpu.product, RDMA labels); a job picks one with the annotation
# gangplank.dev/gpu-class on its metadata or on a replica template (the template wins), or
# gets defaultClass. The class's labels are added to the nodeSelector of every replica that
# uses GPUs; keys the user set are never overwritten. A data-parallel job whose replicas land
# on different GPU models runs at the pace of the slowest, so differing
# nvidia.com/gpu.product selections are refused.
#
# Kueue jobs (label kueue.x-k8s.io/queue-name) are left alone by default: Kueue merges the
# nodeLabels of the ResourceFlavor it assigns into the pod templates' nodeSelector, and fails
# to admit the workload when a key is already set to another value.
package gangplank.policies.topology

import rego.v1

import data.gangplank.lib

meta := {
	"title": "GPU class node selectors",
	"description": "Adds the nodeSelector labels of the job's GPU class (annotation gangplank.dev/gpu-class on the job or a replica template, else defaultClass) to every GPU replica without overwriting user keys; refuses unknown classes and GPU replicas that select different nvidia.com/gpu.product values. Kueue jobs are skipped by default (skipKueueJobs): Kueue merges its ResourceFlavor nodeLabels into the nodeSelector and refuses to admit a workload whose nodeSelector sets one of those keys to another value.",
	"action": "deny",
	"params": {
		# Class name -> nodeSelector labels (GFD labels shown; values as they appear on nodes).
		"gpuClasses": {
			"a100-40gb": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
			"a100-80gb": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
			"a100-80gb-rdma": {
				"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
				"feature.node.kubernetes.io/rdma.available": "true",
			},
		},
		# Class for jobs that name none; "" adds nothing.
		"defaultClass": "",
		# Leave Kueue-queued jobs to Kueue's ResourceFlavors.
		"skipKueueJobs": true,
		# The label whose value must agree across GPU replicas.
		"productLabel": "nvidia.com/gpu.product",
	},
}

params := data.params.topology

annotation := "gangplank.dev/gpu-class"

job_annotations := a if {
	a := input.object.metadata.annotations
	is_object(a)
} else := {}

# The class a replica gets and where it was chosen.
class_of(r) := {"name": n, "path": lib.ptrs(r.templatePath, ["metadata", "annotations", annotation]), "from": sprintf("annotation %s on the %s template", [annotation, r.type])} if {
	n := r.annotations[annotation]
	is_string(n)
	n != ""
} else := {"name": n, "path": lib.ptrs("/metadata", ["annotations", annotation]), "from": sprintf("job annotation %s", [annotation])} if {
	n := job_annotations[annotation]
	is_string(n)
	n != ""
} else := {"name": params.defaultClass, "path": "", "from": "the topology parameter defaultClass"} if {
	is_string(params.defaultClass)
	params.defaultClass != ""
}

known(name) if is_object(params.gpuClasses[name])

# The cheap first test of the class rules: a template or the job has the annotation, or there
# is a default class. Most jobs have none, and then no class is looked up per replica.
class_named if {
	some r in input.job.replicas
	r.annotations[annotation]
}

# job_annotations[annotation] without building job_annotations: a key of anything but an
# object is undefined.
class_named if input.object.metadata.annotations[annotation]

class_named if params.defaultClass != ""

skipped if {
	params.skipKueueJobs == true
	lib.kueue_managed(input.object)
}

gpu_replicas := lib.gpu_replicas(input.job)

# --- mutation -----------------------------------------------------------------------------

mutation contains {"op": "default", "path": lib.ptrs(r.podSpecPath, ["nodeSelector", key]), "value": value} if {
	class_named
	not skipped
	some r in gpu_replicas
	cls := class_of(r)
	labels := params.gpuClasses[cls.name]
	is_object(labels)
	lib.writable_object_field(lib.raw_pod_spec(r), "nodeSelector")
	some key, value in labels
	not key in object.keys(r.nodeSelector)
}

# --- validation ---------------------------------------------------------------------------

# Most jobs name no class: then one body is entered for the class findings, not one per
# finding (a body costs the VM thousands of instructions even when its first test fails).
violation contains f if {
	class_named
	some f in class_violations
}

# Classes named by annotations are checked on every replica (a typo is a typo); the default
# class only matters where it would be applied.
class_violations contains {"path": cls.path, "msg": msg} if {
	some r in input.job.replicas
	cls := class_of(r)
	cls.path != ""
	not known(cls.name)
	msg := sprintf("GPU class \"%s\" (%s) is not defined; use one of %v, or remove the annotation", [cls.name, cls.from, sort(object.keys(params.gpuClasses))])
}

class_violations contains {"path": "", "msg": msg} if {
	not skipped
	some r in gpu_replicas
	cls := class_of(r)
	cls.path == ""
	not known(cls.name)
	msg := sprintf("the default GPU class \"%s\" (topology parameter defaultClass) is not defined; name a class with the annotation %s (one of %v), or ask the platform team to fix the default", [cls.name, annotation, sort(object.keys(params.gpuClasses))])
}

violation contains {"path": input.job.replicaSpecsPath, "msg": msg} if {
	label := params.productLabel
	# The GPU replicas (gpu_replicas written out: no call) that select a product.
	selected := [[r.type, v] | some r in input.job.replicas; r.gpusPerPod + r.migSlicesPerPod > 0; v := r.nodeSelector[label]]
	# Cheap test first: two GPU replicas select a product at all.
	count(selected) > 1
	count({v | some [_, v] in selected}) > 1
	listing := concat(", ", [sprintf("%s selects %s", [t, lib.shown(v)]) | some [t, v] in selected])
	msg := sprintf("GPU replicas select different %s values (%s); a job on mixed GPU models runs at the pace of the slowest and may not fit its memory plan. Select one model for every GPU replica (or one gpu-class annotation on the job)", [label, listing])
}

warning contains f if {
	class_named
	some f in class_warnings
}

# A user's nodeSelector value wins over the class's; say so, since the class then does not
# hold for that replica.
class_warnings contains {"path": lib.ptrs(r.podSpecPath, ["nodeSelector", key]), "msg": msg} if {
	not skipped
	some r in gpu_replicas
	cls := class_of(r)
	labels := params.gpuClasses[cls.name]
	is_object(labels)
	some key, value in labels
	user := r.nodeSelector[key]
	user != value
	msg := sprintf("nodeSelector %s: %s on %s overrides %s from GPU class \"%s\" (%s); remove it to get the class's nodes", [key, lib.shown(user), r.type, lib.shown(value), cls.name, cls.from])
}

class_warnings contains {"path": cls.path, "msg": msg} if {
	skipped
	some r in gpu_replicas
	cls := class_of(r)
	cls.path != ""
	known(cls.name)
	msg := sprintf("GPU class \"%s\" (%s) is not applied to Kueue jobs: the ResourceFlavor Kueue assigns sets the node labels. Pick the GPU model with the queue (kueue.x-k8s.io/queue-name) instead", [cls.name, cls.from])
}
