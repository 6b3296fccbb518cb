# Volumes every pod of the job can use. A multi-pod job mounting a ReadWriteOnce claim starts
# the pods on the node that attached it; the others wait in ContainerCreating forever
# (Multi-Attach error), so the gang never forms and nothing fails. Refused:
#
# (1) a claim used by more than one pod of the job (pods, not nodes: a replica type counts its
#     replicas once, however many of its volumes name the claim; a volume listed in the pod
#     spec is attached whether or not a container mounts it) that is not ReadWriteMany, nor
#     ReadOnlyMany with every use read-only (`persistentVolumeClaim.readOnly: true`, or every
#     mount of the volume `readOnly: true`). Its modes are `status.accessModes` once Bound
#     (what the volume has, which may be more than the claim asked), else `spec.accessModes`;
# (2) a claim not yet bound whose class's provisioner cannot give the modes it asks (even for
#     one pod: the claim, and the pod, stay Pending). No API says what a provisioner offers,
#     so `provisionerModes` says it for common drivers; an unknown provisioner, a claim that
#     names its volume (static binding) and a claim used as a raw block device (shared disks
#     give more modes there) are not judged.
#
# Messages name what the namespace holds about a claim (its modes, its class, the class's
# provisioner) only to an authenticated caller (lib.for_caller): the claim's name is the
# job's own, and whether it exists is the verdict itself.
#
# A claim missing from the namespace is warned (it may be created next). emptyDir and generic
# ephemeral volumes (one claim per pod) are fine. Reads data.cluster.claims (the job's
# namespace's) and data.cluster.storage_classes: silent when the claims are not known
# (offline, or a snapshot without PersistentVolumeClaims); (2) is silent when the classes are
# not known, and messages then say the class as the claim names it. A TrainJob is judged on
# its pods as its runtime renders them.
# METADATA
# custom:
#   applies_when:
#     all: [cluster, claims]
package gangplank.policies.storage

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Volumes every pod can attach",
	"description": "With the namespace's PersistentVolumeClaims known, refuses a claim used by more than one pod of the job unless ReadWriteMany, or ReadOnlyMany and read-only in every pod (ReadWriteOnce/ReadWriteOncePod leave the other pods in ContainerCreating or Pending); refuses an unbound claim whose class's provisioner (provisionerModes) cannot give the modes it asks; warns about claims that do not exist.",
	"action": "deny",
	"params": {
		# Provisioner → the access modes its volumes can have in Filesystem mode (claims used
		# as raw block devices are not judged: shared disks give more there). Only drivers
		# whose limits are known; extraProvisionerModes adds or replaces entries.
		"provisionerModes": {
			# EBS volumes attach to one instance (io2 multi-attach is Block only).
			"ebs.csi.aws.com": ["ReadWriteOnce", "ReadWriteOncePod"],
			"kubernetes.io/aws-ebs": ["ReadWriteOnce", "ReadWriteOncePod"],
			# Persistent disks: one writer node, or many readers (RWX is Block only).
			"pd.csi.storage.gke.io": ["ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany"],
			"kubernetes.io/gce-pd": ["ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany"],
			# Azure managed disks: one writer node (shared disks are Block only); the driver
			# also advertises ReadOnlyMany, which is not refused.
			"disk.csi.azure.com": ["ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany"],
			"kubernetes.io/azure-disk": ["ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany"],
			# File shares: every mode.
			"efs.csi.aws.com": ["ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce", "ReadWriteOncePod"],
			"file.csi.azure.com": ["ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce", "ReadWriteOncePod"],
			"kubernetes.io/azure-file": ["ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce", "ReadWriteOncePod"],
			"filestore.csi.storage.gke.io": ["ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce", "ReadWriteOncePod"],
		},
		# Merged over provisionerModes, so a cluster adds its own drivers without copying these.
		"extraProvisionerModes": {},
	},
}

params := data.params.storage

claims := data.cluster.claims

classes := data.cluster.storage_classes

provisioner_modes := object.union(params.provisionerModes, params.extraProvisionerModes)

# Every persistentVolumeClaim volume of the job's pod templates, one entry per volume entry
# (r.claimVolumes: read from the pod spec the pods will run, a TrainJob's runtime included).
# Empty when the claims are not known, so that nothing below says anything: an inventory
# without PersistentVolumeClaims would otherwise call every claim missing.
uses := [u |
	is_object(claims)
	some r in input.job.replicas
	some v in r.claimVolumes
	u := {
		"claim": v.claimName,
		"key": r.key,
		"type": r.type,
		"path": sprintf("%s/volumes/%d", [r.podSpecPath, v.index]),
		"claimReadOnly": v.readOnly,
		# Mounts without readOnly: true, and every raw block device (no read-only flag).
		"writers": v.writableMounts + v.devices,
		"block": v.devices > 0,
	}
]

claim_names := {u.claim | some u in uses}

# Claim → the path of its first volume entry, where its findings point.
first := {name: [u.path | some u in uses; u.claim == name][0] | some name in claim_names}

# Claims used as raw block devices: (2) leaves them alone (EBS io2, PD and Azure shared
# disks give ReadWriteMany to Block volumes only).
block := {u.claim | some u in uses; u.block}

