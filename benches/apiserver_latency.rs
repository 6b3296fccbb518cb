//! What gangplank's webhooks add to a create through a real kube-apiserver.
//!
//! Server-side dry-run creates (`?dryRun=All`: admission runs in full, nothing is stored, so
//! every request is alike) of a 1 Master + 8 Worker PyTorchJob, from one client, one at a
//! time, into three namespaces of one apiserver:
//!
//! - `kube-system`: deploy/'s namespaceSelector keeps every webhook away (no webhooks);
//! - `gangplank-system`: deploy/'s selector skips it too, and a second pair of the same
//!   configurations, scoped to it, calls a gangplank serving one policy that does nothing
//!   (the do-nothing webhook pair);
//! - a plain namespace: deploy/'s pair with the shipped policies.
//!
//! Requests rotate between the three, so machine noise falls on all of them alike. Prints
//! p50, p90, p99 of each and what gangplank adds over no webhooks. Two jobs: the lean
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(measure(&control_plane));
}

async fn measure(control_plane: &ControlPlane) {
    let shipped_ns = control_plane.namespace("latency").await;
    control_plane.create_platform_priority_class();
    let noop_ns = "gangplank-system";
    control_plane.ensure_namespace(noop_ns).await;
    let noop_policies = support::repo().join("benches/data/noop-policies");
    let noop = Webhooks::install_scoped(control_plane, noop_policies, Some(noop_ns)).await;
    let shipped = Webhooks::install(control_plane, support::repo().join("policies")).await;
    println!(
        "{REQUESTS} server-side dry-run creates per namespace (after {WARM_UP} warm-up rounds), \
         rotating between them, one client; gangplank at {} (shipped), {} (do-nothing)",
        shipped.url, noop.url
    );
    let client = control_plane.client().await;
    let namespaces = ["kube-system", noop_ns, shipped_ns.as_str()];
    for (name, text) in JOBS {
        let job: Value = yaml_serde::from_str(text).expect("benchmark job");
        let before = server_time(&shipped).await;
        let [none, noop, measured] = latencies(&client, &namespaces, &job).await;
        report(name, &none, &noop, &measured);
        let after = server_time(&shipped).await;
        let calls = (after.1 - before.1).max(1.0);
        println!(
            "  inside gangplank (shipped): {:.3} ms per webhook call on average ({} calls, \
             request read to response written; warm-up included)",
            (after.0 - before.0) / calls * 1e3,
            calls
        );
    }
}

/// Sorted latencies per namespace of `REQUESTS` dry-run creates each, after `WARM_UP`
/// unmeasured rounds; each round visits the namespaces in a rotated order.
async fn latencies(
    client: &kube::Client,
    namespaces: &[&str; 3],
    job: &Value,
) -> [Vec<Duration>; 3] {
    let mut measured: [Vec<Duration>; 3] = Default::default();
    for round in 0..WARM_UP + REQUESTS {
        for offset in 0..3 {
            let i = (round + offset) % 3;
            let mut job = job.clone();
            job["metadata"]["namespace"] = namespaces[i].into();
            let start = Instant::now();
            jobs::create(client, namespaces[i], &job, true)
                .await
                .unwrap_or_else(|e| panic!("dry-run create in {} refused: {e}", namespaces[i]));
            if round >= WARM_UP {
                measured[i].push(start.elapsed());
            }
        }
    }
    for m in &mut measured {
        m.sort();
    }
    measured
}

/// (sum of seconds, count) of the server's request-duration histogram, both endpoints.
async fn server_time(webhooks: &Webhooks) -> (f64, f64) {
    let metrics = webhooks.metrics().await;
    let total = |suffix: &str| -> f64 {
        let prefix = format!("gangplank_admission_request_duration_seconds_{suffix}{{");
        metrics
            .lines()
            .filter(|line| line.starts_with(&prefix))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (total("sum"), total("count"))
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
