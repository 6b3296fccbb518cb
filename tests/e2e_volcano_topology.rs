//! Volcano's network-topology-aware gangs (HyperNodes, `networkTopology` hard) against the
//! real vc-scheduler (v1.16) with its `network-topology-aware` plugin on, on simulated nodes:
//! six 8-GPU nodes in two tier-1 HyperNodes of three nodes (leaf-a, leaf-b) under one tier-2
//! spine. A job annotated `gangplank.dev/network-topology: hard:1` gets a PodGroup with
//! `networkTopology {mode: hard, highestTierAllowed: 1}` from `gangplank controller`:
//!
//! - a gang of 4 × 8 GPUs fits the cluster (48 GPUs) but no leaf (24): without the webhooks
//!   Volcano holds it whole (no pod bound); with them it is refused at create, naming the
//!   tiers and the largest HyperNode's room;
//! - a gang of 2 × 8 GPUs fits a leaf: it is admitted and every pod lands inside one leaf.
//!
//! A control plane of its own: HyperNodes are cluster-scoped, and Volcano's overcommit check
//! counts every node of the cluster. Skipped, with the reason, without Volcano's binaries.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{json, Value};
use support::controller::Controller;
use support::nodes::create_gpu_pool;
use support::scheduler::Placement;
use support::volcano::{hypernode, reap, wait_bound, wait_pod_group};
use support::{jobs, ControlPlane, Crds, Scheduling, Webhooks};

e2e_suite!(
    "e2e_volcano_topology",
    [a_hard_gang_lands_inside_one_hypernode_or_waits_whole_and_is_refused_at_create],
    support::volcano::requirement
);

/// Volcano schedules every second; a fitting gang is bound within a few seconds here.
const LIMIT: Duration = Duration::from_secs(60);
/// How long a gang that cannot fit in one HyperNode is watched for a partly bound gang.
const WINDOW: Duration = Duration::from_secs(15);
const CONTROLLER_ARGS: [&str; 2] = ["--leader-elect=false", "--gang-scheduler=volcano"];
const ANNOTATION: &str = "gangplank.dev/network-topology";

/// A 1 + `workers` gang of 8-GPU pods on `pool`, kept inside one tier-1 HyperNode.
fn leaf_gang(name: &str, workers: u32, pool: &str) -> Value {
    let mut job = jobs::gpu_gang(name, workers, pool);
    job["metadata"]["annotations"] = json!({ANNOTATION: "hard:1"});
    job
}

async fn create_hypernode(client: &kube::Client, name: &str, tier: i64, members: Value) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &hypernode());
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": if tier == 1 { "leaf" } else { "spine" }, "members": members},
    }))
    .expect("HyperNode");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create HyperNode {name}: {e}"));
}

fn node_members(nodes: &[String]) -> Value {
    nodes
        .iter()
        .map(|n| json!({"type": "Node", "selector": {"exactMatch": {"name": n}}}))
        .collect()
}

async fn a_hard_gang_lands_inside_one_hypernode_or_waits_whole_and_is_refused_at_create() {
    let assets = support::assets::get();
    let plane = ControlPlane::start_with(&assets, Crds::TrainingV1, Scheduling::VolcanoTopology);
    let _controller = Controller::start(&plane, "controller-topology", &CONTROLLER_ARGS);
    let client = plane.client().await;
    let ns = plane.namespace("topology").await;
    let nodes = create_gpu_pool(&client, &ns, 6).await;
    let (a, b) = nodes.split_at(3);
    create_hypernode(&client, "leaf-a", 1, node_members(a)).await;
    create_hypernode(&client, "leaf-b", 1, node_members(b)).await;
    let leaves = json!([
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-a"}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-b"}}},
    ]);
    create_hypernode(&client, "spine", 2, leaves).await;

    // Without the webhooks: the wide gang's PodGroup carries the topology, and Volcano holds
    // it whole while the narrow one (created after it) is bound inside one leaf.
    jobs::create_ok(&client, &ns, &leaf_gang("wide", 3, &ns)).await;
    jobs::create_ok(&client, &ns, &leaf_gang("narrow", 1, &ns)).await;
    let pg = wait_pod_group(&client, &ns, "wide", "a phase", |pg| {
        !jobs::get_str(pg, "/status/phase").is_empty()
    })
    .await;
    assert_eq!(
        pg["spec"]["networkTopology"],
        json!({"mode": "hard", "highestTierAllowed": 1}),
        "{pg}"
    );
    let narrow = wait_bound(&client, &ns, "narrow", 2).await;
    let used: BTreeSet<&String> = narrow.bound.values().collect();
    let inside = |leaf: &[String]| used.iter().all(|n| leaf.contains(n));
    assert!(
        inside(a) || inside(b),
        "the narrow gang crosses leaves: {}",
        narrow.summary()
    );
    eprintln!("narrow gang bound inside one leaf: {}", narrow.summary());
    // Four nodes stay free (one in the narrow gang's leaf, three in the other): room for the
    // wide gang's four pods, were it not kept inside one leaf.
    assert_eq!(nodes.len() - used.len(), 4, "{}", narrow.summary());
    let started = Instant::now();
    while started.elapsed() < WINDOW {
        reap(&client, &ns).await;
        let wide = Placement::read(&client, &ns, &jobs::selector("wide")).await;
        assert!(
            wide.bound.is_empty(),
            "Volcano bound part of a gang no HyperNode holds: {}",
            wide.summary()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let wide = Placement::read(&client, &ns, &jobs::selector("wide")).await;
    eprintln!("wide gang held whole: {}", wide.summary());

    // With the webhooks (the shipped policies), in a namespace of their own: the wide gang is
    // refused at create, the narrow one admitted.
    let gated = plane.namespace("topology-gated").await;
    let policies = support::repo().join("policies");
    // As support::on_own_runtime, on a scoped thread: this plane is the test's own.
    let _webhooks = std::thread::scope(|scope| {
        let install = scope.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(Webhooks::install_scoped(&plane, policies, Some(&gated)))
        });
        install
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    // Same pool label as the nodes (the namespace above names it).
    let wide = leaf_gang("wide", 3, &ns);
    let message = support::wait_for("the HyperNodes reach the policies", LIMIT, || async {
        match jobs::create(&client, &gated, &wide, true).await {
            Err(kube::Error::Api(s)) if s.message.contains("none can hold them") => Ok(s.message),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (code, refused) = jobs::refusal(jobs::create(&client, &gated, &wide, false).await);
    assert_eq!(code, 403, "{refused}");
    for part in [
        "gangplank.dev/network-topology hard:1 keeps all 4 pods of the gang (1 Master + 3 Worker)",
        "tier 1: leaf-a, leaf-b",
        "(tier 1, 3 nodes) has room for 3 Master pods or 3 Worker pods",
        "Allow tier 2 (spine holds the gang)",
    ] {
        assert!(refused.contains(part), "{part:?} missing from: {refused}");
    }
    eprintln!("refused at create: {message}");
    jobs::create(&client, &gated, &leaf_gang("narrow", 1, &ns), true)
        .await
        .unwrap_or_else(|e| panic!("the narrow gang is admitted: {e}"));
}
