//! What the cluster holds for one job: [`observe`] reads the owned pods and Services from
//! the watch caches, the PodGroup and, only when a pod waits to be scheduled, the facts the
//! gang watchdog explains a stall with (FailedScheduling Events, missing PVCs).

use std::collections::BTreeSet;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event as CoreEvent, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::reflector::Store;
use kube::ResourceExt;

use super::mpi::objects::{SSH_PRIVATE_KEY, SSH_PUBLIC_KEY};
use super::observed::{
    controlled_by, ClusterFacts, Foreign, LauncherRbac, Observed, QueueProblem, SshSecret,
};
use super::snapshot::JobSnapshot;
use super::{mpi, naming, podgroup, Config, GangScheduler};

/// Reads what `job` owns. Pods and Services come from the caches (filtered by the job's
/// uid in a controller owner reference, so a same-named job created after a delete never
/// adopts its predecessor's pods); the rest are API reads.
pub async fn observe(
    client: &kube::Client,
    config: &Config,
    pods: &Store<Pod>,
    services: &Store<Service>,
    job: &JobSnapshot,
) -> Result<Observed, kube::Error> {
    let owned = |owner_refs: &[OwnerReference]| controlled_by(owner_refs, &job.uid);
    let pods: Vec<Pod> = pods
        .state()
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(job.namespace.as_str()))
        .filter(|p| owned(p.owner_references()))
        .map(|p| (**p).clone())
        .collect();
    let services: Vec<Service> = services
        .state()
        .iter()
        .filter(|s| s.namespace().as_deref() == Some(job.namespace.as_str()))
        .filter(|s| owned(s.owner_references()))
        .map(|s| (**s).clone())
        .collect();
    // A 404 that is not an object's NotFound (get_opt's None) is the API itself missing.
    let (pod_group, not_served) = match &config.gang {
        Some(gang) => match read_pod_group(client, job, podgroup::api_version(gang)).await {
            Ok(found) => (found, None),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                (None, Some(podgroup::not_served(gang, &status.message)))
            }
            Err(e) => return Err(e),
        },
        None => (None, None),
    };
    let hpa = read_hpa(client, job).await?;
    let mpi_objects = read_mpi_objects(client, job).await?;
    let mut facts = if pods.iter().any(is_pending) {
        cluster_facts(client, job, &pods).await?
    } else {
        ClusterFacts::default()
    };
    facts.pod_group_refused = not_served;
    // A gang that waits (no pods yet, or some Pending): what the scheduler said about it.
    if let Some(pg) = pod_group.as_ref() {
        if pods.is_empty() || pods.iter().any(is_pending) {
            facts.pod_group_warnings = pod_group_warnings(client, job, pg).await?;
        }
        if config.gang == Some(GangScheduler::Volcano) {
            facts.queue_problem = queue_problem(client, pg).await;
        }
    }
    Ok(Observed {
        pods,
        services,
        pod_group,
        hpa,
        config_map: mpi_objects.config_map,
        ssh_secret: mpi_objects.ssh_secret,
        launcher_rbac: mpi_objects.launcher_rbac,
        foreign: mpi_objects.foreign,
        facts,
    })
}

/// An MPIJob's shared objects: the ConfigMap, then v2beta1's SSH Secret (read whole, to see
/// that its keys are there; the keys are not kept) or v1's launcher ServiceAccount, Role and RoleBinding. One of
/// those names held by an object the job does not control (say, an MPIJob of the same name
/// of the other version) is reported in `foreign`, never adopted.
async fn read_mpi_objects(
    client: &kube::Client,
    job: &JobSnapshot,
) -> Result<MpiObjects, kube::Error> {
    let mut found = MpiObjects::default();
    if !mpi::is_mpi(job) {
        return Ok(found);
    }
    let ns = job.namespace.as_str();
    let foreign = &mut found.foreign;
    let name = mpi::config_name(job);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    found.config_map = ours(config_maps.get_opt(&name).await?, &name, job, foreign);
    if mpi::is_v2(job) {
        let name = mpi::secret_name(job);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        let secret = ours(secrets.get_opt(&name).await?, &name, job, foreign);
        found.ssh_secret = secret.as_ref().map_or(SshSecret::Absent, ssh_secret_state);
        return Ok(found);
    }
    let name = mpi::launcher_name(job);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let roles: Api<Role> = Api::namespaced(client.clone(), ns);
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let rbac = &mut found.launcher_rbac;
    rbac.service_account = ours(accounts.get_opt(&name).await?, &name, job, foreign).is_some();
    rbac.role = ours(roles.get_opt(&name).await?, &name, job, foreign);
    rbac.role_binding = ours(bindings.get_opt(&name).await?, &name, job, foreign).is_some();
    Ok(found)
}

