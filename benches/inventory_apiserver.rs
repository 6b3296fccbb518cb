//! The cluster inventory through a real kube-apiserver: `gangplank serve` (this build)
//! watching `INVENTORY_NODES` (default 10,000) realistic GPU Nodes, against the same server
//! with the inventory off.
//!
//! On one kube-apiserver + etcd (tests/support/): the Nodes of tests/support/realistic.rs
//! (18 KB, 53 labels, 50 images, conditions, nodeInfo) are created (metadata and spec by
//! this client, then `status` by the field manager `kubelet`, so managedFields has two
//! managers, as a kubelet-registered node has), 16 requests in flight. Then:
//! 1. `serve` starts with the inventory, and the time until its `/metrics` counts every
//!    Node in the index is the first list; its RSS is read then, beside a `serve` with
//!    `--cluster-inventory=false` (the same policies, no inventory);
//! 2. heartbeats: every Node's status is patched once as a kubelet heartbeat does (every
//!    condition's lastHeartbeatTime), 16 in flight; the server's CPU time over that is
//!    what a heartbeat of every node costs it (kubelets send one per node every 5 minutes
//!    by default), and `gangplank_cluster_inventory_publishes_total{cache="summary"}` says
//!    how many new views they caused (0 expected: nothing the policies read changed);
//! 3. one Node's allocatable changes: one publish.
//!
//! `INVENTORY_GRAIN=g` creates issue 44's fixture instead (tests/support/realistic.rs
//! `node_grained`: a node class per `g` nodes).
//!
//! Run: `cargo bench --bench inventory_apiserver` (needs the kube test binaries).
//! Figures: BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use support::control_plane::free_ports;
use support::realistic;
use support::webhooks::Webhooks;
use support::{ControlPlane, Crds};

const IN_FLIGHT: usize = 16;

fn main() {
    // `cargo test --all-targets` runs benches once as tests: this one (a control plane and
    // 10,000 Nodes) only under `cargo bench`; tests/e2e_cluster_inventory.rs covers its path.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let assets = match support::assets::find() {
        Ok(assets) => assets,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let n: usize = std::env::var("INVENTORY_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(run(&assets, n));
}

async fn run(assets: &support::assets::Assets, n: usize) {
    let control_plane = ControlPlane::start(assets, Crds::TrainingV1);
    let client = control_plane.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let template = Arc::new(realistic::node_template());
    let started = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(IN_FLIGHT, |i| {
            let (nodes, template) = (nodes.clone(), template.clone());
            async move { create(&nodes, &node_at(&template, i)).await }
        })
        .await;
    println!(
        "== {n} realistic Nodes created (with status by `kubelet`) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let policies = support::repo().join("policies");
    let [port, bare_port] = free_ports();
    let started = Instant::now();
    let server = Webhooks::start_scoped(
        &control_plane,
        policies.clone(),
        Some("inventory-bench"),
        port,
        &[],
    )
    .await;
    server.wait_ready().await;
    let seen = wait_metric(
        &server,
        "gangplank_cache_entries{cache=\"nodes\"}",
        n as f64,
    )
    .await;
    let first_list = started.elapsed();
    let bare = Webhooks::start_scoped(
        &control_plane,
        policies,
        Some("inventory-bench-bare"),
        bare_port,
        &["--cluster-inventory=false".into()],
    )
    .await;
    bare.wait_ready().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rss, _) = server.usage();
    let (bare_rss, _) = bare.usage();
    let metrics = server.metrics().await;
    let classes = metric(&metrics, "gangplank_cache_entries{cache=\"node_classes\"}");
    let estimated = metric(&metrics, "gangplank_cache_bytes{cache=\"nodes\"}");
    println!(
        "   first list: {seen} Nodes in the index {:.1} s after serve started ({classes} classes, {:.1} MiB estimated)",
        first_list.as_secs_f64(),
        estimated / 1048576.0
    );
    let mib = |kib: Option<u64>| kib.unwrap_or(0) as f64 / 1024.0;
    println!(
        "   RSS: {:.1} MiB with the inventory, {:.1} MiB without (+{:.1} MiB, {:.2} MiB per 1,000 Nodes)",
        mib(rss),
        mib(bare_rss),
        mib(rss) - mib(bare_rss),
        (mib(rss) - mib(bare_rss)) / n as f64 * 1000.0
    );

    // The server's own idle cost over as long as the heartbeats will take (the publish
    // tick, probes, the scrapes here), to tell apart what the heartbeats cost.
    let (_, idle_before) = server.usage();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let (_, idle_after) = server.usage();
    let idle = idle_after
        .unwrap_or_default()
        .saturating_sub(idle_before.unwrap_or_default());
    // Heartbeats: every Node once.
    let publishes = |m: &str| {
        metric(
            m,
            "gangplank_cluster_inventory_publishes_total{cache=\"summary\"}",
        )
    };
    let before = publishes(&server.metrics().await);
    let (_, cpu_before) = server.usage();
    let started = Instant::now();
    futures::stream::iter(0..n)
        .for_each_concurrent(IN_FLIGHT, |i| {
            let (nodes, template) = (nodes.clone(), template.clone());
            async move {
                let name = realistic::node(&template, i)["metadata"]["name"].clone();
                let beat = json!({"status": {"conditions": conditions(i)}});
                let name = name.as_str().unwrap_or_default();
                nodes
                    .patch_status(
                        name,
                        &PatchParams::apply("kubelet"),
                        &Patch::Strategic(&beat),
                    )
                    .await
                    .expect("heartbeat");
            }
        })
        .await;
    let beats = started.elapsed();
    // The last events reach the server after the last patch returns.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, cpu_after) = server.usage();
    let after = publishes(&server.metrics().await);
    let cpu = cpu_after
        .unwrap_or_default()
        .saturating_sub(cpu_before.unwrap_or_default());
    let idle_share = idle.as_secs_f64() / 30.0 * (beats.as_secs_f64() + 2.0);
    println!(
        "   idle: {:.2} s of CPU in 30 s (the publish tick, probes, scrapes)",
        idle.as_secs_f64()
    );
    let cpu = cpu.saturating_sub(Duration::from_secs_f64(idle_share));
    println!(
        "   heartbeat of every Node: {n} status updates in {:.1} s; beyond idle the server used {:.2} s of CPU ({:.0} µs per update; {:.2} % of one core if spread over 5 minutes); {} new views published",
        beats.as_secs_f64(),
        cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / n as f64,
        cpu.as_secs_f64() / 300.0 * 100.0,
        after - before
    );

    let (rss_after, _) = server.usage();
    let (bare_after, _) = bare.usage();
    println!(
        "   RSS after the heartbeats: {:.1} MiB with the inventory, {:.1} MiB without",
        mib(rss_after),
        mib(bare_after)
    );

    // A change that matters: one node loses a GPU.
    let name = realistic::node(&template, 0)["metadata"]["name"].clone();
    let name = name.as_str().unwrap_or_default().to_string();
    let lost = json!({"status": {"allocatable": {"nvidia.com/gpu": "7"}}});
    nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&lost))
        .await
        .expect("allocatable patch");
    let seen = wait_metric(
        &server,
        "gangplank_cluster_inventory_publishes_total{cache=\"summary\"}",
        after + 1.0,
    )
    .await;
    println!("   one Node's allocatable changed: publishes {after} -> {seen}");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("   load average: {}", load.trim());
}

