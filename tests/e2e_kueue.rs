//! Kueue v0.19.2 in front of gangplank, for real: kueue-manager beside a real kube-apiserver
//! and kube-scheduler (Kubernetes' native gang on), running as its own ServiceAccount, with
//! its webhooks registered for the `kubeflow.org/pytorchjob` integration; gangplank's
//! webhooks (deploy/, the native gang's params) and `gangplank controller --gang-scheduler
//! kubernetes`.
//!
//! What a platform that puts Kueue in front of gangplank meets:
//! - a job created in a LocalQueue is suspended by Kueue's webhook and defaulted by
//!   gangplank's, both kept (gangplank's configuration sorts first; it is called again when
//!   Kueue's webhook changes the job, `reinvocationPolicy: IfNeeded`); Kueue admits it when
//!   quota frees, its UPDATE (suspend off, the flavor's nodeSelector) passes gangplank's
//!   webhooks, and the controller's pods are bound whole by the native gang;
//! - while gangplank serve is down, Kueue's UPDATEs fail closed with the rest: a queued job
//!   waits, admitted but suspended, and starts once gangplank is back; with deploy/kueue (the
//!   component that lets Kueue's own UPDATEs skip the webhooks) it starts at once.
//!
//! Every test has its own namespace, node pool, ResourceFlavor, ClusterQueue and LocalQueue,
//! and its own `gangplank serve` whose webhook configurations match only its namespace, so
//! the tests run side by side (and one may stop its server). Skipped, with the reason and the
//! command that builds them, without the Kueue assets.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use support::controller::Controller;
use support::kueue::{KueueOptions, NAMESPACE, SERVICE_ACCOUNT};
use support::nodes::create_gpu_pool;
use support::scheduler::wait_placement;
use support::{jobs, ControlPlane, Crds, Scheduling, Webhooks};

e2e_suite!(
    "e2e_kueue",
    [
        a_queued_job_is_suspended_then_admitted_with_its_flavor_and_bound_whole,
        while_gangplank_is_down_a_queued_job_waits_and_starts_once_it_is_back,
        with_deploy_kueue_a_queued_job_starts_while_gangplank_is_down,
    ],
    support::kueue::requirement
);

const LIMIT: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(3);

/// The native-gang plane with Kueue and `gangplank controller --gang-scheduler kubernetes`.
fn plane() -> &'static ControlPlane {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    static KUEUE: OnceLock<()> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::NativeGang);
    KUEUE.get_or_init(|| {
        support::on_own_runtime(
            move || async move { plane.start_kueue(&KueueOptions::default()).await },
        )
    });
    let args = ["--leader-elect=false", "--gang-scheduler=kubernetes"];
    CONTROLLER.get_or_init(|| Controller::start(plane, "controller-kueue", &args));
    plane
}

/// gangplank serve for `ns` alone, with the native gang's params and deploy/'s
/// `components`.
async fn gangplank_for(plane: &ControlPlane, ns: &str, components: &[&str]) -> Webhooks {
    let policies = support::policies::with_gang_scheduler(plane, "kubernetes");
    Webhooks::install_with_components(plane, policies, Some(ns), components).await
}

fn suspended(job: &Value) -> bool {
    job["spec"]["runPolicy"]["suspend"] == true
}

/// Two 8-GPU nodes labelled `pool=<ns>` and Kueue's objects for `ns` (see
/// [`support::kueue::gpu_queue`]) with `gpus` GPUs.
async fn queue(plane: &ControlPlane, ns: &str, gpus: u32) {
    create_gpu_pool(&plane.client().await, ns, 2).await;
    support::kueue::gpu_queue(plane, ns, gpus).await;
}

/// A Master and a Worker of 8 GPUs each in LocalQueue `lq`.
fn queued_job(name: &str) -> Value {
    support::kueue::queued_gpu_gang(name, 1)
}

