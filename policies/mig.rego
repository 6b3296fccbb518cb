# MIG: whole-GPU requests become MIG slices where a profile is asked for; GPU resource
# requests must be well-formed.
#
# Under the NVIDIA device plugin's mixed strategy each MIG profile is its own extended
# resource, nvidia.com/mig-<profile> ("+" becomes ".": 1g.10gb+me -> mig-1g.10gb.me). A
# replica whose template carries the annotation gangplank.dev/mig-profile (or every replica,
# with the defaultProfile parameter) gets its nvidia.com/gpu: 1 rewritten to one slice of that
# profile. MIG slices have no NVLink/P2P or CUDA IPC, so NCCL between them falls back to
# shared memory or the network: only single-GPU containers are translated, and more than one
# slice per container is refused. Extended resources are never overcommitted, so the
# apiserver requires their request to equal their limit; that is checked here for every GPU
# resource, before the apiserver's less helpful message.
# METADATA
# custom:
#   applies_when:
#     any: [gpus, "template_annotation:gangplank.dev/mig-profile"]
package gangplank.policies.mig

import rego.v1

import data.gangplank.lib

meta := {
	"title": "MIG slices and GPU resource requests",
	"description": "Rewrites nvidia.com/gpu: 1 to nvidia.com/mig-<profile>: 1 on replicas annotated gangplank.dev/mig-profile (or all, with defaultProfile; the annotation value \"none\" opts out). Refuses unknown profiles and MIG resources, more than one MIG slice per container (no NVLink/P2P between slices), multi-GPU containers on a MIG profile, and GPU requests that differ from their limits.",
	"action": "deny",
	"params": {
		# Profile for replicas without the annotation; "" leaves them on whole GPUs.
		"defaultProfile": "",
		# GPU-instance profiles by GPU (mig-parted config-default.yaml). Extend it for new
		# GPUs; overriding it in params.yaml replaces the whole table.
		"profiles": {
			"A100-40GB": ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
			"A100-80GB, H100-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
			"H100-94GB (H100 NVL)": ["1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"],
			"H100-96GB, GH200-96GB": ["1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"],
			"H200-141GB": ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
			"B200": ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
			"GB200": ["1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"],
		},
	},
}

params := data.params.mig

annotation := "gangplank.dev/mig-profile"

whole_gpu := "nvidia.com/gpu"

known_profiles contains p if {
	some list in params.profiles
	some p in list
	is_string(p)
}

known_resources contains lib.mig_resource_name(p) if some p in known_profiles

# The device plugin's time-slicing with renameByDefault advertises <resource>.shared.
known_resources contains concat("", [lib.mig_resource_name(p), ".shared"]) if some p in known_profiles

known_list := concat(", ", sort(known_profiles))

# The profile a replica asks for and where that comes from; "" or "none" means whole GPUs.
requested(r) := {"profile": p, "path": lib.ptrs(r.templatePath, ["metadata", "annotations", annotation]), "from": "annotation"} if {
	p := r.annotations[annotation]
	is_string(p)
} else := {"profile": params.defaultProfile, "path": "", "from": "default"} if {
	is_string(params.defaultProfile)
}

profile(r) := q if {
	q := requested(r)
	not q.profile in {"", "none"}
}

# The cheap first test of every profile rule: some template has the annotation, or there is
# a default profile. Without it, known_profiles (the whole table) is never built.
profiles_requested if {
	some r in input.job.replicas
	r.annotations[annotation]
}

profiles_requested if params.defaultProfile != ""

# [replica, container, what, resource] for every GPU-like resource (JobView gpuResources,
# request and limit null when unset) of every container and init container. A list: a set
# would compare whole replica and container objects on every insert.
gpu_resources := array.concat(
	[[r, c, "container", g] | some r in input.job.replicas; some c in r.containers; some g in c.gpuResources],
	[[r, c, "init container", g] | some r in input.job.replicas; some c in r.initContainers; some g in c.gpuResources],
)

# The container or init container c as written.
raw_container(r, c, "container") := lib.raw_container(r, c)

raw_container(r, c, "init container") := lib.raw_init_container(r, c)

# Where a resource is written: the limit when there is one, else the request.
resource_path(c, g) := lib.ptrs(c.path, ["resources", "limits", g.name]) if g.limit != null

resource_path(c, g) := lib.ptrs(c.path, ["resources", "requests", g.name]) if g.limit == null

# What the container gets: the limit, else the request.
count_of(g) := g.limit if g.limit != null

count_of(g) := g.request if g.limit == null

# --- mutation -----------------------------------------------------------------------------

