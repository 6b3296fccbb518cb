//! Jobs and the Node/Queue inventory from a live cluster (in-cluster config or KUBECONFIG).
//!
//! Entry points: [`connect`] (a client, once the API server has answered), [`inventory`]
//! (Nodes and Volcano Queues, listed once) and [`jobs`] (every stored job of the kinds
//! whose CRDs are installed, found by discovery).
//!
//! # Errors
//! An API server that does not answer is an error naming it ([`ConnectError`]). After
//! that, a kind that cannot be listed is recorded as unreadable and the other kinds still
//! run; a kind whose CRD is not installed is a note, since most clusters run one operator.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Audit;
use crate::cluster::priority_classes::resource as priority_classes;
use crate::cluster::Inventory;
use crate::job::kinds::KINDS;
use crate::job::KindSpec;
use crate::review::DocumentError;

/// Longer than any healthy API server takes to say its version, short enough that a wrong
/// address in the kubeconfig is reported before the user gives up on the command.
const CONNECT_LIMIT: Duration = Duration::from_secs(10);

/// Objects per list request unless `--page-size` says otherwise: the page size kubectl
/// uses, so a cluster with many thousands of jobs is read in bounded responses.
pub const PAGE: u32 = 500;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("no Kubernetes API configuration (in-cluster service account or KUBECONFIG)")]
    Config(#[source] kube::config::InferConfigError),
    #[error("cannot build a client for the Kubernetes API server at {url}")]
    Client {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot reach the Kubernetes API server at {url}")]
    Unreachable {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error("the Kubernetes API server at {url} did not answer within {limit:?}")]
    Timeout { url: String, limit: Duration },
}

/// A client, and the server's URL, after the server has answered `/version`.
pub async fn connect() -> Result<(kube::Client, String), ConnectError> {
    let config = kube::Config::infer().await.map_err(ConnectError::Config)?;
    let url = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(|source| ConnectError::Client {
        url: url.clone(),
        source,
    })?;
    match tokio::time::timeout(CONNECT_LIMIT, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok((client, url)),
        Ok(Err(source)) => Err(ConnectError::Unreachable { url, source }),
        Err(_) => Err(ConnectError::Timeout {
            url,
            limit: CONNECT_LIMIT,
        }),
    }
}

/// Nodes and, when their CRDs are installed, Volcano Queues and Kueue ClusterQueues,
/// LocalQueues, Cohorts, ResourceFlavors and Topologies (v1beta2 where served, else v1beta1); `Err` says what could not be listed (the cluster-aware policies then stay
/// silent, which the caller notes).
pub async fn inventory(client: &kube::Client, page: u32) -> Result<Inventory, String> {
    let nodes = list_all(&Api::<Node>::all(client.clone()), page)
        .await
        .map_err(|e| format!("cannot list Nodes: {}", crate::error_chain(&e)))?;
    let [cluster_queues, local_queues, cohorts, flavors, topologies] =
        crate::cluster::watch::kueue_resources();
    let [claims, classes, network_policies, namespaces] =
        crate::cluster::watch::storage_and_network_resources();
    Ok(Inventory {
        nodes,
        volcano_queues: custom(
            client,
            &crate::cluster::watch::queue_resource(),
            "Volcano Queues",
            page,
        )
        .await?,
        kueue_cluster_queues: served(client, &cluster_queues, "Kueue ClusterQueues", page).await?,
        kueue_local_queues: served(client, &local_queues, "Kueue LocalQueues", page).await?,
        kueue_cohorts: served(client, &cohorts, "Kueue Cohorts", page).await?,
        kueue_flavors: served(client, &flavors, "Kueue ResourceFlavors", page).await?,
        kueue_topologies: served(client, &topologies, "Kueue Topologies", page).await?,
        claims: listable(client, &claims, "PersistentVolumeClaims", page).await?,
        storage_classes: listable(client, &classes, "StorageClasses", page).await?,
        priority_classes: listable(client, &priority_classes(), "PriorityClasses", page).await?,
        network_policies: listable(client, &network_policies, "NetworkPolicies", page).await?,
        namespaces: listable(client, &namespaces, "Namespaces", page).await?,
        // Unknown (null) when discovery cannot answer: the rule that reads it stays quiet.
        native_gang_api: crate::cluster::discovery::native_gang_api(client)
            .await
            .ok(),
        source: "cluster".into(),
        ..Inventory::default()
    })
}

/// Every object of a built-in kind, as JSON; `None` (unknown, the policies that read it
/// stay silent) when the caller may not list it.
async fn listable(
    client: &kube::Client,
    resource: &ApiResource,
    what: &str,
    page: u32,
) -> Result<Option<Vec<Value>>, String> {
    listed(client, resource, what, &[403, 404], page).await
}

/// Every object of a custom resource, as JSON; `None` when its CRD is not installed.
async fn custom(
    client: &kube::Client,
    resource: &ApiResource,
    what: &str,
    page: u32,
) -> Result<Option<Vec<Value>>, String> {
    listed(client, resource, what, &[404], page).await
}

/// Every object of the first of `versions` (one kind at the versions it may be served at, the
/// preferred first) that is served; `None` when none is (its CRD is not installed).
async fn served(
    client: &kube::Client,
    versions: &[ApiResource],
    what: &str,
    page: u32,
) -> Result<Option<Vec<Value>>, String> {
    for resource in versions {
        if let Some(items) = custom(client, resource, what, page).await? {
            return Ok(Some(items));
        }
    }
    Ok(None)
}

/// Every object of `resource`; `None` when the API server answers one of `unknown_on`.
async fn listed(
    client: &kube::Client,
    resource: &ApiResource,
    what: &str,
    unknown_on: &[u16],
    page: u32,
) -> Result<Option<Vec<Value>>, String> {
    match list_json(client, resource, page).await {
        Ok(items) => Ok(Some(items)),
        Err(kube::Error::Api(status)) if unknown_on.contains(&status.code) => Ok(None),
        Err(e) => Err(format!("cannot list {what}: {}", crate::error_chain(&e))),
    }
}

async fn list_json(
    client: &kube::Client,
    resource: &ApiResource,
    page: u32,
) -> Result<Vec<Value>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let items = list_all(&api, page).await?;
    Ok(items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}

/// Every stored job (in `namespace`, or all) of the kinds whose CRDs the cluster serves,
/// with its `apiVersion` and `kind` set (list items come without them).
pub async fn jobs(
    client: &kube::Client,
    namespace: Option<&str>,
    page: u32,
    audit: &mut Audit,
) -> Vec<(Value, String)> {
    let mut out = Vec::new();
    for (spec, served) in discover(client, audit).await {
        let resource = ApiResource {
            group: spec.group.into(),
            version: spec.version.into(),
            api_version: spec.api_version(),
            kind: spec.kind.into(),
            plural: served,
        };
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let what = format!("{}.{}/{}", resource.plural, spec.group, spec.version);
        match list_all(&api, page).await {
            Ok(items) => out.extend(items.into_iter().filter_map(|mut item| {
                item.types = Some(kube::api::TypeMeta {
                    api_version: spec.api_version(),
                    kind: spec.kind.into(),
                });
                let item = serde_json::to_value(item).ok()?;
                Some((item, format!("cluster: {what}")))
            })),
            Err(e) => audit.unreadable.push(DocumentError {
                source: format!("cluster: {what}"),
                message: format!("cannot list: {}", crate::error_chain(&e)),
            }),
        }
    }
    out.extend(trainer_objects(client, namespace, page, audit).await);
    out
}

/// Kubeflow Trainer v2's runtimes and TrainJobs (the runtimes first: TrainJobs are judged
/// on them), when the Trainer's CRDs are installed.
async fn trainer_objects(
    client: &kube::Client,
    namespace: Option<&str>,
    page: u32,
    audit: &mut Audit,
) -> Vec<(Value, String)> {
    use crate::trainer::{TrainerKind, GROUP, VERSION};
    let mut out = Vec::new();
    for (kind, plural) in [
        (
            TrainerKind::ClusterTrainingRuntime,
            "clustertrainingruntimes",
        ),
        (TrainerKind::TrainingRuntime, "trainingruntimes"),
        (TrainerKind::TrainJob, "trainjobs"),
    ] {
        let resource = ApiResource {
            group: GROUP.into(),
            version: VERSION.into(),
            api_version: format!("{GROUP}/{VERSION}"),
            kind: kind.as_str().into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = match namespace {
            Some(ns) if kind != TrainerKind::ClusterTrainingRuntime => {
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        let what = format!("{plural}.{GROUP}/{VERSION}");
        match list_all(&api, page).await {
            Ok(items) => out.extend(items.into_iter().filter_map(|mut item| {
                item.types = Some(kube::api::TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                });
                Some((serde_json::to_value(item).ok()?, format!("cluster: {what}")))
            })),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                audit.notes.push(format!(
                    "{} {GROUP}/{VERSION}: CRD not installed; skipped",
                    kind.as_str()
                ));
            }
            Err(e) => audit.unreadable.push(DocumentError {
                source: format!("cluster: {what}"),
                message: format!("cannot list: {}", crate::error_chain(&e)),
            }),
        }
    }
    out
}

/// The kinds whose resources the cluster serves, each with its plural. A group version
/// the server does not know (404) is a note; any other failure makes the kinds unreadable.
async fn discover(client: &kube::Client, audit: &mut Audit) -> Vec<(&'static KindSpec, String)> {
    let mut found = Vec::new();
    let mut versions: Vec<String> = Vec::new();
    for version in KINDS.iter().map(KindSpec::api_version) {
        if !versions.contains(&version) {
            versions.push(version);
        }
    }
    for version in versions {
        let kinds = KINDS.iter().filter(|k| k.api_version() == version);
        let resources = match client.list_api_group_resources(&version).await {
            Ok(list) => list.resources,
            Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
            Err(e) => {
                audit.unreadable.push(DocumentError {
                    source: format!("cluster: /apis/{version}"),
                    message: format!("cannot discover resources: {}", crate::error_chain(&e)),
                });
                continue;
            }
        };
        for spec in kinds {
            // Subresources (`pytorchjobs/status`) share the kind; the plural has no slash.
            let served = resources
                .iter()
                .find(|r| r.kind == spec.kind && !r.name.contains('/'));
            match served {
                Some(r) => found.push((spec, r.name.clone())),
                None => audit.notes.push(format!(
                    "{} {version}: CRD not installed; skipped",
                    spec.kind
                )),
            }
        }
    }
    found
}

/// Every object of `api` that `params` selects, `page` objects per request (limit and
/// continue): a large cluster is never read in one response.
pub async fn list_all_with<K>(
    api: &Api<K>,
    mut params: ListParams,
    page: u32,
) -> Result<Vec<K>, kube::Error>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut items = Vec::new();
    params = params.limit(page);
    loop {
        let listed = api.list(&params).await?;
        items.extend(listed.items);
        match listed.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}

/// Every object of `api`, page by page.
async fn list_all<K>(api: &Api<K>, page: u32) -> Result<Vec<K>, kube::Error>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    list_all_with(api, ListParams::default(), page).await
}
