//! `gangplank controller --gang-scheduler scheduler-plugins-scheduler` against the real
//! Coscheduling plugin of scheduler-plugins (kube-scheduler v1.36.2 built with it, upstream's
//! sample configuration) on simulated nodes: the controller's `scheduling.x-k8s.io/v1alpha1`
//! PodGroups are what the plugin needs (minMember, minResources, scheduleTimeoutSeconds),
//! the plugin binds the gang whole or not at all, and a gang it will not place says the
//! plugin's own reason on the job as soon as the plugin gives it.
//!
//! The plugin writes nothing on its PodGroup (its status is scheduler-plugins' controller's,
//! not run here) and records no Event on it: its reason is on the pods' PodScheduled
//! condition, which the controller carries to the job (`watchdog::gang_reason`).
//!
//! Deletion is the garbage collector's, so kube-controller-manager runs too. Every test has
//! its own node pool (`pool=<namespace>`, selected by the job), so the tests run side by
//! side; the plugin's minResources check counts every node of the cluster, so the tests that
//! reach its Filter give it room their own pools alone provide (a cordoned node counts there,
//! and holds no pod). Skipped, with the reason, without the Coscheduling assets.

mod support;

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};
use support::controller::{pods_of, Controller};
use support::coscheduling::{pod_group, SCHEDULER_NAME};
use support::nodes::{create_nodes, gpu_pool};
use support::scheduler::Placement;
use support::volcano::{reap, wait_bound};
use support::{jobs, ControlPlane, Crds, Scheduling};

e2e_suite!(
    "e2e_coscheduling",
    [
        a_pytorch_job_gets_a_pod_group_coscheduling_binds_whole,
        a_gang_that_cannot_fit_binds_no_pod_and_the_job_says_the_plugins_reason,
        min_resources_larger_than_the_cluster_are_refused_before_any_pod_binds,
        schedule_timeout_seconds_reach_the_pod_group_and_end_a_stuck_gang_at_its_deadline,
    ],
    support::kueue::coscheduling_requirement
);

/// A fitting gang is bound within a few seconds here; a reason is given within one.
const LIMIT: Duration = Duration::from_secs(60);
const GANG_SCHEDULER: &str = "--gang-scheduler=scheduler-plugins-scheduler";
const CONTROLLER_ARGS: [&str; 2] = ["--leader-elect=false", GANG_SCHEDULER];

/// The shared Coscheduling plane with `gangplank controller --gang-scheduler
/// scheduler-plugins-scheduler`.
fn plane() -> &'static ControlPlane {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::Coscheduling);
    CONTROLLER
        .get_or_init(|| Controller::start(plane, "controller-coscheduling", &CONTROLLER_ARGS));
    plane
}

