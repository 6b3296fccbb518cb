//! Kueue admits by quota, not by placement (issue 42, "admitted is not placed"): a gang whose
//! queue has the quota but whose nodes cannot hold it is admitted, unsuspended and left half
//! placed by kube-scheduler, with no gang scheduler, for as long as it waits; with Kueue's
//! `waitForPodsReady` the same workload is evicted after the timeout (the job suspended
//! again, its pods deleted) and requeued.
//!
//! One test, in two phases on one plane: kube-scheduler without any gang, `gangplank
//! controller` with none (`--gang-scheduler=`), Kueue v0.19.2 first without
//! waitForPodsReady, then restarted with it. Skipped, with the reason and the command that
//! builds them, without the Kueue assets.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};
use support::controller::Controller;
use support::kueue::KueueOptions;
use support::nodes::create_gpu_pool;
use support::scheduler::wait_placement;
use support::{jobs, ControlPlane, Crds, Scheduling};

e2e_suite!(
    "e2e_kueue_pods_ready",
    [an_admitted_gang_stays_half_placed_until_wait_for_pods_ready_evicts_and_requeues_it],
    support::kueue::requirement
);

const LIMIT: Duration = Duration::from_secs(60);
/// How long a half-placed gang is watched: kube-scheduler retries an unschedulable pod
/// within 10 s at most, so a pod still unbound after this stays unbound.
const WINDOW: Duration = Duration::from_secs(15);
const TIMEOUT: &str = "10s";

fn plane() -> &'static ControlPlane {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::Scheduler);
    CONTROLLER.get_or_init(|| {
        let args = ["--leader-elect=false", "--gang-scheduler="];
        Controller::start(plane, "controller-no-gang", &args)
    });
    plane
}

/// A pod outside Kueue holding one node's 8 GPUs (another team's, or a system workload).
async fn occupy_one_node(plane: &ControlPlane, ns: &str) {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "other-team", "namespace": ns},
        "spec": {"nodeSelector": {"pool": ns}, "containers": [{"name": "c", "image": jobs::IMAGE,
            "resources": {"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 8}}}]},
    });
    plane
        .kubectl_apply(Some(ns), &pod, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let placement = wait_placement(
        plane,
        ns,
        "!training.kubeflow.org/job-name",
        1,
        WINDOW,
        LIMIT,
    )
    .await;
    assert!(placement.all_bound(), "{}", placement.summary());
}

fn condition<'a>(workload: &'a Value, type_: &str) -> Option<&'a Value> {
    let conditions = workload["status"]["conditions"].as_array()?;
    conditions.iter().find(|c| c["type"] == type_)
}

async fn an_admitted_gang_stays_half_placed_until_wait_for_pods_ready_evicts_and_requeues_it() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("pods-ready").await;
    create_gpu_pool(&client, &ns, 2).await;
    occupy_one_node(plane, &ns).await;
    plane.start_kueue(&KueueOptions::default()).await;
    support::kueue::gpu_queue(plane, &ns, 24).await;

    // Without waitForPodsReady: admitted on quota, unsuspended, one pod of three placed.
    // A Master and two Workers of 8 GPUs each: 24, the queue's quota.
    let gang = support::kueue::queued_gpu_gang("half", 2);
    jobs::create_ok(&client, &ns, &gang).await;
    support::wait_for("half admitted", LIMIT, || async {
        let job = jobs::stored_pytorch_job(&client, &ns, "half").await;
        (job["spec"]["runPolicy"]["suspend"] == false)
            .then_some(())
            .ok_or(format!("{}", job["spec"]["runPolicy"]))
    })
    .await;
    let placement = wait_placement(plane, &ns, &jobs::selector("half"), 3, WINDOW, LIMIT).await;
    assert_eq!(
        (placement.bound.len(), placement.pending.len()),
        (1, 2),
        "half placed: {}",
        placement.summary()
    );
    let w = support::kueue::workload(&client, &ns, "half").await;
    assert!(
        condition(&w, "Evicted").is_none_or(|c| c["status"] != "True"),
        "{w}"
    );
    assert_eq!(
        condition(&w, "Admitted").map(|c| c["status"].clone()),
        Some(json!("True")),
        "admitted on quota though half placed: {}",
        w["status"]
    );

    // With waitForPodsReady: evicted after the timeout and requeued.
    plane.stop_kueue();
    let options = KueueOptions {
        wait_for_pods_ready: Some(TIMEOUT),
    };
    plane.start_kueue(&options).await;
    let evicted = support::wait_for("half evicted and requeued", LIMIT * 2, || async {
        let w = support::kueue::workload(&client, &ns, "half").await;
        let requeued = w["status"]["requeueState"]["count"].as_u64().unwrap_or(0);
        (requeued >= 1)
            .then_some(w.clone())
            .ok_or(format!("{}", w["status"]))
    })
    .await;
    let reason = condition(&evicted, "Evicted")
        .or_else(|| condition(&evicted, "Requeued"))
        .map(|c| format!("{} {}", c["reason"], c["message"]))
        .unwrap_or_default();
    assert!(
        reason.contains("PodsReady"),
        "evicted for PodsReady: {reason}; {}",
        evicted["status"]
    );
}
