//! Kubernetes' native gang (1.36 `scheduling.k8s.io/v1alpha2`) for TrainJobs, which no Trainer
//! release offers yet (Trainer KEP-3015 is open). Three parts, each where it must be:
//!
//! 1. the `trainer_gang` policy (`gang: kubernetes`) marks a TrainJob whose runtime has no
//!    `podGroupPolicy`: the annotation [`MIN_COUNT_ANNOTATION`] (the pods that run together)
//!    and a `runtimePatches` entry of gangplank's own that labels the gang's pod templates
//!    [`POD_GROUP_LABEL`]`: <trainjob>`;
//! 2. `gangplank controller --trainjobs` creates one standalone PodGroup per such TrainJob,
//!    named after it, owned by it ([`desired_pod_group`]);
//! 3. the mutating webhook sets `spec.schedulingGroup.podGroupName` on each labelled pod at
//!    CREATE ([`pod_patch`]; the field is immutable after), keyed on the label the Trainer
//!    and JobSet copy onto the pods, so the webhook needs no cache of TrainJobs.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;

use crate::controller::managed::Managed;
use crate::controller::scope::{dynamic_api, Scope};
use serde_json::{json, Value};
use tracing::{info, warn};

/// On a TrainJob: how many pods form its native gang (`gang.minCount`).
pub const MIN_COUNT_ANNOTATION: &str = "gangplank.dev/native-gang-min-count";
/// On a gang pod (through gangplank's `runtimePatches` entry): the PodGroup it belongs to.
pub const POD_GROUP_LABEL: &str = "gangplank.dev/pod-group";
/// The `runtimePatches` manager of gangplank's entry.
pub const PATCH_MANAGER: &str = "gangplank.dev/native-gang";

/// The JSON patch that puts a labelled pod into its PodGroup, on CREATE of a pod that names
/// no scheduling group yet; `None` for any other request.
pub fn pod_patch(operation: &str, pod: &Value) -> Option<json_patch::Patch> {
    if operation != "CREATE" || pod.get("kind").and_then(Value::as_str) != Some("Pod") {
        return None;
    }
    let group = pod
        .pointer("/metadata/labels")
        .and_then(|l| l.get(POD_GROUP_LABEL))
        .and_then(Value::as_str)
        .filter(|g| !g.is_empty())?;
    if pod
        .pointer("/spec/schedulingGroup")
        .is_some_and(|g| !g.is_null())
    {
        return None;
    }
    pod.get("spec").filter(|s| s.is_object())?;
    serde_json::from_value(json!([{
        "op": "add",
        "path": "/spec/schedulingGroup",
        "value": {"podGroupName": group},
    }]))
    .ok()
}

