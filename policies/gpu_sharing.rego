# Shared GPUs: ranks of one job on one physical GPU.
#
# With time-slicing or MPS the NVIDIA device plugin advertises each physical GPU several
# times (GPU Feature Discovery labels the node nvidia.com/gpu.replicas=N and
# nvidia.com/gpu.sharing-strategy=time-slicing|mps, and without renaming appends -SHARED to
# nvidia.com/gpu.product; with renameByDefault the resource itself becomes
# nvidia.com/gpu.shared). GKE labels such nodes cloud.google.com/gke-gpu-sharing-strategy and
# cloud.google.com/gke-max-shared-clients-per-gpu. kube-scheduler counts the replicas as GPUs,
# so two ranks of one NCCL job can get the same card: NCCL stops at init ("Duplicate GPU
# detected"), or, across jobs, trains at a fraction of the speed with no memory isolation.
#
# A job of several GPU pods whose pods may use shared GPUs (the nodes their nodeSelector and
# tolerations admit, from data.cluster; or a request for a `.shared` resource, known without
# an inventory) is refused, naming those nodes and the fix. A one-pod job asking for more
# than one replica of shared GPUs is warned: its GPUs may be one card. A sharing label that
# does not parse counts as shared, and the message says so. The job's annotation
# optOutAnnotation: "allow" opts out (a job that knows what it does).
# METADATA
# custom:
#   applies_when:
#     all: [gpus]
package gangplank.policies.gpu_sharing

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Ranks on GPUs of their own",
	"description": "Refuses a job of several GPU pods that may be placed on shared GPUs (time-slicing or MPS: nvidia.com/gpu.replicas, nvidia.com/gpu.sharing-strategy, the -SHARED product, GKE's sharing labels, nvidia.com/gpu.shared), naming the nodes and the fix; warns a one-pod job that asks for several replicas of shared GPUs. The job annotation optOutAnnotation: \"allow\" opts out.",
	"action": "deny",
	"params": {"optOutAnnotation": "gangplank.dev/gpu-sharing"},
}

params := data.params.gpu_sharing

# Whether anything can be shared at all, tested first by every output rule (most jobs ask
# for no renamed shared resource and run where no node shares its GPUs): the name of a
# resource asked, or the sharing labels a node class carries (projections keep them).
relevant if {
	some r in input.job.replicas
	some name, _ in r.podRequests
	endswith(name, ".shared")
}

relevant if {
	some c in classes
	some key, v in c.labels
	sharing_label(key, v)
}

sharing_label(key, _) if key in gpu_strategy_labels

sharing_label(key, _) if key in gpu_replica_labels

sharing_label(key, _) if {
	startswith(key, "nvidia.com/mig-")
	endswith(key, ".replicas")
}

sharing_label(key, _) if {
	startswith(key, "nvidia.com/mig-")
	endswith(key, ".sharing-strategy")
}

sharing_label("nvidia.com/gpu.product", v) if endswith(v, "-SHARED")

# Per replica: the GPU resources its pods ask for (whole GPUs, MIG slices, shared ones).
gpu_asks := {r.key: asks |
	some r in input.job.replicas
	r.replicas > 0
	asks := {name: n | some name, n in r.podRequests; gpu_resource(name); n > 0}
	count(asks) > 0
}

gpu_resource(name) if endswith(name, "/gpu")

gpu_resource(name) if startswith(name, "nvidia.com/mig-")

gpu_resource(name) if endswith(name, "/gpu.shared")

gpu_pods := sum([r.replicas | some r in input.job.replicas; gpu_asks[r.key]])

opted_out if object.get(input.object.metadata, ["annotations", params.optOutAnnotation], "") == "allow"

classes := data.cluster.node_classes

# The inventory's staleness, when there is one (a `.shared` request is judged without).
stale_note := lib.inventory_stale_note if is_object(data.cluster) else := ""

# --- How a node class shares resource `name` (a set of reasons; empty: exclusive). ---

sharing(c, name) := ((renamed(name) | strategies(c, name)) | replicas(c, name)) | product(c, name)

# Renamed by the device plugin (renameByDefault): the resource says it.
renamed(name) := {sprintf("%s is a shared resource (the device plugin's renameByDefault)", [name]) |
	endswith(name, ".shared")
}

