# Helpers for the resource, image, environment and placement policies: run_policy, images,
# rendezvous_env, mig, topology, gpu_uniformity, nproc_gpu. Functions only, no verdicts.
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

# A content digest as resolvers and registries give it: sha256 and 64 lowercase hex digits.
is_sha256_digest(d) if {
	is_string(d)
	regex.match(`^sha256:[a-f0-9]{64}$`, d)
}

# An image reference pinned by digest: ends in "@sha256:<64 lowercase hex>".
image_pinned(image) if {
	is_string(image)
	regex.match(`@sha256:[a-f0-9]{64}$`, image)
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

# Whether pattern p equals s, or is a glob that matches it (for names, not prefixes).
name_matches(p, s) if {
	is_string(p)
	p == s
}

name_matches(p, s) if {
	is_string(p)
	is_string(s)
	is_glob(p)
	glob.match(p, null, s)
}

is_glob(p) if regex.match(`[*?\[{]`, p)

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
	regex.match(`^[0-9]{1,9}$`, v)
	n := digits_value(trim_left(v, "0"))
}

digits_value("") := 0

digits_value(d) := to_number(d) if d != ""

# Devices a pod of replica r gets: whole GPUs plus MIG slices.
devices_per_pod(r) := r.gpusPerPod + r.migSlicesPerPod

# A manifest value for messages: strings quoted, anything else as JSON.
shown_value(v) := sprintf("\"%s\"", [v]) if is_string(v)

shown_value(v) := sprintf("%v", [v]) if not is_string(v)
