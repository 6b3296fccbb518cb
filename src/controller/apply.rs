//! Carries out a [`Plan`]'s actions against the API, in order (a run of pod and Service
//! creates at once), stopping at the first error (the next reconcile plans again from what
//! did happen).
//!
//! Creates are idempotent: 409 AlreadyExists on an object the job controls means the watch
//! cache is behind, not that anything is wrong. A 409 on a pod, Service, or an MPIJob's
//! ConfigMap, ServiceAccount, Role or RoleBinding reads the object: one the job does not
//! control is [`Foreign`], reported to the caller, never taken for the job's own (the caches
//! select by operator label, so another workload's pod of the same name is only seen here).
//! Deletes of what is already gone (404) are done too, and so is releasing a pod that is
//! gone. A release ([`Action::ReleasePods`]) patches its pods one after the other.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::rbac::v1::Role;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::ByteString;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use super::mpi::objects::{SSH_PRIVATE_KEY, SSH_PUBLIC_KEY};
use super::observe::pod_group_resource;
use super::observed::{controlled_by, Foreign};
use super::release::RELEASED_AT_ANNOTATION;
use super::snapshot::JobSnapshot;
use super::ssh_key;
use super::{Action, NewPod};
use crate::job::release_order::RELEASE_GATE;

/// Field manager of every write the controller makes.
pub const FIELD_MANAGER: &str = "gangplank-controller";

/// What failed, and on which action (for logs and the error metric's closed label set).
#[derive(Debug, thiserror::Error)]
#[error("{action} {name}: {source}")]
pub struct ApplyError {
    pub action: &'static str,
    pub name: String,
    #[source]
    pub source: kube::Error,
}

/// Applies `actions` for `job` (whose API resource is `resource`) in order. Returns the
/// objects of other owners its creates found holding their names; the actions after the
/// batch that found them are not applied (the caller plans again, knowing them).
pub async fn apply(
    client: &kube::Client,
    resource: &ApiResource,
    job: &JobSnapshot,
    actions: &[Action],
) -> Result<Vec<Foreign>, ApplyError> {
    // Pods and Services of one gang do not depend on one another: a run of creates goes out
    // at once (a gang of 64 pods is 128 writes, which one after another would take the
    // reconcile seconds). Everything else keeps the plan's order.
    let mut rest = actions;
    while let Some(first) = rest.first() {
        let run = if is_create(first) {
            rest.iter().take_while(|a| is_create(a)).count()
        } else {
            1
        };
        let (batch, after) = rest.split_at(run);
        let results = futures::future::join_all(
            batch
                .iter()
                .map(|action| apply_one(client, resource, job, action)),
        )
        .await;
        let held: Vec<Foreign> = results
            .into_iter()
            .collect::<Result<Vec<Option<Foreign>>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        if !held.is_empty() {
            return Ok(held);
        }
        rest = after;
    }
    Ok(Vec::new())
}

fn is_create(action: &Action) -> bool {
    matches!(action, Action::CreatePod(_) | Action::CreateService(_))
}

