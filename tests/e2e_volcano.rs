//! `gangplank controller` (`--gang-scheduler volcano`, the default) against Volcano's real
//! vc-scheduler and vc-controller-manager (v1.16) on simulated nodes: the controller's
//! PodGroups are what Volcano needs (minMember, minResources, queue, priority class), Volcano
//! places the gang whole or not at all, suspend and deletion leave nothing that holds GPUs,
//! and a gang Volcano will not admit says why on the job at once.
//!
//! The seed's deadlock: a 1 + 8 × 8-GPU job on 6 × 8-GPU nodes waits with no pod placed and
//! Volcano's reason on the job (a control plane of its own: Volcano's overcommit check counts
//! the whole cluster's GPUs, so other tests' nodes would change the answer); with gangplank's
//! webhooks it is refused at create. kube-scheduler half places the same job:
//! `e2e_scheduling::without_gangplank_the_seed_job_is_half_placed_and_stays_so`.
//!
//! Deletion is the garbage collector's (ownerReferences), so kube-controller-manager runs too.
//! No kubelet runs: a pod being deleted is removed here as the kubelet would ([`reap`]).
//! Every test has its own node pool (`pool=<namespace>`, selected by the job), so the tests
//! run side by side. Skipped, with the reason, without Volcano's binaries.

mod support;

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use support::controller::{pods_of, set_running, Controller};
use support::nodes::create_gpu_pool;
use support::scheduler::Placement;
use support::volcano::{find_pod_group, pod_group, queue, reap, wait_bound, wait_pod_group};
use support::{jobs, ControlPlane, Crds, Scheduling, Webhooks};

e2e_suite!(
    "e2e_volcano",
    [
        a_pytorch_job_gets_a_pod_group_volcano_binds_whole,
        a_gang_behind_another_job_binds_no_pod_until_that_job_is_deleted,
        suspend_frees_the_gpus_and_resume_binds_the_gang_again,
        the_queue_and_priority_class_reach_volcano,
        an_elastic_job_binds_its_minimum_as_one_gang,
        an_mpi_job_v2beta1_gets_a_pod_group_of_launcher_and_workers_bound_whole,
        the_seed_job_waits_whole_and_the_job_says_why_at_once,
        with_gangplank_the_seed_job_is_refused_with_demand_and_capacity,
        a_job_in_a_queue_that_does_not_exist_says_so,
        without_volcanos_crds_the_job_says_its_pod_group_was_refused,
        without_vc_scheduler_the_deadline_says_no_volcano_scheduler_looked,
    ],
    support::volcano::requirement
);

/// Volcano schedules every second; a fitting gang is bound within a few seconds here.
const LIMIT: Duration = Duration::from_secs(60);
/// How long a gang that cannot fit whole is watched for a partly bound gang.
const WINDOW: Duration = Duration::from_secs(15);
const CONTROLLER_ARGS: [&str; 2] = ["--leader-elect=false", "--gang-scheduler=volcano"];

/// The shared Volcano control plane with `gangplank controller --gang-scheduler volcano`.
fn plane() -> &'static ControlPlane {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::Volcano);
    CONTROLLER.get_or_init(|| Controller::start(plane, "controller-volcano", &CONTROLLER_ARGS));
    plane
}

async fn wait_no_pod_group(client: &kube::Client, ns: &str, job: &str) {
    support::wait_for(&format!("no PodGroup of {ns}/{job}"), LIMIT, || async {
        match find_pod_group(client, ns, job).await {
            None => Ok(()),
            Some(pg) => Err(format!("still there: {}", pg["metadata"])),
        }
    })
    .await
}

