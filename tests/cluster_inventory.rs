//! The cluster inventory behind `data.cluster`: nodes grouped into classes, bad quantities
//! reported and ignored, staleness carried into policy messages, snapshot errors named, and
//! a new inventory reaching an already compiled policy set.

use std::path::PathBuf;

use gangplank::cluster::{snapshot, ClusterHandle, Inventory};
use gangplank::policy::{Action, PolicySet};
use gangplank::review::{review, Input};
use k8s_openapi::api::core::v1::Node;
use serde_json::{json, Value};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn node(name: &str, labels: Value, allocatable: Value) -> Node {
    let mut labels = labels;
    labels["kubernetes.io/hostname"] = json!(name);
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable},
    }))
    .unwrap_or_else(|e| panic!("node: {e}"))
}

fn inventory(nodes: Vec<Node>) -> Inventory {
    Inventory {
        nodes,
        source: "test".into(),
        ..Inventory::default()
    }
}

fn gpu_nodes(prefix: &str, n: usize, product: &str, gpus: &str) -> Vec<Node> {
    (0..n)
        .map(|i| {
            node(
                &format!("{prefix}-{i}"),
                json!({"nvidia.com/gpu.product": product}),
                json!({"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": gpus}),
            )
        })
        .collect()
}

#[test]
fn five_thousand_nodes_become_a_few_classes_with_totals() {
    let mut nodes = gpu_nodes("a100", 3000, "NVIDIA-A100-SXM4-80GB", "8");
    nodes.extend(gpu_nodes("h100", 1999, "NVIDIA-H100-80GB-HBM3", "8"));
    nodes.push(node(
        "cpu-0",
        json!({}),
        json!({"cpu": "32", "memory": "128Gi"}),
    ));
    let summary = inventory(nodes).summary();
    let classes = summary["node_classes"].as_array().expect("classes");
    let sizes: Vec<i64> = classes
        .iter()
        .map(|c| c["size"].as_i64().unwrap_or(-1))
        .collect();
    assert_eq!(sizes, vec![3000, 1999, 1]);
    assert_eq!(
        summary["resources"]["nvidia.com/gpu"],
        json!({"max_per_node": 8, "total": 39992, "nodes": 4999})
    );
    assert_eq!(classes[0]["labels"].get("kubernetes.io/hostname"), None);
    assert_eq!(classes[0]["names"][0], "a100-0");
    assert_eq!(classes[2]["max_cpu_millis"], 32000);
    assert_eq!(summary["node_count"], 5000);
}

#[test]
fn malformed_quantities_are_reported_and_ignored() {
    let nodes = vec![
        node(
            "odd",
            json!({}),
            json!({"nvidia.com/gpu": "eight", "cpu": "lots"}),
        ),
        node("half", json!({}), json!({"nvidia.com/gpu": "0.5"})),
    ];
    let summary = inventory(nodes).summary();
    let problems: Vec<&str> = summary["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        problems,
        vec![
            "node odd: allocatable nvidia.com/gpu \"eight\" is not a whole number; ignored",
            "node odd: allocatable cpu \"lots\" is not a quantity; ignored",
            "node half: allocatable nvidia.com/gpu \"0.5\" is not a whole number; ignored",
        ]
    );
    assert_eq!(summary["resources"], json!({}));
}

