//! Gang scheduling: the job's PodGroup for Volcano (`scheduling.volcano.sh/v1beta1`),
//! scheduler-plugins (`scheduling.x-k8s.io/v1alpha1`) or Kubernetes itself
//! (`scheduling.k8s.io/v1alpha2`, 1.36), and the pod decoration that ties pods to it.
//!
//! Entry points: [`desired`], [`reconcile`], [`decorate`], [`scheduling_group`],
//! [`ready_for_pods`], [`unschedulable_message`].
//!
//! The native PodGroup is standalone (no Workload): kube-scheduler reads only PodGroups, and
//! a Workload would add a second immutable object whose only reader is a person with kubectl.
//! Its spec is immutable, so it is created and never updated; the job's controller owner
//! reference lets the garbage collector delete it with the job.
//!
//! Differences from upstream: the name carries the kind (see
//! [`naming::pod_group_name`](super::naming::pod_group_name)); the PodGroup is updated only
//! when its spec differs (upstream updates on every reconcile); computed minResources count
//! replica types in rank order (Master first) instead of by PriorityClass value, which a pure
//! planner cannot look up.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Map, Value};

use super::action::Action;
use super::config::GangScheduler;
use super::elastic;
use super::mpi;
use super::naming;
use super::observed::QueueProblem;
use super::snapshot::{JobSnapshot, Replica};
use crate::job::network_topology::{self, NETWORK_TOPOLOGY_ANNOTATION};
use crate::job::quantity::Nanos;

pub const VOLCANO_API: &str = "scheduling.volcano.sh/v1beta1";
pub const SCHEDULER_PLUGINS_API: &str = "scheduling.x-k8s.io/v1alpha1";
/// Kubernetes 1.36's PodGroup (gate GenericWorkload, `--runtime-config` to serve it).
pub const NATIVE_API: &str = "scheduling.k8s.io/v1alpha2";
/// The condition kube-scheduler sets on a native PodGroup after each gang scheduling cycle.
pub const NATIVE_SCHEDULED_CONDITION: &str = "PodGroupScheduled";
/// Volcano reads the pod's group from this annotation.
pub const VOLCANO_GROUP_ANNOTATION: &str = "scheduling.k8s.io/group-name";
pub const VOLCANO_TASK_ANNOTATION: &str = "volcano.sh/task-spec";
/// scheduler-plugins' coscheduling reads the pod's group from this label.
pub const SCHEDULER_PLUGINS_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// The node label key whose one domain (rack, NVLink domain) must hold a native gang: the
/// PodGroup's `schedulingConstraints.topology` (the gang_scheduling policy's
/// `nativeTopologyKey` writes it; empty means none).
pub const TOPOLOGY_KEY_ANNOTATION: &str = "gangplank.dev/topology-key";

pub fn api_version(gang: &GangScheduler) -> &'static str {
    match gang {
        GangScheduler::Volcano => VOLCANO_API,
        GangScheduler::SchedulerPlugins { .. } => SCHEDULER_PLUGINS_API,
        GangScheduler::Kubernetes => NATIVE_API,
    }
}

/// How many pods must be placed at once: `schedulingPolicy.minAvailable`, else the elastic
/// minimum, else every pod.
pub fn min_member(job: &JobSnapshot) -> i32 {
    let policy = job.run_policy.scheduling_policy.as_ref();
    policy
        .and_then(|p| p.min_available)
        .or_else(|| elastic::min_member(job))
        .unwrap_or_else(|| job.total_replicas())
}

/// `schedulingPolicy.priorityClass`, else (MPIJob) the templates' priorityClassName.
fn priority_class(job: &JobSnapshot) -> Option<String> {
    let policy = job.run_policy.scheduling_policy.as_ref();
    policy
        .and_then(|p| p.priority_class.clone())
        .filter(|p| !p.is_empty())
        .or_else(|| mpi::template_priority_class(job))
}

