//! Cluster-aware admission on a big cluster: the admission of a platform-style job
//! (1 Master + 8 Workers, 8 GPUs each, sidecars, env, mounts) without an inventory and with a
//! 5,000-node one — 250 node classes (racks of 20 nodes, a `rack` label each) and the worst
//! case of 5,000 classes (a label unique to every node) — plus what publishing a 5,000-node
//! inventory costs and what the node cache holds in memory; and the same job in a namespace
//! crowded with 2,000 claims and 2,000 NetworkPolicies (the storage and network policies'
//! inventory). Figures and the command are in
//! BENCHMARKS.md.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, Criterion};
use std::sync::Arc;

use gangplank::cluster::cache::Kept;
use gangplank::cluster::objects::{Cached, Incremental};
use gangplank::cluster::{ClusterHandle, Inventory};
use gangplank::policy::PolicySet;
use gangplank::review::{self, Input};
use k8s_openapi::api::core::v1::Node;
use kube::api::DynamicObject;
use serde_json::{json, Value};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const NODES: usize = 5_000;

fn job() -> Value {
    let text = include_str!("data/pytorchjob-9-platform.yaml");
    yaml_serde::from_str(text).expect("benchmark job parses")
}

fn policies() -> PolicySet {
    PolicySet::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
        .expect("shipped policies load")
}

/// A Node as a kubelet reports it: labels from GFD and the cloud, conditions, addresses,
/// images (what makes real Node objects several KB).
fn node(i: usize, rack_size: usize) -> Node {
    let images: Vec<Value> = (0..20)
        .map(|k| json!({"names": [format!("registry.example.com/team/image-{k}@sha256:{:064}", k)], "sizeBytes": 1_000_000_000 + k}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": format!("gpu-{i}"), "labels": {
            "kubernetes.io/hostname": format!("gpu-{i}"),
            "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "p5.48xlarge",
            "topology.kubernetes.io/zone": format!("zone-{}", i % 3),
            "rack": format!("rack-{}", i / rack_size),
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.memory": "81559", "nvidia.com/mig.strategy": "mixed",
            "feature.node.kubernetes.io/rdma.available": "true"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "191500m", "memory": "2043312Mi", "nvidia.com/gpu": "8",
                "ephemeral-storage": "3500Gi", "pods": "110", "rdma/ib": "8"},
            "capacity": {"cpu": "192", "memory": "2063312Mi", "nvidia.com/gpu": "8",
                "ephemeral-storage": "3600Gi", "pods": "110", "rdma/ib": "8"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 250, i % 250)}],
            "images": images,
        },
    }))
    .expect("node")
}

fn inventory(rack_size: usize) -> Inventory {
    Inventory {
        nodes: (0..NODES).map(|i| node(i, rack_size)).collect(),
        source: "bench".into(),
        ..Inventory::default()
    }
}

/// Claims and NetworkPolicies per namespace in the crowded-namespace benchmark.
const CROWD: usize = 2_000;