#[test]
fn cordoned_nodes_and_condition_taints() {
    let mut cordoned = node("c", json!({}), json!({"nvidia.com/gpu": "8"}));
    cordoned.spec = serde_json::from_value(json!({"unschedulable": true})).ok();
    let mut rebooting = node("r", json!({}), json!({"nvidia.com/gpu": "8"}));
    rebooting.spec = serde_json::from_value(json!({"taints": [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "infer", "effect": "NoSchedule"},
        {"key": "soft", "effect": "PreferNoSchedule"},
    ]}))
    .ok();
    let summary = inventory(vec![cordoned, rebooting]).summary();
    assert_eq!(summary["unschedulable_nodes"], 1);
    assert_eq!(
        summary["node_classes"][0]["taints"],
        json!([{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]),
        "a passing condition and a soft preference do not restrict the class"
    );
    assert_eq!(
        summary["node_classes"][1]["taints"],
        json!([{"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}]),
        "a cordoned node is a class that pods tolerating the cordon may use"
    );
    assert_eq!(
        summary["resources"]["nvidia.com/gpu"]["total"], 8,
        "the cordoned node's GPUs are not in the totals"
    );
}

/// A class's allocatable is exact for every node in it: nodes that differ in cpu, memory or
/// pods are classes of their own, in the units kube-scheduler counts (millicores, bytes).
#[test]
fn classes_are_split_by_every_allocatable_amount() {
    let gpu = |name: &str, memory: &str| {
        node(
            name,
            json!({"pool": "a"}),
            json!({"cpu": "95500m", "memory": memory, "pods": "110", "nvidia.com/gpu": "8"}),
        )
    };
    let summary = inventory(vec![
        gpu("n1", "1000Gi"),
        gpu("n2", "1000Gi"),
        gpu("n3", "999Gi"),
    ])
    .summary();
    let classes = summary["node_classes"].as_array().expect("classes");
    assert_eq!(classes.len(), 2);
    let big = classes
        .iter()
        .find(|c| c["size"] == 2)
        .expect("the two 1000Gi nodes");
    assert_eq!(
        big["allocatable"],
        json!({"cpu": 95500, "memory": 1_073_741_824_000_i64, "nvidia.com/gpu": 8, "pods": 110})
    );
}

fn gang_of(workers: u32) -> Input {
    let image = "registry.example.com/train:1@sha256:0000000000000000000000000000000000000000000000000000000000000001";
    let replica = |n: u32| {
        json!({"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [{
            "name": "pytorch", "image": image,
            "resources": {"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 8}}}]}}})
    };
    Input::create(
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "llm", "namespace": "team-a"},
            "spec": {"nprocPerNode": "8", "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}}}),
        "team-a",
    )
}

/// The capacity policy's findings, refusals and warnings alike, with their action.
fn capacity_findings(set: &PolicySet, input: &Input) -> Vec<(Action, String)> {
    review(set, input)
        .unwrap_or_else(|e| panic!("{e}"))
        .violations
        .iter()
        .filter(|v| v.policy == "capacity")
        .map(|v| (v.action, v.msg.clone()))
        .collect()
}

fn capacity_messages(set: &PolicySet, input: &Input) -> Vec<String> {
    let findings = capacity_findings(set, input);
    findings.into_iter().map(|(_, msg)| msg).collect()
}

/// The shipped policies, reading `data.cluster` from the handle returned beside them.
fn shipped_with_cluster() -> (ClusterHandle, PolicySet) {
    let handle = ClusterHandle::default();
    let set = PolicySet::load(&repo().join("policies"))
        .unwrap_or_else(|e| panic!("{e}"))
        .with_cluster(handle.clone());
    (handle, set)
}

#[test]
fn a_published_inventory_reaches_the_compiled_set_and_staleness_is_said() {
    let (handle, set) = shipped_with_cluster();
    let job = gang_of(7);
    assert!(capacity_messages(&set, &job).is_empty(), "no inventory yet");

    handle.publish(&inventory(gpu_nodes("gpu", 6, "H100", "8")));
    let refused = capacity_messages(&set, &job);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("hold 6 of them"), "{}", refused[0]);
    assert!(!refused[0].contains("out of date"), "{}", refused[0]);

    let mut stale = inventory(gpu_nodes("gpu", 6, "H100", "8"));
    stale.stale =
        Some("the watch of Nodes is failing since 2026-11-23T03:00:00Z: connection refused".into());
    handle.publish(&stale);
    let refused = capacity_messages(&set, &job);
    assert!(
        refused[0].ends_with("(cluster inventory may be out of date: the watch of Nodes is failing since 2026-11-23T03:00:00Z: connection refused)"),
        "{}",
        refused[0]
    );

    handle.publish(&inventory(gpu_nodes("gpu", 8, "H100", "8")));
    assert!(
        capacity_messages(&set, &job).is_empty(),
        "8 nodes hold the 8 pods"
    );
}

#[test]
fn an_inventory_past_its_memory_bound_refuses_nothing_and_warns_capacity_unknown() {
    let (handle, set) = shipped_with_cluster();
    let job = gang_of(7);
    let mut partial = inventory(gpu_nodes("gpu", 6, "H100", "8"));
    partial.incomplete = Some(
        "the inventory reached its memory bound (160 MiB, --inventory-max-mib) and leaves 94000 of 100000 nodes out: capacity is unknown".into(),
    );
    handle.publish(&partial);
    let capacity = capacity_findings(&set, &job);
    assert_eq!(capacity.len(), 1, "{capacity:?}");
    assert_eq!(
        capacity[0].0,
        Action::Warn,
        "6 known nodes cannot hold 8 pods, but the rest are unknown"
    );
    assert!(
        capacity[0]
            .1
            .starts_with("capacity unknown, not checked: the inventory reached its memory bound")
            && capacity[0].1.contains("leaves 94000 of 100000 nodes out"),
        "{}",
        capacity[0].1
    );

    handle.publish(&inventory(gpu_nodes("gpu", 6, "H100", "8")));
    assert_eq!(
        capacity_messages(&set, &job).len(),
        1,
        "complete again: refused"
    );
}

#[test]
fn the_interpreter_sees_the_same_inventory_as_the_vm() {
    let handle = ClusterHandle::fixed(&inventory(gpu_nodes("gpu", 2, "H100", "8")));
    let set = PolicySet::load(&repo().join("policies"))
        .unwrap_or_else(|e| panic!("{e}"))
        .with_cluster(handle);
    assert!(
        set.interpreter_reason().is_none(),
        "the shipped policies run on the VM"
    );
    let job = gang_of(4);
    assert_eq!(
        capacity_messages(&set, &job),
        capacity_messages(&set.interpreter_only(), &job)
    );
    assert_eq!(capacity_messages(&set, &job).len(), 1);
}

#[test]
fn snapshot_errors_name_the_file_and_the_item() {
    let wrong =
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}}\n";
    let err = snapshot::parse(wrong, "nodes.yaml")
        .err()
        .unwrap_or_default();
    assert!(err.starts_with("nodes.yaml: item 0 is a \"Pod\""), "{err}");
    let broken = "kind: Node\nmetadata: {name: [unclosed\n";
    let err = snapshot::parse(broken, "nodes.yaml")
        .err()
        .unwrap_or_default();
    assert!(err.starts_with("nodes.yaml: document at line 1:"), "{err}");
    // A Node that cannot be read is noted and left out, and the view is marked so.
    let bad_node = "kind: Node\nmetadata: {name: n}\nstatus: {allocatable: 5}\n---\nkind: Node\nmetadata: {name: m}\n";
    let inv = snapshot::parse(bad_node, "nodes.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inv.nodes.len(), 1);
    assert_eq!(inv.notes.len(), 1);
    assert!(
        inv.notes[0].starts_with("nodes.yaml: item 0 (Node) cannot be read:"),
        "{:?}",
        inv.notes
    );
    let stale = inv.stale.unwrap_or_default();
    assert!(
        stale.contains("1 Node item(s) of nodes.yaml could not be read"),
        "{stale}"
    );
    let inv = snapshot::read(&repo().join("policies/tests/clusters/gpu-cluster.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inv.nodes.len(), 12);
    assert_eq!(inv.volcano_queues.map(|q| q.len()), Some(3));
}

/// A snapshot of Kueue's kinds is read, not refused: ClusterQueues of both versions, Cohorts,
/// ResourceFlavors and Topologies into `data.cluster.kueue`, its other kinds (Workload, ...)
/// passed over; a snapshot with ResourceFlavors has its Cohorts known (none: implicit).
#[test]
fn a_snapshot_of_kueues_kinds_is_read_and_its_other_kinds_passed_over() {
    let inv = snapshot::read(&repo().join("policies/tests/clusters/kueue-cluster.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inv.kueue_flavors.as_ref().map(Vec::len), Some(9));
    assert_eq!(inv.kueue_cohorts.as_ref().map(Vec::len), Some(4));
    assert_eq!(inv.kueue_topologies.as_ref().map(Vec::len), Some(3));
    let summary = inv.summary();
    let small = &summary["kueue"]["cluster_queues"]["small"];
    let a100 = &small["resources"]["nvidia.com/gpu"]["flavors"]["a100"];
    assert_eq!(a100["can_reserve"], 12, "{small}");
    assert_eq!(
        summary["kueue"]["flavors"]["a100"]["node_labels"]["pool"],
        "a100"
    );
    let problems = summary["problems"].as_array().map(Vec::len);
    assert_eq!(
        problems,
        Some(5),
        "the cycle, the unit, the flavor, the Topology, the flavor naming an absent one: {}",
        summary["problems"]
    );
    assert_eq!(
        summary["kueue"]["topologies"]["dc"]["levels"],
        serde_json::json!(["block", "rack", "kubernetes.io/hostname"])
    );
    assert_eq!(summary["kueue"]["flavors"]["tas"]["topology_name"], "dc");
    // Without ResourceFlavors or Cohorts, the Cohorts are unknown: the queue's own cap.
    let queues_only = "kind: ClusterQueue\nmetadata: {name: q}\nspec: {cohortName: pool, resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 2, borrowingLimit: 1}]}]}]}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\n";
    let inv = snapshot::parse(queues_only, "kueue.yaml").unwrap_or_else(|e| panic!("{e}"));
    let summary = inv.summary();
    assert_eq!(summary["kueue"]["cohorts_known"], false);
    let cpu = &summary["kueue"]["cluster_queues"]["q"]["resources"]["cpu"]["flavors"]["f"];
    assert_eq!(
        cpu["can_reserve"], 3000,
        "millicores: nominal 2 + borrowing 1"
    );
}

/// Node classes are told apart by the labels the job selects on, per request: a `rack`
/// label splits 40 nodes only for a job that selects a rack, and a hostname selector gets
/// exactly its node.
#[test]
fn classes_follow_the_jobs_selectors() {
    let nodes: Vec<Node> = (0..40)
        .map(|i| {
            node(
                &format!("gpu-{i}"),
                json!({"rack": format!("rack-{}", i / 20)}),
                json!({"nvidia.com/gpu": "8"}),
            )
        })
        .collect();
    let set = PolicySet::load(&repo().join("policies"))
        .unwrap_or_else(|e| panic!("{e}"))
        .with_cluster(ClusterHandle::fixed(&inventory(nodes)));
    let selecting = |workers: u32, selector: Value| {
        let mut input = gang_of(workers);
        for r in ["Master", "Worker"] {
            input.object["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"]["nodeSelector"] =
                selector.clone();
        }
        capacity_messages(&set, &input)
    };
    assert!(selecting(20, json!({})).is_empty(), "21 pods on 40 nodes");
    let rack = selecting(20, json!({"rack": "rack-0"}));
    assert!(
        rack.first().is_some_and(|m| m.contains("hold 20 of them")),
        "{rack:?}"
    );
    let host = selecting(1, json!({"kubernetes.io/hostname": "gpu-3"}));
    assert!(
        host.first()
            .is_some_and(|m| m.contains("1 schedulable nodes can take such a pod")),
        "{host:?}"
    );
    assert!(
        selecting(0, json!({"kubernetes.io/hostname": "gpu-3"})).is_empty(),
        "1 pod on its node"
    );
}

/// Claims, NetworkPolicies and Namespaces reach a request for its own namespace only; a
/// NetworkPolicy that selects none of the job's pods is left out; a kind the snapshot does
/// not list is null (unknown), never empty; an object that cannot be read is noted and
/// left out, and the rest is kept.
#[test]
fn namespaced_objects_reach_the_request_of_their_namespace() {
    let snapshot = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: team-a, labels: {kubernetes.io/metadata.name: team-a, tier: gpu}}}
- {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data, namespace: team-a}, spec: {accessModes: [ReadWriteOnce], storageClassName: gp3}, status: {phase: Bound, accessModes: [ReadWriteOnce]}}
- {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: other, namespace: team-b}, spec: {accessModes: [ReadWriteMany]}}
- {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: broken, namespace: team-a}, spec: {accessModes: ReadWriteOnce}}
- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: deny-all, namespace: team-a}, spec: {podSelector: {}, policyTypes: [Ingress]}}
- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: web-only, namespace: team-a}, spec: {podSelector: {matchLabels: {app: web}}}}
- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: same-job, namespace: team-a}, spec: {podSelector: {matchLabels: {training.kubeflow.org/job-name: llm}}}}
- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: workers, namespace: team-a}, spec: {podSelector: {matchExpressions: [{key: training.kubeflow.org/replica-type, operator: In, values: [worker]}]}}}
- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: elsewhere, namespace: team-b}, spec: {podSelector: {}}}
- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: bad, namespace: team-a}, spec: {podSelector: {matchExpressions: [{key: a, operator: Near}]}}}
- {apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: gp3, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}, provisioner: ebs.csi.aws.com}
"#;
    let inventory = snapshot::parse(snapshot, "cluster.yaml").unwrap_or_else(|e| panic!("{e}"));
    let handle = ClusterHandle::fixed(&inventory);
    let doc = handle.current().expect("published");
    let problems = doc.problems();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("PersistentVolumeClaim team-a/broken"),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("NetworkPolicy team-a/bad") && problems[1].contains("\"Near\""),
        "{problems:?}"
    );
    assert_eq!(
        doc.json["storage_classes"],
        json!({"default": "gp3", "classes": {"gp3": {"provisioner": "ebs.csi.aws.com"}}})
    );
    let input = gang_of(2);
    let cluster = cluster_seen_by(&handle, &input);
    assert_eq!(
        cluster["namespace"],
        json!({"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a", "tier": "gpu"}})
    );
    assert_eq!(
        cluster["claims"],
        json!({"data": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "boundAccessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "volumeName": ""}})
    );
    let names: Vec<&str> = cluster["network_policies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["deny-all", "same-job", "workers"]);
    let selects: Vec<&Value> = cluster["network_policies"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| &p["selects"])
        .collect();
    assert_eq!(
        selects,
        [
            &json!(["Master", "Worker"]),
            &json!(["Master", "Worker"]),
            &json!(["Worker"])
        ]
    );

    // Nodes only: every namespaced kind is unknown.
    let nodes_only = ClusterHandle::fixed(&inventory_of_nodes());
    let cluster = cluster_seen_by(&nodes_only, &input);
    assert_eq!(cluster["claims"], Value::Null);
    assert_eq!(cluster["network_policies"], Value::Null);
    assert_eq!(cluster["storage_classes"], Value::Null);
    assert_eq!(
        cluster["namespace"],
        json!({"name": "team-a", "labels": null})
    );
}

/// PriorityClasses of a snapshot reach `data.cluster.priority_classes` with their values and
/// the default a pod naming no class gets; one without an integer value is left out and
/// said; a snapshot without any leaves them unknown (null), not empty.
#[test]
fn priority_classes_reach_the_policies_with_their_values_and_the_default() {
    let snapshot = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: normal}, value: 1000, globalDefault: true, preemptionPolicy: PreemptLowerPriority, description: what most jobs get}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: low}, value: -10, preemptionPolicy: Never}