/// The PodGroup the job should have. `existing` is the observed one: a Volcano queue is
/// immutable once set, so an existing PodGroup keeps its queue.
pub fn desired(job: &JobSnapshot, gang: &GangScheduler, existing: Option<&Value>) -> Value {
    let spec = match gang {
        GangScheduler::Kubernetes => native_spec(job),
        _ => member_spec(job, gang, existing),
    };
    json!({
        "apiVersion": api_version(gang),
        "kind": "PodGroup",
        "metadata": {
            "name": naming::pod_group_name(job),
            "namespace": job.namespace,
            "annotations": job.annotations,
            "ownerReferences": [naming::owner_reference(job)],
        },
        "spec": spec,
    })
}

/// Volcano's and scheduler-plugins' spec: `minMember`, `minResources` and each one's extras.
fn member_spec(
    job: &JobSnapshot,
    gang: &GangScheduler,
    existing: Option<&Value>,
) -> Map<String, Value> {
    let policy = job.run_policy.scheduling_policy.clone().unwrap_or_default();
    let min_member = min_member(job);
    let min_resources = match &policy.min_resources {
        Some(r) => json!(r),
        None => json!(computed_min_resources(job, min_member)),
    };
    let mut spec = Map::new();
    spec.insert("minMember".into(), json!(min_member));
    spec.insert("minResources".into(), min_resources);
    match gang {
        GangScheduler::Volcano => {
            let queue = existing
                .and_then(|pg| pg.pointer("/spec/queue"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(policy.queue)
                .filter(|q| !q.is_empty())
                .or_else(|| mpi::volcano_queue_annotation(job))
                .unwrap_or_else(|| "default".to_string());
            spec.insert("queue".into(), json!(queue));
            if let Some(pc) = priority_class(job) {
                spec.insert("priorityClassName".into(), json!(pc));
            }
            if let Some(Ok(topology)) = network_topology(job) {
                spec.insert("networkTopology".into(), topology);
            }
        }
        GangScheduler::SchedulerPlugins { .. } => {
            if let Some(t) = policy.schedule_timeout_seconds {
                spec.insert("scheduleTimeoutSeconds".into(), json!(t));
            }
        }
        GangScheduler::Kubernetes => {}
    }
    spec
}

/// A native PodGroup's spec: a gang of [`min_member`] (the API requires at least 1), the
/// job's topology key (annotation [`TOPOLOGY_KEY_ANNOTATION`], when it is a valid label key;
/// an invalid one is never written, see [`topology_problem`]) and the job's PriorityClass.
/// kube-apiserver drops `schedulingConstraints` unless the TopologyAwareWorkloadScheduling
/// gate is on. kube-apiserver drops `priorityClassName` unless the
/// WorkloadAwarePreemption gate is on, and its Priority admission plugin then fills in
/// `priority` from the class; `priority` is never written here (the plugin refuses a value
/// that differs from the class's).
fn native_spec(job: &JobSnapshot) -> Map<String, Value> {
    let mut spec = Map::new();
    spec.insert(
        "schedulingPolicy".into(),
        json!({"gang": {"minCount": min_member(job).max(1)}}),
    );
    if let Some(key) = topology_key(job).filter(|k| label_key_problem(k).is_none()) {
        spec.insert(
            "schedulingConstraints".into(),
            json!({"topology": [{"key": key}]}),
        );
    }
    if let Some(pc) = priority_class(job) {
        spec.insert("priorityClassName".into(), json!(pc));
    }
    spec
}

/// The job's topology key: its annotation [`TOPOLOGY_KEY_ANNOTATION`] unless empty.
fn topology_key(job: &JobSnapshot) -> Option<&str> {
    job.annotations
        .get(TOPOLOGY_KEY_ANNOTATION)
        .map(String::as_str)
        .filter(|k| !k.is_empty())
}

/// The job's Volcano `networkTopology` (annotation [`NETWORK_TOPOLOGY_ANNOTATION`]), or why
/// its value is not one; `None` without the annotation.
fn network_topology(job: &JobSnapshot) -> Option<Result<Value, String>> {
    let value = job.annotations.get(NETWORK_TOPOLOGY_ANNOTATION)?;
    Some(network_topology::parse(value))
}

/// Why the job's PodGroup cannot be written as the job asks: a native gang's topology key is
/// not a node label key, which kube-apiserver would refuse on every try; a Volcano gang's
/// network topology annotation is not one. Said on the job like a refused PodGroup (the
/// planner writes nothing); `None` for other gangs, which ignore both.
pub fn topology_problem(job: &JobSnapshot, gang: Option<&GangScheduler>) -> Option<String> {
    if gang == Some(&GangScheduler::Volcano) {
        let why = network_topology(job)?.err()?;
        return Some(format!(
            "annotation {NETWORK_TOPOLOGY_ANNOTATION} is not a network topology: {why}"
        ));
    }
    if gang != Some(&GangScheduler::Kubernetes) {
        return None;
    }
    let key = topology_key(job)?;
    let problem = label_key_problem(key)?;
    Some(format!(
        "annotation {TOPOLOGY_KEY_ANNOTATION} is {key:?}, which is not a node label key \
         ({problem}): set it to one such as topology.kubernetes.io/rack, or remove it"
    ))
}

/// What makes `key` no label key (Kubernetes' qualified name): an optional DNS subdomain
/// prefix of at most 253 characters and `/`, then a name of 1 to 63 alphanumerics, `-`, `_`
/// and `.`, starting and ending alphanumeric.
fn label_key_problem(key: &str) -> Option<&'static str> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() || prefix.len() > 253 {
            return Some("the prefix before / must have 1 to 253 characters");
        }
        let label_ok = |l: &str| {
            let edge =
                |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
            edge(l.chars().next())
                && edge(l.chars().last())
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if !prefix.split('.').all(label_ok) {
            return Some("the prefix before / must be a lowercase DNS subdomain");
        }
    }
    if name.is_empty() || name.len() > 63 {
        return Some("the name must have 1 to 63 characters");
    }
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if !(edge(name.chars().next()) && edge(name.chars().last()) && name.chars().all(inner)) {
        return Some(
            "the name may hold only alphanumerics, -, _ and ., starting and ending alphanumeric (at most one /)",
        );
    }
    None
}