/// Watches `job`'s pods for [`WINDOW`]: none may be bound.
async fn assert_none_bound_for_a_while(client: &kube::Client, ns: &str, job: &str) {
    let started = Instant::now();
    while started.elapsed() < WINDOW {
        reap(client, ns).await;
        let now = Placement::read(client, ns, &jobs::selector(job)).await;
        assert!(
            now.bound.is_empty(),
            "Volcano bound part of a gang that cannot fit whole: {}",
            now.summary()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Deletes job `name` (background propagation: the garbage collector deletes its PodGroup
/// and pods through their ownerReferences) and waits until they are gone.
async fn delete_job(client: &kube::Client, ns: &str, name: &str) {
    jobs::pytorch_api(client, ns)
        .delete(name, &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("delete job {name}: {e}"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let params = ListParams::default().labels(&jobs::selector(name));
    support::wait_for(&format!("pods of {name} gone"), LIMIT, || async {
        reap(client, ns).await;
        let left = pods.list(&params).await.map_err(|e| e.to_string())?;
        let n = left.items.len();
        (n == 0).then_some(()).ok_or(format!("{n} left"))
    })
    .await;
    wait_no_pod_group(client, ns, name).await;
}

async fn a_pytorch_job_gets_a_pod_group_volcano_binds_whole() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("fits").await;
    create_gpu_pool(&client, &ns, 2).await;
    let created = jobs::create_ok(&client, &ns, &jobs::gpu_gang("fits", 1, &ns)).await;

    let placement = wait_bound(&client, &ns, "fits", 2).await;
    let nodes: BTreeSet<&String> = placement.bound.values().collect();
    assert_eq!(nodes.len(), 2, "one 8-GPU pod per node: {placement:?}");

    let pg = wait_pod_group(&client, &ns, "fits", "Running", |pg| {
        jobs::get_str(pg, "/status/phase") == "Running"
    })
    .await;
    assert_eq!(pg["spec"]["minMember"], 2, "{pg}");
    assert_eq!(pg["spec"]["minResources"]["nvidia.com/gpu"], "16", "{pg}");
    assert_eq!(pg["spec"]["queue"], "default", "{pg}");
    let owner = &pg["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], created["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    for pod in pods_of(&client, &ns, "fits").await {
        let spec = pod.spec.clone().unwrap_or_default();
        assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations
                .get("scheduling.k8s.io/group-name")
                .map(String::as_str),
            Some("fits-pytorchjob")
        );
    }
}

async fn a_gang_behind_another_job_binds_no_pod_until_that_job_is_deleted() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("behind").await;
    create_gpu_pool(&client, &ns, 2).await;
    jobs::create_ok(&client, &ns, &jobs::gpu_gang("first", 1, &ns)).await;
    wait_bound(&client, &ns, "first", 2).await;

    jobs::create_ok(&client, &ns, &jobs::gpu_gang("second", 1, &ns)).await;
    wait_pod_group(&client, &ns, "second", "created", |_| true).await;
    assert_none_bound_for_a_while(&client, &ns, "second").await;
    // The job says why, from the PodGroup (a condition once pods exist, else its Events).
    let created = wait_created_reason(
        &client,
        &ns,
        "second",
        "PyTorchJobUnschedulable",
        "PodGroup second-pytorchjob is unschedulable: ",
    )
    .await;
    eprintln!("the waiting gang's Created condition: {created}");

    // Deleting the job deletes its PodGroup and pods (garbage collector); Volcano then binds
    // the waiting gang whole.
    delete_job(&client, &ns, "first").await;
    let second = wait_bound(&client, &ns, "second", 2).await;
    assert!(second.all_bound(), "{}", second.summary());
    // Once its pods run, Created is the plain condition again and Running follows it.
    for pod in second.bound.keys() {
        set_running(&client, &ns, pod, "pytorch").await;
    }
    wait_created_reason(&client, &ns, "second", "PyTorchJobCreated", "is created").await;
}

async fn suspend(client: &kube::Client, ns: &str, name: &str, on: bool) {
    let patch = json!({"spec": {"runPolicy": {"suspend": on}}});
    jobs::pytorch_api(client, ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("suspend={on} {name}: {e}"));
}

async fn suspend_frees_the_gpus_and_resume_binds_the_gang_again() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("suspend").await;
    create_gpu_pool(&client, &ns, 2).await;
    jobs::create_ok(&client, &ns, &jobs::gpu_gang("paused", 1, &ns)).await;
    wait_bound(&client, &ns, "paused", 2).await;

    suspend(&client, &ns, "paused", true).await;
    support::wait_for("suspended job's pods gone", LIMIT, || async {
        reap(&client, &ns).await;
        let n = pods_of(&client, &ns, "paused").await.len();
        (n == 0).then_some(()).ok_or(format!("{n} pods"))
    })
    .await;
    wait_no_pod_group(&client, &ns, "paused").await;

    // Nothing of the suspended job holds GPUs: Volcano binds another job on the same nodes.
    jobs::create_ok(&client, &ns, &jobs::gpu_gang("next", 1, &ns)).await;
    wait_bound(&client, &ns, "next", 2).await;

    // Resumed while `next` holds the GPUs: a new PodGroup, no pod bound until `next` goes.
    suspend(&client, &ns, "paused", false).await;
    wait_pod_group(&client, &ns, "paused", "recreated", |_| true).await;
    assert_none_bound_for_a_while(&client, &ns, "paused").await;
    delete_job(&client, &ns, "next").await;
    wait_bound(&client, &ns, "paused", 2).await;
}

async fn the_queue_and_priority_class_reach_volcano() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("queue").await;
    // Room for two 2-node gangs; the queue's capability is one gang's GPUs.
    create_gpu_pool(&client, &ns, 4).await;
    let queue_name = format!("team-{ns}");
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &queue());
    let q: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": queue_name},
        "spec": {"weight": 1, "reclaimable": true, "capability": {"nvidia.com/gpu": "16"}},
    }))
    .unwrap_or_else(|e| panic!("Queue object: {e}"));
    queues
        .create(&PostParams::default(), &q)
        .await
        .unwrap_or_else(|e| panic!("create Queue {queue_name}: {e}"));
    let class = format!("high-{ns}");
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(client.clone());
    let pc = serde_json::from_value(json!({"metadata": {"name": class}, "value": 1000}))
        .unwrap_or_else(|e| panic!("PriorityClass object: {e}"));
    classes
        .create(&PostParams::default(), &pc)
        .await
        .unwrap_or_else(|e| panic!("create PriorityClass {class}: {e}"));

    let mut job = jobs::gpu_gang("queued", 1, &ns);
    job["spec"]["runPolicy"] =
        json!({"schedulingPolicy": {"queue": queue_name, "priorityClass": class}});
    jobs::create_ok(&client, &ns, &job).await;
    wait_bound(&client, &ns, "queued", 2).await;
    let pg = wait_pod_group(&client, &ns, "queued", "Running", |pg| {
        jobs::get_str(pg, "/status/phase") == "Running"
    })
    .await;
    assert_eq!(pg["spec"]["queue"], json!(queue_name), "{pg}");
    assert_eq!(pg["spec"]["priorityClassName"], json!(class), "{pg}");
    // Volcano counts the gang against that queue: its status holds the gang's 16 GPUs.
    support::wait_for("the queue counts the running gang", LIMIT, || async {
        let q = queues.get(&queue_name).await.map_err(|e| e.to_string())?;
        let q = serde_json::to_value(q).map_err(|e| e.to_string())?;
        (q["status"]["allocated"]["nvidia.com/gpu"] == "16")
            .then_some(())
            .ok_or(format!("{}", q["status"]))
    })
    .await;
    // And a second job in that queue, beyond its 16-GPU capability, is not admitted while
    // the first runs, although the cluster has room for it.
    let mut more = jobs::gpu_gang("over-quota", 1, &ns);
    more["spec"]["runPolicy"] = json!({"schedulingPolicy": {"queue": queue_name}});
    jobs::create_ok(&client, &ns, &more).await;
    wait_pod_group(&client, &ns, "over-quota", "created", |_| true).await;
    assert_none_bound_for_a_while(&client, &ns, "over-quota").await;
    let created = wait_created_reason(
        &client,
        &ns,
        "over-quota",
        "PyTorchJobUnschedulable",
        "queue resource quota insufficient",
    )
    .await;
    eprintln!("over its queue's capability: {created}");
}

