# Processes per node for PyTorchJob. spec.nprocPerNode feeds torchrun's --nproc-per-node
# (PET_NPROC_PER_NODE) and WORLD_SIZE; the older spec.elasticPolicy.nProcPerNode is deprecated
# and, set together with the new field, leaves it undefined which one wins.
# METADATA
# custom:
#   applies_when:
#     kinds: [PyTorchJob]
package gangplank.policies.pytorch_nproc

import rego.v1

import data.gangplank.lib

meta := {
	"title": "PyTorchJob processes per node",
	"description": "spec.elasticPolicy.nProcPerNode is deprecated (a warning, as upstream); setting it together with spec.nprocPerNode is refused (upstream Forbidden); spec.nprocPerNode must be auto, cpu, gpu or a positive whole number as a string.",
	"action": "deny",
	"params": {},
}

pytorch if input.job.kind == "PyTorchJob"

legacy_path := "/spec/elasticPolicy/nProcPerNode"

nproc_path := "/spec/nprocPerNode"

legacy := input.object.spec.elasticPolicy.nProcPerNode if {
	pytorch
	input.object.spec.elasticPolicy.nProcPerNode != null
}

nproc := input.object.spec.nprocPerNode if {
	pytorch
	input.object.spec.nprocPerNode != null
}

warning contains {"path": legacy_path, "msg": "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"} if legacy

# The deprecated field is rarely set: one body is entered for its two findings (a body
# costs the VM thousands of instructions even when its first test fails).
violation contains {"path": legacy_path, "msg": msg} if {
	legacy
	some msg in legacy_findings
}

legacy_findings contains msg if {
	nproc
	msg := sprintf("must not be used with spec.nprocPerNode (%s); remove spec.elasticPolicy.nProcPerNode, it is deprecated", [lib.shown(nproc)])
}

legacy_findings contains msg if {
	not whole_positive(legacy)
	msg := sprintf("nProcPerNode is %s; it must be a whole number of at least 1. Better, remove it and set spec.nprocPerNode (e.g. \"4\")", [lib.shown(legacy)])
}

whole_positive(n) if {
	is_number(n)
	floor(n) == n
	n >= 1
}

# The usual value, a positive whole number as a string ("8": ^[1-9][0-9]*$, digits only,
# no leading zero), tested in one rule body; the findings below are looked at only for other
# values.
nproc_valid if {
	is_string(nproc)
	nproc != ""
	not startswith(nproc, "0")
	trim(nproc, "0123456789") == ""
}

violation contains {"path": nproc_path, "msg": msg} if {
	nproc
	not nproc_valid
	some msg in nproc_findings
}

nproc_findings contains msg if {
	not is_string(nproc)
	msg := sprintf("nprocPerNode must be a string; write it quoted, e.g. nprocPerNode: \"%v\"", [nproc])
}

nproc_findings contains msg if {
	is_string(nproc)
	not nproc in {"auto", "cpu", "gpu"}
	msg := sprintf("nprocPerNode \"%s\" is not valid; use \"auto\", \"cpu\", \"gpu\" or a positive whole number of processes per pod as a string, e.g. \"8\"%s", [nproc, case_hint(nproc)])
}

case_hint(s) := sprintf(" (did you mean \"%s\"?)", [lower(s)]) if lower(s) in {"auto", "cpu", "gpu"}

case_hint(s) := "" if not lower(s) in {"auto", "cpu", "gpu"}
