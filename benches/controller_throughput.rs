//! How fast the lifecycle controller turns jobs into pods and Services, against the
//! apiserver's own rate for pods created directly.
//!
//! On one real kube-apiserver + etcd (tests/support/), in one run:
//! 1. raw: 1,600 pods created directly from one client, 16 requests in flight;
//! 2. controller: 200 PyTorchJobs of 1 Master + 7 Workers created (16 in flight), timed from
//!    the first create until all 1,600 pods and 1,600 headless Services exist. The
//!    controller (`gangplank controller`, release build) runs 16 reconciles at once.
//!
//! Prints both rates in objects/s, their ratio (target ≥ 80 %: the controller adds little
//! on top of the API writes it must make), and the controller's peak RSS and its RSS with
//! every job in flight.
//!
//! Run: `cargo bench --bench controller_throughput` (needs the kube test binaries);
//! `CONTROLLER_JOBS=1000` for 1,000 jobs (8,000 pods and Services).
//! Figures: BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use support::controller::Controller;
use support::{jobs, ControlPlane, Crds};

const WORKERS: usize = 7;
const IN_FLIGHT: usize = 16;

/// Jobs of 1 Master + 7 Workers (`CONTROLLER_JOBS`, default 200; 1,000 for the issue 33
/// target of 8,000 pods in flight).
fn jobs_count() -> usize {
    std::env::var("CONTROLLER_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let Some(assets) = support::assets::require("controller_throughput") else {
        return;
    };
    let control_plane = ControlPlane::start(&assets, Crds::Gangplank);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(measure(&control_plane));
}

async fn measure(control_plane: &ControlPlane) {
    let jobs_count = jobs_count();
    let pods_count = jobs_count * (WORKERS + 1);
    let client = control_plane.client().await;
    let raw_ns = control_plane.namespace("raw").await;
    let raw = raw_pods(&client, &raw_ns, pods_count).await;
    let raw_rate = pods_count as f64 / raw.as_secs_f64();
    println!(
        "raw: {pods_count} pods in {:.2} s = {raw_rate:.0} pods/s ({IN_FLIGHT} in flight, one client)",
        raw.as_secs_f64()
    );

    let ns = control_plane.namespace("jobs").await;
    let args = [
        "--leader-elect=false",
        "--gang-scheduler=",
        "--kinds=PyTorchJob",
    ];
    let controller = Controller::start(control_plane, "controller-bench", &args);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (elapsed, peak_rss) = controller_run(&client, &ns, &controller, jobs_count).await;
    let objects = 2 * pods_count;
    let rate = objects as f64 / elapsed.as_secs_f64();
    println!(
        "controller: {jobs_count} jobs → {pods_count} pods + {pods_count} Services in {:.2} s = {rate:.0} objects/s",
        elapsed.as_secs_f64()
    );
    println!("ratio to the raw rate: {:.0} %", 100.0 * rate / raw_rate);
    println!("controller peak RSS: {:.1} MiB", peak_rss as f64 / 1024.0);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let settled = controller.process.server_rss_kib().unwrap_or(0);
    println!(
        "controller RSS 5 s later, {jobs_count} jobs in flight: {:.1} MiB",
        settled as f64 / 1024.0
    );
    let cpu = controller.process.server_cpu().unwrap_or_default();
    println!(
        "controller CPU (user + system, whole run): {:.2} s",
        cpu.as_secs_f64()
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let recorded = events
        .list_metadata(&ListParams::default())
        .await
        .map_or(0, |l| l.items.len());
    println!("Events recorded on the jobs: {recorded}");
}

async fn raw_pods(client: &kube::Client, ns: &str, count: usize) -> Duration {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                let pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("raw-{i}"), "labels": {"bench": "raw"}},
                    "spec": {"containers": [{"name": "pytorch", "image": jobs::IMAGE,
                        "env": [{"name": "RANK", "value": i.to_string()}]}]},
                }))
                .expect("pod");
                api.create(&PostParams::default(), &pod)
                    .await
                    .expect("raw pod created");
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    started.elapsed()
}

/// Creates the jobs and waits for every pod and Service; the time and the controller's
/// peak RSS in KiB.
async fn controller_run(
    client: &kube::Client,
    ns: &str,
    controller: &Controller,
    jobs_count: usize,
) -> (Duration, u64) {
    let pods_count = jobs_count * (WORKERS + 1);
    let started = Instant::now();
    futures::stream::iter(0..jobs_count)
        .map(|i| async move {
            let mut job = jobs::pytorch_job(&format!("job-{i}"), 1);
            job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = WORKERS.into();
            jobs::create(client, ns, &job, false)
                .await
                .expect("job created");
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let mut peak_rss = 0;
    loop {
        peak_rss = peak_rss.max(controller.process.server_rss_kib().unwrap_or(0));
        let params = ListParams::default();
        let pod_count = pods
            .list_metadata(&params)
            .await
            .map_or(0, |l| l.items.len());
        let service_count = services
            .list_metadata(&params)
            .await
            .map_or(0, |l| l.items.len());
        if pod_count >= pods_count && service_count >= pods_count {
            return (started.elapsed(), peak_rss);
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "stuck at {pod_count} pods, {service_count} Services:\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
