//! Training jobs through the Kubernetes API: resources by kind, and a small valid job.

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{json, Value};

/// An image pinned by digest: the `images` policy refuses unpinned ones.
pub const IMAGE: &str = "registry.example.com/ml/pytorch:2.4.0@sha256:\
                         897f10e5f6f63d68a5e340c9ce4546f4720b48ee657e891e18c2b7515b5566c5";

/// The API resource of a training kind (their plurals are all `<kind lowercased>s`).
pub fn resource(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

/// The namespaced API of `object`'s kind.
pub fn api_for(client: &kube::Client, namespace: &str, object: &Value) -> Api<DynamicObject> {
    let field = |name: &str| object[name].as_str().unwrap_or_default();
    let resource = resource(field("apiVersion"), field("kind"));
    Api::namespaced_with(client.clone(), namespace, &resource)
}

pub fn pytorch_api(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &resource("kubeflow.org/v1", "PyTorchJob"),
    )
}

/// The PyTorchJob `name` as stored in `namespace`, as JSON.
pub async fn stored_pytorch_job(client: &kube::Client, namespace: &str, name: &str) -> Value {
    let stored = pytorch_api(client, namespace)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("PyTorchJob {namespace}/{name}: {e}"));
    serde_json::to_value(stored).expect("a stored job is JSON")
}

/// Creates `object` in `namespace` (`dry_run`: `?dryRun=All`); the object the apiserver
/// returns, or its refusal.
pub async fn create(
    client: &kube::Client,
    namespace: &str,
    object: &Value,
    dry_run: bool,
) -> Result<Value, kube::Error> {
    let api = api_for(client, namespace, object);
    let typed: DynamicObject = serde_json::from_value(object.clone()).expect("a Kubernetes object");
    let params = PostParams {
        dry_run,
        ..PostParams::default()
    };
    let created = api.create(&params, &typed).await?;
    Ok(serde_json::to_value(created).expect("object serializes"))
}

/// A small PyTorchJob: `masters` Masters and 2 Workers, image pinned, no GPUs. Only the
/// coordinator rule objects to it, when `masters` is not 1.
pub fn pytorch_job(name: &str, masters: u32) -> Value {
    let replica = |replicas: u32| {
        json!({
            "replicas": replicas,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{
                "name": "pytorch",
                "image": IMAGE,
                "command": ["python", "/workspace/train.py"],
            }]}},
        })
    };
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(masters), "Worker": replica(2)}},
    })
}

/// The message of an apiserver refusal (`kube::Error::Api`), or a panic naming what came.
pub fn refusal(result: Result<Value, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        Err(other) => panic!("expected a refusal from the apiserver, got error {other}"),
        Ok(object) => panic!("expected a refusal from the apiserver, got {object}"),
    }
}

/// The condition of `type_` with status True in `job`'s status, if it has one.
pub fn true_condition(job: &Value, type_: &str) -> Option<Value> {
    let conditions = job["status"]["conditions"].as_array()?;
    conditions
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == "True")
        .cloned()
}

/// Waits until an Event with `reason` is recorded in `ns`; its note. On timeout, panics
/// listing the reasons that were there.
pub async fn wait_event(client: &kube::Client, ns: &str, reason: &str) -> String {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), ns);
    super::wait_for(
        &format!("event {reason}"),
        std::time::Duration::from_secs(20),
        || async {
            let events = api
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let reasons: Vec<String> = events
                .items
                .iter()
                .filter_map(|e| e.reason.clone())
                .collect();
            events
                .items
                .iter()
                .find(|e| e.reason.as_deref() == Some(reason))
                .map(|e| e.note.clone().unwrap_or_default())
                .ok_or_else(|| format!("events: {reasons:?}"))
        },
    )
    .await
}

