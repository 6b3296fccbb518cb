//! Kubernetes' native gang for Kubeflow Trainer TrainJobs, which no Trainer release offers:
//! with `trainer_gang` `gang: kubernetes`, the webhook marks a TrainJob whose runtime has no
//! podGroupPolicy (min-count annotation, gangplank's runtimePatches entry labelling the gang's
//! pods), `gangplank controller --trainjobs` creates its standalone `scheduling.k8s.io/
//! v1alpha2` PodGroup, and the pod webhook sets each labelled pod's `spec.schedulingGroup` at
//! CREATE. A real kube-scheduler (GenericWorkload, GangScheduling) then binds the TrainJob's
//! pods all together or not at all.
//!
//! No Trainer or JobSet controller runs: the test creates the pods the way JobSet would from
//! the rendered template (names `<trainjob>-node-0-<i>`, JobSet's labels, the template's
//! labels). Each test has its own node pool. Skipped, with the reason, without kube-scheduler.

mod support;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{json, Value};
use support::controller::Controller;
use support::nodes::{create_gpu_pool, create_nodes, delete_nodes, gpu_pool};
use support::scheduler::{native_pod_group, wait_placement};
use support::{jobs, ControlPlane, Crds, Scheduling, Webhooks};

e2e_suite!(
    "e2e_trainer_native",
    [
        a_trainjob_without_a_runtime_gang_gets_a_native_one_and_binds_whole,
        a_native_trainjob_gang_that_cannot_fit_binds_no_pod_until_it_can,
    ],
    support::scheduler::requirement
);

const LIMIT: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(3);
/// How long a gang that cannot fit whole is watched for a partly bound gang.
const WINDOW: Duration = Duration::from_secs(20);
const IMAGE: &str = "registry.example.com/ml/train:2@sha256:0000000000000000000000000000000000000000000000000000000000000002";

/// The native-gang plane with the Trainer's CRDs, webhooks whose trainer_gang gives native
/// gangs, and `gangplank controller --trainjobs`.
fn plane() -> &'static ControlPlane {
    static WEBHOOKS: OnceLock<Webhooks> = OnceLock::new();
    static CONTROLLER: OnceLock<Controller> = OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::Trainer, Scheduling::NativeGang);
    WEBHOOKS.get_or_init(|| {
        let policies = native_policies(plane);
        support::on_own_runtime(move || Webhooks::install(plane, policies))
    });
    let args = [
        "--leader-elect=false",
        "--gang-scheduler=kubernetes",
        "--trainjobs",
    ];
    CONTROLLER.get_or_init(|| Controller::start(plane, "controller-trainjobs", &args));
    plane
}

/// policies/ with `trainer_gang: {params: {gang: kubernetes}}` in params.yaml.
fn native_policies(plane: &ControlPlane) -> PathBuf {
    let dir = plane.file("policies-trainer-native");
    let copy = std::process::Command::new("cp")
        .arg("-r")
        .arg(support::repo().join("policies"))
        .arg(&dir)
        .status()
        .expect("cp policies");
    assert!(copy.success(), "copy policies/");
    let params = dir.join("params.yaml");
    let mut doc: Value =
        yaml_serde::from_str(&std::fs::read_to_string(&params).expect("params.yaml"))
            .expect("YAML");
    doc["policies"]["trainer_gang"] = json!({"params": {"gang": "kubernetes"}});
    std::fs::write(&params, yaml_serde::to_string(&doc).expect("YAML out")).expect("write params");
    dir
}

/// A ClusterTrainingRuntime without podGroupPolicy whose `node` pods ask 8 GPUs of `pool`.
fn runtime(name: &str, pool: &str) -> Value {
    support::trainer::runtime(name, gpu_pod(pool), json!({}))
}

/// One pod of 8 GPUs on `pool`: the runtime's `node` template, and the pods JobSet makes.
fn gpu_pod(pool: &str) -> Value {
    json!({
        "nodeSelector": {"pool": pool},
        "containers": [{"name": "node", "image": IMAGE,
            "resources": {"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 8}}}],
    })
}

/// Applies the runtime and a `nodes`-node TrainJob `name` on it in `ns` (retrying while the
/// webhook's watch has not seen the runtime); the stored TrainJob.
async fn admit(plane: &ControlPlane, ns: &str, name: &str, nodes: u32) -> Value {
    let runtime_name = format!("{ns}-torch");
    plane
        .kubectl_apply(None, &runtime(&runtime_name, ns), &[])
        .expect("runtime applied");
    let job = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime_name}, "trainer": {"numNodes": nodes}},
    });
    support::trainer::apply_when_runtime_known(plane, ns, &job, LIMIT)
        .await
        .unwrap_or_else(|e| panic!("TrainJob {name} refused: {e}"));
    let client = plane.client().await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client,
        ns,
        &jobs::resource("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    );
    serde_json::to_value(api.get(name).await.expect("stored TrainJob")).expect("JSON")
}

