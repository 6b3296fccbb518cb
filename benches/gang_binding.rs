//! Time from `create` to every pod bound, for a 1 + 63 PyTorchJob run by the controller, with
//! Kubernetes-native gang scheduling, with no gang, and with Volcano (when its binaries are
//! there: tests/support/volcano.rs).
//!
//! On one real kube-apiserver + etcd + kube-scheduler (native gang gates on) and 64 simulated
//! 8-GPU nodes (tests/support/), each pod asking for 8 GPUs. For each mode, the controller
//! (`gangplank controller`, this build) runs `RUNS` jobs one after the other; a run is timed
//! from the job's create to the moment all 64 pods have `spec.nodeName`, then the job and its
//! pods are deleted (pods forcibly: no kubelet ends them) before the next run.
//!
//! Prints min / median / max per mode.
//!
//! Run: `cargo bench --bench gang_binding` (needs the kube test binaries with kube-scheduler).
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

const WORKERS: u32 = 63;
const PODS: usize = WORKERS as usize + 1;
const RUNS: usize = 5;
const LIMIT: Duration = Duration::from_secs(120);

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

/// Runs `RUNS` jobs per mode (name, `--gang-scheduler` value) on 64 fresh nodes.
async fn measure(plane: &ControlPlane, modes: &[(&str, &str)]) {
    let client = plane.client().await;
    let nodes: Vec<SimNode> = (0..PODS)
        .map(|i| SimNode::new(&format!("gpu-{i}")).gpus(8, "NVIDIA-H100-80GB-HBM3"))
        .collect();
    create_nodes(&client, &nodes).await;
    for &(mode, gang) in modes {
        let flag = format!("--gang-scheduler={gang}");
        let args = ["--leader-elect=false", flag.as_str(), "--kinds=PyTorchJob"];
        let controller = Controller::start(plane, &format!("controller-{}", gang.len()), &args);
        let ns = plane.namespace("binding").await;
        let mut times = Vec::new();
        for run in 0..RUNS {
            times.push(one_run(&client, &ns, &format!("run-{run}"), gang).await);
        }
        drop(controller);
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{mode}: 1 + {WORKERS} pods bound, create → all bound: min {:.0} ms, median {:.0} ms, \
             max {:.0} ms ({RUNS} runs)",
            ms(times[0]),
            ms(times[RUNS / 2]),
            ms(times[RUNS - 1]),
        );
    }
}

/// Creates the job, waits for every pod to be bound, deletes it all; the time to bound.
async fn one_run(client: &kube::Client, ns: &str, name: &str, gang: &str) -> Duration {
    let mut job = jobs::gpu_gang(name, WORKERS, "any");
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
        if bound == PODS {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < LIMIT,
            "{name}: {bound} of {PODS} bound after {LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    jobs::pytorch_api(client, ns)
        .delete(name, &DeleteParams::default())
        .await
        .expect("job deleted");
    let now = DeleteParams::default().grace_period(0);
    pods.delete_collection(&now, &params)
        .await
        .expect("pods deleted");
    support::wait_for("pods gone", LIMIT, || async {
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
        support::wait_for("PodGroup gone", LIMIT, || async {
            let left = groups.get_opt(&name).await.map_err(|e| e.to_string())?;
            left.is_none()
                .then_some(())
                .ok_or("still there".to_string())
        })
        .await;
    }
    bound
}