async fn an_elastic_job_binds_its_minimum_as_one_gang() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("elastic").await;
    create_gpu_pool(&client, &ns, 2).await;
    let mut job = jobs::gpu_gang("elastic", 1, &ns);
    let spec = job["spec"]["pytorchReplicaSpecs"].as_object_mut();
    if let Some(specs) = spec {
        specs.remove("Master");
    }
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(4);
    job["spec"]["elasticPolicy"] =
        json!({"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d"});
    jobs::create_ok(&client, &ns, &job).await;
    let pg = wait_pod_group(&client, &ns, "elastic", "created", |_| true).await;
    assert_eq!(pg["spec"]["minMember"], 2, "{pg}");
    assert_eq!(pg["spec"]["minResources"]["nvidia.com/gpu"], "16", "{pg}");
    // Two nodes hold the minimum of two 8-GPU workers: those are bound, the other two wait.
    let settled = support::wait_for("the elastic minimum bound", LIMIT, || async {
        let now = Placement::read(&client, &ns, &jobs::selector("elastic")).await;
        let total = now.bound.len() + now.pending.len();
        (total == 4 && now.bound.len() == 2)
            .then_some(now.clone())
            .ok_or_else(|| now.summary())
    })
    .await;
    let nodes: BTreeSet<&String> = settled.bound.values().collect();
    assert_eq!(nodes.len(), 2, "{}", settled.summary());
}