# Claim → the pods that use it at once and their replica types, for claims more than one pod
# uses. A replica type counts once however many of its volumes name the claim; Trainer
# initializers finish before the trainer starts, so they never hold it at the same time.
shared := {name: {"pods": n, "types": types} |
	some name in claim_names
	keys := {u.key | some u in uses; u.claim == name}
	members := [r |
		some r in input.job.replicas
		r.key in keys
		object.get(r, "role", "") != "initializer"
	]
	n := sum([r.replicas | some r in members])
	n > 1
	types := concat(", ", [r.type | some r in members])
}

# The modes a claim has: the bound volume's (status.accessModes), else what it asks for.
modes(c) := m if {
	object.get(c, "phase", "") == "Bound"
	m := object.get(c, "boundAccessModes", [])
	is_array(m)
	count(m) > 0
} else := m if {
	m := object.get(c, "accessModes", [])
	is_array(m)
}

# The class a claim is provisioned by: the one it names, else (storageClassName absent) the
# default class; undefined for "" (no class: bound only to a volume made by hand) and when
# the classes are not known.
class_name(c) := n if {
	n := c.storageClassName
	is_string(n)
	n != ""
}

class_name(c) := d if {
	object.get(c, "storageClassName", null) == null
	d := classes["default"]
	is_string(d)
	d != ""
}

# The class as messages name it.
class_label(c) := sprintf("class %s", [c.storageClassName]) if class_name(c) == c.storageClassName

class_label(c) := sprintf("default class %s", [d]) if {
	object.get(c, "storageClassName", null) == null
	d := class_name(c)
	is_string(d)
}

class_label(c) := "the default class" if {
	object.get(c, "storageClassName", null) == null
	not class_name(c)
}

class_label(c) := "no class" if c.storageClassName == ""

# What sharing a claim of modes m across pods does, for modes that allow one writer only.
one_writer(m) := "attaches to one node: pods on others hang in ContainerCreating (Multi-Attach)" if "ReadWriteOnce" in m

one_writer(m) := "only one pod may use it: the others stay Pending" if {
	"ReadWriteOncePod" in m
	not "ReadWriteOnce" in m
}

# (1) Shared, and no mode lets several nodes use it: ReadWriteOnce, ReadWriteOncePod.
violation contains {"path": first[name], "msg": msg} if {
	some name, s in shared
	c := claims[name]
	is_object(c)
	m := modes(c)
	is_array(m)
	not "ReadWriteMany" in m
	not "ReadOnlyMany" in m
	effect := one_writer(m)
	is_string(effect)
	full := sprintf("claim %q (%s, %s) is used by %d pods (%s) but %s. Use a ReadWriteMany claim", [name, concat(" or ", m), class_label(c), s.pods, s.types, effect])
	withheld := sprintf("claim %q is used by %d pods (%s) but its access mode lets only one node or pod use it. Use a ReadWriteMany claim", [name, s.pods, s.types])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

# (1) Shared read-only only (ReadOnlyMany, no ReadWriteMany), but some pod may write to it.
violation contains {"path": u.path, "msg": msg} if {
	some name, s in shared
	c := claims[name]
	is_object(c)
	m := modes(c)
	is_array(m)
	not "ReadWriteMany" in m
	"ReadOnlyMany" in m
	writable := [w | some w in uses; w.claim == name; not w.claimReadOnly; w.writers > 0]
	count(writable) > 0
	u := writable[0]
	fix := sprintf("is used by %d pods but %s mounts it writable; shared, it is read-only: set persistentVolumeClaim.readOnly or readOnly on every mount", [s.pods, u.type])
	full := sprintf("claim %q (%s, %s) %s", [name, concat(" or ", m), class_label(c), fix])
	withheld := sprintf("claim %q %s", [name, fix])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

# (2) Not bound yet, and its class's provisioner cannot make a volume with the modes it asks:
# it stays Pending, and so does every pod using it. A claim naming a volume (spec.volumeName)
# binds to that volume, not to a new one.
violation contains {"path": first[name], "msg": msg} if {
	some name in claim_names
	not name in block
	c := claims[name]
	is_object(c)
	object.get(c, "phase", "") != "Bound"
	object.get(c, "volumeName", "") == ""
	class := class_name(c)
	is_string(class)
	provisioner := classes.classes[class].provisioner
	is_string(provisioner)
	offered := provisioner_modes[provisioner]
	is_array(offered)
	asked := object.get(c, "accessModes", [])
	is_array(asked)
	missing := [mode | some mode in asked; not mode in offered]
	count(missing) > 0
	full := sprintf("claim %q asks %s but %s (%s) gives only %s: it stays Pending, so do its pods. Use a class with %s", [name, concat(", ", missing), class_label(c), provisioner, concat(", ", offered), concat(", ", missing)])
	withheld := sprintf("claim %q asks access modes its class's provisioner cannot give: it stays Pending, so do its pods. Use a class that gives them", [name])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

# A claim the namespace does not have (yet): the pods stay Pending until it exists.
warning contains {"path": first[name], "msg": msg} if {
	some name in claim_names
	object.get(claims, name, null) == null
	msg := sprintf("claim %q does not exist in namespace %q: the pods stay Pending until it is created%s", [name, input.job.namespace, lib.inventory_stale_note])
}
