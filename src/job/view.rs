//! JobView: one normalized, read-only view over every training kind.
//!
//! Entry point: [`JobView::build`]. Kinds keep pod templates in maps of replica specs
//! (`pytorchReplicaSpecs.Worker.template`); the view walks them once so that policies can be
//! written against `input.job.replicas[_]` for every kind at once.
//!
//! # Guarantees
//! - Building never fails and never panics: anything malformed is recorded in `problems`
//!   with a JSON pointer and a message, and the rest of the view is still filled in.
//! - Every `path` is a JSON pointer into the *original* object, with the key as written
//!   (`worker`, not `Worker`), so mutation intents built from it land where the user wrote.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::containers::{containers_at, default_container};
pub use super::containers::{ContainerView, MAX_CONTAINERS, MAX_ENV};
pub(crate) use super::fields::checked_total;
use super::fields::{map_at, object_at, optional_text, str_at};
use super::kinds::{KindSpec, ReplicaType};
use super::naming::{pod_name, type_pod_labels};
use super::placement_facts::{placement_facts, PlacementFacts};
use super::problem::{problem, type_name, Problem};
use super::release_order;
use super::requests::pod_requests;
use super::volumes::{claim_volumes, ClaimVolumeView};
use crate::pointer;

/// Placeholder for the five random characters the apiserver appends to `generateName`.
const GENERATED_SUFFIX: &str = "xxxxx";
/// The apiserver keeps at most 63 - 5 characters of a `generateName` prefix.
const MAX_GENERATE_NAME_PREFIX: usize = 58;

/// Replica types read per job. A kind allows at most 5 (TFJob: Chief, Master, PS, Worker,
/// Evaluator); 16 leaves room for misspelt keys, which are reported, while bounding the per-job work of every policy that walks `input.job.replicas`.
pub const MAX_REPLICA_TYPES: usize = 16;
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub api_version: String,
    pub kind: &'static str,
    /// `metadata.name`, or `generateName` plus a 5-character placeholder.
    pub name: String,
    /// True when the name comes from `generateName`.
    pub name_generated: bool,
    pub namespace: String,
    /// `spec.<field>` holding the replica map, e.g. `pytorchReplicaSpecs`.
    pub replica_field: &'static str,
    /// Pointer to the replica map, e.g. `/spec/pytorchReplicaSpecs`.
    pub replica_specs_path: String,
    /// Replica types this kind allows, canonical spelling.
    pub allowed_types: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_container: Option<&'static str>,
    pub requires_default_container: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<PortView>,
    /// Values of `runPolicy.managedBy` upstream accepts for this kind.
    pub managed_by_allowed: Vec<&'static str>,
    pub replicas: Vec<ReplicaView>,
    /// Sum of `replicas` over all replica specs (unset counts as 1).
    pub total_pods: i64,
    /// Names of the env vars any container (not init container) of any replica sets, each
    /// once, sorted: a policy tests each name once instead of once per container.
    pub env_names: Vec<String>,
    /// Structural problems found while building the view.
    pub problems: Vec<Problem>,
    /// Trainer v2 only (TrainJob and its runtimes): what the runtime and the Trainer decide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trainer: Option<super::trainer_facts::TrainerView>,
    /// The annotation `gangplank.dev/release-order`, parsed, when the job carries it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_order: Option<ReleaseOrderView>,
}

