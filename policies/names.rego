# Job and pod names. The operator names pods and Services <job>-<type>-<index> and uses the
# job name for Services, PodGroups and label values, all of which must be DNS-1035 labels
# (at most 63 characters). Upstream checks only the job name (C1), so a valid name with many
# replicas can still produce pods and Services that can never be created (#1745, #1101).
package gangplank.policies.names

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Job and pod names",
	"description": "metadata.name must be a DNS-1035 label (upstream C1; with generateName the prefix is checked), and every generated pod/Service name <job>-<type>-<index> must fit in 63 characters, which upstream never checks.",
	"action": "deny",
	"params": {},
}

# Longest DNS label: job, pod and Service names.
max_len := 63

generated := input.job.nameGenerated

# A runtime is no job: its name becomes no pod, Service or PodGroup name (a TrainJob's does,
# and is checked on the TrainJob), and the Trainer allows any DNS subdomain.
runtime if input.job.kind in {"TrainingRuntime", "ClusterTrainingRuntime"}

name := input.object.metadata.name if {
	not generated
	not runtime
}

prefix := input.object.metadata.generateName if generated

name_path := "/metadata/generateName" if generated

name_path := "/metadata/name" if not generated

# The apiserver truncates a generateName prefix to 58 characters before adding 5 random ones.
max_prefix := max_len - 5

effective_name := concat("", [substring(prefix, 0, max_prefix), "xxxxx"]) if generated

effective_name := name if not generated

# The usual case, a valid name, in one rule body: then one body is entered for the four
# name findings below, not one per finding (a body costs the VM thousands of instructions
# even when its first test fails).
name_valid if lib.dns1035_label(input.object.metadata.name)

violation contains {"path": "/metadata/name", "msg": msg} if {
	not generated
	not name_valid
	some msg in name_findings
}

name_findings contains "the job has no name; set metadata.name to a DNS-1035 label such as \"mnist-ddp\", or metadata.generateName to a prefix such as \"mnist-\"" if {
	object.get(input.object, ["metadata", "name"], null) == null
}

name_findings contains msg if {
	name != null
	not is_string(name)
	msg := sprintf("metadata.name must be a string, got %v; write it as a DNS-1035 label such as \"mnist-ddp\"", [name])
}

name_findings contains msg if {
	is_string(name)
	name != ""
	not lib.dns1035_label(name)
	reasons := [why | some check in name_checks; not check.ok; why := check.why]
	count(reasons) > 0
	msg := sprintf("\"%s\" is not a DNS-1035 label: %s. The operator names Services and pods after the job, so rename it, e.g. \"%s\"", [name, concat("; ", reasons), suggestion(name)])
}

name_findings contains "the job has an empty name; set metadata.name to a DNS-1035 label such as \"mnist-ddp\"" if {
	name == ""
}

name_checks := [
	{"ok": count(name) <= max_len, "why": sprintf("it has %d characters, at most %d are allowed", [count(name), max_len])},
	{"ok": regex.match(`^[a-z]`, name), "why": "it must start with a lowercase letter"},
	{"ok": regex.match(`^[-a-z0-9]*$`, name), "why": "it may contain only lowercase letters, digits and '-'"},
	{"ok": regex.match(`[a-z0-9]$`, name), "why": "it must end with a lowercase letter or digit"},
]

# A close valid name: lower-cased, invalid characters as '-', a letter first, cut to fit.
suggestion(s) := fixed if {
	dashed := trim(regex.replace(lower(s), `[^a-z0-9]+`, "-"), "-")
	lettered := concat("-", array.concat(letter_prefix(dashed), [dashed]))
	fixed := trim(substring(lettered, 0, max_len), "-")
}

letter_prefix(s) := [] if regex.match(`^[a-z]`, s)

letter_prefix(s) := ["job"] if not regex.match(`^[a-z]`, s)

violation contains {"path": "/metadata/generateName", "msg": msg} if {
	is_string(prefix)
	not dns1035_prefix(prefix)
	msg := sprintf("generateName \"%s\" cannot produce a DNS-1035 label: the prefix must start with a lowercase letter and contain only lowercase letters, digits and '-' (5 random characters are appended), e.g. \"%s-\"", [prefix, suggestion(prefix)])
}

# A prefix of a DNS-1035 label (^[a-z][-a-z0-9]*$): a letter first, then letters, digits and
# '-'.
dns1035_prefix(p) if {
	trim_left(substring(p, 0, 1), "abcdefghijklmnopqrstuvwxyz") == ""
	p != ""
	trim(p, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

# Suffix the operator appends for the longest pod or Service of replica r. The MPI launcher
# is a single pod (v1) or batch Job (v2beta1) named <job>-launcher, without an index.
suffix(r) := "-launcher" if {
	input.job.kind == "MPIJob"
	r.role == "launcher"
}

suffix(r) := trim_prefix(r.lastPodName, input.job.name) if {
	not r.role == "launcher"
}

longest := max({[count(s), s] | some r in input.job.replicas; s := suffix(r)})

# A cheap first test: the JobView's last pod names are input.job.name (the effective name)
# plus at least the suffix, so no violation is possible unless one is too long.
pod_name_too_long if {
	some r in input.job.replicas
	count(r.lastPodName) > max_len
}

violation contains {"path": name_path, "msg": msg} if {
	pod_name_too_long
	is_string(effective_name)
	count(effective_name) + longest[0] > max_len
	pod := concat("", [effective_name, longest[1]])
	msg := sprintf("pod and Service name \"%s\" would have %d characters, over the %d allowed (the operator names them <job>-<type>-<index>); %s", [pod, count(pod), max_len, shorten_hint])
}

shorten_hint := sprintf("shorten the job name to at most %d characters", [max_len - longest[0]]) if not generated

shorten_hint := sprintf("shorten generateName to at most %d characters (5 random characters are appended)", [(max_len - longest[0]) - 5]) if generated