/// Node `i`: realistic's (a class per 64 nodes), or with `INVENTORY_GRAIN=g` issue 44's
/// fixture (one node group in four zones, a class per `g` nodes; 1: a class per node).
fn node_at(template: &Value, i: usize) -> Value {
    let grain = std::env::var("INVENTORY_GRAIN").ok();
    match grain.and_then(|g| g.parse().ok()) {
        Some(g) => realistic::node_grained(template, i, g),
        None => realistic::node(template, i),
    }
}

/// Creates `node` (metadata, spec) and then its status as the kubelet would.
async fn create(nodes: &Api<Node>, node: &Value) {
    let mut object = node.clone();
    let status = object
        .as_object_mut()
        .and_then(|o| o.remove("status"))
        .unwrap_or(Value::Null);
    if let Some(meta) = object["metadata"].as_object_mut() {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(field);
        }
    }
    let object: Node = serde_json::from_value(object).expect("Node");
    let name = object.metadata.name.clone().unwrap_or_default();
    nodes
        .create(&PostParams::default(), &object)
        .await
        .expect("Node created");
    nodes
        .patch_status(
            &name,
            &PatchParams {
                field_manager: Some("kubelet".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&json!({ "status": status })),
        )
        .await
        .expect("Node status");
}

fn conditions(i: usize) -> Value {
    let time = format!("2026-11-28T20:{:02}:{:02}Z", (i / 60) % 60, i % 60);
    let kinds = [
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
        ("Ready", "True"),
    ];
    let list: Vec<Value> = kinds
        .iter()
        .map(|(t, s)| json!({"type": t, "status": s, "lastHeartbeatTime": time}))
        .collect();
    Value::Array(list)
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Waits until the server's metric `name` is at least `at_least`; its value.
async fn wait_metric(server: &Webhooks, name: &str, at_least: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let value = metric(&server.metrics().await, name);
        if value >= at_least || Instant::now() > deadline {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
