# NetworkPolicies against the gang: a NetworkPolicy that isolates the job's pods (a namespace's
# default-deny, an allow-list written for a web service) leaves every rank waiting at
# rendezvous, "workers cannot reach the master", until a timeout that names no policy. Warned;
# refused with `refuse: true`.
#
# Reads data.cluster.network_policies, the NetworkPolicies of the job's namespace that select
# some pod of the job, each with `selects`, the keys of the replica types its podSelector
# selects (matched once, by the inventory; null when NetworkPolicies are not known: silent), and
# data.cluster.namespace.labels (null when Namespaces are not known), against the labels
# every pod of a replica type will carry (input.job.replicas[].podLabels, the controller's
# included). As the NetworkPolicy API (networking.k8s.io/v1) decides, traffic from pod a to
# pod b passes when no policy selecting a isolates it for egress or one of those policies has an
# egress rule letting it reach b, and likewise for ingress on b's side. Every replica type
# must reach every other one, and itself when it has more than one pod, on every TCP port:
# NCCL, Gloo and MPI open ports of their own beyond the rendezvous port, so a rule that opens
# only 29500 still leaves the collectives hanging.
#
# Not evaluated: CNI-specific kinds (CiliumNetworkPolicy, Calico's NetworkPolicy and
# GlobalNetworkPolicy, AdminNetworkPolicy/BaselineAdminNetworkPolicy), which gangplank does
# not read; ipBlock peers, which never count for pod-to-pod traffic (the API leaves pod IPs in
# ipBlocks to the CNI); named ports, which count as some ports only; selectors on
# training.kubeflow.org/replica-index, a label podLabels leaves out (it differs per pod);
# egress to the cluster DNS; hostNetwork pods, for which the API leaves the behaviour undefined.
# METADATA
# custom:
#   applies_when:
#     all: [network_policies]
package gangplank.policies.network

import rego.v1

import data.gangplank.lib

meta := {
	"title": "NetworkPolicies let the gang's pods reach each other",
	"description": "With the namespace's NetworkPolicies known (cluster inventory), warns when a policy isolates the job's pods (ingress or egress) and no rule lets every replica type reach the others on every port (ipBlock peers and rules opening only some ports do not count); refuse: true refuses instead.",
	"action": "deny",
	"params": {
		# Refuse (not only warn) a job whose pods cannot reach each other.
		"refuse": false,
	},
}

params := data.params.network

# The namespace's NetworkPolicies that select a pod of the job; [] when they are not known
# (null, or no inventory), which says nothing either.
policies := nps if {
	nps := data.cluster.network_policies
	is_array(nps)
} else := []

# The replica types whose pods run together. Trainer initializers finish before the trainer
# starts and no rank reaches them; a type with no pods needs no traffic.
members := [r | some r in input.job.replicas; r.replicas > 0; r.role != "initializer"]

# [a, b] (indices into members) for the traffic the job needs: from each type to every
# other one, and to itself when it has more than one pod.
pairs := [[i, j] | some i, a in members; some j, _ in members; needed(i, j, a)]

needed(i, j, _) if i != j

needed(i, j, a) if {
	i == j
	a.replicas > 1
}

# Per member (same index), the policies that isolate its pods: select them and have the
# direction in their policyTypes.
isolating := {dir: [[p |
	some p in policies
	isolates(p, r, type)
] | some r in members] |
	some dir, type in {"ingress": "Ingress", "egress": "Egress"}
}

isolates(p, r, type) if {
	r.key in p.selects
	is_object(p.spec)
	type in policy_types(p.spec)
}

# spec.policyTypes, or the API's default when it is absent or empty: Ingress, plus Egress
# when the policy has egress rules (SetDefaults_NetworkPolicySpec tests len(egress) != 0).
# Policies read from the API server already carry the default.
policy_types(spec) := spec.policyTypes if {
	is_array(spec.policyTypes)
	count(spec.policyTypes) > 0
} else := ["Ingress", "Egress"] if {
	is_array(spec.egress)
	count(spec.egress) > 0
} else := ["Ingress"]

# The rules of a direction, and the key that holds their peers.
rules(spec, dir) := rs if {
	rs := object.get(spec, dir, [])
	is_array(rs)
} else := []

