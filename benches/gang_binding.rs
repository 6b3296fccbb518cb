//! Time from `create` to every pod bound, for a 1 + 63 PyTorchJob (`GANG_WORKERS=1023`: a
//! 1 + 1023 one on 1,024 nodes) run by the controller, with
//! Kubernetes-native gang scheduling, with no gang, and with Volcano (when its binaries are
//! there: tests/support/volcano.rs).
//!
//! On one real kube-apiserver + etcd + kube-scheduler (native gang gates on) and one simulated
//! 8-GPU node per pod (tests/support/), each asking for 8 GPUs. For each mode, the controller
//! (`gangplank controller`, this build) runs `GANG_RUNS` jobs one after the other; a run is timed
//! from the job's create to the moment all its pods have `spec.nodeName`, then the job and its
//! pods are deleted (pods forcibly: no kubelet ends them) before the next run.
//!
//! Prints min / median / max per mode.
//!
//! Run: `cargo bench --bench gang_binding` (needs the kube test binaries with kube-scheduler);
//! `GANG_WORKERS=1023 GANG_RUNS=3 cargo bench --bench gang_binding` for the 1,024-pod gang.
//! Figures: BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde_json::json;
use support::controller::Controller;
use support::nodes::{create_nodes, SimNode};
use support::{jobs, ControlPlane, Crds, Scheduling};

/// The gang's Workers (`GANG_WORKERS`, default 63: a 1 + 63 job; 1023 for a frontier-size
/// gang), its runs per mode (`GANG_RUNS`, default 5).
fn workers() -> u32 {
    env_or("GANG_WORKERS", 63)
}

fn runs() -> usize {
    env_or("GANG_RUNS", 5)
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How long a run may take: two minutes, plus a second per 8 pods for big gangs.
fn limit(pods: usize) -> Duration {
    Duration::from_secs(120 + pods as u64 / 8)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let Some(assets) = support::assets::require("gang_binding") else {
        return;
    };
    if let Some(why) = assets.scheduler_missing() {
        support::skip(&format!("gang_binding: {why}"));
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    {
        let plane = ControlPlane::start_with(&assets, Crds::Gangplank, Scheduling::NativeGang);
        let modes = [("native gang", "kubernetes"), ("no gang", "")];
        runtime.block_on(measure(&plane, &modes));
    }
    match support::volcano::find() {
        Ok(_) => {
            let plane = ControlPlane::start_with(&assets, Crds::Gangplank, Scheduling::Volcano);
            runtime.block_on(measure(&plane, &[("Volcano", "volcano")]));
        }
        Err(why) => support::skip(&format!("gang_binding, Volcano: {why}")),
    }
}

/// Runs `GANG_RUNS` jobs per mode (name, `--gang-scheduler` value) on one fresh 8-GPU node
/// per pod.
async fn measure(plane: &ControlPlane, modes: &[(&str, &str)]) {
    let client = plane.client().await;
    let (workers, runs) = (workers(), runs());
    let pods = workers as usize + 1;
    let nodes: Vec<SimNode> = (0..pods)
        .map(|i| SimNode::new(&format!("gpu-{i}")).gpus(8, "NVIDIA-H100-80GB-HBM3"))
        .collect();
    create_nodes(&client, &nodes).await;
    for &(mode, gang) in modes {
        let flag = format!("--gang-scheduler={gang}");
        let args = ["--leader-elect=false", flag.as_str(), "--kinds=PyTorchJob"];
        let controller = Controller::start(plane, &format!("controller-{}", gang.len()), &args);
        let ns = plane.namespace("binding").await;
        let mut times = Vec::new();
        for run in 0..runs {
            times.push(one_run(&client, &ns, &format!("run-{run}"), gang, workers).await);
        }
        drop(controller);
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{mode}: 1 + {workers} pods bound, create → all bound: min {:.0} ms, median {:.0} ms, \
             max {:.0} ms ({runs} runs; load average {})",
            ms(times[0]),
            ms(times[runs / 2]),
            ms(times[runs - 1]),
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim(),
        );
    }
}

/// Creates the job, waits for every pod to be bound, deletes it all; the time to bound.
async fn one_run(
    client: &kube::Client,
    ns: &str,
    name: &str,
    gang: &str,
    workers: u32,
) -> Duration {
    let pods_wanted = workers as usize + 1;
    let limit = limit(pods_wanted);
    // A list of 1,024 pods is megabytes: poll a big gang less often (the figure is then
    // late by up to that much).
    let poll = Duration::from_millis(20.max(pods_wanted as u64 / 4));
    let mut job = jobs::gpu_gang(name, workers, "any");
    for r in ["Master", "Worker"] {
        let spec = &mut job["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"];
        spec.as_object_mut().map(|s| s.remove("nodeSelector"));
        // As gangplank's webhook leaves a Volcano job (no webhook runs here).
        if gang == "volcano" {
            spec["schedulerName"] = json!("volcano");
        }
    }
    job["spec"]["runPolicy"] = json!({"cleanPodPolicy": "None"});
    let started = Instant::now();
    jobs::create(client, ns, &job, false)
        .await
        .expect("job created");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let selector = format!("training.kubeflow.org/job-name={name}");
    let params = ListParams::default().labels(&selector);
    let bound = loop {
        let list = pods.list(&params).await.expect("list pods");
        let bound = list
            .items
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .count();
        if bound == pods_wanted {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "{name}: {bound} of {pods_wanted} bound after {limit:?}"
        );
        tokio::time::sleep(poll).await;
    };
    jobs::pytorch_api(client, ns)
        .delete(name, &DeleteParams::default())
        .await
        .expect("job deleted");
    let now = DeleteParams::default().grace_period(0);
    pods.delete_collection(&now, &params)
        .await
        .expect("pods deleted");
    support::wait_for("pods gone", limit, || async {
        let left = pods
            .list(&params)
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        (left == 0).then_some(()).ok_or(format!("{left} left"))
    })
    .await;
    // A Volcano PodGroup left behind would keep its minResources reserved for the next run:
    // wait for the garbage collector to take it. (A native one reserves nothing; it waits
    // on its podgroup-protection finalizer, which no controller here removes.)
    if gang == "volcano" {
        let resource = support::volcano::pod_group();
        let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
        let name = format!("{name}-pytorchjob");
        support::wait_for("PodGroup gone", limit, || async {
            let left = groups.get_opt(&name).await.map_err(|e| e.to_string())?;
            left.is_none()
                .then_some(())
                .ok_or("still there".to_string())
        })
        .await;
    }
    bound
}