/// The order the controller releases a native gang's pods in ([`release_order`]): the
/// replica types, first released first, or why the annotation names none.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReleaseOrderView {
    pub types: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ReleaseOrderView {
    /// The view of the job `meta`'s annotation over its `replicas`; `None` without one.
    pub fn of(meta: Option<&Value>, replicas: &[ReplicaView]) -> Option<ReleaseOrderView> {
        let value = meta?
            .get("annotations")?
            .get(release_order::RELEASE_ORDER_ANNOTATION)?;
        let keys: Vec<&str> = replicas.iter().map(|r| r.key.as_str()).collect();
        let parsed = match value.as_str() {
            Some(text) => release_order::parse(text, &keys),
            None => Err(format!(
                "{} must be a string",
                release_order::RELEASE_ORDER_ANNOTATION
            )),
        };
        Some(match parsed {
            Ok(types) => ReleaseOrderView { types, error: None },
            Err(why) => ReleaseOrderView {
                types: Vec::new(),
                error: Some(why),
            },
        })
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PortView {
    pub name: &'static str,
    pub number: u16,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaView {
    /// The key as written in the manifest (`worker`).
    pub key: String,
    /// Canonical type (`Worker`); the key itself when the kind does not know it.
    #[serde(rename = "type")]
    pub replica_type: String,
    /// Whether the kind allows this replica type.
    pub known: bool,
    /// coordinator | launcher | worker | ps | evaluator; undefined when the type is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// Master, Chief or Launcher: the one replica the job cannot have two of.
    pub coordinator: bool,
    /// Declared replicas, or 1 when unset or invalid.
    pub replicas: i64,
    pub replicas_set: bool,
    /// Declared restartPolicy, or the kind's default for this type.
    pub restart_policy: String,
    pub restart_policy_set: bool,
    pub path: String,
    pub template_path: String,
    pub pod_spec_path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    pub node_selector: Map<String, Value>,
    /// The pod's tolerations as written (matched against node taints by policies).
    pub tolerations: Vec<Value>,
    pub annotations: Map<String, Value>,
    pub labels: Map<String, Value>,
    /// The labels every pod of this type will carry: the template's and those its
    /// controller adds (job name, operator, replica type; MPI v2's job-role; JobSet's names
    /// for a TrainJob), without the per-pod replica index. NetworkPolicies select on them.
    pub pod_labels: Map<String, Value>,
    /// The pod's PersistentVolumeClaim volumes and how its containers use them.
    pub claim_volumes: Vec<ClaimVolumeView>,
    pub containers: Vec<ContainerView>,
    pub init_containers: Vec<ContainerView>,
    /// Index into `containers` of the container the operator configures, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_container_index: Option<usize>,
    /// Whole GPUs per pod (`*/gpu` resources) over regular containers.
    pub gpus_per_pod: i64,
    /// MIG slices per pod (`nvidia.com/mig-*` resources) over regular containers.
    pub mig_slices_per_pod: i64,
    /// What one pod asks the scheduler for, every resource (cpu in millicores, memory in
    /// bytes, extended resources in units), by Kubernetes' effective request rule
    /// ([`pod_requests`]); zero amounts left out.
    pub pod_requests: BTreeMap<String, i64>,
    /// What kube-scheduler's order and scores depend on (see [`placement_facts`]).
    pub placement: PlacementFacts,
    /// Name of the last pod of this replica type (the longest one).
    pub last_pod_name: String,
    /// Trainer v2 only: the JobSet step this replicatedJob is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<StepView>,
}

/// A replicatedJob of a TrainJob's JobSet, as the Trainer runs it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    /// `trainer.kubeflow.org/trainjob-ancestor-step`: trainer, dataset-initializer, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ancestor: Option<String>,
    /// JobSet `dependsOn` (`{name, status}`): created only once those reach the status.
    pub depends_on: Vec<Value>,
    /// Created with the JobSet (no `dependsOn`), so present when a gang first forms.
    pub first_wave: bool,
}

impl JobView {
    /// Builds the view of `object`, a manifest of the kind `spec` describes.
    pub fn build(spec: &'static KindSpec, object: &Value) -> JobView {
        let mut problems = Vec::new();
        let meta = object.get("metadata");
        let (name, name_generated) = job_name(meta);
        let namespace = str_at(meta, "namespace").unwrap_or_default();
        let replica_specs_path = pointer::join("/spec", [spec.replica_field]);
        let replicas = match object.get("spec") {
            Some(Value::Object(s)) => replicas_of(
                spec,
                default_container_name(spec, s),
                s.get(spec.replica_field),
                &replica_specs_path,
                &name,
                &mut problems,
            ),
            Some(other) => {
                problems.push(problem(
                    "/spec",
                    format!("must be an object, got {}", type_name(other)),
                ));
                Vec::new()
            }
            None => {
                problems.push(problem("/spec", "is required".into()));
                Vec::new()
            }
        };
        let total_pods = checked_total(
            replicas.iter().map(|r| r.replicas.max(0)),
            &replica_specs_path,
            "the replica counts",
            &mut problems,
        );
        let env_names = distinct_env_names(&replicas);
        let release_order = ReleaseOrderView::of(meta, &replicas);
        let replicas = with_controller_labels(spec, &name, replicas);
        JobView {
            api_version: spec.api_version(),
            kind: spec.kind,
            name,
            name_generated,
            namespace,
            replica_field: spec.replica_field,
            replica_specs_path,
            allowed_types: spec.replica_types.iter().map(|t| t.name).collect(),
            default_container: spec.default_container,
            requires_default_container: spec.requires_default_container,
            port: spec.port.map(|(name, number)| PortView { name, number }),
            managed_by_allowed: spec.managed_by.to_vec(),
            replicas,
            total_pods,
            env_names,
            problems,
            trainer: None,
            release_order,
        }
    }
}

/// Each replica's `pod_labels`: its template's labels under those the controller puts on
/// every pod of the type ([`type_pod_labels`]).
fn with_controller_labels(
    spec: &'static KindSpec,
    job: &str,
    mut replicas: Vec<ReplicaView>,
) -> Vec<ReplicaView> {
    for r in &mut replicas {
        let mut labels = r.labels.clone();
        let added = type_pod_labels(job, spec, &r.replica_type.to_lowercase());
        labels.extend(added.into_iter().map(|(k, v)| (k, Value::from(v))));
        r.pod_labels = labels;
    }
    replicas
}

pub(crate) fn distinct_env_names(replicas: &[ReplicaView]) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> = replicas
        .iter()
        .flat_map(|r| &r.containers)
        .flat_map(|c| &c.env_names)
        .collect();
    names.into_iter().cloned().collect()
}

/// MPIJob v1 lets `spec.mainContainer` name the container the operator configures.
fn default_container_name<'a>(
    spec: &'static KindSpec,
    job_spec: &'a Map<String, Value>,
) -> Option<&'a str> {
    job_spec
        .get("mainContainer")
        .and_then(Value::as_str)
        .filter(|_| spec.kind == "MPIJob")
        .or(spec.default_container)
}

