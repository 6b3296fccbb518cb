# Which node classes of data.cluster a replica's pods may use: shared by the cluster-aware
# policies (capacity, gpu_sharing). Functions only, no verdicts.
package gangplank.lib

import rego.v1

# A node class admits the pods of replica r: its labels satisfy r's nodeSelector and r
# tolerates its NoSchedule/NoExecute taints (kube-scheduler's NodeAffinity, TaintToleration
# and NodeUnschedulable filters; a key-less `operator: Exists` tolerates every taint, the
# cordon's included).
node_admits(r, class) if {
	not unselected(r, class)
	not untolerated(r, class)
}

unselected(r, class) if {
	some k, v in r.nodeSelector
	not selects(class, k, v)
}

# Classes come split by exactly the labels the job's nodeSelectors name, hostname included
# (src/cluster/view.rs), so one lookup decides.
selects(class, k, v) if class.labels[k] == v

untolerated(r, class) if {
	some taint in class.taints
	not tolerated(r.tolerations, taint)
}

tolerated(tolerations, taint) if {
	some t in tolerations
	tolerates(t, taint)
}

tolerates(t, taint) if {
	object.get(t, "operator", "Equal") == "Exists"
	key_matches(t, taint)
	effect_matches(t, taint)
}

tolerates(t, taint) if {
	object.get(t, "operator", "Equal") == "Equal"
	object.get(t, "key", "") == taint.key
	object.get(t, "value", "") == taint.value
	effect_matches(t, taint)
}

key_matches(t, _) if object.get(t, "key", "") == ""

key_matches(t, taint) if t.key == taint.key

effect_matches(t, _) if object.get(t, "effect", "") == ""

effect_matches(t, taint) if t.effect == taint.effect

# Whether a node with `allocatable` limits resource `name`: a node that reports no `pods`
# (hand-written snapshots) is not limited by pod count; kubelets always report it.
node_limits(_, name) if name != "pods"

node_limits(allocatable, "pods") if allocatable.pods

# Pods asking for `d` (resource → amount per pod) that one node with `allocatable` holds, at
# most `cap` (what "no limit" means to the caller): the scarcest resource decides.
pods_per_node(d, allocatable, cap) := max([0, min(array.concat([cap], [floor(object.get(allocatable, name, 0) / n) |
	some name, n in d
	node_limits(allocatable, name)
]))])