fn condition<'a>(job: &'a Value, type_: &str) -> Option<&'a Value> {
    job["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

async fn the_seed_job_waits_whole_and_the_job_says_why_at_once() {
    // A plane of its own: Volcano's overcommit check counts every node of the cluster.
    let assets = support::assets::get();
    let plane = ControlPlane::start_with(&assets, Crds::TrainingV1, Scheduling::Volcano);
    let _controller = Controller::start(&plane, "controller-seed", &CONTROLLER_ARGS);
    let client = plane.client().await;
    let ns = plane.namespace("seed").await;
    let nodes = create_gpu_pool(&client, &ns, 6).await;
    let mut job = jobs::gpu_gang("seed", 8, &ns);
    let deadline_s = 40;
    job["spec"]["runPolicy"] = json!({"schedulingPolicy": {"scheduleTimeoutSeconds": deadline_s}});
    let started = Instant::now();
    jobs::create_ok(&client, &ns, &job).await;

    // Volcano says why on the PodGroup: it stays Pending, and its Events name the GPUs.
    let pg = wait_pod_group(&client, &ns, "seed", "a phase", |pg| {
        !jobs::get_str(pg, "/status/phase").is_empty()
    })
    .await;
    assert_eq!(pg["spec"]["minMember"], 9, "{pg}");
    assert_eq!(pg["spec"]["minResources"]["nvidia.com/gpu"], "72", "{pg}");
    let pg_events =
        jobs::wait_event_of(&client, &ns, "PodGroup", "seed-pytorchjob", |_| true).await;
    eprintln!("Volcano's Events on PodGroup seed-pytorchjob: {pg_events:?}");

    // The job says so at once: the Created condition's reason and a Warning Event.
    let api = jobs::pytorch_api(&client, &ns);
    let said = support::wait_for("the job names Volcano's reason", LIMIT, || async {
        let job = api.get("seed").await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        let created = condition(&job, "Created").cloned().unwrap_or_default();
        let gpus = jobs::get_str(&created, "/message").contains("overused nvidia.com/gpu");
        (created["reason"] == "PyTorchJobUnschedulable" && gpus)
            .then_some(created.clone())
            .ok_or(format!("{created}"))
    })
    .await;
    let said_after = started.elapsed();
    let message = jobs::get_str(&said, "/message").to_string();
    assert!(message.contains("seed-pytorchjob"), "{message}");
    assert!(message.contains("nvidia.com/gpu"), "{message}");
    jobs::wait_job_event(&client, &ns, "seed", |e| {
        e.starts_with("PyTorchJobUnschedulable: ") && e.contains("nvidia.com/gpu")
    })
    .await;
    eprintln!("the job said why {said_after:?} after create: {message}");

    // No partial placement: no pod of the job is bound anywhere, and the nodes hold nothing.
    let pods: Api<Pod> = Api::all(client.clone());
    let bound: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.spec?.node_name)
        .filter(|n| nodes.contains(n))
        .collect();
    assert!(bound.is_empty(), "pods bound to the pool: {bound:?}");
    assert_none_bound_for_a_while(&client, &ns, "seed").await;

    // At the deadline the job fails with Volcano's reason, not "no cause".
    let limit = Duration::from_secs(deadline_s) + LIMIT;
    let failed = support::wait_for("the start deadline fails the job", limit, || async {
        let job = api.get("seed").await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        jobs::true_condition(&job, "Failed").ok_or_else(|| format!("{}", job["status"]))
    })
    .await;
    let message = jobs::get_str(&failed, "/message");
    assert!(message.contains("PodGroup seed-pytorchjob"), "{message}");
    assert!(message.contains("nvidia.com/gpu"), "{message}");
    assert!(!message.contains("no cause"), "{message}");
}

