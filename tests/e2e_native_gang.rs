//! `gangplank controller --gang-scheduler kubernetes` against a real kube-apiserver and
//! kube-scheduler with Kubernetes' native gang scheduling on (1.36: the GenericWorkload and
//! GangScheduling gates, `scheduling.k8s.io/v1alpha2` served): the controller's standalone
//! PodGroup and the pods' `schedulingGroup` make the scheduler place a gang whole or not at
//! all, and the watchdog names the PodGroup's reason when it never is. With the job's
//! `gangplank.dev/topology-key` (TopologyAwareWorkloadScheduling on), the whole gang lands in
//! one domain of that node label, or stays unbound. With its `gangplank.dev/release-order`,
//! the pods are created behind the controller's scheduling gate, lifted one replica type
//! after the other once every pod exists.
//!
//! Every test has its own node pool (`pool=<namespace>`, selected by the job), so the tests
//! run side by side on one control plane. Skipped, with the reason, without kube-scheduler.

mod support;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::{json, Value};
use support::controller::{pods_of, Controller};
use support::nodes::{create_gpu_pool, create_nodes, SimNode, H100};
use support::scheduler::{native_pod_group, wait_placement, Placement};
use support::{jobs, ControlPlane, Crds, Scheduling};

e2e_suite!(
    "e2e_native_gang",
    [
        a_gang_that_fits_is_bound_together,
        a_gang_admitted_while_another_job_holds_the_gpus_binds_nothing_until_they_are_freed,
        the_watchdog_fails_a_gang_stuck_past_its_deadline_with_the_pod_groups_reason,
        a_gang_with_a_topology_key_lands_in_one_domain_or_not_at_all,
        a_release_order_lifts_the_gates_one_replica_type_after_the_other_once_the_gang_is_whole,
    ],
    support::scheduler::requirement
);

/// How long the scheduler gets to settle a gang (well under a second when it fits; a gang
/// that waited is retried within the scheduler's 10 s maximum backoff).
const LIMIT: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(3);
/// How long a gang that cannot fit whole is watched for a partly bound gang.
const WINDOW: Duration = Duration::from_secs(20);

/// The native-gang control plane with `gangplank controller --gang-scheduler kubernetes`.
fn plane() -> &'static ControlPlane {
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::NativeGang);
    let args = ["--leader-elect=false", "--gang-scheduler=kubernetes"];
    CONTROLLER.get_or_init(|| Controller::start(plane, "controller-native-gang", &args));
    plane
}