- {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: odd}, value: "high"}
"#;
    let inventory = snapshot::parse(snapshot, "cluster.yaml").unwrap_or_else(|e| panic!("{e}"));
    let doc = ClusterHandle::fixed(&inventory)
        .current()
        .expect("published");
    assert_eq!(
        doc.json["priority_classes"],
        json!({
            "classes": {
                "normal": {"value": 1000, "globalDefault": true, "preemptionPolicy": "PreemptLowerPriority"},
                "low": {"value": -10, "globalDefault": false, "preemptionPolicy": "Never"},
            },
            "default": {"name": "normal", "value": 1000},
        })
    );
    assert_eq!(
        doc.problems(),
        ["PriorityClass item 2 (odd) has no name or no integer value; left out"]
    );
    let nodes_only = ClusterHandle::fixed(&inventory_of_nodes())
        .current()
        .expect("published");
    assert_eq!(nodes_only.json["priority_classes"], Value::Null);
}

fn inventory_of_nodes() -> Inventory {
    inventory(gpu_nodes("a100", 2, "NVIDIA-A100-SXM4-80GB", "8"))
}

/// `data.cluster` as `handle`'s current inventory gives it to the request `input`.
fn cluster_seen_by(handle: &ClusterHandle, input: &Input) -> Value {
    let doc = handle.current().expect("published");
    let view = doc.view(&input.rego_input_for(&input.object));
    serde_json::from_str(&view.to_json_str().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"))
}

/// The watch's incremental index: a claim changed (a new resourceVersion) is seen at the
/// next update, a namespace whose claims are all gone has none, a kind the caches do not
/// list is unknown (null) in the view, and Namespaces' labels reach the view.
#[test]
fn the_incremental_index_follows_the_watch_caches() {
    use gangplank::cluster::cache::Kept;
    use gangplank::cluster::objects::{Cached, Incremental};
    use kube::api::DynamicObject;
    use std::sync::Arc;
    let claim = |ns: &str, name: &str, version: &str, mode: &str| -> Arc<Kept> {
        let object =
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": version},
            "spec": {"accessModes": [mode]}}))
            .unwrap_or_else(|e| panic!("{e}"));
        Arc::new(Kept::of("PersistentVolumeClaim", object))
    };
    let handle = ClusterHandle::fixed(&inventory_of_nodes());
    let input = gang_of(2);
    let claims_seen = |handle: &ClusterHandle| cluster_seen_by(handle, &input)["claims"].clone();
    let mut incremental = Incremental::default();
    let mut update = |claims: Option<&[Arc<Kept>]>| {
        handle.publish_objects(incremental.update(
            &Cached {
                claims,
                network_policies: None,
                namespaces: None,
            },
            usize::MAX,
        ));
    };
    let first = [
        claim("team-a", "data", "1", "ReadWriteOnce"),
        claim("team-b", "x", "1", "ReadWriteOnce"),
    ];
    update(Some(&first));
    assert_eq!(
        claims_seen(&handle)["data"]["accessModes"],
        json!(["ReadWriteOnce"])
    );
    let changed = [
        claim("team-b", "x", "1", "ReadWriteOnce"),
        claim("team-a", "data", "2", "ReadWriteMany"),
    ];
    update(Some(&changed));
    assert_eq!(
        claims_seen(&handle)["data"]["accessModes"],
        json!(["ReadWriteMany"])
    );
    update(Some(&changed[..1]));
    assert_eq!(claims_seen(&handle), json!({}), "team-a has no claims left");
    update(None);
    assert_eq!(
        claims_seen(&handle),
        Value::Null,
        "claims not listed: unknown"
    );
    // Namespaces, cluster-scoped, are indexed the same way.
    let namespace: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1",
        "kind": "Namespace", "metadata": {"name": "team-a", "resourceVersion": "1",
        "labels": {"tier": "gpu"}}}))
    .unwrap_or_else(|e| panic!("{e}"));
    handle.publish_objects(incremental.update(
        &Cached {
            claims: None,
            network_policies: None,
            namespaces: Some(&[Arc::new(Kept::of("Namespace", namespace))]),
        },
        usize::MAX,
    ));
    assert_eq!(
        cluster_seen_by(&handle, &input)["namespace"]["labels"],
        json!({"tier": "gpu"})
    );
    // The node summary published before is kept by every objects publish.
    let doc = handle.current().expect("published");
    assert_eq!(doc.json["node_count"], 2);
}