/// The action that makes the observed PodGroup the desired one, if any. A native PodGroup's
/// spec is immutable, so one that exists is left as it is.
pub fn reconcile(
    job: &JobSnapshot,
    gang: &GangScheduler,
    existing: Option<&Value>,
) -> Option<Action> {
    let want = desired(job, gang, existing);
    match existing {
        None => Some(Action::CreatePodGroup(want)),
        Some(_) if *gang == GangScheduler::Kubernetes => None,
        Some(pg) => {
            let (have, spec) = (pg.get("spec"), want.get("spec"));
            let differs = spec.and_then(Value::as_object).is_some_and(|s| {
                s.iter()
                    .any(|(k, v)| have.and_then(|h| h.get(k)) != Some(v))
            });
            differs.then(|| Action::UpdatePodGroup {
                api_version: api_version(gang).to_string(),
                name: naming::pod_group_name(job),
                spec: spec.cloned().unwrap_or_default(),
            })
        }
    }
}

/// Whether pods may be created: Volcano admits a PodGroup (phase past Pending) only when the
/// whole gang fits its queue; creating pods before that only fills the node with Pending
/// pods. scheduler-plugins never holds pods back, and kube-scheduler holds a native gang's
/// pods itself (PreEnqueue) until the PodGroup and `minCount` pods exist.
pub fn ready_for_pods(gang: &GangScheduler, existing: Option<&Value>) -> bool {
    match gang {
        GangScheduler::SchedulerPlugins { .. } | GangScheduler::Kubernetes => true,
        GangScheduler::Volcano => {
            let phase = existing
                .and_then(|pg| pg.pointer("/status/phase"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            !matches!(phase, "" | "Pending")
        }
    }
}

/// Why the gang scheduler does not place the job's gang, as `<reason>: <message>`: the one
/// place a scheduler's reason for a stuck gang enters the planner (the job's condition and
/// Event while it waits, the watchdog's message at the deadline).
///
/// In order: the PodGroup's condition saying it cannot be placed (Volcano's `Unschedulable`
/// when True, the native `PodGroupScheduled` when False, reason `Unschedulable` or
/// `SchedulerError`); else, while a Volcano PodGroup is not admitted (phase empty or
/// Pending; it gets no condition until pods exist, and the controller creates none before
/// admission), the scheduler's recent Warning Events on it (`warnings`: `Unschedulable:
/// resource in cluster is overused: overused nvidia.com/gpu`, `Unschedulable: queue
/// resource quota insufficient: ...`), joined with `; ` in a fixed order so that the text
/// changes only when the reasons do. Volcano's per-cycle summary (`0/0 tasks in gang
/// unschedulable: pod group is not ready, 9 minAvailable`) says only that the gang waits, so
/// it comes after the causes.
pub fn unschedulable_message(pod_group: Option<&Value>, warnings: &[String]) -> Option<String> {
    let pod_group = pod_group?;
    unschedulable_condition(pod_group).or_else(|| {
        let phase = pod_group
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !matches!(phase, "" | "Pending") {
            return None;
        }
        let mut ordered: Vec<&String> = warnings.iter().filter(|w| !w.is_empty()).collect();
        ordered.sort_by_key(|w| (w.contains(GANG_SUMMARY), w.as_str()));
        ordered.dedup();
        let joined: Vec<&str> = ordered.into_iter().map(String::as_str).collect();
        (!joined.is_empty()).then(|| joined.join("; "))
    })
}

/// Why no PodGroup of `gang`'s API can be written: the API server does not serve it
/// (`detail`: its answer).
pub fn not_served(gang: &GangScheduler, detail: &str) -> String {
    let install = match gang {
        GangScheduler::Volcano => {
            "install Volcano (its CRDs: scheduling.volcano.sh_podgroups.yaml)"
        }
        GangScheduler::SchedulerPlugins { .. } => "install scheduler-plugins' PodGroup CRD",
        GangScheduler::Kubernetes => "serve it (kube-apiserver 1.36 with GenericWorkload)",
    };
    format!(
        "the API server does not serve {} PodGroups ({detail}): {install}, or run the \
         controller with another --gang-scheduler",
        api_version(gang)
    )
}

/// What the controller says of a Queue that admits nothing, where Volcano says nothing (a
/// missing Queue: no phase, no Event) or nothing useful (a Closed one: "pod group is not
/// ready").
pub fn queue_problem(problem: &QueueProblem) -> String {
    match problem {
        QueueProblem::Missing(queue) => format!(
            "Queue {queue} does not exist, and Volcano ignores PodGroups of a missing queue: \
             create it, or set runPolicy.schedulingPolicy.queue to an existing one"
        ),
        QueueProblem::NotOpen { queue, state } => format!(
            "Queue {queue} is {state}, and Volcano admits no new PodGroup to it: open it \
             (vcctl queue operate --name {queue} --action open), or set \
             runPolicy.schedulingPolicy.queue to an Open one"
        ),
    }
}

/// At the start deadline, a Volcano PodGroup that still has no phase: no Volcano scheduler
/// has looked at it (vc-scheduler down, or running under another `--scheduler-name`). Not
/// said before the deadline: every new PodGroup has no phase for a cycle.
pub fn never_seen(pod_group: Option<&Value>) -> Option<String> {
    let pod_group = pod_group?;
    let volcano = pod_group.get("apiVersion").and_then(Value::as_str) == Some(VOLCANO_API);
    let phase = pod_group.pointer("/status/phase").and_then(Value::as_str);
    (volcano && phase.unwrap_or_default().is_empty()).then(|| {
        "the PodGroup has no phase: no Volcano scheduler has looked at it (is vc-scheduler \
         running, with --scheduler-name volcano?)"
            .to_string()
    })
}

/// Whether `pod_group` is scheduler-plugins' (`scheduling.x-k8s.io`).
pub fn is_scheduler_plugins(pod_group: &Value) -> bool {
    pod_group.get("apiVersion").and_then(Value::as_str) == Some(SCHEDULER_PLUGINS_API)
}

/// Coscheduling's PreFilter refuses every pod until minMember pods of the group exist
/// ("pre-filter pod P cannot find enough sibling pods, current pods number: N, minMember of
/// group: M"). Once `pods` reach minMember that message is left over from before the
/// controller created the rest, not a reason the gang waits: the pod is tried again.
pub fn stale_sibling_wait(pod_group: &Value, message: &str, pods: usize) -> bool {
    let min_member = pod_group.pointer("/spec/minMember").and_then(Value::as_u64);
    message.contains(SIBLING_WAIT) && min_member.is_some_and(|m| pods as u64 >= m)
}

/// The words of Coscheduling's PreFilter for a group with fewer than minMember pods.
const SIBLING_WAIT: &str = "cannot find enough sibling pods";

/// The words of Volcano's per-cycle summary Event of a waiting gang.
const GANG_SUMMARY: &str = "tasks in gang unschedulable";

fn unschedulable_condition(pod_group: &Value) -> Option<String> {
    pod_group
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| {
            let (kind, status) = (
                c.get("type").and_then(Value::as_str),
                c.get("status").and_then(Value::as_str),
            );
            matches!(
                (kind, status),
                (Some("Unschedulable"), Some("True"))
                    | (Some(NATIVE_SCHEDULED_CONDITION), Some("False"))
            )
        })
        .map(|c| {
            let text = |k| c.get(k).and_then(Value::as_str).unwrap_or_default();
            [text("reason"), text("message")]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(": ")
        })
}

/// Ties a pod to the job's PodGroup: schedulerName (only if the template sets none; upstream
/// keeps a user's choice) and the group annotation (Volcano) or label (scheduler-plugins).
/// A native gang's pods keep their scheduler; their tie is [`scheduling_group`].
pub fn decorate(
    job: &JobSnapshot,
    replica: &Replica,
    gang: &GangScheduler,
    meta: &mut ObjectMeta,
    spec: &mut PodSpec,
) {
    let unnamed = spec
        .scheduler_name
        .as_deref()
        .unwrap_or_default()
        .is_empty();
    if let (true, Some(name)) = (unnamed, gang.scheduler_name()) {
        spec.scheduler_name = Some(name.to_string());
    }
    let group = naming::pod_group_name(job);
    match gang {
        GangScheduler::Volcano => {
            let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
            annotations.insert(VOLCANO_GROUP_ANNOTATION.to_string(), group);
            annotations.insert(VOLCANO_TASK_ANNOTATION.to_string(), replica.type_label());
        }
        GangScheduler::SchedulerPlugins { .. } => {
            meta.labels
                .get_or_insert_with(BTreeMap::new)
                .insert(SCHEDULER_PLUGINS_GROUP_LABEL.to_string(), group);
        }
        GangScheduler::Kubernetes => {}
    }
}

/// The pods' `spec.schedulingGroup.podGroupName`: the job's PodGroup, for the native gang.
pub fn scheduling_group(job: &JobSnapshot, gang: Option<&GangScheduler>) -> Option<String> {
    (gang == Some(&GangScheduler::Kubernetes)).then(|| naming::pod_group_name(job))
}

/// Requests (limits where a resource has no request) of the first `min_member` pods, in
/// rank order, summed per resource.
fn computed_min_resources(job: &JobSnapshot, min_member: i32) -> BTreeMap<String, String> {
    let mut left = i128::from(min_member.max(0));
    let mut total: BTreeMap<String, Nanos> = BTreeMap::new();
    for replica in &job.replicas {
        let pods = left.min(i128::from(replica.replicas.max(0)));
        left -= pods;
        for (resource, per_pod) in pod_requests(replica) {
            let add = per_pod.checked_mul(pods).unwrap_or_default();
            let sum = total.entry(resource).or_default();
            *sum = sum.checked_add(add).unwrap_or(*sum);
        }
    }
    total
        .into_iter()
        .map(|(k, v)| (k, v.to_quantity().0))
        .collect()
}

/// One pod's requests over its regular containers (limits stand in for missing requests).
fn pod_requests(replica: &Replica) -> BTreeMap<String, Nanos> {
    let mut out: BTreeMap<String, Nanos> = BTreeMap::new();
    let containers = replica
        .template
        .spec
        .iter()
        .flat_map(|s| s.containers.iter());
    for r in containers.filter_map(|c| c.resources.as_ref()) {
        for (name, q) in effective_requests(r) {
            let sum = out.entry(name).or_default();
            *sum = Nanos::parse(&q)
                .and_then(|n| sum.checked_add(n))
                .unwrap_or(*sum);
        }
    }
    out
}

fn effective_requests(
    r: &ResourceRequirements,
) -> BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> {
    let mut all = r.limits.clone().unwrap_or_default();
    all.extend(r.requests.clone().unwrap_or_default());
    all
}
