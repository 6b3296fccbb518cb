# Kueue queues: a job labelled kueue.x-k8s.io/queue-name is admitted by Kueue only through
# an existing LocalQueue pointing at an active ClusterQueue whose quota covers the whole
# gang (Kueue admits all pod sets at once). Otherwise it stays suspended forever. Reads
# data.cluster.kueue (present when Kueue's CRDs are installed and a cluster inventory is
# known); silent otherwise. The quota compared is the ClusterQueue's nominal quota plus its
# borrowing limit, summed over flavors: a gang above it can never be admitted. A queue in a
# cohort without a borrowing limit may borrow without bound, so only its coverage is checked.
# The namespace's other LocalQueues, the ClusterQueue a LocalQueue points at and its quotas are
# named only to an authenticated caller (lib.for_caller): the job names its LocalQueue only.
# METADATA
# custom:
#   applies_when:
#     all: [cluster, kueue]
package gangplank.policies.kueue_queue

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Kueue queues that can take the gang",
	"description": "With a cluster inventory that has Kueue's queues, refuses jobs whose kueue.x-k8s.io/queue-name names no LocalQueue of the namespace, whose ClusterQueue is missing or stopped, does not cover a GPU resource the job asks for, or has less quota (nominal + borrowing limit) than the whole gang needs.",
	"action": "deny",
	"params": {},
}

kueue := data.cluster.kueue

label := "kueue.x-k8s.io/queue-name"

path := "/metadata/labels/kueue.x-k8s.io~1queue-name"

local_queue := q if {
	is_object(kueue)
	data.cluster.node_count > 0
	q := input.object.metadata.labels[label]
	is_string(q)
}

key := sprintf("%s/%s", [input.job.namespace, local_queue])

cluster_queue_name := kueue.local_queues[key]

cluster_queue := kueue.cluster_queues[cluster_queue_name]

namespace_queues := [name |
	some k, _ in kueue.local_queues
	startswith(k, sprintf("%s/", [input.job.namespace]))
	name := substring(k, count(input.job.namespace) + 1, -1)
]

violation contains {"path": path, "msg": msg} if {
	local_queue
	not kueue.local_queues[key]
	full := sprintf("Kueue LocalQueue %q does not exist in namespace %q (LocalQueues there: %s); Kueue would keep the job suspended forever", [local_queue, input.job.namespace, shown(namespace_queues)])
	withheld := sprintf("Kueue LocalQueue %q does not exist in namespace %q; Kueue would keep the job suspended forever", [local_queue, input.job.namespace])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

violation contains {"path": path, "msg": msg} if {
	local_queue
	name := kueue.local_queues[key]
	not kueue.cluster_queues[name]
	full := sprintf("Kueue LocalQueue %q points at ClusterQueue %q, which does not exist", [local_queue, name])
	withheld := sprintf("Kueue LocalQueue %q points at a ClusterQueue that does not exist", [local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

violation contains {"path": path, "msg": msg} if {
	cluster_queue.stop_policy != "None"
	full := sprintf("Kueue ClusterQueue %q is stopped (stopPolicy %s): it admits no new workloads", [cluster_queue_name, cluster_queue.stop_policy])
	withheld := sprintf("the ClusterQueue of Kueue LocalQueue %q is stopped: it admits no new workloads", [local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

violation contains {"path": path, "msg": msg} if {
	some name in lib.gang_resources
	not cluster_queue.resources[name]
	cluster_queue
	full := sprintf("Kueue ClusterQueue %q has no quota for %s, which the job asks for: Kueue never admits it (covered: %s)", [cluster_queue_name, name, shown(object.keys(cluster_queue.resources))])
	withheld := sprintf("the ClusterQueue of Kueue LocalQueue %q has no quota for %s, which the job asks for: Kueue never admits it", [local_queue, name])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

violation contains {"path": path, "msg": msg} if {
	some name in lib.gang_resources
	quota := cluster_queue.resources[name]
	is_number(quota.borrowing_limit)
	limit := quota.nominal + quota.borrowing_limit
	need := lib.gang_total(name)
	need > limit
	full := sprintf("the gang needs %d %s at once; Kueue ClusterQueue %q can admit at most %d (nominal %d + borrowing limit %d), so it never admits the job", [need, name, cluster_queue_name, limit, quota.nominal, quota.borrowing_limit])
	withheld := sprintf("the gang needs %d %s at once; the ClusterQueue of Kueue LocalQueue %q can never admit that many, so it never admits the job", [need, name, local_queue])
	msg := sprintf("%s%s", [lib.for_caller(input, full, withheld), lib.inventory_stale_note])
}

shown(names) := "none" if {
	count(names) == 0
} else := concat(", ", sort(names))