/// The job's PodGroup `<job>-pytorchjob`, once the controller has made it.
async fn pod_group(client: &kube::Client, ns: &str, job: &str) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &native_pod_group());
    let name = format!("{job}-pytorchjob");
    support::wait_for(&format!("PodGroup {ns}/{name}"), LIMIT, || async {
        match api.get_opt(&name).await {
            Ok(Some(pg)) => Ok(serde_json::to_value(pg).map_err(|e| e.to_string())?),
            Ok(None) => Err("not created".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}

/// The pods of `job` as JSON: the typed Pod (1.33 API) drops `spec.schedulingGroup`.
async fn raw_pods(client: &kube::Client, ns: &str, job: &str) -> Vec<Value> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<Pod>(&()));
    let list = api
        .list(&ListParams::default().labels(&jobs::selector(job)))
        .await
        .unwrap_or_else(|e| panic!("list pods of {job}: {e}"));
    list.items
        .into_iter()
        .map(|p| serde_json::to_value(p).unwrap_or_else(|e| panic!("pod as JSON: {e}")))
        .collect()
}

async fn a_gang_that_fits_is_bound_together() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("fits").await;
    create_gpu_pool(&client, &ns, 2).await;
    let job = jobs::gpu_gang("fits", 1, &ns);
    let created = jobs::create(&client, &ns, &job, false)
        .await
        .unwrap_or_else(|e| panic!("create job: {e}"));

    let placement = wait_placement(plane, &ns, &jobs::selector("fits"), 2, SETTLE, LIMIT).await;
    assert!(placement.all_bound(), "{}", placement.summary());
    let nodes: std::collections::BTreeSet<&String> = placement.bound.values().collect();
    assert_eq!(nodes.len(), 2, "one 8-GPU pod per node: {placement:?}");

    let pg = pod_group(&client, &ns, "fits").await;
    assert_eq!(
        pg["spec"]["schedulingPolicy"],
        json!({"gang": {"minCount": 2}})
    );
    let owner = &pg["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "PyTorchJob");
    assert_eq!(owner["uid"], created["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    for pod in raw_pods(&client, &ns, "fits").await {
        assert_eq!(
            pod["spec"]["schedulingGroup"],
            json!({"podGroupName": "fits-pytorchjob"}),
            "{}",
            pod["metadata"]["name"]
        );
        assert_eq!(pod["spec"]["schedulerName"], "default-scheduler");
    }
    support::wait_for("PodGroupScheduled=True", LIMIT, || async {
        let condition = scheduled_condition(&pod_group(&client, &ns, "fits").await);
        (condition["status"] == "True")
            .then_some(())
            .ok_or(format!("{condition}"))
    })
    .await;
}

async fn a_gang_admitted_while_another_job_holds_the_gpus_binds_nothing_until_they_are_freed() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("waits").await;
    create_gpu_pool(&client, &ns, 2).await;
    jobs::create(&client, &ns, &jobs::gpu_gang("first", 1, &ns), false)
        .await
        .unwrap_or_else(|e| panic!("create first: {e}"));
    let first = wait_placement(plane, &ns, &jobs::selector("first"), 2, SETTLE, LIMIT).await;
    assert!(first.all_bound(), "{}", first.summary());

    jobs::create(&client, &ns, &jobs::gpu_gang("second", 1, &ns), false)
        .await
        .unwrap_or_else(|e| panic!("create second: {e}"));
    support::wait_for("the second job's 2 pods", LIMIT, || async {
        let n = pods_of(&client, &ns, "second").await.len();
        (n == 2).then_some(()).ok_or(format!("{n} pods"))
    })
    .await;
    let started = Instant::now();
    while started.elapsed() < WINDOW {
        let now = Placement::read(&client, &ns, &jobs::selector("second")).await;
        assert!(
            now.bound.is_empty(),
            "the native gang bound part of a job that cannot fit whole: {}",
            now.summary()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let pg = pod_group(&client, &ns, "second").await;
    let condition = scheduled_condition(&pg);
    assert_eq!(condition["status"], "False", "{pg}");
    assert_eq!(condition["reason"], "Unschedulable", "{pg}");
    // The job says why at once, not only at its start deadline.
    let api = jobs::pytorch_api(&client, &ns);
    support::wait_for(
        "the second job's Created condition names the reason",
        LIMIT,
        || async {
            let job = api.get("second").await.map_err(|e| e.to_string())?;
            let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
            let conditions = job["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let created = conditions.iter().find(|c| c["type"] == "Created").cloned();
            let created = created.unwrap_or_default();
            let message = created["message"].as_str().unwrap_or_default();
            (created["reason"] == "PyTorchJobUnschedulable" && message.contains("Unschedulable"))
                .then_some(())
                .ok_or(format!("{created}"))
        },
    )
    .await;

    jobs::delete_with_pods(&client, &ns, "first").await;
    let second = wait_placement(plane, &ns, &jobs::selector("second"), 2, SETTLE, LIMIT).await;
    assert!(second.all_bound(), "{}", second.summary());
}

async fn the_watchdog_fails_a_gang_stuck_past_its_deadline_with_the_pod_groups_reason() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("stuck").await;
    // One 8-GPU node for a gang of two 8-GPU pods: never placed whole.
    create_gpu_pool(&client, &ns, 1).await;
    let mut job = jobs::gpu_gang("stuck", 1, &ns);
    job["spec"]["runPolicy"] = json!({"schedulingPolicy": {"scheduleTimeoutSeconds": 15}});
    jobs::create(&client, &ns, &job, false)
        .await
        .unwrap_or_else(|e| panic!("create job: {e}"));

    let api = jobs::pytorch_api(&client, &ns);
    let failed = support::wait_for("the job Failed by the watchdog", LIMIT, || async {
        let job = api.get("stuck").await.map_err(|e| e.to_string())?;
        let job = serde_json::to_value(job).map_err(|e| e.to_string())?;
        jobs::true_condition(&job, "Failed").ok_or(format!("conditions: {}", job["status"]))
    })
    .await;
    assert_eq!(
        failed["reason"], "PyTorchJobStartDeadlineExceeded",
        "{failed}"
    );
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("PyTorchJob stuck did not start within 15s: 2 pod(s) still Pending"),
        "{message}"
    );
    assert!(
        message.contains(": PodGroup is unschedulable: Unschedulable: "),
        "the PodGroup's PodGroupScheduled reason and message: {message}"
    );
    assert!(
        message.contains("; pod stuck-") && message.contains("nodes are available"),
        "the scheduler's reason for a pod, from its PodScheduled condition: {message}"
    );
    let placement = Placement::read(&client, &ns, &jobs::selector("stuck")).await;
    assert!(placement.bound.is_empty(), "{}", placement.summary());
}

const DOMAIN: &str = "example.com/nvlink-domain";

/// Domain `a` has 2 8-GPU nodes, domain `b` 3: a gang of three 8-GPU pods with the topology
/// key fits only `b`; one of four fits no domain, though the 5 nodes together would hold it.
async fn a_gang_with_a_topology_key_lands_in_one_domain_or_not_at_all() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("domains").await;
    let nodes: Vec<SimNode> = [("a", 2), ("b", 3)]
        .into_iter()
        .flat_map(|(domain, count)| {
            let ns = ns.clone();
            (0..count).map(move |i| {
                SimNode::new(&format!("{ns}-{domain}-{i}"))
                    .gpus(8, H100)
                    .label("pool", &ns)
                    .label(DOMAIN, domain)
            })
        })
        .collect();
    create_nodes(&client, &nodes).await;
    let domain_of = |node: &str| -> String {
        let rest = node.strip_prefix(&format!("{ns}-")).unwrap_or_default();
        rest.split('-').next().unwrap_or_default().to_string()
    };
    let keyed = |name: &str, workers: u32| {
        let mut job = jobs::gpu_gang(name, workers, &ns);
        job["metadata"]["annotations"] = json!({"gangplank.dev/topology-key": DOMAIN});
        job
    };

    // Four pods: no domain holds them, so nothing binds.
    jobs::create(&client, &ns, &keyed("four", 3), false)
        .await
        .unwrap_or_else(|e| panic!("create four: {e}"));
    let pg = pod_group(&client, &ns, "four").await;
    assert_eq!(
        pg["spec"]["schedulingConstraints"],
        json!({"topology": [{"key": DOMAIN}]}),
        "the apiserver keeps the constraint (TopologyAwareWorkloadScheduling on): {pg}"
    );
    support::wait_for("the four job's 4 pods", LIMIT, || async {
        let n = pods_of(&client, &ns, "four").await.len();
        (n == 4).then_some(()).ok_or(format!("{n} pods"))
    })
    .await;
    let started = Instant::now();
    while started.elapsed() < WINDOW {
        let now = Placement::read(&client, &ns, &jobs::selector("four")).await;
        assert!(
            now.bound.is_empty(),
            "a gang no domain holds was bound (in part): {}",
            now.summary()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let condition = scheduled_condition(&pod_group(&client, &ns, "four").await);
    assert_eq!(condition["status"], "False", "{condition}");
    jobs::delete_with_pods(&client, &ns, "four").await;

    // Three pods: only domain b holds them, all of them.
    jobs::create(&client, &ns, &keyed("three", 2), false)
        .await
        .unwrap_or_else(|e| panic!("create three: {e}"));
    let placement = wait_placement(plane, &ns, &jobs::selector("three"), 3, SETTLE, LIMIT).await;
    assert!(placement.all_bound(), "{}", placement.summary());
    let domains: std::collections::BTreeSet<String> =
        placement.bound.values().map(|n| domain_of(n)).collect();
    assert_eq!(
        domains,
        std::collections::BTreeSet::from(["b".to_string()]),
        "{placement:?}"
    );
    let nodes: std::collections::BTreeSet<&String> = placement.bound.values().collect();
    assert_eq!(nodes.len(), 3, "one 8-GPU pod per node: {placement:?}");
}

/// The PodGroup's `PodGroupScheduled` condition, or null.
fn scheduled_condition(pg: &Value) -> Value {
    let conditions = pg["status"]["conditions"].as_array();
    conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodGroupScheduled")
        .cloned()
        .unwrap_or(Value::Null)
}

const RELEASE_GATE: &str = "gangplank.dev/release-order";

/// What a watch of a job's pods saw of the release gate, in resourceVersion order.
#[derive(Debug, Default)]
struct Gates {
    /// Each pod as it was created: its name and whether it carried the gate.
    created: Vec<(String, bool)>,
    /// The pods whose gate went away, in the order it did, with how many pods existed then.
    lifted: Vec<(String, usize)>,
}

impl Gates {
    fn saw(&mut self, event: WatchEvent<Pod>) -> Result<(), String> {
        let pod = match event {
            WatchEvent::Added(pod) | WatchEvent::Modified(pod) => pod,
            WatchEvent::Deleted(_) | WatchEvent::Bookmark(_) => return Ok(()),
            WatchEvent::Error(e) => return Err(format!("watch: {e}")),
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        let gated = pod
            .spec
            .iter()
            .flat_map(|s| s.scheduling_gates.iter().flatten())
            .any(|g| g.name == RELEASE_GATE);
        if !self.created.iter().any(|(n, _)| *n == name) {
            self.created.push((name.clone(), gated));
        }
        let lifted = self.lifted.iter().any(|(n, _)| *n == name);
        if !gated && !lifted {
            self.lifted.push((name, self.created.len()));
        }
        Ok(())
    }
}

/// A Master and two Workers with `gangplank.dev/release-order: Worker,Master`: every pod is
/// created gated, the gates are lifted only once all three exist, the Workers' first, and
/// the gang is then bound whole.
async fn a_release_order_lifts_the_gates_one_replica_type_after_the_other_once_the_gang_is_whole() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("release").await;
    create_gpu_pool(&client, &ns, 3).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // The watch starts before the job exists, so it sees each pod's creation.
    let selector = jobs::selector("ordered");
    let listed = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap_or_else(|e| panic!("list pods: {e}"));
    let version = listed.metadata.resource_version.unwrap_or_default();
    let params = WatchParams::default().labels(&selector).timeout(120);
    let events = pods
        .watch(&params, &version)
        .await
        .unwrap_or_else(|e| panic!("watch pods: {e}"));
    let mut job = jobs::gpu_gang("ordered", 2, &ns);
    job["metadata"]["annotations"] = json!({RELEASE_GATE: "Worker,Master"});
    jobs::create(&client, &ns, &job, false)
        .await
        .unwrap_or_else(|e| panic!("create job: {e}"));

    let mut gates = Gates::default();
    let mut events = events.map_err(|e| e.to_string()).boxed();
    let watched = tokio::time::timeout(LIMIT, async {
        while gates.lifted.len() < 3 {
            let event = events.try_next().await?.ok_or("the watch ended")?;
            gates.saw(event)?;
        }
        Ok::<(), String>(())
    })
    .await;
    match watched {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}; so far: {gates:?}"),
        Err(_) => panic!("the three gates were not lifted within {LIMIT:?}: {gates:?}"),
    }

    assert_eq!(gates.created.len(), 3, "{gates:?}");
    assert!(
        gates.created.iter().all(|(_, gated)| *gated),
        "every pod is created with the release gate: {gates:?}"
    );
    assert!(
        gates.lifted.iter().all(|(_, existing)| *existing == 3),
        "no gate is lifted before the whole gang exists: {gates:?}"
    );
    let lifted: Vec<&str> = gates.lifted.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        lifted,
        ["ordered-worker-0", "ordered-worker-1", "ordered-master-0"],
        "Workers first, then the Master: {gates:?}"
    );

    let placement = wait_placement(plane, &ns, &selector, 3, SETTLE, LIMIT).await;
    assert!(placement.all_bound(), "{}", placement.summary());
    for pod in raw_pods(&client, &ns, "ordered").await {
        assert_eq!(
            pod["spec"].get("schedulingGates"),
            None,
            "no gate left: {}",
            pod["metadata"]["name"]
        );
        let released = &pod["metadata"]["annotations"]["gangplank.dev/released-at"];
        assert!(
            released.as_str().is_some_and(|t| t.ends_with('Z')),
            "the release time, where the watchdog's clock starts: {pod}"
        );
    }
}