/// Waits until `name` is unsuspended (Kueue admitted it); the job.
async fn wait_started(client: &kube::Client, ns: &str, name: &str, limit: Duration) -> Value {
    support::wait_for(&format!("{ns}/{name} unsuspended"), limit, || async {
        let job = jobs::stored_pytorch_job(client, ns, name).await;
        (!suspended(&job))
            .then_some(job.clone())
            .ok_or(format!("runPolicy: {}", job["spec"]["runPolicy"]))
    })
    .await
}

/// Waits until the Workload of `name` says why its quota is not reserved; the message.
async fn wait_pending_reason(client: &kube::Client, ns: &str, name: &str) -> String {
    support::wait_for(&format!("{ns}/{name} pending on quota"), LIMIT, || async {
        let w = support::kueue::workload(client, ns, name).await;
        let conditions = w["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let reserved = conditions.iter().find(|c| c["type"] == "QuotaReserved");
        match reserved {
            Some(c) if c["status"] == "False" && c["message"].as_str().is_some() => {
                Ok(c["message"].as_str().unwrap_or_default().to_string())
            }
            other => Err(format!("QuotaReserved: {other:?}")),
        }
    })
    .await
}

/// Both pods of `name` bound, on the flavor's nodes.
async fn assert_bound_on_pool(plane: &ControlPlane, ns: &str, name: &str) {
    let placement = wait_placement(plane, ns, &jobs::selector(name), 2, SETTLE, LIMIT).await;
    assert!(placement.all_bound(), "{name}: {}", placement.summary());
    for node in placement.bound.values() {
        assert!(node.starts_with(&format!("{ns}-gpu-")), "{name} on {node}");
    }
}

/// What Kueue's flavor and gangplank's defaults left on a started job.
fn assert_flavor_and_defaults(job: &Value, ns: &str) {
    let name = jobs::get_str(job, "/metadata/name");
    for r in ["Master", "Worker"] {
        let template = &job["spec"]["pytorchReplicaSpecs"][r]["template"];
        assert_eq!(
            template["spec"]["nodeSelector"]["pool"], ns,
            "{name} {r}: the flavor's nodeLabels injected by Kueue: {template}"
        );
    }
    assert_eq!(
        job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "lq",
        "{name}: Kueue's label kept"
    );
    let run_policy = &job["spec"]["runPolicy"];
    assert_eq!(
        run_policy["backoffLimit"], 3,
        "{name}: gangplank's default kept: {run_policy}"
    );
    assert_eq!(
        run_policy["cleanPodPolicy"], "Running",
        "{name}: {run_policy}"
    );
}

async fn a_queued_job_is_suspended_then_admitted_with_its_flavor_and_bound_whole() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("kueue-admit").await;
    queue(plane, &ns, 16).await;
    let webhooks = gangplank_for(plane, &ns, &[]).await;

    // Created: Kueue's webhook suspends both, gangplank's defaults them, both kept.
    for name in ["first", "second"] {
        let created = jobs::create_ok(&client, &ns, &queued_job(name)).await;
        assert!(
            suspended(&created),
            "{name} created suspended: {}",
            created["spec"]
        );
        assert_eq!(
            created["spec"]["runPolicy"]["backoffLimit"], 3,
            "{}",
            created["spec"]
        );
    }
    let first = wait_started(&client, &ns, "first", LIMIT).await;
    assert_flavor_and_defaults(&first, &ns);
    assert_bound_on_pool(plane, &ns, "first").await;

    // The second waits for quota, suspended, no pod made.
    let why = wait_pending_reason(&client, &ns, "second").await;
    assert!(why.contains("nvidia.com/gpu"), "Kueue's reason: {why}");
    let second = jobs::stored_pytorch_job(&client, &ns, "second").await;
    assert!(suspended(&second), "{}", second["spec"]);
    assert!(support::controller::pods_of(&client, &ns, "second")
        .await
        .is_empty());

    // The first leaves: the second is admitted, passes gangplank, and runs.
    jobs::delete_with_pods(&client, &ns, "first").await;
    let second = wait_started(&client, &ns, "second", LIMIT).await;
    assert_flavor_and_defaults(&second, &ns);
    assert_bound_on_pool(plane, &ns, "second").await;
    let unsuspend_reviewed = webhooks.decisions_in(&ns).iter().any(|d| {
        d["span"]["operation"] == "UPDATE"
            && d["span"]["object_name"] == "second"
            && d["span"]["endpoint"] == "validate"
    });
    assert!(
        unsuspend_reviewed,
        "Kueue's UPDATE of second went through gangplank's /validate: {:?}",
        webhooks.decisions_in(&ns)
    );
}