fn job_name(meta: Option<&Value>) -> (String, bool) {
    match str_at(meta, "name").filter(|n| !n.is_empty()) {
        Some(n) => (n, false),
        None => match str_at(meta, "generateName") {
            Some(prefix) => {
                // The apiserver cuts the prefix so that prefix + suffix fits 63 characters.
                let cut: String = prefix.chars().take(MAX_GENERATE_NAME_PREFIX).collect();
                (format!("{cut}{GENERATED_SUFFIX}"), true)
            }
            None => (String::new(), false),
        },
    }
}

fn replicas_of(
    spec: &'static KindSpec,
    default_name: Option<&str>,
    map: Option<&Value>,
    base: &str,
    job: &str,
    problems: &mut Vec<Problem>,
) -> Vec<ReplicaView> {
    let map = match map {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => {
            problems.push(problem(
                base,
                "is required: the job has no replica specs".into(),
            ));
            return Vec::new();
        }
        Some(other) => {
            problems.push(problem(
                base,
                format!("must be a map of replica specs, got {}", type_name(other)),
            ));
            return Vec::new();
        }
    };
    if map.len() > MAX_REPLICA_TYPES {
        problems.push(problem(
            base,
            format!(
                "has {} replica types; gangplank reads at most {MAX_REPLICA_TYPES} (this kind allows {}): remove the extra keys",
                map.len(),
                spec.replica_types.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let mut out: Vec<ReplicaView> = Vec::with_capacity(map.len().min(MAX_REPLICA_TYPES));
    for (key, value) in map.iter().take(MAX_REPLICA_TYPES) {
        let path = pointer::join(base, [key.as_str()]);
        let replica_type = spec.replica_type(key);
        let canonical = replica_type.map_or(key.as_str(), |t| t.name);
        if let Some(dup) = out.iter().find(|r| r.replica_type == canonical) {
            problems.push(problem(
                &path,
                format!(
                    "duplicate replica type {canonical}: keys {:?} and {key:?} differ only in case",
                    dup.key
                ),
            ));
            continue;
        }
        match value {
            Value::Object(r) => out.push(replica(
                default_name,
                replica_type,
                key,
                canonical,
                r,
                path,
                job,
                problems,
            )),
            Value::Null => problems.push(problem(
                &path,
                format!("replica spec {key} is null; give it a template or remove the key"),
            )),
            other => problems.push(problem(
                &path,
                format!(
                    "replica spec {key} must be an object, got {}",
                    type_name(other)
                ),
            )),
        }
    }
    out
}

#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename the list
fn replica(
    default_name: Option<&str>,
    known: Option<&'static ReplicaType>,
    key: &str,
    canonical: &str,
    r: &Map<String, Value>,
    path: String,
    job: &str,
    problems: &mut Vec<Problem>,
) -> ReplicaView {
    let default_replicas = known.map_or(1, |t| t.default_replicas);
    let (replicas, replicas_set) =
        replica_count(r.get("replicas"), default_replicas, &path, problems);
    let restart_declared =
        optional_text(r, "restartPolicy", &path, problems).filter(|p| !p.is_empty());
    let head = ReplicaHead {
        key: key.to_string(),
        replica_type: canonical.to_string(),
        known: known.is_some(),
        role: known.map(|t| t.role.as_str()),
        coordinator: known.is_some_and(|t| t.role.is_singleton()),
        replicas,
        replicas_set,
        restart_policy: restart_declared
            .or(known.map(|t| t.default_restart_policy))
            .unwrap_or_default()
            .to_string(),
        restart_policy_set: restart_declared.is_some(),
        template_path: pointer::join(&path, ["template"]),
        path,
        last_pod_name: match known {
            Some(t) if t.unindexed => format!("{job}-{}", canonical.to_lowercase()),
            _ => pod_name(job, canonical, replicas.saturating_sub(1).max(0)),
        },
        step: None,
    };
    replica_with_template(head, r.get("template"), default_name, problems)
}

/// What a replica is apart from its pod template; each kind's reader fills it in.
#[derive(Debug, Clone)]
pub struct ReplicaHead {
    pub key: String,
    pub replica_type: String,
    pub known: bool,
    pub role: Option<&'static str>,
    pub coordinator: bool,
    pub replicas: i64,
    pub replicas_set: bool,
    pub restart_policy: String,
    pub restart_policy_set: bool,
    pub path: String,
    /// Pointer (or runtime path) of the pod template.
    pub template_path: String,
    pub last_pod_name: String,
    pub step: Option<StepView>,
}

/// The replica `head` describes, its pod read from `template` (`{metadata, spec}`).
pub fn replica_with_template(
    head: ReplicaHead,
    template: Option<&Value>,
    default_name: Option<&str>,
    problems: &mut Vec<Problem>,
) -> ReplicaView {
    let template_path = head.template_path;
    let pod_spec_path = pointer::join(&template_path, ["spec"]);
    let template = object_at(template, &template_path, problems);
    let tmeta = template.and_then(|t| t.get("metadata"));
    let pod_spec = template.and_then(|t| object_at(t.get("spec"), &pod_spec_path, problems));
    let containers = containers_at(pod_spec, "containers", &pod_spec_path, problems);
    let init_containers = containers_at(pod_spec, "initContainers", &pod_spec_path, problems);
    let default_container_index = default_container(&containers, default_name);
    let per_pod = |what: &str, count: fn(&ContainerView) -> i64, problems: &mut Vec<Problem>| {
        checked_total(containers.iter().map(count), &pod_spec_path, what, problems)
    };
    let gpus_per_pod = per_pod("the GPUs of the containers", |c| c.gpus, problems);
    let mig_slices_per_pod = per_pod(
        "the MIG slices of the containers",
        |c| c.mig_slices,
        problems,
    );
    ReplicaView {
        key: head.key,
        replica_type: head.replica_type,
        known: head.known,
        role: head.role,
        coordinator: head.coordinator,
        replicas: head.replicas,
        replicas_set: head.replicas_set,
        restart_policy: head.restart_policy,
        restart_policy_set: head.restart_policy_set,
        path: head.path,
        template_path,
        pod_spec_path,
        scheduler_name: pod_spec
            .and_then(|s| s.get("schedulerName"))
            .and_then(Value::as_str)
            .map(str::to_string),
        node_selector: map_at(pod_spec.and_then(|s| s.get("nodeSelector"))),
        tolerations: pod_spec
            .and_then(|s| s.get("tolerations"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        annotations: map_at(tmeta.and_then(|m| m.get("annotations"))),
        labels: map_at(tmeta.and_then(|m| m.get("labels"))),
        pod_labels: Map::new(),
        claim_volumes: claim_volumes(pod_spec),
        gpus_per_pod,
        mig_slices_per_pod,
        pod_requests: pod_requests(pod_spec),
        placement: placement_facts(pod_spec),
        containers,
        init_containers,
        default_container_index,
        last_pod_name: head.last_pod_name,
        step: head.step,
    }
}

fn replica_count(
    v: Option<&Value>,
    default: i64,
    path: &str,
    problems: &mut Vec<Problem>,
) -> (i64, bool) {
    match v {
        None | Some(Value::Null) => (default, false),
        Some(Value::Number(n)) if n.is_i64() => (n.as_i64().unwrap_or(default), true),
        Some(other) => {
            problems.push(problem(
                &pointer::join(path, ["replicas"]),
                format!("must be an integer, got {} {other}", type_name(other)),
            ));
            (default, false)
        }
    }
}
