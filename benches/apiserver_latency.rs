//! What gangplank's webhooks add to a create through a real kube-apiserver.
//!
//! Server-side dry-run creates (`?dryRun=All`: admission runs in full, nothing is stored, so
//! every request is alike) of the 1 Master + 8 Worker PyTorchJob, sequential, from one
//! client: first with no webhooks installed, then with deploy/'s webhook pair calling a
//! gangplank that serves one policy doing nothing (the do-nothing baseline), then with the
//! shipped policies. Prints p50, p90, p99 of each and the differences. The jobs: the lean
//! benchmark job and the same job as platforms write it (env, mounts, sidecars, annotations).
//!
//! Run: `cargo bench --bench apiserver_latency` (release build of gangplank). Needs the kube
//! test binaries (tests/support/assets.rs); without them it says why and measures nothing.
//! Figures: BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{jobs, ControlPlane, Crds, Webhooks};

const REQUESTS: usize = 300;
const WARM_UP: usize = 30;
const JOBS: [(&str, &str); 2] = [
    (
        "lean 1+8 PyTorchJob",
        include_str!("data/pytorchjob-9.yaml"),
    ),
    (
        "platform 1+8 PyTorchJob",
        include_str!("data/pytorchjob-9-platform.yaml"),
    ),
];

fn main() {
    // `cargo bench` passes `--bench`; a `cargo test --benches` run passes nothing: stay quiet.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let Some(assets) = support::assets::require("apiserver_latency") else {
        return;
    };
    let control_plane = ControlPlane::start(&assets, Crds::TrainingV1);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(measure(&control_plane));
}

async fn measure(control_plane: &ControlPlane) {
    let namespace = control_plane.namespace("latency").await;
    let client = control_plane.client().await;
    let jobs: Vec<(&str, Value)> = JOBS
        .iter()
        .map(|(name, text)| {
            let mut job: Value = yaml_serde::from_str(text).expect("benchmark job");
            job["metadata"]["namespace"] = namespace.clone().into();
            (*name, job)
        })
        .collect();
    let mut none = Vec::new();
    for (_, job) in &jobs {
        none.push(latencies(&client, &namespace, job).await);
    }
    // The baseline webhook pair: gangplank serving one policy that does nothing.
    let noop_policies = support::repo().join("benches/data/noop-policies");
    let noop_webhooks = Webhooks::install(control_plane, noop_policies).await;
    let mut noop = Vec::new();
    for (_, job) in &jobs {
        noop.push(latencies(&client, &namespace, job).await);
    }
    drop(noop_webhooks);
    let webhooks = Webhooks::install(control_plane, support::repo().join("policies")).await;
    println!(
        "{REQUESTS} sequential server-side dry-run creates each (after {WARM_UP} warm-up), \
         one client, apiserver {}, gangplank at {}",
        control_plane.url, webhooks.url
    );
    for (((name, job), none), noop) in jobs.iter().zip(none).zip(noop) {
        let shipped = latencies(&client, &namespace, job).await;
        report(name, &none, &noop, &shipped);
    }
}

/// Sorted latencies of `REQUESTS` dry-run creates, after `WARM_UP` unmeasured ones.
async fn latencies(client: &kube::Client, namespace: &str, job: &Value) -> Vec<Duration> {
    let mut measured = Vec::with_capacity(REQUESTS);
    for i in 0..WARM_UP + REQUESTS {
        let start = Instant::now();
        jobs::create(client, namespace, job, true)
            .await
            .unwrap_or_else(|e| panic!("dry-run create refused: {e}"));
        if i >= WARM_UP {
            measured.push(start.elapsed());
        }
    }
    measured.sort();
    measured
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let index = (sorted.len() * p / 100).min(sorted.len().saturating_sub(1));
    sorted.get(index).copied().unwrap_or_default()
}

fn report(name: &str, none: &[Duration], noop: &[Duration], shipped: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("{name}:          no webhooks   do-nothing pair   gangplank   added by gangplank");
    for p in [50, 90, 99] {
        let (a, b, c) = (
            percentile(none, p),
            percentile(noop, p),
            percentile(shipped, p),
        );
        println!(
            "  p{p}:  {:>14.2} ms {:>14.2} ms {:>9.2} ms {:>+14.2} ms",
            ms(a),
            ms(b),
            ms(c),
            ms(c) - ms(a)
        );
    }
}
