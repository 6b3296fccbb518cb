//! The silent deadlock gangplank exists to stop, with a real kube-scheduler placing the pods.
//!
//! Without gangplank's webhooks (a control plane with kube-scheduler and the controller
//! running jobs without a gang), a job larger than its nodes is half placed and the rest waits
//! forever: the tests show the failure exists here. With the webhooks, the inventory watch
//! and Kubernetes-native gangs (a second control plane, gates on), the same job is refused at
//! create with demand and capacity in the message, and a fitting one is admitted and every
//! pod is bound. The same for a MIG job and for a nodeSelector/toleration mismatch.
//!
//! Every test has its own node pool (`pool=<namespace>`, selected by the job), so the tests
//! of one control plane run side by side. Skipped, with the reason, without kube-scheduler.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};
use support::controller::{wait_pods, Controller};
use support::nodes::{create_nodes, gpu_pool, SimNode, H100};
use support::scheduler::{wait_placement, Placement};
use support::{jobs, ControlPlane, Crds, Scheduling, Webhooks};

e2e_suite!(
    "e2e_scheduling",
    [
        without_gangplank_the_seed_job_is_half_placed_and_stays_so,
        without_gangplank_a_mig_job_is_half_placed,
        without_gangplank_a_selector_mismatch_places_only_the_matching_pods,
        with_gangplank_the_seed_job_is_refused_with_demand_and_capacity,
        with_gangplank_a_fitting_job_is_admitted_and_every_pod_bound,
        with_gangplank_a_mig_job_too_large_is_refused_and_a_fitting_one_bound,
        with_gangplank_a_selector_mismatch_is_refused,
        with_gangplank_a_gang_the_order_decides_is_released_in_the_order_that_places_it,
        a_simulated_node_without_allocatable_is_refused_with_the_reason,
    ],
    support::scheduler::requirement
);

/// How long the scheduler gets to settle a gang (it takes well under a second here), and how
/// long an unbound pod must stay unbound before a test calls it stuck.
const LIMIT: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(5);
const A100: &str = "NVIDIA-A100-SXM4-80GB";
/// The slice of the MIG tests: an A100 80GB holds two.
const MIG: &str = "nvidia.com/mig-3g.40gb";

/// kube-scheduler with its defaults, and the controller with no gang scheduler: what a
/// cluster without gangplank's admission does with a training job.
fn bare() -> &'static ControlPlane {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::Scheduler);
    CONTROLLER.get_or_init(|| Controller::start(plane, "controller-bare", &CONTROLLER_NO_GANG));
    plane
}

const CONTROLLER_NO_GANG: [&str; 2] = ["--leader-elect=false", "--gang-scheduler="];

/// Native gangs on, gangplank's webhooks (the shipped policies with `scheduler: kubernetes`)
/// watching the cluster's nodes, and the controller writing native PodGroups.
fn gated() -> &'static ControlPlane {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    static WEBHOOKS: OnceLock<Webhooks> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::NativeGang);
    WEBHOOKS.get_or_init(|| {
        let policies = support::policies::with_gang_scheduler(plane, "kubernetes");
        support::on_own_runtime(move || Webhooks::install(plane, policies))
    });
    let args = ["--leader-elect=false", "--gang-scheduler=kubernetes"];
    CONTROLLER.get_or_init(|| Controller::start(plane, "controller-native", &args));
    plane
}

/// A PyTorchJob of 1 Master + `workers` Workers, each pod asking for `amount` of `resource`,
/// on the nodes of `pool`.
fn gang(name: &str, workers: u32, resource: &str, amount: u32, pool: &str) -> Value {
    let mut job = jobs::pytorch_job(name, 1);
    for r in ["Master", "Worker"] {
        let spec = &mut job["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"];
        let resources = json!({resource: amount});
        spec["containers"][0]["resources"] = json!({"requests": resources, "limits": resources});
        spec["nodeSelector"] = json!({"pool": pool});
    }
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(workers);
    job
}

