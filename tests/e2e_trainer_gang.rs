//! Kubeflow Trainer v2.3.0's Volcano gangs against Volcano's real vc-scheduler (v1.16): a
//! runtime whose replicatedJobs start one after another never forms its gang.
//!
//! With `podGroupPolicy: volcano`, the Trainer's Volcano plugin
//! (kubeflow/trainer v2.3.0 `pkg/runtime/framework/plugins/volcano/volcano.go`) makes one
//! `scheduling.volcano.sh/v1beta1` PodGroup named after the TrainJob, in queue `default`
//! unless the queue annotation says otherwise, with `minMember` the sum of the pod counts of
//! all the runtime's replicatedJobs, initializers included, and `minResources` the sum of
//! requests × count; every pod gets the annotation `scheduling.k8s.io/group-name:
//! <trainjob>` and `schedulerName: volcano`. JobSet, though, creates a replicatedJob with
//! `dependsOn` only once its dependency has reached the status named there. So:
//! - `torch-distributed-with-cache` (a 1-pod `dataset-initializer`, then a `node` job of N
//!   pods that `dependsOn` it `Complete`) has a gang of 1 + N while only the initializer's
//!   pod exists: Volcano never binds it, the initializer never completes, and the nodes are
//!   never created;
//! - the MPI runtimes (`deepspeed-distributed`, `mpi-distributed`: a `launcher` that
//!   `dependsOn` `node` `Ready`) have a gang of N + 1 while only the N node pods exist: none
//!   is bound, so none is ever Ready.
//!
//! No Trainer or JobSet controller runs here: each test makes the PodGroup as the Trainer
//! would and the pods JobSet would have made by then (its labels, the plugin's annotation and
//! scheduler name), on nodes of the test's own pool (`pool=<namespace>`) with room for the
//! whole gang. The controls give the same pods a PodGroup of what runs at once (the first
//! wave alone), and Volcano binds them; and each deadlocked gang binds whole once the pods
//! JobSet holds back are created too, so only the missing pods keep it waiting.
//!
//! No kubelet runs: bound means `spec.nodeName` set by vc-scheduler. Skipped, with the
//! reason, without Volcano's binaries.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{json, Value};
use support::nodes::create_gpu_pool;
use support::scheduler::Placement;
use support::volcano::{pod_group, SCHEDULER_NAME};
use support::{jobs, ControlPlane, Crds, Scheduling};

e2e_suite!(
    "e2e_trainer_gang",
    [
        a_trainer_gang_with_an_initializer_never_binds_its_first_pod,
        the_same_pod_in_a_gang_of_its_first_wave_binds,
        an_mpi_gang_whose_launcher_waits_for_the_nodes_binds_no_node,
        the_same_node_pods_in_a_gang_of_their_own_bind,
    ],
    support::volcano::requirement
);

/// Volcano schedules every second; a fitting gang is bound within a few seconds here.
const LIMIT: Duration = Duration::from_secs(60);
/// How long a gang that is short of pods is watched for a bound pod: some 25 of
/// vc-scheduler's 1 s sessions.
const WINDOW: Duration = Duration::from_secs(25);
/// JobSet's labels on its pods.
const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
const REPLICATED_JOB: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// The Trainer's Volcano plugin's pod annotation.
const GROUP_NAME: &str = "scheduling.k8s.io/group-name";
/// Pods of `node` in these tests: N of them, each a whole 8-GPU node of the pool.
const NODES: u32 = 2;

/// The suite's Volcano control plane (no gangplank controller: the tests make the PodGroups).
fn plane() -> &'static ControlPlane {
    let assets = support::assets::get();
    ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::Volcano)
}

/// One replicatedJob of a runtime as the Trainer renders it: its pod count and one pod's
/// requests.
#[derive(Debug, Clone, Copy)]
struct ReplicatedJob {
    name: &'static str,
    pods: u32,
    image: &'static str,
    cpu: u32,
    gpus: u32,
}

/// `torch-distributed-with-cache`'s first job (a modest cpu request, no GPU).
const DATASET_INITIALIZER: ReplicatedJob = ReplicatedJob {
    name: "dataset-initializer",
    pods: 1,
    image: "ghcr.io/kubeflow/trainer/dataset-initializer:v2.3.0",
    cpu: 2,
    gpus: 0,
};

/// `node` with `numNodes` [`NODES`], a whole 8-GPU node per pod.
const NODE: ReplicatedJob = ReplicatedJob {
    name: "node",
    pods: NODES,
    image: "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
    cpu: 16,
    gpus: 8,
};

/// The MPI runtimes' `launcher` (`dependsOn: [{name: node, status: Ready}]`).
const LAUNCHER: ReplicatedJob = ReplicatedJob {
    name: "launcher",
    pods: 1,
    image: "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0",
    cpu: 1,
    gpus: 0,
};