peer_key := {"ingress": "from", "egress": "to"}

# A failure: traffic from members[peer] to members[isolated] (ingress) or from
# members[isolated] to members[peer] (egress) that the isolating policies (names) let through
# on no rule.
failures contains {"dir": dir, "isolated": x, "peer": y, "names": sort([p.name | some p in pols])} if {
	count(policies) > 0
	some [i, j] in pairs
	some dir, ends in {"ingress": [j, i], "egress": [i, j]}
	x := ends[0]
	y := ends[1]
	pols := isolating[dir][x]
	count(pols) > 0
	not allowed(pols, dir, members[y].podLabels)
}

allowed(pols, dir, labels) if {
	some p in pols
	some rule in rules(p.spec, dir)
	is_object(rule)
	all_ports(object.get(rule, "ports", null))
	peers_allow(object.get(rule, peer_key[dir], null), labels)
}

# Peers absent or empty: every source (destination). Else one of them must match the pods.
peers_allow(peers, _) if not is_array(peers)

peers_allow(peers, _) if {
	is_array(peers)
	count(peers) == 0
}

peers_allow(peers, labels) if {
	is_array(peers)
	some peer in peers
	is_object(peer)
	peer_matches(peer, labels)
}

# podSelector alone: pods of the policy's own namespace, which is the job's.
peer_matches(peer, labels) if {
	object.get(peer, "namespaceSelector", null) == null
	is_object(peer.podSelector)
	selector_matches(peer.podSelector, labels)
}

# namespaceSelector: pods of the namespaces it selects, narrowed by the podSelector if any.
# (ipBlock peers have neither, so they never match a pod.)
peer_matches(peer, labels) if {
	is_object(peer.namespaceSelector)
	namespace_selected(peer.namespaceSelector)
	selector_matches(object.get(peer, "podSelector", null), labels)
}

namespace_name := data.cluster.namespace.name

# The namespace's labels, when Namespaces are known; the API server puts
# kubernetes.io/metadata.name on every namespace, so it is there even if a snapshot left it out.
namespace_labels := object.union(labels, {"kubernetes.io/metadata.name": namespace_name}) if {
	labels := data.cluster.namespace.labels
	is_object(labels)
}

namespace_selected(sel) if selector_matches(sel, namespace_labels)

# Labels unknown: a selector on kubernetes.io/metadata.name alone is decided by the name;
# any other may select the namespace, and is taken to.
namespace_selected(sel) if {
	not namespace_labels
	names_only_name(sel)
	selector_matches(sel, {"kubernetes.io/metadata.name": namespace_name})
}

namespace_selected(sel) if {
	not namespace_labels
	not names_only_name(sel)
}

names_only_name(sel) if {
	count([k | some k, _ in match_labels(sel); k != "kubernetes.io/metadata.name"]) == 0
	count([e | some e in match_expressions(sel); e.key != "kubernetes.io/metadata.name"]) == 0
}

# A label selector (metav1.LabelSelector) against labels: null or {} selects everything.
selector_matches(sel, _) if sel == null

selector_matches(sel, labels) if {
	is_object(sel)
	count([k | some k, v in match_labels(sel); object.get(labels, k, null) != v]) == 0
	count([e | some e in match_expressions(sel); not expression_matches(e, labels)]) == 0
}

match_labels(sel) := m if {
	m := sel.matchLabels
	is_object(m)
} else := {}

match_expressions(sel) := es if {
	es := sel.matchExpressions
	is_array(es)
} else := []

expression_matches(e, labels) if {
	e.operator == "In"
	is_array(e.values)
	object.get(labels, e.key, null) in e.values
}

expression_matches(e, labels) if {
	e.operator == "NotIn"
	is_array(e.values)
	not object.get(labels, e.key, null) in e.values
}

expression_matches(e, labels) if {
	e.operator == "Exists"
	object.get(labels, e.key, null) != null
}

expression_matches(e, labels) if {
	e.operator == "DoesNotExist"
	object.get(labels, e.key, null) == null
}

# Whether a rule's ports open every TCP port: none listed, an entry without a port (every
# port of its protocol, TCP by default) or one with the range 1-65535.
all_ports(ports) if not is_array(ports)