/// A PyTorchJob of 1 Master + `workers` Workers, 8 GPUs each (nprocPerNode 8), on the nodes
/// labelled `pool` (see [`create_gpu_node`]).
pub fn gpu_gang(name: &str, workers: u32, pool: &str) -> Value {
    let mut job = pytorch_job(name, 1);
    job["spec"]["nprocPerNode"] = json!("8");
    for r in ["Master", "Worker"] {
        let spec = &mut job["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"];
        spec["containers"][0]["resources"] =
            json!({"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 8}});
        spec["nodeSelector"] = json!({"pool": pool});
    }
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(workers);
    job
}

/// Creates an 8-GPU Node labelled `pool`, with its capacity written through the status
/// subresource as a kubelet would (no kubelet runs in the test control plane).
pub async fn create_gpu_node(client: &kube::Client, name: &str, pool: &str) {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, Patch, PatchParams};
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": pool,
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
    }))
    .expect("Node");
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("Node created");
    let resources = json!({"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": "8", "pods": "110"});
    let status = json!({"status": {"capacity": resources, "allocatable": resources}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("Node status");
}

/// The label selector of job `name`'s pods (the operator's job-name label).
pub fn selector(name: &str) -> String {
    format!("training.kubeflow.org/job-name={name}")
}

/// The string at `pointer`, or "" when there is none.
pub fn get_str<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Creates `job` in `ns`, which must succeed; the stored object.
pub async fn create_ok(client: &kube::Client, ns: &str, job: &Value) -> Value {
    let name = get_str(job, "/metadata/name").to_string();
    create(client, ns, job, false)
        .await
        .unwrap_or_else(|e| panic!("create {name} in {ns}: {e}"))
}

/// Deletes PyTorchJob `name` and, as no kubelet runs to confirm, its pods at once; waits
/// until they are gone (the scheduler counts a pod's resources until then).
pub async fn delete_with_pods(client: &kube::Client, ns: &str, name: &str) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams, ListParams};
    pytorch_api(client, ns)
        .delete(name, &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("delete job {name}: {e}"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let params = ListParams::default().labels(&selector(name));
    let limit = std::time::Duration::from_secs(60);
    super::wait_for(&format!("pods of {name} gone"), limit, || async {
        let now = DeleteParams::default().grace_period(0);
        pods.delete_collection(&now, &params)
            .await
            .map_err(|e| e.to_string())?;
        let left = pods.list(&params).await.map_err(|e| e.to_string())?;
        let n = left.items.len();
        (n == 0).then_some(()).ok_or(format!("{n} left"))
    })
    .await;
}

/// The Events whose involvedObject is `kind`/`name` in `ns`, as `reason: message`.
pub async fn events_of(client: &kube::Client, ns: &str, kind: &str, name: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let fields = format!("involvedObject.kind={kind},involvedObject.name={name}");
    let params = kube::api::ListParams::default().fields(&fields);
    let events = api.list(&params).await.map(|l| l.items).unwrap_or_default();
    events
        .into_iter()
        .map(|e| {
            let reason = e.reason.unwrap_or_default();
            format!("{reason}: {}", e.message.unwrap_or_default())
        })
        .collect()
}

/// Waits until `kind`/`name` in `ns` has an Event (`reason: message`) that `matches`; its
/// Events then. An Event is recorded beside the condition or phase it explains, not with it:
/// under load it lands after, so it is waited for, never listed once.
pub async fn wait_event_of(
    client: &kube::Client,
    ns: &str,
    kind: &str,
    name: &str,
    matches: impl Fn(&str) -> bool,
) -> Vec<String> {
    let what = format!("a matching Event on {kind} {name}");
    super::wait_for(&what, std::time::Duration::from_secs(60), || async {
        let events = events_of(client, ns, kind, name).await;
        events
            .iter()
            .any(|e| matches(e))
            .then(|| events.clone())
            .ok_or(format!("{events:?}"))
    })
    .await
}

/// [`wait_event_of`] a PyTorchJob.
pub async fn wait_job_event(
    client: &kube::Client,
    ns: &str,
    name: &str,
    matches: impl Fn(&str) -> bool,
) -> Vec<String> {
    wait_event_of(client, ns, "PyTorchJob", name, matches).await
}