async fn with_gangplank_the_seed_job_is_refused_with_demand_and_capacity() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("seed-gated").await;
    // The shipped policies (scheduler: volcano), for this namespace only: the other tests
    // create jobs the webhooks do not judge.
    let policies = support::repo().join("policies");
    let ns_for_install = ns.clone();
    let _webhooks = support::on_own_runtime(move || async move {
        Webhooks::install_scoped(plane, policies, Some(&ns_for_install)).await
    });
    create_gpu_pool(&client, &ns, 6).await;
    let job = jobs::gpu_gang("seed", 8, &ns);
    support::wait_for("the inventory reaches the policies", LIMIT, || async {
        match jobs::create(&client, &ns, &job, true).await {
            Err(kube::Error::Api(s)) if s.message.contains("hold 6 of them") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (code, message) = jobs::refusal(jobs::create(&client, &ns, &job, false).await);
    assert_eq!(code, 403, "{message}");
    for part in [
        "1 Master + 8 Worker",
        "8 nvidia.com/gpu",
        "6 schedulable nodes",
        "hold 6",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    // A fitting job in the same namespace is admitted with Volcano set, and bound whole.
    let fitting = jobs::create_ok(&client, &ns, &jobs::gpu_gang("fits", 4, &ns)).await;
    let master = &fitting["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"];
    assert_eq!(master["schedulerName"], "volcano", "{fitting}");
    wait_bound(&client, &ns, "fits", 5).await;
}

/// Waits until job `name`'s Created condition has `reason` and a message containing `part`.
async fn wait_created_reason(
    client: &kube::Client,
    ns: &str,
    name: &str,
    reason: &str,
    part: &str,
) -> Value {
    let api = jobs::pytorch_api(client, ns);
    let what = format!("{name}'s Created condition: {reason}, {part:?}");
    support::wait_for(&what, LIMIT, || async {
        let job = api.get(name).await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        let created = condition(&job, "Created").cloned().unwrap_or_default();
        let said =
            created["reason"] == reason && jobs::get_str(&created, "/message").contains(part);
        said.then_some(created.clone())
            .ok_or_else(|| format!("{created}"))
    })
    .await
}

async fn a_job_in_a_queue_that_does_not_exist_says_so() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("no-queue").await;
    create_gpu_pool(&client, &ns, 2).await;
    let queue_name = format!("missing-{ns}");
    let mut job = jobs::gpu_gang("lost", 1, &ns);
    job["spec"]["runPolicy"] = json!({"schedulingPolicy": {"queue": queue_name}});
    jobs::create_ok(&client, &ns, &job).await;
    // Volcano gives such a PodGroup no phase and records nothing: the controller says it.
    let part = format!("Queue {queue_name} does not exist");
    wait_created_reason(&client, &ns, "lost", "PyTorchJobUnschedulable", &part).await;
    let pg = find_pod_group(&client, &ns, "lost")
        .await
        .unwrap_or_default();
    assert_eq!(jobs::get_str(&pg, "/status/phase"), "", "{pg}");
    jobs::wait_job_event(&client, &ns, "lost", |e| e.contains(&part)).await;

    // Once the Queue exists, Volcano admits the gang and binds it; Created is plain again.
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &queue());
    let q: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": queue_name}, "spec": {"weight": 1},
    }))
    .unwrap_or_else(|e| panic!("Queue object: {e}"));
    queues
        .create(&PostParams::default(), &q)
        .await
        .unwrap_or_else(|e| panic!("create Queue {queue_name}: {e}"));
    wait_bound(&client, &ns, "lost", 2).await;
    wait_created_reason(&client, &ns, "lost", "PyTorchJobCreated", "is created").await;
}