/// The PodGroup a marked TrainJob gets, or `None` when it is not marked (or the mark is not
/// a positive count).
pub fn desired_pod_group(trainjob: &Value) -> Option<Value> {
    let meta = trainjob.get("metadata")?;
    let min_count: i64 = meta
        .pointer("/annotations")
        .and_then(|a| a.get(MIN_COUNT_ANNOTATION))
        .and_then(Value::as_str)?
        .parse()
        .ok()
        .filter(|n| *n >= 1 && *n <= i64::from(i32::MAX))?;
    let text = |k: &str| meta.get(k).and_then(Value::as_str);
    let (name, namespace, uid) = (text("name")?, text("namespace")?, text("uid")?);
    Some(json!({
        "apiVersion": crate::controller::podgroup::NATIVE_API,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gangplank"},
            "ownerReferences": [{
                "apiVersion": trainjob.get("apiVersion").and_then(Value::as_str).unwrap_or("trainer.kubeflow.org/v1alpha1"),
                "kind": "TrainJob",
                "name": name,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }))
}

fn trainjobs() -> ApiResource {
    ApiResource {
        group: super::GROUP.into(),
        version: super::VERSION.into(),
        api_version: format!("{}/{}", super::GROUP, super::VERSION),
        kind: super::TRAINJOB.into(),
        plural: "trainjobs".into(),
    }
}

fn pod_groups() -> ApiResource {
    crate::controller::observe::pod_group_resource(crate::controller::podgroup::NATIVE_API)
}

/// `gangplank controller --trainjobs`: creates the PodGroup of every marked TrainJob, and
/// again if it is deleted while the TrainJob lives, until `shutdown`. The PodGroup's spec is
/// immutable: it is created once and never patched; the garbage collector removes it with
/// the TrainJob (its owner). With `--namespaces`, one such controller per namespace (as the
/// training kinds', src/controller/runner.rs says why); with `--namespace-selector`, only
/// TrainJobs in the namespaces `managed` admits.
pub async fn run(
    client: kube::Client,
    scope: Scope,
    managed: Managed,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let loops = scope.each().into_iter().map(|namespace| {
        let context = Arc::new(Native {
            client: client.clone(),
            managed: managed.clone(),
        });
        run_in(context, namespace, shutdown.clone())
    });
    futures::future::join_all(loops.collect::<Vec<_>>()).await;
}

/// What the reconciles share.
struct Native {
    client: kube::Client,
    managed: Managed,
}

async fn run_in(
    context: Arc<Native>,
    namespace: Option<&str>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let jobs = dynamic_api(&context.client, namespace, &trainjobs());
    let groups = dynamic_api(&context.client, namespace, &pod_groups());
    let scope = namespace.unwrap_or("(all namespaces)");
    info!(
        namespace = scope,
        "creating the native PodGroups of TrainJobs marked {MIN_COUNT_ANNOTATION}"
    );
    let controller = Controller::new_with(jobs, watcher::Config::default(), trainjobs()).owns_with(
        groups,
        pod_groups(),
        watcher::Config::default(),
    );
    context.managed.watch_jobs(controller.store());
    let picked_up = context.managed.picked_up(controller.store(), trainjobs());
    controller
        .reconcile_on(picked_up)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context.clone())
        .for_each(|_| async {})
        .await;
}

async fn reconcile(job: Arc<DynamicObject>, ctx: Arc<Native>) -> Result<Action, kube::Error> {
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if !ctx
        .managed
        .admits(job.metadata.namespace.as_deref().unwrap_or_default())
    {
        ctx.managed.skipped();
        return Ok(Action::await_change());
    }
    let value = serde_json::to_value(job.as_ref()).map_err(kube::Error::SerdeError)?;
    let (Some(group), Some(namespace)) =
        (desired_pod_group(&value), job.metadata.namespace.as_deref())
    else {
        return Ok(Action::await_change());
    };
    let group: DynamicObject = serde_json::from_value(group).map_err(kube::Error::SerdeError)?;
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), namespace, &pod_groups());
    match api.create(&PostParams::default(), &group).await {
        Ok(_) => info!(
            namespace,
            trainjob = job.metadata.name.as_deref().unwrap_or_default(),
            "created the TrainJob's native PodGroup"
        ),
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => return Err(e),
    }
    Ok(Action::await_change())
}

fn error_policy(job: Arc<DynamicObject>, error: &kube::Error, _: Arc<Native>) -> Action {
    warn!(trainjob = job.metadata.name.as_deref().unwrap_or_default(), error = %error, "cannot create the TrainJob's native PodGroup; retrying");
    Action::requeue(std::time::Duration::from_secs(5))
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::expect_used)] // fixed test documents
mod tests {
    use super::*;

    #[test]
    fn labelled_pods_join_their_group_once_at_create() {
        let pod = json!({"kind": "Pod", "metadata": {"labels": {POD_GROUP_LABEL: "llm"}}, "spec": {"containers": []}});
        let patch = pod_patch("CREATE", &pod).expect("a patch");
        assert_eq!(
            serde_json::to_value(patch).expect("JSON"),
            json!([{"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": "llm"}}])
        );
        assert!(
            pod_patch("UPDATE", &pod).is_none(),
            "immutable after create"
        );
        let mut grouped = pod.clone();
        grouped["spec"]["schedulingGroup"] = json!({"podGroupName": "other"});
        assert!(
            pod_patch("CREATE", &grouped).is_none(),
            "a group already named is kept"
        );
        assert!(pod_patch("CREATE", &json!({"kind": "Pod", "spec": {}})).is_none());
    }

    #[test]
    fn a_marked_trainjob_gets_a_standalone_gang_owned_by_it() {
        let job = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "llm", "namespace": "nlp", "uid": "u1", "annotations": {MIN_COUNT_ANNOTATION: "4"}}});
        let group = desired_pod_group(&job).expect("a PodGroup");
        assert_eq!(group["spec"]["schedulingPolicy"]["gang"]["minCount"], 4);
        assert_eq!(group["metadata"]["ownerReferences"][0]["uid"], "u1");
        let mut bad = job.clone();
        bad["metadata"]["annotations"][MIN_COUNT_ANNOTATION] = json!("0");
        assert!(desired_pod_group(&bad).is_none());
    }
}