fn gpu_gang(name: &str, workers: u32, pool: &str) -> Value {
    let mut job = gang(name, workers, "nvidia.com/gpu", 8, pool);
    job["spec"]["nprocPerNode"] = json!("8");
    job
}

/// `count` A100 nodes, each split into two 3g.40gb MIG slices, labelled `pool=<pool>`.
fn mig_nodes(pool: &str, count: usize) -> Vec<SimNode> {
    (0..count)
        .map(|i| {
            SimNode::new(&format!("{pool}-mig-{i}"))
                .label(support::nodes::GPU_PRODUCT_LABEL, A100)
                .mig("3g.40gb", 2)
                .label("pool", pool)
        })
        .collect()
}

/// Three H100 nodes reserved for training (tainted) and three A100 nodes, all in `pool`.
fn mixed_nodes(pool: &str) -> Vec<SimNode> {
    let mut nodes = Vec::new();
    for i in 0..3 {
        let h100 = SimNode::new(&format!("{pool}-h100-{i}")).gpus(8, H100);
        nodes.push(h100.taint("training", "reserved", "NoSchedule"));
        nodes.push(SimNode::new(&format!("{pool}-a100-{i}")).gpus(8, A100));
    }
    nodes.into_iter().map(|n| n.label("pool", pool)).collect()
}

/// A 1 + `workers` 8-GPU job whose pods select H100 and tolerate the training taint, except
/// the Master, which has neither: the case of a template copied without its scheduling part.
fn h100_gang(name: &str, workers: u32, pool: &str) -> Value {
    let mut job = gpu_gang(name, workers, pool);
    let worker = &mut job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"];
    worker["nodeSelector"][support::nodes::GPU_PRODUCT_LABEL] = json!(H100);
    worker["tolerations"] = json!([{"key": "training", "operator": "Equal", "value": "reserved", "effect": "NoSchedule"}]);
    job
}

/// Runs `job` on the bare control plane and returns where its pods went once settled.
async fn run_bare(pool: &str, nodes: &[SimNode], job: &Value, pods: usize) -> Placement {
    let plane = bare();
    create_nodes(&plane.client().await, nodes).await;
    run(plane, pool, job, pods).await
}

/// Creates `job` (it must be admitted), waits for the controller's `pods` pods and for what
/// the scheduler does with them.
async fn run(plane: &ControlPlane, pool: &str, job: &Value, pods: usize) -> Placement {
    let client = plane.client().await;
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    if let Err(e) = jobs::create(&client, pool, job, false).await {
        panic!("{name} must be admitted: {e}");
    }
    wait_pods(&client, pool, name, pods).await;
    let selector = format!("training.kubeflow.org/job-name={name}");
    wait_placement(plane, pool, &selector, pods, SETTLE, LIMIT).await
}

fn assert_insufficient(placement: &Placement, resource: &str) {
    for (pod, why) in &placement.pending {
        assert!(
            why.contains(&format!("Insufficient {resource}")) || why.contains("didn't match"),
            "{pod} waits for another reason: {why}"
        );
    }
}

async fn without_gangplank_the_seed_job_is_half_placed_and_stays_so() {
    let pool = bare().namespace("seed-bare").await;
    let job = gpu_gang("seed", 8, &pool);
    let placement = run_bare(&pool, &gpu_pool(&pool, 6), &job, 9).await;
    assert_eq!(
        (placement.bound.len(), placement.pending.len()),
        (6, 3),
        "6 nodes of 8 GPUs hold 6 of the 9 pods: {}",
        placement.summary()
    );
    assert_insufficient(&placement, "nvidia.com/gpu");
    // Six nodes' GPUs are held by pods that cannot start training without the other three.
    let nodes: std::collections::BTreeSet<&String> = placement.bound.values().collect();
    assert_eq!(nodes.len(), 6, "one pod per node: {}", placement.summary());
}

async fn without_gangplank_a_mig_job_is_half_placed() {
    let pool = bare().namespace("mig-bare").await;
    let job = gang("mig", 9, MIG, 1, &pool);
    let placement = run_bare(&pool, &mig_nodes(&pool, 4), &job, 10).await;
    assert_eq!(
        (placement.bound.len(), placement.pending.len()),
        (8, 2),
        "4 nodes of 2 slices hold 8 of the 10 one-slice pods: {}",
        placement.summary()
    );
    assert_insufficient(&placement, MIG);
}