/// The PodGroup the Trainer's Volcano plugin makes for TrainJob `trainjob` of `jobs`:
/// `minMember` Σ pods, `minResources` Σ requests × pods, queue `default`. The stored object.
async fn create_pod_group(
    client: &kube::Client,
    ns: &str,
    trainjob: &str,
    jobs: &[ReplicatedJob],
) -> Value {
    let members: u32 = jobs.iter().map(|j| j.pods).sum();
    let cpu: u32 = jobs.iter().map(|j| j.cpu * j.pods).sum();
    let gpus: u32 = jobs.iter().map(|j| j.gpus * j.pods).sum();
    let mut resources = json!({"cpu": cpu.to_string()});
    if gpus > 0 {
        resources["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    let pg: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": trainjob, "namespace": ns},
        "spec": {"minMember": members, "minResources": resources, "queue": "default"},
    }))
    .unwrap_or_else(|e| panic!("PodGroup object: {e}"));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &pod_group());
    let created = api
        .create(&PostParams::default(), &pg)
        .await
        .unwrap_or_else(|e| panic!("create PodGroup {ns}/{trainjob}: {e}"));
    serde_json::to_value(created).unwrap_or_default()
}

/// Creates the pods JobSet makes for `job` of `trainjob` (one Job, its pods indexed from 0),
/// on the nodes labelled `pool=<ns>`.
async fn create_pods(client: &kube::Client, ns: &str, trainjob: &str, job: ReplicatedJob) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for index in 0..job.pods {
        let name = format!("{trainjob}-{}-0-{index}", job.name);
        let mut resources = json!({"requests": {"cpu": job.cpu.to_string()}});
        if job.gpus > 0 {
            let gpus = json!({"nvidia.com/gpu": job.gpus.to_string()});
            resources["requests"]["nvidia.com/gpu"] = gpus["nvidia.com/gpu"].clone();
            resources["limits"] = gpus;
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "labels": {JOBSET_NAME: trainjob, REPLICATED_JOB: job.name},
                "annotations": {GROUP_NAME: trainjob},
            },
            "spec": {
                "schedulerName": SCHEDULER_NAME,
                "nodeSelector": {"pool": ns},
                "restartPolicy": "Never",
                "containers": [{"name": job.name, "image": job.image, "resources": resources}],
            },
        }))
        .unwrap_or_else(|e| panic!("Pod object {name}: {e}"));
        pods.create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("create pod {ns}/{name}: {e}"));
    }
}

fn selector(trainjob: &str) -> String {
    format!("{JOBSET_NAME}={trainjob}")
}

/// Watches `trainjob`'s pods for [`WINDOW`] while the control plane runs: none may be bound.
async fn assert_none_bound_for_a_while(client: &kube::Client, ns: &str, trainjob: &str) {
    let started = Instant::now();
    while started.elapsed() < WINDOW {
        if let Err(exited) = plane().check_running() {
            panic!("a control-plane process exited, so nothing here is Volcano's: {exited}");
        }
        let now = Placement::read(client, ns, &selector(trainjob)).await;
        assert!(
            now.bound.is_empty(),
            "Volcano bound a pod of a gang that is short of pods: {}",
            now.summary()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until `trainjob` has `count` pods, every one bound; how long that took from `since`.
async fn wait_bound(
    client: &kube::Client,
    ns: &str,
    trainjob: &str,
    count: usize,
    since: Instant,
) -> Duration {
    let what = format!("{count} pods of {ns}/{trainjob} bound");
    support::wait_for(&what, LIMIT, || async {
        let placement = Placement::read(client, ns, &selector(trainjob)).await;
        let all = placement.bound.len() == count && placement.pending.is_empty();
        all.then(|| since.elapsed())
            .ok_or_else(|| placement.summary())
    })
    .await
}

/// What Volcano says about `trainjob`'s gang, printed: the PodGroup's status, each pod's
/// `PodScheduled` condition, and every Event of the namespace. The PodGroup.
async fn say_why(client: &kube::Client, ns: &str, trainjob: &str) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &pod_group());
    let pg = api
        .get(trainjob)
        .await
        .unwrap_or_else(|e| panic!("get PodGroup {ns}/{trainjob}: {e}"));
    let pg = serde_json::to_value(pg).unwrap_or_default();
    let placement = Placement::read(client, ns, &selector(trainjob)).await;
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let listed = events.list(&ListParams::default()).await;
    let lines: Vec<String> = listed
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let kind = e.involved_object.kind.unwrap_or_default();
            let name = e.involved_object.name.unwrap_or_default();
            let (reason, count) = (e.reason.unwrap_or_default(), e.count.unwrap_or(1));
            let message = e.message.unwrap_or_default();
            format!("  {kind}/{name} {reason} (×{count}): {message}")
        })
        .collect();
    eprintln!(
        "{ns}/{trainjob}: PodGroup spec {}\n  status {}\n  pods: {}\n  Events:\n{}",
        pg["spec"],
        pg["status"],
        placement.summary(),
        lines.join("\n")
    );
    pg
}