/// The 5,000-node inventory (250 classes) with a crowded job namespace: `CROWD` claims
/// (the job's three among them, shareable as the job mounts them) and `CROWD`
/// NetworkPolicies, every one selecting other apps but one that lets the job's pods reach
/// each other; plus the same again in 50 other namespaces, Namespaces and StorageClasses.
fn crowded_inventory() -> Inventory {
    let mut inventory = inventory(20);
    let mut claims = Vec::new();
    let mut policies = Vec::new();
    let mut namespaces = Vec::new();
    for n in 0..51 {
        let ns = if n == 0 {
            "team-vision".to_string()
        } else {
            format!("team-{n}")
        };
        namespaces.push(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns, "team": ns}}}));
        let per_namespace = if n == 0 { CROWD } else { CROWD / 10 };
        for i in 0..per_namespace {
            let (name, mode) = match i {
                0 => ("llama-corpus".to_string(), "ReadOnlyMany"),
                1 => ("llama-checkpoints".to_string(), "ReadWriteMany"),
                2 => ("hf-cache".to_string(), "ReadWriteMany"),
                _ => (format!("data-{i}"), "ReadWriteOnce"),
            };
            claims.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": ns, "labels": {"app": format!("web-{i}")}},
                "spec": {"accessModes": [mode], "storageClassName": "fast",
                    "resources": {"requests": {"storage": "100Gi"}}, "volumeName": format!("pv-{n}-{i}")},
                "status": {"phase": "Bound", "accessModes": [mode], "capacity": {"storage": "100Gi"}}}));
            let selected = if i == 0 {
                json!({"matchLabels": {"app": "llama-finetune"}})
            } else {
                json!({"matchLabels": {"app": format!("web-{i}")}, "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["frontend", "api"]}]})
            };
            policies.push(json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": format!("policy-{i}"), "namespace": ns},
                "spec": {"podSelector": selected.clone(), "policyTypes": ["Ingress", "Egress"],
                    "ingress": [{"from": [{"podSelector": selected.clone()}]}],
                    "egress": [{"to": [{"podSelector": selected}]},
                        {"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                         "ports": [{"protocol": "UDP", "port": 53}]}]}}));
        }
    }
    inventory.claims = Some(claims);
    inventory.network_policies = Some(policies);
    inventory.namespaces = Some(namespaces);
    inventory.storage_classes = Some(vec![json!({"apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "filestore.csi.storage.gke.io"})]);
    inventory
}

/// Resident set size of this process, in KiB (Linux).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn cluster_inventory(c: &mut Criterion) {
    let input = Input::create(job(), "default");
    let without = policies();
    let racks = ClusterHandle::fixed(&inventory(20));
    let with_racks = policies().with_cluster(racks);
    let unique = ClusterHandle::fixed(&inventory(1));
    let with_unique = policies().with_cluster(unique);
    let crowded = crowded_inventory();
    let with_crowd = policies().with_cluster(ClusterHandle::fixed(&crowded));
    for set in [&without, &with_racks, &with_unique, &with_crowd] {
        let decision = review::review(set, &input).expect("decides");
        assert!(decision.allowed(), "{:?}", decision.violations);
    }
    let mut g = c.benchmark_group("cluster inventory");
    let crowd_handle = ClusterHandle::default();
    g.bench_function("review, no inventory", |b| {
        b.iter(|| review::review(black_box(&without), black_box(&input)))
    });
    g.bench_function("review, 5000 nodes in 250 classes", |b| {
        b.iter(|| review::review(black_box(&with_racks), black_box(&input)))
    });
    g.bench_function("review, 5000 nodes in 5000 classes", |b| {
        b.iter(|| review::review(black_box(&with_unique), black_box(&input)))
    });
    g.bench_function(
        "review, 5000 nodes in 250 classes, 2000 claims and 2000 NetworkPolicies in the namespace",
        |b| b.iter(|| review::review(black_box(&with_crowd), black_box(&input))),
    );
    // A frontier-size gang: the platform job with 1023 Workers, over 1,100 nodes in racks
    // of 64 (each holds one pod: 8 GPUs a pod, 8 a node).
    let mut gang = job();
    gang["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(1023);
    let gang = Input::create(gang, "default");
    let frontier = Inventory {
        nodes: (0..1_100).map(|i| node(i, 64)).collect(),
        source: "bench".into(),
        ..Inventory::default()
    };
    let with_frontier = policies().with_cluster(ClusterHandle::fixed(&frontier));
    for set in [&without, &with_frontier] {
        let decision = review::review(set, &gang).expect("decides");
        assert!(decision.allowed(), "{:?}", decision.violations);
    }
    g.bench_function("review, 1 + 1023 gang, no inventory", |b| {
        b.iter(|| review::review(black_box(&without), black_box(&gang)))
    });
    g.bench_function("review, 1 + 1023 gang, 1100 nodes in 18 classes", |b| {
        b.iter(|| review::review(black_box(&with_frontier), black_box(&gang)))
    });
    let nodes = inventory(20);
    let handle = ClusterHandle::default();
    g.sample_size(10);
    g.bench_function("publish a 5000-node inventory", |b| {
        b.iter(|| handle.publish(black_box(&nodes)))
    });
    g.bench_function(
        "publish 5000 nodes with 12000 claims and 12000 NetworkPolicies in 51 namespaces",
        |b| b.iter(|| crowd_handle.publish(black_box(&crowded))),
    );
    // The watch's path: the caches hold DynamicObjects; a claim changed re-indexes its
    // namespace only.
    let cached = |kind: &str, items: &Option<Vec<Value>>| -> Vec<Arc<Kept>> {
        let items = items.iter().flatten().enumerate();
        items
            .map(|(i, item)| {
                let mut item = item.clone();
                item["metadata"]["resourceVersion"] = json!(i.to_string());
                let object: DynamicObject = serde_json::from_value(item).expect("DynamicObject");
                Arc::new(Kept::of(kind, object))
            })
            .collect()
    };
    let (claims, netpols) = (
        cached("PersistentVolumeClaim", &crowded.claims),
        cached("NetworkPolicy", &crowded.network_policies),
    );
    g.bench_function(
        "watch: index 12000 claims and 12000 NetworkPolicies (first list)",
        |b| {
            b.iter(|| {
                Incremental::default().update(
                    &Cached {
                        claims: Some(&claims),
                        network_policies: Some(&netpols),
                        namespaces: None,
                    },
                    usize::MAX,
                )
            })
        },
    );
    let mut incremental = Incremental::default();
    let mut changed = claims.clone();
    let mut version = 0u64;
    g.bench_function(
        "watch: update after one claim changed (12000 claims, 12000 NetworkPolicies cached)",
        |b| {
            b.iter(|| {
                version += 1;
                let mut one: DynamicObject =
                    serde_json::from_value(changed[7].value()).expect("DynamicObject");
                one.metadata.resource_version = Some(format!("v{version}"));
                changed[7] = Arc::new(Kept::of("PersistentVolumeClaim", one));
                incremental.update(
                    &Cached {
                        claims: Some(&changed),
                        network_policies: Some(&netpols),
                        namespaces: None,
                    },
                    usize::MAX,
                )
            })
        },
    );
    // The first review of a selector shape after a publish builds that projection.
    let cold = policies().with_cluster(handle.clone());
    g.bench_function(
        "first review after a publish (5000 nodes, 250 classes)",
        |b| {
            b.iter_batched(
                || handle.publish(&nodes),
                |()| review::review(black_box(&cold), black_box(&input)),
                criterion::BatchSize::PerIteration,
            )
        },
    );
    g.finish();
}

/// The node cache's memory: RSS before and after holding 5,000 Nodes and their summary.
fn memory() {
    let before = rss_kib();
    let nodes = inventory(20);
    let after_nodes = rss_kib();
    let handle = ClusterHandle::fixed(&nodes);
    let after_summary = rss_kib();
    let summary_bytes = handle.current().map_or(0, |d| d.json.to_string().len());
    println!(
        "memory: 5000 Nodes hold {} MiB of RSS; their summary (data.cluster, {} KiB as JSON) another {} MiB",
        after_nodes.saturating_sub(before) / 1024,
        summary_bytes / 1024,
        after_summary.saturating_sub(after_nodes) / 1024
    );
    drop(handle);
    drop(nodes);
}

criterion_group!(benches, cluster_inventory);

fn main() {
    gangplank::no_library_backtraces();
    memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