/// The job's PodGroup `<job>-pytorchjob`, once it exists.
async fn wait_pod_group(client: &kube::Client, ns: &str, job: &str) -> Value {
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), ns, &pod_group());
    let name = format!("{job}-pytorchjob");
    support::wait_for(&format!("PodGroup {ns}/{name}"), LIMIT, || async {
        match api.get_opt(&name).await {
            Ok(Some(pg)) => serde_json::to_value(pg).map_err(|e| e.to_string()),
            Ok(None) => Err("not created".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}

/// `count` 8-GPU nodes labelled `pool=<ns>`, the last `cordoned` of them cordoned.
async fn create_pool(
    client: &kube::Client,
    ns: &str,
    count: usize,
    cordoned: usize,
) -> Vec<String> {
    let mut nodes = gpu_pool(ns, count);
    for node in nodes.iter_mut().rev().take(cordoned) {
        *node = node.clone().cordoned();
    }
    create_nodes(client, &nodes).await;
    nodes.into_iter().map(|n| n.name).collect()
}

/// Uncordons `node` (`kubectl uncordon`: spec.unschedulable off, and the taint node-lifecycle
/// would take off with it).
async fn uncordon(client: &kube::Client, node: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({"spec": {"unschedulable": false, "taints": []}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("uncordon {node}: {e}"));
}

fn condition<'a>(job: &'a Value, type_: &str) -> Option<&'a Value> {
    job["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Waits until job `name`'s Created condition has reason `PyTorchJobUnschedulable` and a
/// message containing every one of `parts`, asserting meanwhile that no pod of the job is
/// bound; the message.
async fn wait_unschedulable(client: &kube::Client, ns: &str, name: &str, parts: &[&str]) -> String {
    let api = jobs::pytorch_api(client, ns);
    let what = format!("{name}'s Created condition names the plugin's reason {parts:?}");
    let started = Instant::now();
    let message = support::wait_for(&what, LIMIT, || async {
        let placement = Placement::read(client, ns, &jobs::selector(name)).await;
        assert!(
            placement.bound.is_empty(),
            "Coscheduling bound part of a gang it does not place: {}",
            placement.summary()
        );
        let job = api.get(name).await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        let created = condition(&job, "Created").cloned().unwrap_or_default();
        let message = jobs::get_str(&created, "/message").to_string();
        let said = created["reason"] == "PyTorchJobUnschedulable"
            && parts.iter().all(|p| message.contains(p));
        said.then_some(message).ok_or_else(|| format!("{created}"))
    })
    .await;
    eprintln!(
        "{ns}/{name} said why {:?} after the wait began: {message}",
        started.elapsed()
    );
    message
}

/// Patches job `name`'s runPolicy.schedulingPolicy with `policy` (a merge).
async fn set_scheduling_policy(client: &kube::Client, ns: &str, name: &str, policy: Value) {
    let patch = json!({"spec": {"runPolicy": {"schedulingPolicy": policy}}});
    jobs::pytorch_api(client, ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patch {name}'s schedulingPolicy: {e}"));
}

async fn a_pytorch_job_gets_a_pod_group_coscheduling_binds_whole() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("fits").await;
    create_pool(&client, &ns, 3, 0).await;
    let created = jobs::create_ok(&client, &ns, &jobs::gpu_gang("fits", 2, &ns)).await;

    let placement = wait_bound(&client, &ns, "fits", 3).await;
    let nodes: BTreeSet<&String> = placement.bound.values().collect();
    assert_eq!(nodes.len(), 3, "one 8-GPU pod per node: {placement:?}");

    let pg = wait_pod_group(&client, &ns, "fits").await;
    assert_eq!(pg["spec"]["minMember"], 3, "{pg}");
    assert_eq!(pg["spec"]["minResources"]["nvidia.com/gpu"], "24", "{pg}");
    let owner = &pg["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], created["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    for pod in pods_of(&client, &ns, "fits").await {
        let spec = pod.spec.clone().unwrap_or_default();
        assert_eq!(spec.scheduler_name.as_deref(), Some(SCHEDULER_NAME));
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("scheduling.x-k8s.io/pod-group")
                .map(String::as_str),
            Some("fits-pytorchjob")
        );
    }
}

async fn a_gang_that_cannot_fit_binds_no_pod_and_the_job_says_the_plugins_reason() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("cordoned").await;
    // Two 8-GPU nodes, one cordoned: the PodGroup's 16 GPUs pass the plugin's cluster-wide
    // minResources check (a cordoned node counts there), one pod fits, the other fits nowhere.
    let nodes = create_pool(&client, &ns, 2, 1).await;
    jobs::create_ok(&client, &ns, &jobs::gpu_gang("waits", 1, &ns)).await;

    // PostFilter rejects the whole group, and the job says so, naming the pod and the nodes.
    let message = wait_unschedulable(
        &client,
        &ns,
        "waits",
        &[
            "PodGroup waits-pytorchjob is unschedulable: pod waits-",
            "nodes are available",
        ],
    )
    .await;
    assert!(message.contains("unschedulable"), "{message}");
    let events = jobs::wait_job_event(&client, &ns, "waits", |e| {
        e.starts_with("PyTorchJobUnschedulable: ")
    })
    .await;
    eprintln!("the waiting gang's Events: {events:?}");

    // Uncordoned, the node takes the other pod: the plugin binds the gang whole, and Created
    // is plain again.
    uncordon(&client, &nodes[1]).await;
    let placement = wait_bound(&client, &ns, "waits", 2).await;
    assert!(placement.all_bound(), "{}", placement.summary());
    let api = jobs::pytorch_api(&client, &ns);
    support::wait_for("Created is plain again", LIMIT, || async {
        let job = api.get("waits").await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        let created = condition(&job, "Created").cloned().unwrap_or_default();
        (created["reason"] == "PyTorchJobCreated")
            .then_some(())
            .ok_or(format!("{created}"))
    })
    .await;
}

async fn min_resources_larger_than_the_cluster_are_refused_before_any_pod_binds() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("min-resources").await;
    create_pool(&client, &ns, 2, 0).await;
    // The gang fits its pool; its minResources ask for more GPUs than the cluster has.
    let mut job = jobs::gpu_gang("huge", 1, &ns);
    job["spec"]["runPolicy"] =
        json!({"schedulingPolicy": {"minResources": {"nvidia.com/gpu": "4096"}}});
    jobs::create_ok(&client, &ns, &job).await;
    let pg = wait_pod_group(&client, &ns, "huge").await;
    assert_eq!(pg["spec"]["minResources"]["nvidia.com/gpu"], "4096", "{pg}");
    assert_eq!(pg["spec"]["minMember"], 2, "{pg}");

    // PreFilter refuses every pod: the plugin's "resource gap", on the job.
    let message =
        wait_unschedulable(&client, &ns, "huge", &["resource gap", "nvidia.com/gpu"]).await;
    assert!(
        message.contains("PodGroup huge-pytorchjob is unschedulable"),
        "{message}"
    );

    // minResources the pool holds: the controller updates the PodGroup, the plugin binds.
    set_scheduling_policy(
        &client,
        &ns,
        "huge",
        json!({"minResources": {"nvidia.com/gpu": "16"}}),
    )
    .await;
    let placement = wait_bound(&client, &ns, "huge", 2).await;
    assert!(placement.all_bound(), "{}", placement.summary());
    let pg = wait_pod_group(&client, &ns, "huge").await;
    assert_eq!(pg["spec"]["minResources"]["nvidia.com/gpu"], "16", "{pg}");
}

async fn schedule_timeout_seconds_reach_the_pod_group_and_end_a_stuck_gang_at_its_deadline() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("deadline").await;
    let nodes = create_pool(&client, &ns, 2, 1).await;
    let deadline_s = 15;
    let mut job = jobs::gpu_gang("late", 1, &ns);
    job["spec"]["runPolicy"] = json!({"schedulingPolicy": {"scheduleTimeoutSeconds": deadline_s}});
    jobs::create_ok(&client, &ns, &job).await;
    // The plugin's Permit waits this long for the rest of the gang; the controller's
    // watchdog ends the job at it.
    let pg = wait_pod_group(&client, &ns, "late").await;
    assert_eq!(pg["spec"]["scheduleTimeoutSeconds"], deadline_s, "{pg}");

    let api = jobs::pytorch_api(&client, &ns);
    let limit = Duration::from_secs(deadline_s) + LIMIT;
    let failed = support::wait_for("the start deadline fails the job", limit, || async {
        reap(&client, &ns).await;
        let job = api.get("late").await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        jobs::true_condition(&job, "Failed").ok_or_else(|| format!("{}", job["status"]))
    })
    .await;
    let message = jobs::get_str(&failed, "/message");
    for part in [
        &format!("did not start within {deadline_s}s"),
        "PodGroup is unschedulable: pod late-",
        "nodes are available",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    assert!(!message.contains("no cause"), "{message}");
    let bound: Vec<String> = Placement::read(&client, &ns, &jobs::selector("late"))
        .await
        .bound
        .into_values()
        .filter(|n| nodes.contains(n))
        .collect();
    assert!(bound.is_empty(), "pods of the failed gang bound: {bound:?}");
}
