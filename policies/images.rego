# Every image of every replica is pinned by digest.
#
# A tag can be re-pushed, so the pods of one job (created minutes or days apart, and
# re-created on restarts) could run different code. When a resolver has looked the tag up
# (input.images: reference -> "sha256:..."), the mutation pins the image as
# <reference>@<digest>, keeping the tag for readers as Kyverno's mutateDigest does;
# validation then sees a pinned image. Unresolved images are refused with the form to use.
package gangplank.policies.images

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Images pinned by digest",
	"description": "Every container and initContainer image must end in @sha256:<64 hex>. Images the resolver looked up (input.images) are pinned automatically, keeping the tag; exemptImages lists prefixes or globs (\"*\" matches across / and .) that may stay unpinned.",
	"action": "deny",
	"params": {
		# Image prefixes ("registry.example.com/dev/") or globs ("*/busybox:*") never
		# required to be pinned, and never rewritten.
		"exemptImages": [],
		# A TrainJob whose runtime still names an image by tag (the runtime was applied
		# before gangplank, or with resolution off): "deny" or "warn".
		"runtimeTags": "deny",
	},
}

params := data.params.images

# Every image the job runs, each once however many containers run it.
all_images := {c.image |
	some r in input.job.replicas
	some c in array.concat(r.containers, r.initContainers)
}

exempt(image) if {
	some p in params.exemptImages
	lib.pattern_matches(p, image)
}

# The images pinned by digest: lib.image_pinned written out (one comprehension, no call per
# image). JobView images are strings.
pinned_images := {image |
	some image in all_images
	parts := split(image, "@sha256:")
	count(parts) > 1
	digest := parts[count(parts) - 1]
	count(digest) == 64
	trim(digest, "0123456789abcdef") == ""
}

# Images that need a digest. An empty image is the containers policy's to report. Usually
# none is left after the set difference, and exempt() is never called.
unpinned_images := {image |
	some image in (all_images - pinned_images) - {""}
	not exempt(image)
}

# [replica, container, what] for the containers and init containers that run an unpinned
# image; built only when there is one. A list: a set would compare whole replica and
# container objects on every insert.
unpinned := array.concat(
	[[r, c, "container"] | some r in input.job.replicas; some c in r.containers; c.image in unpinned_images],
	[[r, c, "init container"] | some r in input.job.replicas; some c in r.initContainers; c.image in unpinned_images],
) if {
	count(unpinned_images) > 0
}

# The digest a resolver found for an image written without one.
resolved(image) := d if {
	not contains(image, "@")
	d := input.images[image]
	lib.is_sha256_digest(d)
}

mutation contains {"op": "set", "path": concat("", [c.path, "/image"]), "value": pinned} if {
	# Guard first: without digests looked up (resolution off, check without --resolve) no
	# image can be pinned, and the images need not be collected at all.
	count(input.images) > 0
	some [_, c, _] in unpinned
	digest := resolved(c.image)
	pinned := concat("@", [c.image, digest])
}

# A container of a TrainJob's pods that the TrainJob cannot set: its image is the runtime's
# (its path names the runtime, not a field of the object).
from_runtime(c) if not startswith(c.path, "/")

# One body for every finding about an unpinned image (a body entered costs the VM
# thousands of instructions even when its first test fails, and most jobs have no finding):
# the message says which finding it is.
violation contains {"path": concat("", [c.path, "/image"]), "msg": msg} if {
	some [r, c, what] in unpinned
	msg := finding(r, c, what)
}

finding(r, c, what) := sprintf("image \"%s\" of %s \"%s\" (%s) is not pinned by digest: a tag can be re-pushed, so the job's pods could run different code. Pin it as %s@sha256:<64 hex digits> (the digest `crane digest %s` prints)", [c.image, what, c.name, r.type, c.image, c.image]) if {
	not contains(c.image, "@")
	not from_runtime(c)
}

finding(r, c, what) := sprintf("image \"%s\" of %s \"%s\" (%s) has a malformed digest: it must end in @sha256: followed by 64 lowercase hex digits, e.g. <image>:<tag>@sha256:<64 hex digits>", [c.image, what, c.name, r.type]) if {
	contains(c.image, "@")
}

finding(r, c, what) := runtime_tag_msg(r, c, what) if {
	params.runtimeTags == "deny"
	not contains(c.image, "@")
	from_runtime(c)
}

runtime_tag_msg(r, c, what) := sprintf("runtime %s %s runs image \"%s\" (%s \"%s\" of %s) by tag, not digest, so this TrainJob's pods could run different code: re-apply the runtime through gangplank's webhook, which pins it (it was applied before gangplank, or with resolution off), or pin it in the runtime by hand", [rt.kind, rt.name, c.image, what, c.name, r.type]) if {
	rt := input.job.trainer.runtime
	rt != null
}

warning contains {"path": concat("", [c.path, "/image"]), "msg": msg} if {
	params.runtimeTags != "deny"
	some [r, c, what] in unpinned
	not contains(c.image, "@")
	from_runtime(c)
	msg := runtime_tag_msg(r, c, what)
}