/// Volcano's word on a gang short of pods, printed and checked: the PodGroup is `Inqueue` (its
/// `minResources` fit, so the enqueue action admitted it), and the PodGroup and every pod are
/// unschedulable because `pods` exist of the `min_member` the gang needs, not for want of room.
async fn assert_waits_for_pods(
    client: &kube::Client,
    ns: &str,
    trainjob: &str,
    pods: u32,
    min_member: u32,
) {
    let pg = say_why(client, ns, trainjob).await;
    assert_eq!(
        pg["status"]["phase"], "Inqueue",
        "enqueued, never Running: {pg}"
    );
    let why = format!("pod group is not ready, {pods} Pending, {min_member} minAvailable");
    let unschedulable = jobs::true_condition(&pg, "Unschedulable").unwrap_or_default();
    let message = jobs::get_str(&unschedulable, "/message");
    assert!(
        message.contains(&why),
        "PodGroup {trainjob}: {why:?} in {pg}"
    );
    let placement = Placement::read(client, ns, &selector(trainjob)).await;
    assert_eq!(
        placement.pending.len(),
        pods as usize,
        "{}",
        placement.summary()
    );
    for (pod, message) in &placement.pending {
        assert!(message.contains(&why), "pod {pod}: {why:?} in {message:?}");
    }
}

/// A gang of `first` and `held` (the runtime's jobs as JobSet starts them: `held` once `first`
/// has reached the status its `dependsOn` names), in a namespace of its own: with only
/// `first`'s pods, none is bound for [`WINDOW`] and Volcano says why; with `held`'s pods as
/// well (which JobSet never creates then), the gang binds whole.
async fn a_gang_short_of_its_held_pods(prefix: &str, first: ReplicatedJob, held: ReplicatedJob) {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace(prefix).await;
    // Room for the whole gang: NODES 8-GPU nodes and one more.
    create_gpu_pool(&client, &ns, NODES as usize + 1).await;
    let pg = create_pod_group(&client, &ns, prefix, &[first, held]).await;
    let gang = first.pods + held.pods;
    assert_eq!(pg["spec"]["minMember"], gang, "{pg}");
    create_pods(&client, &ns, prefix, first).await;

    assert_none_bound_for_a_while(&client, &ns, prefix).await;
    assert_waits_for_pods(&client, &ns, prefix, first.pods, gang).await;

    let since = Instant::now();
    create_pods(&client, &ns, prefix, held).await;
    let took = wait_bound(&client, &ns, prefix, gang as usize, since).await;
    eprintln!(
        "{ns}/{prefix}: with the {} pods created as well, all bound in {took:?}",
        held.name
    );
}

/// `first`'s pods alone in a gang of their own (minMember their count), in a namespace of its
/// own: Volcano binds them all.
async fn a_gang_of_the_first_wave(prefix: &str, first: ReplicatedJob) {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace(prefix).await;
    create_gpu_pool(&client, &ns, NODES as usize + 1).await;
    let pg = create_pod_group(&client, &ns, prefix, &[first]).await;
    assert_eq!(pg["spec"]["minMember"], first.pods, "{pg}");

    let since = Instant::now();
    create_pods(&client, &ns, prefix, first).await;
    let took = wait_bound(&client, &ns, prefix, first.pods as usize, since).await;
    let pods = first.pods;
    eprintln!(
        "{ns}/{prefix}: {pods} {} pod(s) in a gang of {pods} bound in {took:?}",
        first.name
    );
    say_why(&client, &ns, prefix).await;
}

/// `torch-distributed-with-cache`: JobSet creates `node` once `dataset-initializer` is
/// Complete, so the initializer's pod is alone in a gang of 1 + N.
async fn a_trainer_gang_with_an_initializer_never_binds_its_first_pod() {
    a_gang_short_of_its_held_pods("cache", DATASET_INITIALIZER, NODE).await;
}

async fn the_same_pod_in_a_gang_of_its_first_wave_binds() {
    a_gang_of_the_first_wave("cache-first-wave", DATASET_INITIALIZER).await;
}

/// The MPI runtimes: JobSet creates `launcher` once `node` is Ready, so the N node pods are
/// alone in a gang of N + 1.
async fn an_mpi_gang_whose_launcher_waits_for_the_nodes_binds_no_node() {
    a_gang_short_of_its_held_pods("mpi", NODE, LAUNCHER).await;
}

async fn the_same_node_pods_in_a_gang_of_their_own_bind() {
    a_gang_of_the_first_wave("mpi-first-wave", NODE).await;
}
