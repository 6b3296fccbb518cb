# Rendezvous and NCCL environment: platform defaults in, operator-owned variables out.
#
# Platform teams inject variables such as NCCL_SOCKET_IFNAME or NCCL_IB_HCA into the
# container the operator configures (the default container) of every replica; a variable
# the user already sets is never overridden. Variables the training operator derives from
# the replica specs (MASTER_ADDR, RANK, TF_CONFIG, ...) are appended by the operator to the
# containers it creates, so a hand-set copy is duplicated and silently loses (or, across
# versions, wins): it is refused, and never injected from the parameters either.
package gangplank.policies.rendezvous_env

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Rendezvous environment",
	"description": "Merges the env and envByKind parameters into the default container of every replica (user values win; operator-owned names are skipped), and refuses containers that set operator-owned variables (ownedEnv: names or globs) by hand.",
	"action": "deny",
	"params": {
		# Variables for every kind: [{name, value}] (valueFrom works too).
		"env": [],
		# Variables per kind ("PyTorchJob": [{name, value}]); they win over `env` entries of
		# the same name. "MPIJob" covers both API versions.
		"envByKind": {},
		# Variables the operator sets itself; names or globs ("PET_*").
		"ownedEnv": ["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "TF_CONFIG", "PET_NODE_RANK"],
	},
}

params := data.params.rendezvous_env

# ownedEnv read once per evaluation: a name is owned when it is listed, or matches one of its
# globs. The usual list has no glob: one test of the joined list finds that, instead of one
# test per pattern.
owned_strings := [p | some p in params.ownedEnv; is_string(p)]

owned_globs := [p | some p in owned_strings; lib.is_glob(p)] if {
	lib.is_glob(concat(" ", owned_strings))
} else := []

owned(name) if name in owned_strings

owned(name) if {
	some p in owned_globs
	glob.match(p, null, name)
}

usable(e) if {
	is_object(e)
	is_string(e.name)
	e.name != ""
	not owned(e.name)
}

kind_env := [e | some e in object.get(params.envByKind, input.job.kind, []); usable(e)]

kind_env_names := {e.name | some e in kind_env}

# The variables to inject: the kind's, then the general ones it does not name.
wanted := array.concat(kind_env, [e | some e in params.env; usable(e); not e.name in kind_env_names])

mutation contains {"op": "merge", "path": concat("", [c.path, "/env"]), "value": missing} if {
	# Guard first: with no env parameters (the default) nothing is wanted, and wanted need
	# not be built. A comparison: it holds for parameters of any type.
	[params.env, params.envByKind] != [[], {}]
	count(wanted) > 0
	some r in input.job.replicas
	c := lib.default_container(r)
	lib.writable_list_field(lib.raw_container(r, c), "env")
	names := {n | some n in c.envNames}
	missing := [e | some e in wanted; not e.name in names]
	count(missing) > 0
}

violation contains {"path": sprintf("%s/env/%d", [c.path, i]), "msg": msg} if {
	count(owned_set) > 0
	some r in input.job.replicas
	some c in r.containers
	sets_owned(c)
	env := lib.raw_container(r, c).env
	is_array(env)
	some i, e in env
	is_object(e)
	name := e.name
	is_string(name)
	owned(name)
	msg := sprintf("%s is one of the variables the training operator sets from the replica specs (ownedEnv) and appends to the containers it starts; the copy set by hand in container \"%s\" (%s) is a duplicate, and one of the two is silently ignored. Remove it; to change the rendezvous, change the replica specs, elasticPolicy or nprocPerNode", [name, c.name, r.type])
}

# The cheap first test: the owned variables among the env names of every container (JobView
# envNames: each name once, however many containers set it). Listed names are looked up in
# that list (a builtin, no call per name; a non-string entry is in no list of names, so
# owned_strings is not needed); only globs are matched name by name.
owned_set := {n | some n in params.ownedEnv; n in input.job.envNames} | {n |
	count(owned_globs) > 0
	some n in input.job.envNames
	owned(n)
}

sets_owned(c) if {
	some name in c.envNames
	name in owned_set
}
