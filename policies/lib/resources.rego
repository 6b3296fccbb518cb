# Helpers for the resource, image, environment and placement policies: run_policy, images,
# rendezvous_env, mig, topology, gpu_uniformity, nproc_gpu. Functions only, no verdicts, no
# rules.
#
# regorus builtins fail the whole evaluation (every policy) on an argument of the wrong type,
# where OPA would only make the expression undefined; so every helper here checks types
# before it calls a builtin on a value taken from the manifest.
package gangplank.lib

import rego.v1

# The pod spec of replica r exactly as written; undefined when it is not an object.
raw_pod_spec(r) := s if {
	s := input.object.spec[input.job.replicaField][r.key].template.spec
	is_object(s)
}

# Container c (a JobView container of r.containers) exactly as written.
raw_container(r, c) := raw_pod_spec(r).containers[c.index]

# Init container c (a JobView container of r.initContainers) exactly as written.
raw_init_container(r, c) := raw_pod_spec(r).initContainers[c.index]

# Whether `field` of object `obj` can be written by a mutation: absent, null or an object
# (a mutation under a string or a list would fail the whole request).
writable_object_field(obj, field) if object.get(obj, field, null) == null

writable_object_field(obj, field) if is_object(object.get(obj, field, null))

# The same for list fields (env, containers).
writable_list_field(obj, field) if object.get(obj, field, null) == null

writable_list_field(obj, field) if is_array(object.get(obj, field, null))

# A content digest as resolvers and registries give it: sha256 and 64 lowercase hex digits
# (^sha256:[a-f0-9]{64}$, with string builtins).
is_sha256_digest(d) if {
	is_string(d)
	startswith(d, "sha256:")
	hex64(substring(d, 7, -1))
}

# An image reference pinned by digest: ends in "@sha256:<64 lowercase hex>"
# (@sha256:[a-f0-9]{64}$). What follows the last "@sha256:" is the digest: none of "@:sh"
# is a hex digit, so a real digest never contains the separator.
image_pinned(image) if {
	is_string(image)
	parts := split(image, "@sha256:")
	count(parts) > 1
	hex64(parts[count(parts) - 1])
}

# Exactly 64 lowercase hex digits: trimming every hex digit off both ends leaves nothing
# only when there is nothing else.
hex64(s) if {
	count(s) == 64
	trim(s, "0123456789abcdef") == ""
}

# Whether pattern p matches s: a glob when p has glob characters, else a prefix. Globs use
# no delimiters (null; [] would mean "."), so "*" matches across "/" and "." as in Kyverno's
# image patterns: "*/busybox:*" matches docker.io/library/busybox:1.36. Non-strings never
# match.
pattern_matches(p, s) if {
	is_string(p)
	is_string(s)
	not is_glob(p)
	startswith(s, p)
}

pattern_matches(p, s) if {
	is_string(p)
	is_string(s)
	is_glob(p)
	glob.match(p, null, s)
}

# Whether pattern p has a glob metacharacter (*, ?, [ or {): removing them changes it.
is_glob(p) if strings.replace_n({"*": "", "?": "", "[": "", "{": ""}, p) != p

# The extended resource of a MIG profile under the device plugin's mixed strategy:
# "mig-" + profile with "+" replaced by ".", so 1g.10gb+me -> nvidia.com/mig-1g.10gb.me.
mig_resource_name(profile) := concat("", ["nvidia.com/mig-", replace(profile, "+", ".")])

# A whole number from a manifest value: a JSON integer ≥ 0, or a string of digits ("08" is
# 8, as Go's strconv.Atoi reads it). Undefined otherwise.
whole_number(v) := v if {
	is_number(v)
	v >= 0
	floor(v) == v
}

whole_number(v) := n if {
	is_string(v)
	count(v) > 0
	count(v) <= 9
	trim(v, "0123456789") == ""
	n := digits_value(trim_left(v, "0"))
}

digits_value("") := 0

digits_value(d) := to_number(d) if d != ""

# Devices a pod of replica r gets: whole GPUs plus MIG slices.
devices_per_pod(r) := r.gpusPerPod + r.migSlicesPerPod

# What a container gets of a GPU-like resource (a JobView gpuResources entry): its limit,
# else its request (the apiserver copies a lone limit into the request).
gpu_amount(g) := g.limit if {
	is_number(g.limit)
} else := g.request if {
	is_number(g.request)
} else := 0

# GPU-like resources the job asks for anywhere.
gang_resources contains g.name if {
	some r in input.job.replicas
	some c in r.containers
	some g in c.gpuResources
	gpu_amount(g) > 0
}

# An amount of resource `name` in words, in the unit that divides it: cpu from millicores
# ("2 cpu", "1500m cpu"), bytes in Gi/Mi/Ki, anything else as a count ("8 nvidia.com/gpu").
amount(name, n) := sprintf("%d %s", [n / 1000, name]) if {
	name == "cpu"
	n % 1000 == 0
} else := sprintf("%dm %s", [n, name]) if {
	name == "cpu"
} else := sprintf("%s %s", [bytes(n), name]) if {
	byte_resource(name)
} else := sprintf("%d %s", [n, name])

byte_resource(name) if name in {"memory", "ephemeral-storage"}

byte_resource(name) if startswith(name, "hugepages-")

bytes(n) := sprintf("%dGi", [n / 1073741824]) if {
	n % 1073741824 == 0
} else := sprintf("%dMi", [n / 1048576]) if {
	n % 1048576 == 0
} else := sprintf("%dKi", [n / 1024]) if {
	n % 1024 == 0
} else := sprintf("%d", [n])

# " (cluster inventory may be out of date: ...)" when the inventory says it may be.
inventory_stale_note := "" if {
	object.get(data.cluster, "stale", "") == ""
} else := sprintf(" (cluster inventory may be out of date: %s)", [data.cluster.stale])

# The extended resources some node offers (allocatable above 0), cordoned nodes included: a
# pod that tolerates the cordon (a key-less `operator: Exists` tolerates every taint) is
# placed there by kube-scheduler's NodeUnschedulable plugin. Which nodes a pod may use is
# the capacity policy's to judge. Summed up once per published inventory
# (data.cluster.offered_resources), not per request over the node classes.
offered_resources := object.get(data.cluster, "offered_resources", {})