strategies(c, name) := {sprintf("%s=%s%s", [key, v, unknown_strategy(v)]) |
	some key in strategy_labels(name)
	v := c.labels[key]
	not v in {"none", ""}
}

# GPU Feature Discovery writes time-slicing or mps, GKE time-sharing or mps.
unknown_strategy(v) := "" if {
	v in {"time-slicing", "mps", "time-sharing"}
} else := " (an unknown strategy: taken as shared)"

replicas(c, name) := {sprintf("%s=%s%s", [key, v, unparsed(v)]) |
	some key in replica_labels(name)
	v := c.labels[key]
	not replicas_one(v)
}

product(c, name) := {sprintf("nvidia.com/gpu.product=%s", [p]) |
	name == "nvidia.com/gpu"
	p := c.labels["nvidia.com/gpu.product"]
	endswith(p, "-SHARED")
}

# GPU Feature Discovery labels whole GPUs as nvidia.com/gpu.*, MIG profiles as
# nvidia.com/mig-<profile>.*; GKE labels the node's GPUs. (src/cluster/view.rs keeps these
# labels in every projection.)
gpu_strategy_labels := ["nvidia.com/gpu.sharing-strategy", "cloud.google.com/gke-gpu-sharing-strategy"]

gpu_replica_labels := ["nvidia.com/gpu.replicas", "cloud.google.com/gke-max-shared-clients-per-gpu"]

strategy_labels(name) := gpu_strategy_labels if {
	endswith(name, "/gpu")
} else := [sprintf("%s.sharing-strategy", [name])]

replica_labels(name) := gpu_replica_labels if {
	endswith(name, "/gpu")
} else := [sprintf("%s.replicas", [name])]

replicas_one(v) if v == "1"

replicas_one(v) if v == "0"

unparsed(v) := "" if {
	regex.match(`^[0-9]+$`, v)
} else := " (not a count: taken as shared)"

# --- Where the job's GPU pods may go. ---

# Per replica with GPUs: the node classes it may use that share one of the GPU resources it
# asks for, with how. Without an inventory, only what the resource name itself says.
shared_reach := {r.key: found |
	some r in input.job.replicas
	asks := gpu_asks[r.key]
	found := shared_nodes(r, asks)
	count(found) > 0
}

shared_nodes(r, asks) := [{"class": c, "how": how} |
	some c in classes
	some name, _ in asks
	object.get(c.allocatable, name, 0) > 0
	lib.node_admits(r, c)
	how := sharing(c, name)
	count(how) > 0
] if {
	is_array(classes)
} else := [{"class": {"size": 0}, "how": how} |
	some name, _ in asks
	how := sharing({"labels": {}}, name)
	count(how) > 0
]

# "3 node(s) (nvidia.com/gpu.replicas=4, nvidia.com/gpu.sharing-strategy=time-slicing)": the
# labels that tell those nodes apart (classes reach policies without node names).
where(found) := concat("; ", [described(f) | some f in found])

described(f) := concat(", ", sort(f.how)) if {
	f.class.size == 0
} else := sprintf("%d node(s) (%s)", [f.class.size, concat(", ", sort(f.how))])

fix := sprintf("select nodes with GPUs of their own (a nodeSelector such as nvidia.com/gpu.sharing-strategy: none, or a GPU product without -SHARED), ask for a MIG slice per rank, or annotate the job %s: allow if its ranks may share cards", [params.optOutAnnotation])

violation contains {"path": r.podSpecPath, "msg": msg} if {
	relevant
	gpu_pods > 1
	not opted_out
	some r in input.job.replicas
	found := shared_reach[r.key]
	msg := sprintf("%s pods may be placed on shared GPUs: %s. This job has %d GPU pods, and kube-scheduler counts each shared replica as a GPU, so two ranks can get one physical card (NCCL: \"Duplicate GPU detected\") or share it with other jobs at a fraction of the speed; %s%s", [r.type, where(found), gpu_pods, fix, stale_note])
}

warning contains {"path": r.podSpecPath, "msg": msg} if {
	relevant
	gpu_pods == 1
	not opted_out
	some r in input.job.replicas
	found := shared_reach[r.key]
	some _, n in gpu_asks[r.key]
	n > 1
	msg := sprintf("a %s pod asks for %d GPUs where they may be shared: %s. The replicas it gets may be one physical card; ask for 1, or %s%s", [r.type, n, where(found), fix, stale_note])
}