/// Intact when both keys are there and not empty; the key itself is not judged (a pair we
/// wrote is valid, and rewriting a user's working key would log running ranks out).
fn ssh_secret_state(secret: &Secret) -> SshSecret {
    let data = secret.data.as_ref();
    let has = |key: &str| {
        data.and_then(|d| d.get(key))
            .is_some_and(|v| !v.0.is_empty())
    };
    match has(SSH_PRIVATE_KEY) && has(SSH_PUBLIC_KEY) {
        true => SshSecret::Intact,
        false => SshSecret::Damaged,
    }
}

/// `found` if the job controls it; a name held by anything else goes into `foreign`.
fn ours<K: ResourceExt<DynamicType = ()>>(
    found: Option<K>,
    name: &str,
    job: &JobSnapshot,
    foreign: &mut Vec<Foreign>,
) -> Option<K> {
    let object = found?;
    if controlled_by(object.owner_references(), &job.uid) {
        return Some(object);
    }
    foreign.push(Foreign::new(&K::kind(&()), name, object.owner_references()));
    None
}

#[derive(Default)]
struct MpiObjects {
    config_map: Option<ConfigMap>,
    ssh_secret: SshSecret,
    launcher_rbac: LauncherRbac,
    foreign: Vec<Foreign>,
}

/// The HPA `<job>` of an elastic PyTorchJob, if the job controls it: an HPA of the same
/// name that someone else made is never updated or deleted. Only jobs with an elasticPolicy
/// are asked about (one GET per reconcile is not spent on every PyTorchJob); a job that
/// drops its whole elasticPolicy leaves its HPA to the garbage collector, as upstream does.
async fn read_hpa(
    client: &kube::Client,
    job: &JobSnapshot,
) -> Result<Option<HorizontalPodAutoscaler>, kube::Error> {
    if job.extras.elastic_policy.is_none() {
        return Ok(None);
    }
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), &job.namespace);
    let found = api.get_opt(&job.name).await?;
    Ok(found.filter(|h| controlled_by(h.owner_references(), &job.uid)))
}

fn is_pending(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, None | Some("Pending"))
}

/// The API resource of a PodGroup of `api_version` (Volcano's or scheduler-plugins').
pub fn pod_group_resource(api_version: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: api_version.to_string(),
        kind: "PodGroup".to_string(),
        plural: "podgroups".to_string(),
    }
}

async fn read_pod_group(
    client: &kube::Client,
    job: &JobSnapshot,
    api_version: &str,
) -> Result<Option<serde_json::Value>, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &job.namespace,
        &pod_group_resource(api_version),
    );
    let found = api.get_opt(&naming::pod_group_name(job)).await?;
    Ok(found.and_then(|pg| serde_json::to_value(pg).ok()))
}

/// `<reason>: <message>` of each distinct Warning or `Unschedulable` Event on this PodGroup (its uid: not a
/// deleted predecessor's of the same name) last seen within [`WARNING_WINDOW`] of the latest
/// one: reasons the scheduler stopped giving are dropped, the ones it gives each cycle kept.
async fn pod_group_warnings(
    client: &kube::Client,
    job: &JobSnapshot,
    pod_group: &serde_json::Value,
) -> Result<Vec<String>, kube::Error> {
    let text = |p: &str| pod_group.pointer(p).and_then(serde_json::Value::as_str);
    let (Some(name), uid) = (text("/metadata/name"), text("/metadata/uid")) else {
        return Ok(Vec::new());
    };
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), &job.namespace);
    let fields = format!("involvedObject.kind=PodGroup,involvedObject.name={name}");
    let listed: Vec<(Option<k8s_openapi::jiff::Timestamp>, String)> = events
        .list(&ListParams::default().fields(&fields))
        .await?
        .items
        .into_iter()
        .filter(|e| uid.is_none() || e.involved_object.uid.as_deref() == uid)
        // Volcano's overcommit plugin records "resource in cluster is overused" as a
        // Normal Event of reason Unschedulable; its gang summary is a Warning.
        .filter(|e| {
            e.type_.as_deref() == Some("Warning")
                || e.reason
                    .as_deref()
                    .is_some_and(|r| r.contains("Unschedulable"))
        })
        .map(|e| {
            let last = e.last_timestamp.as_ref().map(|t| t.0);
            let seen = last
                .or(e.event_time.as_ref().map(|t| t.0))
                .or(e.first_timestamp.as_ref().map(|t| t.0));
            let text = [e.reason.as_deref(), e.message.as_deref()]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
            (seen, text)
        })
        .collect();
    let newest = listed.iter().filter_map(|(seen, _)| *seen).max();
    let recent = |seen: &Option<k8s_openapi::jiff::Timestamp>| match (seen, newest) {
        (Some(seen), Some(newest)) => {
            let gap = newest.duration_since(*seen);
            gap.as_secs() <= WARNING_WINDOW.as_secs() as i64
        }
        _ => true,
    };
    let mut warnings: Vec<String> = listed
        .into_iter()
        .filter(|(seen, text)| recent(seen) && !text.is_empty())
        .map(|(_, text)| text)
        .collect();
    warnings.sort();
    warnings.dedup();
    Ok(warnings)
}

