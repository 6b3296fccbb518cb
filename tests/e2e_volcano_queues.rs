//! Volcano Queues against the `volcano_queue` policy: what gangplank's webhooks refuse at
//! create, Volcano (v1.16, proportion plugin) never runs, and what they admit it binds.
//!
//! Each test has its own node pool (`pool=<namespace>`, selected by the job) and its own
//! Queue(s). Jobs gangplank judges are created in one namespace of the suite with the shipped
//! policies' webhooks scoped to it ([`gated`]); the same job without gangplank goes to the
//! test's own namespace, which no webhook watches, so Volcano alone decides it there.
//!
//! A Queue's `guarantee` is the one Volcano figure that reaches other queues: the proportion
//! plugin caps every queue at the cluster's total less the other queues' guarantees
//! (`realCapability`), so that test runs on a control plane of its own (a shared plane's
//! total, and its other tests' queues, would change the answer).
//!
//! A queue is closed as `vcctl queue operate --action close` does it: a `CloseQueue` Command
//! that vc-controller-manager turns into the Queue's `status.state` ([`close_queue`]).
//!
//! Skipped, with the reason, without Volcano's binaries.

mod support;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{json, Value};
use support::controller::Controller;
use support::nodes::create_gpu_pool;
use support::scheduler::Placement;
use support::volcano::{pod_group, queue};
use support::{jobs, ControlPlane, Crds, Scheduling, Webhooks};

e2e_suite!(
    "e2e_volcano_queues",
    [
        a_gang_over_its_queues_capability_is_refused_and_volcano_never_runs_it,
        a_gang_at_its_queues_capability_is_admitted_and_bound_whole,
        a_minimum_within_the_capability_is_admitted_and_volcano_binds_at_least_it,
        a_closed_queue_is_refused_and_volcano_runs_nothing_there,
        another_queues_guarantee_is_refused_and_volcano_never_runs_the_gang,
    ],
    support::volcano::requirement
);

/// Volcano schedules every second; a fitting gang is bound within a few seconds here.
const LIMIT: Duration = Duration::from_secs(60);
/// How long a gang Volcano should never run is watched for a bound pod.
const WINDOW: Duration = Duration::from_secs(15);
const CONTROLLER_ARGS: [&str; 2] = ["--leader-elect=false", "--gang-scheduler=volcano"];

/// The suite's Volcano control plane with `gangplank controller --gang-scheduler volcano`.
fn plane() -> &'static ControlPlane {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::Volcano);
    CONTROLLER
        .get_or_init(|| Controller::start(plane, "controller-volcano-queues", &CONTROLLER_ARGS));
    plane
}

/// The namespace the shipped policies' webhooks judge (and only it), made once.
fn gated() -> &'static str {
    static GATED: OnceLock<(String, Webhooks)> = OnceLock::new();
    let plane = plane();
    let (ns, _) = GATED.get_or_init(|| {
        let policies = support::repo().join("policies");
        support::on_own_runtime(move || async move {
            let ns = plane.namespace("gated").await;
            let webhooks = Webhooks::install_scoped(plane, policies, Some(&ns)).await;
            (ns, webhooks)
        })
    });
    ns
}

/// Creates Queue `name` with `spec` (weight 1 unless `spec` says) and returns it.
async fn create_queue(client: &kube::Client, name: &str, spec: Value) -> Value {
    let mut full = json!({"weight": 1});
    for (k, v) in spec.as_object().into_iter().flatten() {
        full[k] = v.clone();
    }
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &queue());
    let q: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name}, "spec": full,
    }))
    .unwrap_or_else(|e| panic!("Queue object: {e}"));
    let created = queues
        .create(&PostParams::default(), &q)
        .await
        .unwrap_or_else(|e| panic!("create Queue {name}: {e}"));
    serde_json::to_value(created).unwrap_or_default()
}

/// A 1 Master + `workers` Workers job of 8-GPU pods on `pool`, in Volcano queue `queue`.
fn queued_gang(name: &str, workers: u32, pool: &str, queue: &str) -> Value {
    let mut job = jobs::gpu_gang(name, workers, pool);
    job["spec"]["runPolicy"] = json!({"schedulingPolicy": {"queue": queue}});
    job
}