async fn without_volcanos_crds_the_job_says_its_pod_group_was_refused() {
    let assets = support::assets::get();
    let plane = ControlPlane::start(&assets, Crds::TrainingV1);
    let client = plane.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = "podgroups.scheduling.volcano.sh";
    crds.delete(crd, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete CRD {crd}: {e}"));
    support::wait_for("the PodGroup CRD gone", LIMIT, || async {
        match crds.get_opt(crd).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let controller = Controller::start(&plane, "controller-no-volcano", &CONTROLLER_ARGS);
    let ns = plane.namespace("no-volcano").await;
    jobs::create_ok(&client, &ns, &jobs::gpu_gang("orphan", 1, &ns)).await;
    let api = jobs::pytorch_api(&client, &ns);
    let created = support::wait_for("the job says its PodGroup was refused", LIMIT, || async {
        let job = api.get("orphan").await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        let created = condition(&job, "Created").cloned().unwrap_or_default();
        (created["reason"] == "PyTorchJobPodGroupRefused")
            .then_some(created.clone())
            .ok_or_else(|| format!("{created}; controller log:\n{}", controller.process.tail(5)))
    })
    .await;
    let message = jobs::get_str(&created, "/message");
    assert!(
        message.contains("PodGroup orphan-pytorchjob was refused"),
        "{message}"
    );
    assert!(
        message.contains("does not serve scheduling.volcano.sh/v1beta1 PodGroups"),
        "{message}"
    );
    jobs::wait_job_event(&client, &ns, "orphan", |e| {
        e.starts_with("PyTorchJobPodGroupRefused: ")
    })
    .await;
    assert!(
        pods_of(&client, &ns, "orphan").await.is_empty(),
        "no pods without a gang"
    );
}

/// The Volcano control plane with the mpi-operator's v2beta1 MPIJob CRD and
/// `gangplank controller --kinds=MPIJob`.
fn mpi_plane() -> &'static ControlPlane {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::MpiV2beta1, Scheduling::Volcano);
    let args = [
        "--leader-elect=false",
        "--gang-scheduler=volcano",
        "--kinds=MPIJob",
    ];
    CONTROLLER.get_or_init(|| Controller::start(plane, "controller-volcano-mpi", &args));
    plane
}

/// An MPIJob v2beta1: one Launcher without GPUs and `workers` 8-GPU Workers, on `pool`.
fn mpi_job(name: &str, workers: u32, pool: &str) -> Value {
    let container = |name: &str, gpus: u32| {
        let mut c = json!({"name": name, "image": jobs::IMAGE, "command": ["mpirun", "python", "train.py"]});
        if gpus > 0 {
            let r = json!({"nvidia.com/gpu": gpus});
            c["resources"] = json!({"requests": r, "limits": r});
        }
        c
    };
    let replica = |replicas: u32, c: Value| {
        json!({"replicas": replicas, "template": {"spec": {
            "containers": [c], "nodeSelector": {"pool": pool},
        }}})
    };
    json!({
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 8,
            "mpiReplicaSpecs": {
                "Launcher": replica(1, container("launcher", 0)),
                "Worker": replica(workers, container("worker", 8)),
            },
        },
    })
}

async fn an_mpi_job_v2beta1_gets_a_pod_group_of_launcher_and_workers_bound_whole() {
    let plane = mpi_plane();
    let client = plane.client().await;
    let ns = plane.namespace("mpi").await;
    create_gpu_pool(&client, &ns, 2).await;
    let job = mpi_job("allreduce", 2, &ns);
    jobs::create(&client, &ns, &job, false)
        .await
        .unwrap_or_else(|e| panic!("create MPIJob: {e}"));
    let placement = wait_bound(&client, &ns, "allreduce", 3).await;
    let nodes: BTreeSet<&String> = placement.bound.values().collect();
    assert_eq!(nodes.len(), 2, "{}", placement.summary());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &pod_group());
    let pg = api
        .get("allreduce-mpijob")
        .await
        .unwrap_or_else(|e| panic!("PodGroup allreduce-mpijob: {e}"));
    let pg = serde_json::to_value(pg).unwrap_or_default();
    // The launcher is a member of the gang; its lack of GPUs counts for nothing.
    assert_eq!(pg["spec"]["minMember"], 3, "{pg}");
    assert_eq!(pg["spec"]["minResources"]["nvidia.com/gpu"], "16", "{pg}");
    // A second MPIJob too large for what is left binds nothing, not even its GPU-less
    // launcher, while the first holds the GPUs.
    let second = mpi_job("waits", 1, &ns);
    jobs::create(&client, &ns, &second, false)
        .await
        .unwrap_or_else(|e| panic!("create MPIJob: {e}"));
    support::wait_for("the second MPIJob's PodGroup", LIMIT, || async {
        let found = api
            .get_opt("waits-mpijob")
            .await
            .map_err(|e| e.to_string())?;
        found.map(drop).ok_or_else(|| "not yet".to_string())
    })
    .await;
    assert_none_bound_for_a_while(&client, &ns, "waits").await;
}