/// One action; `Some` when a create found its name held by another owner's object.
async fn apply_one(
    client: &kube::Client,
    resource: &ApiResource,
    job: &JobSnapshot,
    action: &Action,
) -> Result<Option<Foreign>, ApplyError> {
    let ns = job.namespace.as_str();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), ns);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let create = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let merge = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let (what, name, result) = match action {
        Action::CreatePod(new) => {
            let (name, result) = match new.scheduling_group {
                None => create_in(client, job, &new.pod).await,
                Some(_) => create_grouped_pod(client, job, new).await,
            };
            return checked("create pod", name, result);
        }
        Action::DeletePod { name, .. } => {
            let result = pods
                .delete(name, &DeleteParams::background())
                .await
                .map(drop);
            ("delete pod", name.clone(), gone_ok(result))
        }
        Action::CreateService(service) => {
            let (name, result) = create_in(client, job, &**service).await;
            return checked("create service", name, result);
        }
        Action::DeleteService { name, .. } => {
            let result = services.delete(name, &DeleteParams::background()).await;
            ("delete service", name.clone(), gone_ok(result.map(drop)))
        }
        Action::CreatePodGroup(object) => {
            let (api, name) = pod_group_api(client, ns, object);
            let typed: Result<DynamicObject, _> = serde_json::from_value(object.clone());
            let result = match typed {
                Ok(typed) => api.create(&create, &typed).await.map(drop),
                Err(e) => Err(kube::Error::SerdeError(e)),
            };
            ("create podgroup", name, exists_ok(result))
        }
        Action::UpdatePodGroup {
            api_version,
            name,
            spec,
        } => {
            let api = pod_groups(client, ns, api_version);
            let patch = json!({ "spec": spec });
            let result = api
                .patch(name, &merge, &Patch::Merge(&patch))
                .await
                .map(drop);
            ("update podgroup", name.clone(), result)
        }
        Action::DeletePodGroup { api_version, name } => {
            let api = pod_groups(client, ns, api_version);
            let result = api
                .delete(name, &DeleteParams::background())
                .await
                .map(drop);
            ("delete podgroup", name.clone(), gone_ok(result))
        }
        Action::CreateHpa(hpa) => {
            // Another owner's HPA of that name is left alone, as `observe` leaves it: an
            // elastic job without its HPA still runs, at its replicas.
            let (name, result) = create_in(client, job, &**hpa).await;
            ("create hpa", name, result.map(drop))
        }
        Action::UpdateHpa { name, spec } => {
            let patch = json!({ "spec": spec });
            let result = hpas.patch(name, &merge, &Patch::Merge(&patch)).await;
            ("update hpa", name.clone(), result.map(drop))
        }
        Action::DeleteHpa { name } => {
            let result = hpas.delete(name, &DeleteParams::background()).await;
            ("delete hpa", name.clone(), gone_ok(result.map(drop)))
        }
        Action::CreateConfigMap(config_map) => {
            let (name, result) = create_in(client, job, &**config_map).await;
            return checked("create configmap", name, result);
        }
        Action::UpdateConfigMap { name, data } => {
            let patch = json!({ "data": data });
            let result = config_maps.patch(name, &merge, &Patch::Merge(&patch)).await;
            ("update configmap", name.clone(), result.map(drop))
        }
        Action::CreateSshSecret(secret) => {
            let name = secret.metadata.name.clone().unwrap_or_default();
            let result = match with_new_key(secret) {
                Ok(filled) => secrets.create(&create, &filled).await.map(drop),
                Err(e) => Err(kube::Error::Service(Box::new(e))),
            };
            // 409: a Secret exists already and keeps its key (never rotated).
            ("create ssh secret", name, exists_ok(result))
        }
        Action::RepairSshSecret { name } => {
            let result = match with_new_key(&Secret::default()) {
                Ok(fresh) => {
                    let patch = json!({ "data": fresh.data });
                    secrets
                        .patch(name, &merge, &Patch::Merge(&patch))
                        .await
                        .map(drop)
                }
                Err(e) => Err(kube::Error::Service(Box::new(e))),
            };
            ("repair ssh secret", name.clone(), result)
        }
        Action::CreateServiceAccount(account) => {
            let (name, result) = create_in(client, job, &**account).await;
            return checked("create serviceaccount", name, result);
        }
        Action::CreateRole(role) => {
            let (name, result) = create_in(client, job, &**role).await;
            return checked("create role", name, result);
        }
        Action::UpdateRole { name, rules } => {
            let api: Api<Role> = Api::namespaced(client.clone(), ns);
            let patch = json!({ "rules": rules });
            let result = api.patch(name, &merge, &Patch::Merge(&patch)).await;
            ("update role", name.clone(), result.map(drop))
        }
        Action::CreateRoleBinding(binding) => {
            let (name, result) = create_in(client, job, &**binding).await;
            return checked("create rolebinding", name, result);
        }
        Action::DeleteJob => {
            // Background: the job goes now, its pods and Services after it by owner reference.
            let result = jobs.delete(&job.name, &DeleteParams::background()).await;
            ("delete job", job.name.clone(), gone_ok(result.map(drop)))
        }
        Action::ReleasePods { names, at } => return release_pods(&pods, names, at).await,
        Action::PatchJobAnnotations(annotations) => {
            let patch = json!({ "metadata": { "annotations": annotations } });
            let result = jobs.patch(&job.name, &merge, &Patch::Merge(&patch)).await;
            ("annotate job", job.name.clone(), result.map(drop))
        }
    };
    checked(what, name, result.map(|()| None))
}