/// Waits until a dry run of `job` in the gated namespace is refused with a message holding
/// every one of `parts` (the webhook's inventory has caught up with the nodes and Queues),
/// then creates it for real: the refusal's message.
async fn refused(client: &kube::Client, job: &Value, parts: &[&str]) -> String {
    let ns = gated();
    support::wait_for("gangplank refuses the job", LIMIT, || async {
        match jobs::create(client, ns, job, true).await {
            Err(kube::Error::Api(s)) if parts.iter().all(|p| s.message.contains(p)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (code, message) = jobs::refusal(jobs::create(client, ns, job, false).await);
    assert_eq!(code, 403, "{message}");
    message
}

/// Waits until a dry run of `job` in the gated namespace is admitted (the inventory has seen
/// the pool and the Queue), then creates it for real.
async fn admitted(client: &kube::Client, job: &Value) -> Value {
    let ns = gated();
    support::wait_for("gangplank admits the job", LIMIT, || async {
        jobs::create(client, ns, job, true)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;
    jobs::create_ok(client, ns, job).await
}

/// The job's PodGroup `<job>-pytorchjob`, once it exists.
async fn wait_pod_group(client: &kube::Client, ns: &str, job: &str) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &pod_group());
    let name = format!("{job}-pytorchjob");
    support::wait_for(&format!("PodGroup {ns}/{name}"), LIMIT, || async {
        let found = api.get_opt(&name).await.map_err(|e| e.to_string())?;
        let found = found.ok_or_else(|| "not created".to_string())?;
        serde_json::to_value(found).map_err(|e| e.to_string())
    })
    .await
}

/// Waits until `job` has `count` pods of which at least `at_least` are bound; the placement.
async fn wait_bound(
    client: &kube::Client,
    ns: &str,
    job: &str,
    count: usize,
    at_least: usize,
) -> Placement {
    let what = format!("{at_least} of {count} pods of {ns}/{job} bound");
    support::wait_for(&what, LIMIT, || async {
        let placement = Placement::read(client, ns, &jobs::selector(job)).await;
        let total = placement.bound.len() + placement.pending.len();
        (total == count && placement.bound.len() >= at_least)
            .then_some(placement.clone())
            .ok_or_else(|| placement.summary())
    })
    .await
}

/// Watches `job`'s pods for [`WINDOW`]: none may be bound.
async fn assert_none_bound_for_a_while(client: &kube::Client, ns: &str, job: &str) {
    let started = Instant::now();
    while started.elapsed() < WINDOW {
        let now = Placement::read(client, ns, &jobs::selector(job)).await;
        assert!(
            now.bound.is_empty(),
            "Volcano bound pods of a gang it should never run: {}",
            now.summary()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn created_condition(job: &Value) -> Value {
    let conditions = job["status"]["conditions"].as_array();
    let created = conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Created");
    created.cloned().unwrap_or_default()
}

/// Waits until job `name`'s Created condition has reason `PyTorchJobUnschedulable` and a
/// message holding `part`: the controller passing on Volcano's reason.
async fn wait_says_why(client: &kube::Client, ns: &str, name: &str, part: &str) -> String {
    let api = jobs::pytorch_api(client, ns);
    let what = format!("{ns}/{name} says {part:?}");
    support::wait_for(&what, LIMIT, || async {
        let job = api.get(name).await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        let created = created_condition(&job);
        let message = jobs::get_str(&created, "/message");
        (created["reason"] == "PyTorchJobUnschedulable" && message.contains(part))
            .then(|| message.to_string())
            .ok_or_else(|| format!("{created}"))
    })
    .await
}

/// The job, created where no webhook looks, is never run by Volcano: no pod bound for
/// [`WINDOW`], the PodGroup Pending, and the job's Created condition names `why` (the
/// controller passing on Volcano's Events); that message.
async fn volcano_never_runs(client: &kube::Client, ns: &str, job: &Value, why: &str) -> String {
    let name = jobs::get_str(job, "/metadata/name").to_string();
    jobs::create_ok(client, ns, job).await;
    wait_pod_group(client, ns, &name).await;
    assert_none_bound_for_a_while(client, ns, &name).await;
    let pg = wait_pod_group(client, ns, &name).await;
    assert_eq!(
        jobs::get_str(&pg, "/status/phase"),
        "Pending",
        "{}",
        pg["status"]
    );
    let pg_events = jobs::events_of(client, ns, "PodGroup", &format!("{name}-pytorchjob")).await;
    eprintln!(
        "{ns}/{name}: PodGroup {}; its Events: {pg_events:?}",
        pg["status"]
    );
    let said = wait_says_why(client, ns, &name, why).await;
    eprintln!("{ns}/{name}'s Created condition: {said}");
    said
}

async fn a_gang_over_its_queues_capability_is_refused_and_volcano_never_runs_it() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("over-cap").await;
    // Room for the whole gang; only the queue (8 GPUs of the gang's 16) stands in the way.
    create_gpu_pool(&client, &ns, 2).await;
    let q = format!("small-{ns}");
    create_queue(&client, &q, json!({"capability": {"nvidia.com/gpu": "8"}})).await;
    let job = queued_gang("over", 1, &ns, &q);

    let message = refused(&client, &job, &["capability is 8"]).await;
    for part in ["the gang needs 16 nvidia.com/gpu", &format!("{q:?}")] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    eprintln!("gangplank: {message}");

    let said = volcano_never_runs(&client, &ns, &job, "queue resource quota insufficient").await;
    assert!(said.contains("nvidia.com/gpu"), "{said}");
}

async fn a_gang_at_its_queues_capability_is_admitted_and_bound_whole() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("at-cap").await;
    create_gpu_pool(&client, &ns, 2).await;
    let q = format!("exact-{ns}");
    create_queue(&client, &q, json!({"capability": {"nvidia.com/gpu": "16"}})).await;
    let created = admitted(&client, &queued_gang("fits", 1, &ns, &q)).await;
    let master = &created["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"];
    assert_eq!(master["schedulerName"], "volcano", "{created}");
    let placement = wait_bound(&client, gated(), "fits", 2, 2).await;
    assert!(placement.all_bound(), "{}", placement.summary());
    let pg = wait_pod_group(&client, gated(), "fits").await;
    assert_eq!(pg["spec"]["queue"], json!(q), "{pg}");
}

async fn a_minimum_within_the_capability_is_admitted_and_volcano_binds_at_least_it() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("min-cap").await;
    // 4 pods of 8 GPUs (32) on 4 nodes; the gang's minimum is 2 pods (16 GPUs); the queue
    // holds 24: more than the minimum, less than every pod.
    create_gpu_pool(&client, &ns, 4).await;
    let q = format!("mid-{ns}");
    create_queue(&client, &q, json!({"capability": {"nvidia.com/gpu": "24"}})).await;
    let mut job = queued_gang("partial", 3, &ns, &q);
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = json!(2);
    admitted(&client, &job).await;

    let pg = wait_pod_group(&client, gated(), "partial").await;
    assert_eq!(pg["spec"]["minMember"], 2, "{pg}");
    assert_eq!(pg["spec"]["minResources"]["nvidia.com/gpu"], "16", "{pg}");
    // Volcano enqueues on the minimum (16 of 24) and then binds what the queue holds: the
    // minimum and one pod more, never the fourth (32 > 24).
    let placement = wait_bound(&client, gated(), "partial", 4, 3).await;
    assert!(
        placement.bound.contains_key("partial-master-0"),
        "{}",
        placement.summary()
    );
    let started = Instant::now();
    while started.elapsed() < WINDOW / 3 {
        let now = Placement::read(&client, gated(), &jobs::selector("partial")).await;
        assert!(now.bound.len() <= 3, "over the queue: {}", now.summary());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "minAvailable 2 of 4 under a 24-GPU queue: {}",
        placement.summary()
    );
}

/// Closes Queue `name` as `vcctl queue operate --action close` does: a bus.volcano.sh
/// Command that vc-controller-manager's queue controller acts on (and deletes), which sets
/// the Queue's `status.state` (Volcano v1.16 has no `spec.state`).
///
/// The queue controller drops a Command for a Queue its cache does not hold yet, and its
/// sync of a just-created Queue may write `Open` over `Closed`: so the Command is sent once
/// the controller has opened the Queue, and again (bounded) if the state does not follow.
async fn close_queue(client: &kube::Client, ns: &str, created: &Value) {
    let name = jobs::get_str(created, "/metadata/name");
    let uid = jobs::get_str(created, "/metadata/uid");
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &queue());
    let state = || async {
        let q = queues.get(name).await.map_err(|e| e.to_string())?;
        let q = serde_json::to_value(q).map_err(|e| e.to_string())?;
        Ok::<_, String>((
            jobs::get_str(&q, "/status/state").to_string(),
            q["status"].clone(),
        ))
    };
    let is = |want: &'static str| {
        move || async move {
            let (now, status) = state().await?;
            (now == want).then_some(()).ok_or(format!("{status}"))
        }
    };
    support::wait_for(&format!("Queue {name} Open"), LIMIT, is("Open")).await;
    let started = Instant::now();
    for attempt in 0.. {
        let command = json!({
            "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
            "metadata": {"name": format!("close-{name}-{attempt}")},
            "action": "CloseQueue",
            "target": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                "name": name, "uid": uid},
        });
        jobs::create(client, ns, &command, false)
            .await
            .unwrap_or_else(|e| panic!("create Command CloseQueue {name}: {e}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if state().await.is_ok_and(|(now, _)| now == "Closed") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let last = state().await;
        assert!(
            started.elapsed() < LIMIT,
            "Queue {name} not Closed after {} CloseQueue Commands: {last:?}",
            attempt + 1
        );
        eprintln!("Queue {name} still not Closed 10 s after a CloseQueue Command: {last:?}");
    }
}

async fn a_closed_queue_is_refused_and_volcano_runs_nothing_there() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("closed").await;
    create_gpu_pool(&client, &ns, 2).await;
    let q = format!("shut-{ns}");
    let created = create_queue(&client, &q, json!({})).await;
    close_queue(&client, &ns, &created).await;
    let job = queued_gang("shut-out", 1, &ns, &q);

    let message = refused(&client, &job, &["is Closed: it admits no new jobs"]).await;
    assert!(message.contains(&format!("{q:?}")), "{message}");
    eprintln!("gangplank: {message}");

    // Without gangplank: Volcano's enqueue rejects the gang for the closed queue without an
    // Event of its own (the PodGroup gets only the gang's summary); the controller reads the
    // Queue and says it is Closed, with how to open it.
    let said = volcano_never_runs(&client, &ns, &job, &format!("Queue {q} is Closed")).await;
    assert!(said.contains("--action open"), "{said}");
}

async fn another_queues_guarantee_is_refused_and_volcano_never_runs_the_gang() {
    // A plane of its own: the guarantee is taken from the whole cluster's total.
    let assets = support::assets::get();
    let plane = ControlPlane::start_with(&assets, Crds::TrainingV1, Scheduling::Volcano);
    let _controller = Controller::start(&plane, "controller-guarantee", &CONTROLLER_ARGS);
    let client = plane.client().await;
    let ns = plane.namespace("guarantee").await;
    let gated = plane.namespace("guarantee-gated").await;
    let policies = support::repo().join("policies");
    let _webhooks = Webhooks::install_scoped(&plane, policies, Some(&gated)).await;
    // 16 GPUs in the cluster; another queue is guaranteed 8 of them, with no job in it.
    create_gpu_pool(&client, &ns, 2).await;
    let reserve = "reserve";
    create_queue(
        &client,
        reserve,
        json!({"guarantee": {"resource": {"nvidia.com/gpu": "8"}}}),
    )
    .await;
    let q = "team";
    create_queue(&client, q, json!({"capability": {"nvidia.com/gpu": "16"}})).await;
    let job = queued_gang("guaranteed-away", 1, &ns, q);

    let said = volcano_never_runs(&client, &ns, &job, "queue resource quota insufficient").await;
    assert!(said.contains("nvidia.com/gpu"), "{said}");

    let parts = ["the gang needs 16 nvidia.com/gpu", "guarantee"];
    support::wait_for("gangplank refuses the job", LIMIT, || async {
        match jobs::create(&client, &gated, &job, true).await {
            Err(kube::Error::Api(s)) if parts.iter().all(|p| s.message.contains(p)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (code, message) = jobs::refusal(jobs::create(&client, &gated, &job, false).await);
    assert_eq!(code, 403, "{message}");
    eprintln!("gangplank: {message}");

    // Half the gang fits what the guarantee leaves: admitted, and bound.
    let mut half = queued_gang("half", 0, &ns, q);
    if let Some(specs) = half["spec"]["pytorchReplicaSpecs"].as_object_mut() {
        specs.remove("Worker");
    }
    support::wait_for("gangplank admits the half", LIMIT, || async {
        jobs::create(&client, &gated, &half, true)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;
    jobs::create_ok(&client, &gated, &half).await;
    wait_bound(&client, &gated, "half", 1, 1).await;
}