async fn without_gangplank_a_selector_mismatch_places_only_the_matching_pods() {
    let pool = bare().namespace("mismatch-bare").await;
    let job = h100_gang("mismatch", 4, &pool);
    let placement = run_bare(&pool, &mixed_nodes(&pool), &job, 5).await;
    // Three Workers fit the three H100 nodes, the Master takes an A100 node, and the fourth
    // Worker waits for an H100 node forever.
    assert_eq!(
        (placement.bound.len(), placement.pending.len()),
        (4, 1),
        "{}",
        placement.summary()
    );
    let waiting = placement.pending.keys().next().expect("one pod waits");
    assert!(waiting.contains("worker"), "{}", placement.summary());
}

/// Creates the nodes on the gated control plane and waits until the webhook's inventory has
/// them: a dry-run of `probe` is refused with `expected` in the message.
async fn gated_nodes(pool: &str, nodes: &[SimNode], probe: &Value, expected: &str) {
    let client = gated().client().await;
    create_nodes(&client, nodes).await;
    support::wait_for(
        "the inventory reaches the policies",
        Duration::from_secs(30),
        || async {
            match jobs::create(&client, pool, probe, true).await {
                Err(kube::Error::Api(s)) if s.message.contains(expected) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

async fn with_gangplank_the_seed_job_is_refused_with_demand_and_capacity() {
    let plane = gated();
    let pool = plane.namespace("seed-gated").await;
    let job = gpu_gang("seed", 8, &pool);
    gated_nodes(&pool, &gpu_pool(&pool, 6), &job, "hold 6 of them").await;
    let client = plane.client().await;
    let (code, message) = jobs::refusal(jobs::create(&client, &pool, &job, false).await);
    assert_eq!(code, 403, "{message}");
    for part in [
        "1 Master + 8 Worker",
        "8 nvidia.com/gpu",
        "6 schedulable nodes",
        "hold 6",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
}

async fn with_gangplank_a_fitting_job_is_admitted_and_every_pod_bound() {
    let plane = gated();
    let pool = plane.namespace("fits-gated").await;
    let probe = gpu_gang("probe", 8, &pool);
    gated_nodes(&pool, &gpu_pool(&pool, 6), &probe, "hold 6 of them").await;
    let job = gpu_gang("fits", 4, &pool);
    let placement = run_gated(&pool, &job, 5).await;
    assert!(placement.all_bound(), "{}", placement.summary());
}

/// Two A100 nodes of 32 cpu and an H100 of 16 cpu, 8 GPUs each, in `pool`; and a 1 + 2 gang
/// of 8 GPUs, 8 cpu and 64Gi per pod whose Workers select the A100s and whose Master selects
/// nothing. kube-scheduler's LeastAllocated scores an A100 higher for the Master (more cpu
/// left): taken first, the Master lands there and a Worker never finds a node; taken last, it
/// gets the H100. As kube-scheduler draws the order (the gang gate releases the pods in Go's
/// map order, kept across retries) the gang was placed 1 time of 4 in the differential.
fn order_decides(pool: &str) -> (Vec<SimNode>, Value) {
    let sized = |node: SimNode, cpu: &str| node.resource("cpu", cpu).resource("memory", "256Gi");
    let nodes = vec![
        sized(SimNode::new(&format!("{pool}-a100-0")).gpus(8, A100), "32"),
        sized(SimNode::new(&format!("{pool}-a100-1")).gpus(8, A100), "32"),
        sized(SimNode::new(&format!("{pool}-h100-0")).gpus(8, H100), "16"),
    ];
    let nodes = nodes.into_iter().map(|n| n.label("pool", pool)).collect();
    let mut job = gpu_gang("ordered", 2, pool);
    for r in ["Master", "Worker"] {
        let spec = &mut job["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"];
        let resources = json!({"nvidia.com/gpu": 8, "cpu": "8", "memory": "64Gi"});
        spec["containers"][0]["resources"] = json!({"requests": resources, "limits": resources});
    }
    let worker = &mut job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"];
    worker["nodeSelector"][support::nodes::GPU_PRODUCT_LABEL] = json!(A100);
    (nodes, job)
}

/// The webhook's placement search finds that only some orders place the gang and writes the
/// release order that does (Workers first); the controller creates the pods behind its gate
/// and lifts it in that order; kube-scheduler places the whole gang, the Master on the H100.
async fn with_gangplank_a_gang_the_order_decides_is_released_in_the_order_that_places_it() {
    let plane = gated();
    let pool = plane.namespace("order-gated").await;
    let (nodes, job) = order_decides(&pool);
    let probe = gpu_gang("probe", 8, &pool);
    gated_nodes(&pool, &nodes, &probe, "hold 3 of them").await;
    let placement = run_gated(&pool, &job, 3).await;
    let client = plane.client().await;
    let stored = jobs::stored_pytorch_job(&client, &pool, "ordered").await;
    assert_eq!(
        stored["metadata"]["annotations"]["gangplank.dev/release-order"], "Worker,Master",
        "the webhook writes the order that places the gang: {stored}"
    );
    assert!(placement.all_bound(), "{}", placement.summary());
    assert_eq!(
        placement.bound.get("ordered-master-0").map(String::as_str),
        Some(format!("{pool}-h100-0").as_str()),
        "{}",
        placement.summary()
    );
}

/// Creates `job` on the gated control plane and waits for its pods' placement.
async fn run_gated(pool: &str, job: &Value, pods: usize) -> Placement {
    run(gated(), pool, job, pods).await
}

async fn with_gangplank_a_mig_job_too_large_is_refused_and_a_fitting_one_bound() {
    let plane = gated();
    let pool = plane.namespace("mig-gated").await;
    let job = gang("mig", 9, MIG, 1, &pool);
    gated_nodes(&pool, &mig_nodes(&pool, 4), &job, "hold 8 of them").await;
    let client = plane.client().await;
    let (code, message) = jobs::refusal(jobs::create(&client, &pool, &job, false).await);
    assert_eq!(code, 403, "{message}");
    assert!(message.contains(&format!("1 {MIG}")), "{message}");
    let fitting = gang("mig-fits", 7, MIG, 1, &pool);
    let placement = run_gated(&pool, &fitting, 8).await;
    assert!(placement.all_bound(), "{}", placement.summary());
}

async fn with_gangplank_a_selector_mismatch_is_refused() {
    let plane = gated();
    let pool = plane.namespace("mismatch-gated").await;
    let job = h100_gang("mismatch", 4, &pool);
    // Once the inventory has all six nodes: the three H100 ones hold 3 of the 4 Workers.
    gated_nodes(&pool, &mixed_nodes(&pool), &job, "hold 3 of them").await;
    let client = plane.client().await;
    let (code, message) = jobs::refusal(jobs::create(&client, &pool, &job, false).await);
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains(H100),
        "the message names the selector: {message}"
    );
    // With the Workers' selector fixed to what the nodes offer, the job runs.
    let fitting = h100_gang("mismatch-fits", 3, &pool);
    let placement = run_gated(&pool, &fitting, 4).await;
    assert!(placement.all_bound(), "{}", placement.summary());
}

/// The test harness's own bad input: a node the scheduler would count as empty is refused
/// before it is created, with what is missing and how to add it.
async fn a_simulated_node_without_allocatable_is_refused_with_the_reason() {
    use futures::FutureExt as _;
    let plane = bare();
    let client = plane.client().await;
    let node = SimNode::new("no-memory").without_resource("memory");
    let created = std::panic::AssertUnwindSafe(node.create(&client))
        .catch_unwind()
        .await;
    let panic = created.expect_err("a node without allocatable memory is refused");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("no-memory has no allocatable memory"),
        "{message}"
    );
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    let stored = nodes.get_opt("no-memory").await.expect("get node");
    assert!(stored.is_none(), "nothing was created");
}
