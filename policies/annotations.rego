# gangplank.dev/* annotations where gangplank reads them. Some are read only from a replica's
# pod template (gangplank.dev/mig-profile); written on the job's metadata instead, they would
# be silently ignored. Others are not gangplank annotations at all (a typo).
package gangplank.policies.annotations

import rego.v1

import data.gangplank.lib

meta := {
	"title": "gangplank.dev annotations in the right place",
	"description": "Warns about gangplank.dev/* annotations on the job's metadata that gangplank reads only from pod templates (gangplank.dev/mig-profile), and about gangplank.dev/* keys gangplank does not know; removes the controller's own gangplank.dev/released-at from pod templates, saying so.",
	"action": "warn",
	"params": {},
}

prefix := "gangplank.dev/"

# Read from the job's metadata: the GPU class and the native gang's topology key; and written
# there by gangplank itself, so a job it wrote is never warned about its own marks: the
# record of derived defaults (src/review/provenance.rs), a TrainJob's native gang size
# (trainer_gang, src/trainer/native.rs) and the controller's restart counts
# (src/controller/restart.rs), the native gang's release order (gang_scheduling,
# src/job/release_order.rs); gpu_sharing's opt-out (its optOutAnnotation's default).
# tests/policy_engine.rs checks that every `*ANNOTATION` constant of src/ is here.
on_job := {
	"gangplank.dev/gpu-class", "gangplank.dev/topology-key", "gangplank.dev/network-topology", "gangplank.dev/defaulted", "gangplank.dev/gpu-sharing",
	"gangplank.dev/native-gang-min-count", "gangplank.dev/restarts", "gangplank.dev/restarted-pods",
	"gangplank.dev/release-order",
}

# Read from each replica's pod template only (image-may-differ: gang_image's default
# optOutAnnotation).
on_template := {"gangplank.dev/mig-profile", "gangplank.dev/gpu-class", "gangplank.dev/image-may-differ"}

# The controller's own record of when it lifted a native gang's release gate from a pod
# (src/controller/release.rs): the gang watchdog's clock starts there. Set in a template, every
# pod would carry it from birth, and a date to come would hold the watchdog off: removed from
# every template, on CREATE and UPDATE alike, and the user told (the watchdog also believes
# a stamp only between the pod's creation and now).
released_at := "gangplank.dev/released-at"

mutation contains {"op": "remove", "path": path, "msg": msg} if {
	some r in input.job.replicas
	released_at in object.keys(r.annotations)
	path := lib.ptrs(r.templatePath, ["metadata", "annotations", released_at])
	# Short: the apiserver cuts a warning at 256 characters, and the path takes ~90.
	msg := sprintf("removed: %s is the controller's own stamp, not the %s template's; drop it from the manifest", [released_at, r.type])
}

job_keys := [k | some k, _ in input.object.metadata.annotations; startswith(k, prefix)] if {
	is_object(input.object.metadata.annotations)
}

# One body for both findings (a body costs the VM thousands of instructions even when its
# first test fails; most jobs have no gangplank.dev/* key on their metadata).
violation contains {"path": lib.ptrs("/metadata", ["annotations", k]), "msg": misplaced(k)} if {
	some k in job_keys
	not k in on_job
}

misplaced(k) := sprintf("%s is read from pod templates only; move it to spec.%s.<type>.template.metadata.annotations", [k, input.job.replicaField]) if {
	k in on_template
}

misplaced(k) := sprintf("%s is not an annotation gangplank reads (it knows %v)", [k, sort(on_job | on_template)]) if {
	not k in on_template
}