/// A job holding the queue's 16 GPUs, running, and a second one waiting for them.
async fn holder_and_waiting(plane: &ControlPlane, client: &kube::Client, ns: &str) {
    jobs::create_ok(client, ns, &queued_job("holder")).await;
    wait_started(client, ns, "holder", LIMIT).await;
    assert_bound_on_pool(plane, ns, "holder").await;
    jobs::create_ok(client, ns, &queued_job("waiting")).await;
    wait_pending_reason(client, ns, "waiting").await;
}

/// A create while gangplank is down: refused, failing closed, naming gangplank's webhook.
async fn assert_creates_fail_closed(client: &kube::Client, ns: &str) {
    let refused = jobs::create(client, ns, &queued_job("while-down"), false).await;
    let (_, message) = jobs::refusal(refused);
    assert!(message.contains("gangplank.dev"), "{message}");
}

async fn while_gangplank_is_down_a_queued_job_waits_and_starts_once_it_is_back() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("kueue-down").await;
    queue(plane, &ns, 16).await;
    let mut webhooks = gangplank_for(plane, &ns, &[]).await;
    holder_and_waiting(plane, &client, &ns).await;

    webhooks.stop();
    assert_creates_fail_closed(&client, &ns).await;
    jobs::delete_with_pods(&client, &ns, "holder").await;
    // Kueue reserves the quota, but its UPDATE is refused with every other: the job waits.
    support::wait_for("waiting's quota reserved", LIMIT, || async {
        let w = support::kueue::workload(&client, &ns, "waiting").await;
        jobs::true_condition(&w, "QuotaReserved")
            .map(drop)
            .ok_or(format!("{}", w["status"]))
    })
    .await;
    tokio::time::sleep(SETTLE).await;
    let job = jobs::stored_pytorch_job(&client, &ns, "waiting").await;
    assert!(
        suspended(&job),
        "Kueue cannot unsuspend while gangplank is down: {}",
        job["spec"]
    );

    // gangplank is back: Kueue's next try passes, the job runs.
    let _webhooks = gangplank_for(plane, &ns, &[]).await;
    let job = wait_started(&client, &ns, "waiting", Duration::from_secs(120)).await;
    assert_flavor_and_defaults(&job, &ns);
    assert_bound_on_pool(plane, &ns, "waiting").await;
}

async fn with_deploy_kueue_a_queued_job_starts_while_gangplank_is_down() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("kueue-component").await;
    queue(plane, &ns, 16).await;
    let mut webhooks = gangplank_for(plane, &ns, &["kueue"]).await;
    holder_and_waiting(plane, &client, &ns).await;

    webhooks.stop();
    assert_creates_fail_closed(&client, &ns).await;
    jobs::delete_with_pods(&client, &ns, "holder").await;
    // Kueue's own UPDATE skips the webhooks (deploy/kueue's matchCondition on its username).
    let job = wait_started(&client, &ns, "waiting", LIMIT).await;
    assert_flavor_and_defaults(&job, &ns);
    assert_bound_on_pool(plane, &ns, "waiting").await;
    let kueue = format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}");
    let rendered = std::fs::read_to_string(support::repo().join("deploy/kueue/kustomization.yaml"))
        .expect("deploy/kueue/kustomization.yaml");
    assert!(rendered.contains(&kueue), "deploy/kueue names {kueue}");
}