/// A NetworkPolicy of megabytes (the API server takes ~1.5 MB) is left out and named, the
/// others of its namespace still count.
#[test]
fn an_oversized_network_policy_is_left_out_and_named() {
    let rules: Vec<Value> = (0..8_000)
        .map(|i| json!({"from": [{"ipBlock": {"cidr": format!("10.{}.{}.0/24", i / 256, i % 256)}}]}))
        .collect();
    let policy = |name: &str, ingress: Value| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": ingress}})
    };
    let mut inventory = inventory_of_nodes();
    inventory.network_policies = Some(vec![
        policy("huge", Value::Array(rules)),
        policy("deny-all", json!([])),
    ]);
    let handle = ClusterHandle::fixed(&inventory);
    let problems = handle.current().expect("published").problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("NetworkPolicy team-a/huge: a spec of ")
            && problems[0].ends_with("KiB (over 256 KiB); ignored"),
        "{}",
        problems[0]
    );
    let seen = cluster_seen_by(&handle, &gang_of(1));
    let names: Vec<&str> = seen["network_policies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["deny-all"]);
}

/// A frontier-size gang, 1 + 1023 pods of 8 GPUs, over 1,100 nodes: admitted when 1,024
/// nodes can take one pod each, refused with the count when one fewer can, whatever the
/// other nodes (4-GPU ones that take none).
#[test]
fn a_gang_of_1024_pods_over_1100_nodes_is_decided_exactly() {
    let (handle, set) = shipped_with_cluster();
    let job = gang_of(1023);
    let cluster = |big: usize| {
        let mut nodes = gpu_nodes("h100", big, "NVIDIA-H100-80GB-HBM3", "8");
        nodes.extend(gpu_nodes("l4", 1100 - big, "NVIDIA-L4", "4"));
        inventory(nodes)
    };
    handle.publish(&cluster(1024));
    let capacity = capacity_messages(&set, &job);
    assert!(
        capacity.is_empty(),
        "1,024 nodes hold the 1,024 pods: {capacity:?}"
    );

    handle.publish(&cluster(1023));
    let refused = capacity_messages(&set, &job);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("1023 schedulable nodes can take such a pod")
            && refused[0].contains("together they hold 1023 of them"),
        "{}",
        refused[0]
    );
}