/// Lifts [`RELEASE_GATE`] from the pods `names`, one after the other: kube-scheduler queues
/// each pod when it sees the update that clears its last gate, so each PATCH is answered
/// before the next is sent. The strategic merge patch deletes that gate only (the list
/// merges by name): a gate someone else put on the pod stays. The same patch records when
/// ([`RELEASED_AT_ANNOTATION`], the watchdog's clock). A pod gone (404) is done.
async fn release_pods(
    pods: &Api<Pod>,
    names: &[String],
    at: &Time,
) -> Result<Option<Foreign>, ApplyError> {
    let patch = json!({
        "metadata": {"annotations": {RELEASED_AT_ANNOTATION: at}},
        "spec": {"schedulingGates": [{"name": RELEASE_GATE, "$patch": "delete"}]}
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    for name in names {
        let result = pods.patch(name, &params, &Patch::Strategic(&patch)).await;
        checked(
            "release pod",
            name.clone(),
            gone_ok(result.map(drop)).map(|()| None),
        )?;
    }
    Ok(None)
}

/// `result` of action `what` on `name`, its error with that context.
fn checked(
    what: &'static str,
    name: String,
    result: Result<Option<Foreign>, kube::Error>,
) -> Result<Option<Foreign>, ApplyError> {
    result.map_err(|source| ApplyError {
        action: what,
        name,
        source,
    })
}

/// A pod with fields the typed [`Pod`] cannot carry (`spec.schedulingGroup`), sent as JSON;
/// a 409 AlreadyExists is judged as in [`create_in`].
async fn create_grouped_pod(
    client: &kube::Client,
    job: &JobSnapshot,
    new: &NewPod,
) -> (String, Result<Option<Foreign>, kube::Error>) {
    let name = new.pod.metadata.name.clone().unwrap_or_default();
    let object = new
        .to_json()
        .and_then(serde_json::from_value::<DynamicObject>);
    let result = match object {
        Ok(object) => {
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                &job.namespace,
                &ApiResource::erase::<Pod>(&()),
            );
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PostParams::default()
            };
            match api.create(&params, &object).await {
                Err(e) if is_conflict(&e) => holder(&api, "Pod", &name, job).await,
                other => other.map(|_| None),
            }
        }
        Err(e) => Err(kube::Error::SerdeError(e)),
    };
    (name, result)
}

fn pod_groups(client: &kube::Client, ns: &str, api_version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &pod_group_resource(api_version))
}

fn pod_group_api(client: &kube::Client, ns: &str, object: &Value) -> (Api<DynamicObject>, String) {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let api = pod_groups(client, ns, text("/apiVersion"));
    (api, text("/metadata/name").to_string())
}

/// The planned Secret with a freshly generated key pair in it.
fn with_new_key(secret: &Secret) -> Result<Secret, rcgen::Error> {
    let pair = ssh_key::generate()?;
    let data = BTreeMap::from([
        (
            SSH_PRIVATE_KEY.to_string(),
            ByteString(pair.private_pem.into_bytes()),
        ),
        (
            SSH_PUBLIC_KEY.to_string(),
            ByteString(pair.authorized_key.into_bytes()),
        ),
    ]);
    Ok(Secret {
        data: Some(data),
        ..secret.clone()
    })
}

/// Creates `object` in the job's namespace: its name, and the other owner's object found
/// holding that name, if a 409 AlreadyExists shows one (see [`holder`]).
async fn create_in<K>(
    client: &kube::Client,
    job: &JobSnapshot,
    object: &K,
) -> (String, Result<Option<Foreign>, kube::Error>)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), &job.namespace);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let name = object.meta().name.clone().unwrap_or_default();
    let result = match api.create(&params, object).await {
        Err(e) if is_conflict(&e) => holder(&api, &K::kind(&()), &name, job).await,
        other => other.map(|_| None),
    };
    (name, result)
}

/// After a 409 on creating `name`: `None` when the object there is the job's own (the watch
/// cache was behind) or gone again (the next reconcile creates it), else the other owner's
/// object that holds the name.
async fn holder<K>(
    api: &Api<K>,
    kind: &str,
    name: &str,
    job: &JobSnapshot,
) -> Result<Option<Foreign>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Some(found) = api.get_opt(name).await? else {
        return Ok(None);
    };
    let owners = found.meta().owner_references.as_deref().unwrap_or_default();
    Ok((!controlled_by(owners, &job.uid)).then(|| Foreign::new(kind, name, owners)))
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

fn exists_ok(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(e) if is_conflict(&e) => Ok(()),
        other => other,
    }
}

fn gone_ok(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn the_planned_ssh_secret_gets_a_fresh_key_pair_and_keeps_its_metadata() {
        let planned = Secret {
            metadata: ObjectMeta {
                name: Some("mnist-ssh".into()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/ssh-auth".into()),
            ..Secret::default()
        };
        let filled = with_new_key(&planned).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(filled.metadata, planned.metadata);
        assert_eq!(filled.type_, planned.type_);
        let data = filled.data.unwrap_or_default();
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        assert_eq!(keys, vec![SSH_PRIVATE_KEY, SSH_PUBLIC_KEY]);
        let public = data
            .get(SSH_PUBLIC_KEY)
            .map(|b| b.0.clone())
            .unwrap_or_default();
        assert!(public.starts_with(b"ecdsa-sha2-nistp521 "));
        let again = with_new_key(&planned).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(
            again
                .data
                .unwrap_or_default()
                .get(SSH_PUBLIC_KEY)
                .map(|b| b.0.clone()),
            Some(public),
            "a new key each time the Secret is created"
        );
    }
}