/// The labels gangplank's runtimePatches entry gives the `node` pod template.
fn gang_labels(trainjob: &Value) -> Value {
    let entry = trainjob["spec"]["runtimePatches"]
        .as_array()
        .and_then(|p| {
            p.iter()
                .find(|e| e["manager"] == "gangplank.dev/native-gang")
        })
        .unwrap_or_else(|| panic!("no gangplank runtimePatches entry: {trainjob}"));
    entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        ["template"]["metadata"]["labels"]
        .clone()
}

/// Creates the `count` pods JobSet would create for job `node` of TrainJob `name`, as JSON
/// (the typed Pod of the 1.33 API would drop spec.schedulingGroup); returns them as stored.
async fn create_pods(
    client: &kube::Client,
    ns: &str,
    name: &str,
    pool: &str,
    labels: &Value,
    count: usize,
) -> Vec<Value> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<Pod>(&()));
    let mut stored = Vec::new();
    for i in 0..count {
        let mut pod_labels = json!({
            "jobset.sigs.k8s.io/jobset-name": name,
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "job": name,
        });
        if let (Some(all), Some(extra)) = (pod_labels.as_object_mut(), labels.as_object()) {
            all.extend(extra.clone());
        }
        let pod: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{name}-node-0-{i}"), "labels": pod_labels},
            "spec": gpu_pod(pool),
        }))
        .expect("pod");
        let created = api
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("create pod {i}: {e}"));
        stored.push(serde_json::to_value(created).expect("JSON"));
    }
    stored
}

async fn wait_pod_group(client: &kube::Client, ns: &str, name: &str) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &native_pod_group());
    support::wait_for(&format!("PodGroup {ns}/{name}"), LIMIT, || async {
        match api.get_opt(name).await {
            Ok(Some(pg)) => serde_json::to_value(pg).map_err(|e| e.to_string()),
            Ok(None) => Err("not created".to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}

async fn a_trainjob_without_a_runtime_gang_gets_a_native_one_and_binds_whole() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("tj-fits").await;
    create_gpu_pool(&client, &ns, 3).await;
    let trainjob = admit(plane, &ns, "llm", 3).await;
    assert_eq!(
        trainjob["metadata"]["annotations"]["gangplank.dev/native-gang-min-count"], "3",
        "{trainjob}"
    );
    let labels = gang_labels(&trainjob);
    assert_eq!(labels, json!({"gangplank.dev/pod-group": "llm"}));

    let group = wait_pod_group(&client, &ns, "llm").await;
    assert_eq!(
        group["spec"]["schedulingPolicy"],
        json!({"gang": {"minCount": 3}})
    );
    assert_eq!(
        group["metadata"]["ownerReferences"][0]["uid"],
        trainjob["metadata"]["uid"]
    );

    let pods = create_pods(&client, &ns, "llm", &ns, &labels, 3).await;
    for pod in &pods {
        assert_eq!(
            pod["spec"]["schedulingGroup"],
            json!({"podGroupName": "llm"}),
            "the pod webhook joined the pod to its gang: {pod}"
        );
    }
    let placement = wait_placement(plane, &ns, "job=llm", 3, SETTLE, LIMIT).await;
    assert!(placement.all_bound(), "{}", placement.summary());
}

async fn a_native_trainjob_gang_that_cannot_fit_binds_no_pod_until_it_can() {
    let plane = plane();
    let client = plane.client().await;
    let ns = plane.namespace("tj-waits").await;
    // Admitted while the pool has 4 nodes; one leaves before the pods come.
    let nodes = create_gpu_pool(&client, &ns, 4).await;
    let trainjob = admit(plane, &ns, "big", 4).await;
    wait_pod_group(&client, &ns, "big").await;
    let gone = nodes[3..].to_vec();
    delete_nodes(&client, &gone).await;

    create_pods(&client, &ns, "big", &ns, &gang_labels(&trainjob), 4).await;
    let started = Instant::now();
    while started.elapsed() < WINDOW {
        let placement = support::scheduler::Placement::read(&client, &ns, "job=big").await;
        assert!(
            placement.bound.is_empty(),
            "a gang of 4 on 3 nodes is bound in part: {}",
            placement.summary()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The fourth node comes back: the whole gang binds.
    let back: Vec<_> = gpu_pool(&ns, 4).into_iter().skip(3).collect();
    create_nodes(&client, &back).await;
    let placement = wait_placement(plane, &ns, "job=big", 4, SETTLE, LIMIT).await;
    assert!(placement.all_bound(), "{}", placement.summary());
}