/// HyperNodes in a snapshot reach every request as `hypernodes`: per HyperNode its tier and
/// its nodes as classes merged by the request's selectors (a hostname selector singles out
/// its node, as in `node_classes`); a HyperNode in a cycle is left out and said in `problems`.
#[test]
fn hypernodes_reach_the_request_as_classes_of_their_nodes() {
    let nodes: Vec<Value> = (0..4)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": format!("gpu-{i}"), "labels": {"rack": format!("rack-{}", i / 2)}},
                "status": {"allocatable": {"nvidia.com/gpu": "8", "pods": "110"}}})
        })
        .collect();
    let hypernode = |name: &str, tier: i64, members: Value| {
        json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name}, "spec": {"tier": tier, "tierName": "t", "members": members}})
    };
    let mut items = nodes;
    items.push(hypernode(
        "rack-0",
        1,
        json!([{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "rack-0"}}}}]),
    ));
    items.push(hypernode(
        "loop",
        2,
        json!([{"type": "HyperNode", "selector": {"exactMatch": {"name": "loop"}}}]),
    ));
    let inventory = snapshot::from_items(items, "test").unwrap_or_else(|e| panic!("{e}"));
    let handle = ClusterHandle::fixed(&inventory);
    let mut input = gang_of(1);
    let seen = cluster_seen_by(&handle, &input);
    assert_eq!(seen["hypernodes"]["rack-0"]["tier"], 1, "{seen}");
    assert_eq!(seen["hypernodes"]["rack-0"]["node_count"], 2, "{seen}");
    let classes = &seen["hypernodes"]["rack-0"]["node_classes"];
    assert_eq!(classes.as_array().map(Vec::len), Some(1), "{classes}");
    assert_eq!(classes[0]["size"], 2, "{classes}");
    assert_eq!(
        classes[0]["labels"],
        json!({}),
        "unselected labels merged away"
    );
    assert_eq!(seen["hypernodes"].get("loop"), None, "{seen}");
    let problems = seen["problems"].to_string();
    assert!(
        problems.contains("HyperNode loop: in a cycle (loop → loop); left out"),
        "{problems}"
    );

    input.object["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] =
        json!({"kubernetes.io/hostname": "gpu-1"});
    let seen = cluster_seen_by(&handle, &input);
    let classes = &seen["hypernodes"]["rack-0"]["node_classes"];
    let sizes: Vec<(Value, Value)> = classes
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["labels"]["kubernetes.io/hostname"].clone(),
                c["size"].clone(),
            )
        })
        .collect();
    assert_eq!(
        sizes,
        [(json!("gpu-1"), json!(1)), (Value::Null, json!(1))],
        "{classes}"
    );
}
