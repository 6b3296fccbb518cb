# Pod template containers: every replica needs containers with names and images, and the
# container the operator configures (env, ports) must exist under the kind's default name.
# Ports upstream R3, R4 and R5; like upstream, an empty list is reported twice (R3 and R5).
package gangplank.policies.containers

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Pod template containers",
	"description": "Upstream R3 (containers must not be empty), R4 (every container and initContainer has an image) and R5 (a container with the kind's default name, e.g. pytorch, where upstream requires it); also every container needs a unique DNS-1123 name, as pod creation would otherwise fail.",
	"action": "deny",
	"params": {},
}

# Longest DNS-1123 label (container names).
max_name_length := 63

# Replicas of a known type whose template the JobView could read: structure reports broken
# templates and coordinator unknown types (a misspelled key is fixed first). A list: a set
# would compare whole replica objects.
readable := [r | some r in input.job.replicas; r.known] if {
	count(input.job.problems) == 0
} else := [r |
	some r in input.job.replicas
	r.known
	not template_problem(r)
]

template_problem(r) if {
	some p in input.job.problems
	startswith(p.path, r.templatePath)
	not contains(p.path, "/resources/")
}

# [name, image] of every container and init container of the readable replicas, each pair
# once. Most jobs run one image under one name in every pod, so the checks below look at
# one pair, and go through the containers one by one only to report what they found.
names_images := {[c.name, c.image] |
	some r in readable
	some c in array.concat(r.containers, r.initContainers)
}

# [replica, container, what] for the init containers and containers of every readable
# replica, in pod order; built only to report a finding.
pod_containers := array.concat(
	[[r, c, "init container"] | some r in readable; some c in r.initContainers],
	[[r, c, "container"] | some r in readable; some c in r.containers],
)

containers_path(r) := lib.ptr(r.podSpecPath, "containers")

# R3.
violation contains {"path": containers_path(r), "msg": msg} if {
	some r in readable
	count(r.containers) == 0
	msg := sprintf("%s pods have no containers; add at least one container with a name and an image%s", [r.type, named_hint])
}

named_hint := sprintf(" (the one that trains named \"%s\")", [input.job.defaultContainer]) if input.job.requiresDefaultContainer

named_hint := "" if not input.job.requiresDefaultContainer

# R5. The container the JobView picked as the default one is the first test: it is the one
# with the default name when there is one.
violation contains {"path": containers_path(r), "msg": msg} if {
	input.job.requiresDefaultContainer
	some r in readable
	not r.containers[r.defaultContainerIndex].name == input.job.defaultContainer
	not default_named(r)
	msg := sprintf("%s pods must have a container named \"%s\": the operator adds the %s environment and port only to that container. Rename the container that runs the training to \"%s\"", [r.type, input.job.defaultContainer, input.job.kind, input.job.defaultContainer])
}

default_named(r) if {
	some c in r.containers
	c.name == input.job.defaultContainer
}

label(c) := sprintf("\"%s\"", [c.name]) if c.name != ""

label(c) := sprintf("%d", [c.index]) if c.name == ""

# R4, for containers and init containers alike.
violation contains {"path": lib.ptr(c.path, "image"), "msg": msg} if {
	some [_, ""] in names_images
	some [r, c, what] in pod_containers
	c.image == ""
	msg := sprintf("%s %s of %s pods has no image; set image to the image it runs", [what, label(c), r.type])
}

violation contains {"path": lib.ptr(c.path, "name"), "msg": msg} if {
	some ["", _] in names_images
	some [r, c, what] in pod_containers
	c.name == ""
	msg := sprintf("%s %d of %s pods has no name; Kubernetes needs one to create the pod. Give it a DNS-1123 label such as \"%s\"", [what, c.index, r.type, name_example])
}

name_example := input.job.defaultContainer

name_example := "main" if not input.job.defaultContainer

# Container names that are not DNS-1123 labels, each name checked once however many
# replicas repeat it. The kind's default container name (pytorch, tensorflow, ...) is one.
# lib.dns1123_label written out as a comprehension of the valid names, subtracted: no call
# per name.
checked_names := {n |
	some [n, _] in names_images
	n != ""
	not n == input.job.defaultContainer
}

invalid_names := checked_names - {n |
	some n in checked_names
	count(n) <= 63
	trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
	not startswith(n, "-")
	not endswith(n, "-")
}

violation contains {"path": lib.ptr(c.path, "name"), "msg": msg} if {
	count(invalid_names) > 0
	some [r, c, what] in pod_containers
	c.name in invalid_names
	msg := sprintf("%s name \"%s\" of %s pods is not a DNS-1123 label, so the pod cannot be created; use lowercase letters, digits and '-', at most %d characters, starting and ending with a letter or digit", [what, c.name, r.type, max_name_length])
}

violation contains {"path": lib.ptr(c.path, "name"), "msg": msg} if {
	some r in readable
	count(r.initContainers) + count(r.containers) > 1
	cs := array.concat(r.initContainers, r.containers)
	# Cheap test first: fewer distinct names than containers (one pass) before comparing
	# every pair.
	count({c.name | some c in cs}) < count(cs)
	some i, c in cs
	c.name != ""
	some j, other in cs
	j < i
	other.name == c.name
	msg := sprintf("%s pods have two containers named \"%s\"; container names must be unique within a pod (init containers included). Rename one of them", [r.type, c.name])
}

# Ephemeral containers exist only in running pods (`kubectl debug` adds them through the
# pods/ephemeralcontainers subresource); in a template every pod creation would fail.
violation contains {"path": concat("", [r.podSpecPath, "/ephemeralContainers"]), "msg": msg} if {
	some r in input.job.replicas
	# A field of anything but an object is undefined: no is_object test needed.
	input.object.spec[input.job.replicaField][r.key].template.spec.ephemeralContainers != null
	msg := sprintf("%s pod template sets ephemeralContainers, which only running pods can have (kubectl debug); remove it", [r.type])
}