/// What is wrong with the Queue a waiting Volcano PodGroup names, if Volcano would not say:
/// it does not exist, or it is not Open. Asked only while the PodGroup has no phase or is
/// Pending (not yet admitted); a read that fails (no RBAC on Queues, say) is no answer, not a
/// failed reconcile.
async fn queue_problem(
    client: &kube::Client,
    pod_group: &serde_json::Value,
) -> Option<QueueProblem> {
    let phase = pod_group.pointer("/status/phase");
    let phase = phase
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    if !matches!(phase, "" | "Pending") {
        return None;
    }
    let queue = pod_group.pointer("/spec/queue")?.as_str()?;
    let resource = ApiResource {
        plural: "queues".to_string(),
        kind: "Queue".to_string(),
        ..pod_group_resource(podgroup::VOLCANO_API)
    };
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    match queues.get_opt(queue).await {
        Ok(None) => Some(QueueProblem::Missing(queue.to_string())),
        Ok(Some(found)) => {
            // No state yet: the queue controller has not looked at it; not a verdict.
            let state = found.data.pointer("/status/state").and_then(|s| s.as_str());
            let state = state.filter(|s| !s.is_empty() && *s != "Open")?;
            Some(QueueProblem::NotOpen {
                queue: queue.to_string(),
                state: state.to_string(),
            })
        }
        Err(e) => {
            tracing::debug!(queue, error = %e, "cannot read the PodGroup's Queue");
            None
        }
    }
}

/// Volcano records its reasons for a waiting gang every scheduling cycle (one second) until
/// the event recorder's spam filter holds them back (about 25 per object, then one per five
/// minutes); a reason older than the newest by more than this is one it stopped giving.
const WARNING_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// FailedScheduling messages of the job's pods and the PVCs they mount that do not exist.
async fn cluster_facts(
    client: &kube::Client,
    job: &JobSnapshot,
    pods: &[Pod],
) -> Result<ClusterFacts, kube::Error> {
    let names: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), &job.namespace);
    let params = ListParams::default().fields("involvedObject.kind=Pod,reason=FailedScheduling");
    let mut failed_scheduling = std::collections::BTreeMap::new();
    let mut listed = events.list(&params).await?.items;
    // Latest last, so the newest message per pod wins.
    listed.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
    for event in listed {
        let pod = event.involved_object.name.clone().unwrap_or_default();
        if names.contains(&pod) {
            failed_scheduling.insert(pod, event.message.clone().unwrap_or_default());
        }
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &job.namespace);
    let mut missing_pvcs = Vec::new();
    for claim in claimed_pvcs(pods) {
        if claims.get_opt(&claim).await?.is_none() {
            missing_pvcs.push(claim);
        }
    }
    Ok(ClusterFacts {
        failed_scheduling,
        missing_pvcs,
        pod_group_warnings: Vec::new(),
        pod_group_refused: None,
        queue_problem: None,
    })
}

fn claimed_pvcs(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(|p| p.spec.as_ref()?.volumes.as_ref())
        .flatten()
        .filter_map(|v| Some(v.persistent_volume_claim.as_ref()?.claim_name.clone()))
        .collect()
}
