# One image across the gang: the training container of every replica type runs the same image
# (the same digest once pinned). Ranks built from different CUDA, NCCL or framework builds hang
# at the first collective, or fail with errors that name neither image.
#
# Sidecars and init containers are not compared: only the container the operator configures
# (the kind's default container, `node` for a TrainJob). Replica types whose role is in
# `exemptRoles` (TF parameter servers and evaluators, the MPI launcher, Trainer initializers)
# run other programs by design; a replica type opts out with the pod template annotation
# `optOutAnnotation: "true"`, which the message names.
package gangplank.policies.gang_image

import rego.v1

import data.gangplank.lib

meta := {
	"title": "One image across the gang",
	"description": "The training container of every replica type of a job runs the same image (compared by digest when both are pinned, else by reference); roles in exemptRoles (default: TF PS and Evaluator, the MPI Launcher, Trainer initializers) and replica types annotated with optOutAnnotation \"true\" are not compared.",
	"action": "deny",
	"params": {
		"exemptRoles": ["ps", "evaluator", "launcher", "initializer"],
		"optOutAnnotation": "gangplank.dev/image-may-differ",
	},
}

params := data.params.gang_image

# [replica, its training container] of every replica type compared: not exempt by role or
# by the opt-out annotation, and with an image. The tests are written out rather than
# called (exempt(r), lib.default_container(r)): a call per replica costs more than the test.
members := [[r, c] |
	some r in input.job.replicas
	not r.role in params.exemptRoles
	not r.annotations[params.optOutAnnotation] == "true"
	c := r.containers[r.defaultContainerIndex]
	c.image != ""
]

# The distinct images the members run: usually one, and then nothing below is needed (the
# same reference is the same image).
member_images := {c.image | some [_, c] in members}

# Two images are the same when both are pinned to one digest, or, when either is not pinned
# yet (the images policy speaks to that), when they name the same reference.
same_image(a, b) if {
	contains(a, "@")
	contains(b, "@")
	split(a, "@")[1] == split(b, "@")[1]
}

same_image(a, b) if {
	not both_pinned(a, b)
	split(a, "@")[0] == split(b, "@")[0]
}

both_pinned(a, b) if {
	contains(a, "@")
	contains(b, "@")
}

# The replica the others are compared with: the first coordinator compared (a TFJob may
# wrongly have two; coordinator refuses that), else the replica type with the most pods, so
# that the odd one out is the one named.
coordinators := [m | some m in members; m[0].coordinator]

most := max([m[0].replicas | some m in members])

reference := coordinators[0] if count(coordinators) > 0

else := [m | some m in members; m[0].replicas == most][0]

violation contains {"path": concat("", [c.path, "/image"]), "msg": msg} if {
	count(member_images) > 1
	[ref, ref_c] := reference
	some [r, c] in members
	not same_image(c.image, ref_c.image)
	msg := sprintf("%s runs image %s but %s runs %s: ranks built from different images hang at the first collective. Run one image in every replica type, or annotate the %s pod template %s: \"true\" if it must differ", [r.type, c.image, ref.type, ref_c.image, r.type, params.optOutAnnotation])
}