mutation contains intent if {
	profiles_requested
	some [r, c, what, g] in gpu_resources
	g.name == whole_gpu
	q := profile(r)
	q.profile in known_profiles
	g.request in {null, 1}
	g.limit in {null, 1}
	resources := raw_container(r, c, what).resources
	is_object(resources)
	some side in ["requests", "limits"]
	value := resources[side][whole_gpu]
	some intent in [
		{"op": "remove", "path": lib.ptrs(c.path, ["resources", side, whole_gpu])},
		{"op": "set", "path": lib.ptrs(c.path, ["resources", side, lib.mig_resource_name(q.profile)]), "value": value},
	]
}

# --- validation ---------------------------------------------------------------------------

# Most jobs ask for no MIG profile and have well-formed GPU requests: the findings are
# grouped behind one cheap guard each, so that one body is entered for them, not one per
# finding (a body costs the VM thousands of instructions even when its first test fails).
violation contains f if {
	profiles_requested
	some f in profile_violations
}

violation contains f if {
	resource_suspect
	some f in resource_violations
}

profile_violations contains {"path": q.path, "msg": msg} if {
	some r in input.job.replicas
	q := profile(r)
	q.from == "annotation"
	not q.profile in known_profiles
	msg := sprintf("MIG profile \"%s\" (annotation %s on %s) is not a known profile. Use one of: %s; or \"none\" for whole GPUs", [q.profile, annotation, r.type, known_list])
}

profile_violations contains {"path": "", "msg": msg} if {
	some r in input.job.replicas
	q := profile(r)
	q.from == "default"
	lib.uses_gpus(r)
	not q.profile in known_profiles
	msg := sprintf("the cluster's default MIG profile \"%s\" (mig parameter defaultProfile) is not a known profile; ask the platform team to fix it, or annotate the templates with %s: none to use whole GPUs", [q.profile, annotation])
}

profile_violations contains {"path": resource_path(c, g), "msg": msg} if {
	some [r, c, what, g] in gpu_resources
	g.name == whole_gpu
	n := count_of(g)
	n > 1
	q := profile(r)
	q.profile in known_profiles
	msg := sprintf("%s \"%s\" (%s) asks for %v GPUs, but %s runs on MIG slices of profile %s and only single-GPU containers are translated: MIG slices have no NVLink/P2P, so a multi-GPU container cannot use them well. Ask for nvidia.com/gpu: 1, or set the template annotation %s: none to keep whole GPUs", [what, c.name, r.type, n, r.type, q.profile, annotation])
}

# [name, request, limit] of every GPU-like resource of every container and init container,
# each once: usually one ([nvidia.com/gpu, 8, 8]), so the guard below tests one entry.
resource_shapes := {[g.name, g.request, g.limit] |
	some r in input.job.replicas
	some c in array.concat(r.containers, r.initContainers)
	some g in c.gpuResources
}

# Whether a resource finding below can hold: some resource is a MIG slice (a container with
# more than one slice has one), or some request differs from its limit.
resource_suspect if {
	some [name, _, _] in resource_shapes
	startswith(name, "nvidia.com/mig-")
}

resource_suspect if {
	some [_, request, limit] in resource_shapes
	request != null
	request != limit
}

resource_violations contains {"path": resource_path(c, g), "msg": msg} if {
	some [r, c, what, g] in gpu_resources
	startswith(g.name, "nvidia.com/mig-")
	not g.name in known_resources
	msg := sprintf("%s in %s \"%s\" (%s) is not the resource of any known MIG profile, so no node offers it and the pod would stay Pending. Use nvidia.com/mig-<profile> (\"+\" written as \".\") with one of: %s", [g.name, what, c.name, r.type, known_list])
}

resource_violations contains {"path": concat("", [c.path, "/resources"]), "msg": msg} if {
	some [r, c, what, _] in gpu_resources
	c.migSlices > 1
	msg := sprintf("%s \"%s\" (%s) asks for %v MIG slices; MIG slices have no NVLink/P2P or CUDA IPC between them, so NCCL across them falls back to shared memory or the network. Ask for one slice per container (nvidia.com/mig-<profile>: 1), or for whole GPUs", [what, c.name, r.type, c.migSlices])
}

# Extended resources: request == limit. One pass for both findings (the request differs
# from the limit, or has none).
resource_violations contains {"path": lib.ptrs(c.path, ["resources", "requests", g.name]), "msg": msg} if {
	some [r, c, what, g] in gpu_resources
	g.request != null
	g.request != g.limit
	msg := request_limit_msg(g, sprintf("%s \"%s\" (%s)", [what, c.name, r.type]))
}

request_limit_msg(g, where) := sprintf("%s request %v differs from its limit %v in %s; extended resources cannot be overcommitted, so the request must equal the limit. Set both to the same count (or give only the limit: it is copied into the request)", [g.name, g.request, g.limit, where]) if {
	g.limit != null
}

request_limit_msg(g, where) := sprintf("%s is requested (%v) without a limit in %s; extended resources need a limit equal to the request. Add limits.%s: %v (or move it from requests to limits)", [g.name, g.request, where, g.name, g.request]) if {
	g.limit == null
}