async fn without_vc_scheduler_the_deadline_says_no_volcano_scheduler_looked() {
    // A plane of its own: its Volcano processes are stopped.
    let assets = support::assets::get();
    let plane = ControlPlane::start_with(&assets, Crds::TrainingV1, Scheduling::Volcano);
    let _controller = Controller::start(&plane, "controller-down", &CONTROLLER_ARGS);
    let client = plane.client().await;
    let ns = plane.namespace("down").await;
    create_gpu_pool(&client, &ns, 2).await;
    // With Volcano up, a gang runs here (so what follows is about Volcano being down).
    jobs::create_ok(&client, &ns, &jobs::gpu_gang("still-runs", 1, &ns)).await;
    wait_bound(&client, &ns, "still-runs", 2).await;
    delete_job(&client, &ns, "still-runs").await;

    // Volcano down: the PodGroup never gets a phase, and the deadline says why.
    plane.stop("vc-controller-manager");
    plane.stop("vc-scheduler");
    let mut job = jobs::gpu_gang("unseen", 1, &ns);
    job["spec"]["runPolicy"] = json!({"schedulingPolicy": {"scheduleTimeoutSeconds": 10}});
    jobs::create_ok(&client, &ns, &job).await;
    let api = jobs::pytorch_api(&client, &ns);
    let failed = support::wait_for("the start deadline fails the job", LIMIT, || async {
        let job = api.get("unseen").await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        jobs::true_condition(&job, "Failed").ok_or_else(|| format!("{}", job["status"]))
    })
    .await;
    let message = jobs::get_str(&failed, "/message");
    assert!(
        message.contains("PodGroup unseen-pytorchjob was not admitted: the PodGroup has no phase: no Volcano scheduler has looked at it"),
        "{message}"
    );
    assert!(pods_of(&client, &ns, "unseen").await.is_empty());
}