all_ports(ports) if {
	is_array(ports)
	count(ports) == 0
}

all_ports(ports) if {
	is_array(ports)
	some p in ports
	tcp(p)
	object.get(p, "port", null) == null
}

all_ports(ports) if {
	is_array(ports)
	some p in ports
	tcp(p)
	p.port == 1
	p.endPort >= 65535
}

tcp(p) if {
	is_object(p)
	object.get(p, "protocol", null) == null
}

tcp(p) if p.protocol == "TCP"

# For the message: the ports rules of the isolating policies open to the peers, where they
# open only some.
some_ports(dir, names, peers) := sort({port_text(pt) |
	some p in policies
	p.name in names
	some rule in rules(p.spec, dir)
	is_object(rule)
	not all_ports(object.get(rule, "ports", null))
	some y in peers
	peers_allow(object.get(rule, peer_key[dir], null), members[y].podLabels)
	some pt in rule.ports
	is_object(pt)
})

port_text(pt) := sprintf("%s %v-%v", [object.get(pt, "protocol", "TCP"), pt.port, pt.endPort]) if pt.endPort

else := sprintf("%s %v", [object.get(pt, "protocol", "TCP"), pt.port]) if pt.port

else := sprintf("%s (every port)", [object.get(pt, "protocol", "TCP")])

# Whether a rule of the isolating policies opens every port to an ipBlock: what it may have
# been meant to allow does not count for pods.
ipblock_rule(dir, names) if {
	some p in policies
	p.name in names
	some rule in rules(p.spec, dir)
	is_object(rule)
	all_ports(object.get(rule, "ports", null))
	peers := object.get(rule, peer_key[dir], null)
	is_array(peers)
	some peer in peers
	is_object(peer.ipBlock)
}

note(dir, names, peers) := sprintf("; only %s open", [concat(", ", ports)]) if {
	ports := some_ports(dir, names, peers)
	count(ports) > 0
} else := "; ipBlocks do not count for pods" if {
	ipblock_rule(dir, names)
} else := ""

# The label every pod of the job carries, for the fix.
job_label := "jobset.sigs.k8s.io/jobset-name" if input.job.trainer

else := "training.kubeflow.org/job-name"

job_label_value := object.get(members[0].podLabels, job_label, input.job.name)

types(indices) := concat(", ", [members[i].type | some i in sort(indices)])

# One finding per direction and set of isolating policies, naming the replica types on
# either side; at the pod spec of the first isolated type.
findings contains {"path": members[min(isolated)].podSpecPath, "msg": msg} if {
	some [dir, names] in {[f.dir, f.names] | some f in failures}
	isolated := {f.isolated | some f in failures; f.dir == dir; f.names == names}
	peers := {f.peer | some f in failures; f.dir == dir; f.names == names}
	full := message(dir, names, types(isolated), types(peers), note(dir, names, peers))
	withheld := message(dir, [], types(isolated), types(peers), "")
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

# No names: withheld (lib.for_caller).
policies_named(names) := "a NetworkPolicy of this namespace keeps" if count(names) == 0

else := sprintf("NetworkPolicy %s keeps", names) if count(names) == 1

else := sprintf("NetworkPolicies %s keep", [concat(", ", names)])

# Short (kubectl shows warnings, and the API server may cut those over 256 characters): the
# policy, who cannot reach whom, the consequence, the fix.
# Which policies and the ports they open are named to an authenticated caller only
# (lib.for_caller): to anyone else, "a NetworkPolicy of this namespace".
message(dir, names, isolated, peers, note) := sprintf("%s %s pods from reaching %s pods (ingress%s): ranks hang at rendezvous; allow every port from podSelector %s=%s", [policies_named(names), peers, isolated, note, job_label, job_label_value]) if dir == "ingress"

message(dir, names, isolated, peers, note) := sprintf("%s %s pods from reaching %s pods (egress%s): ranks hang at rendezvous; allow every port to podSelector %s=%s", [policies_named(names), isolated, peers, note, job_label, job_label_value]) if dir == "egress"

violation contains f if {
	params.refuse == true
	some f in findings
}

warning contains f if {
	params.refuse != true
	some f in findings
}
