//! [`JobSnapshot`]: a job object parsed once for the planner.
//!
//! Entry point: [`JobSnapshot::from_value`]. The kind table and [`JobView`] from
//! [`crate::job`] supply replica types, roles, default container and port; this module adds
//! what only the controller needs (typed pod templates, runPolicy, status, restart count).
//!
//! # Guarantees
//! Building fails only for objects that are not a kind this controller runs. Anything
//! malformed inside a runnable kind becomes a [`Problem`] in `problems`, and `plan` fails
//! such a job with a condition naming it instead of creating half a gang.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;
use serde_json::Value;

use super::elastic::{self, ElasticPolicy};
use super::mpi::{self, MpiSpec};
use super::restart::{RestartPolicy, RESTARTS_ANNOTATION};
use super::status::JobStatus;
use crate::job::kinds::{KindSpec, ReplicaType, Role};
use crate::job::naming::MAX_LABEL_LEN;
use crate::job::problem::Problem;
use crate::job::view::JobView;

/// Kinds this controller runs in their kubeflow.org/v1 form.
pub const RUNNABLE_KINDS: &[&str] = &["PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob"];

/// MPIJob runs in its `kubeflow.org/v2beta1` form (mpi-operator semantics, see [`mpi`]) and
/// its `kubeflow.org/v1` form (training operator semantics, see [`mpi::kubexec`]).
const RUNNABLE_MPI_VERSIONS: &[&str] = &["v2beta1", "v1"];

/// `runPolicy.managedBy` values that mean "the training operator runs it", i.e. us.
pub const OUR_MANAGER: &str = "kubeflow.org/training-operator";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("{api_version} {kind} is not a kind the lifecycle controller runs")]
    UnsupportedKind { api_version: String, kind: String },
}

/// One job, parsed.
#[derive(Debug, Clone)]
pub struct JobSnapshot {
    pub spec: &'static KindSpec,
    /// The normalized view shared with the admission path.
    pub view: JobView,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub annotations: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` is set: the garbage collector is removing the job.
    pub deleting: bool,
    /// Known replica types with a parsed template, in kind-table order (Master before Worker),
    /// which is the rank order.
    pub replicas: Vec<Replica>,
    pub run_policy: RunPolicy,
    pub extras: Extras,
    /// MPIJob v2beta1 spec fields, defaulted (default values for every other kind).
    pub mpi: MpiSpec,
    pub status: JobStatus,
    /// Pod recreations recorded so far (see [`RESTARTS_ANNOTATION`]).
    pub recorded_restarts: i64,
    /// Why the job cannot run; empty for a runnable job.
    pub problems: Vec<Problem>,
}

/// One replica type of the job.
#[derive(Debug, Clone)]
pub struct Replica {
    pub rtype: &'static ReplicaType,
    pub replicas: i32,
    pub restart_policy: RestartPolicy,
    pub template: PodTemplateSpec,
}

impl Replica {
    pub fn role(&self) -> Role {
        self.rtype.role
    }

    /// Lower-case type, as in names and the replica-type label.
    pub fn type_label(&self) -> String {
        self.rtype.name.to_lowercase()
    }
}

/// `spec.runPolicy` (common to every v1 kind).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicy {
    pub clean_pod_policy: Option<String>,
    pub ttl_seconds_after_finished: Option<i64>,
    pub active_deadline_seconds: Option<i64>,
    pub backoff_limit: Option<i64>,
    pub scheduling_policy: Option<SchedulingPolicy>,
    pub suspend: Option<bool>,
    pub managed_by: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    pub min_available: Option<i32>,
    pub queue: Option<String>,
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    pub priority_class: Option<String>,
    pub schedule_timeout_seconds: Option<i32>,
}

/// Kind-specific spec fields the planner reads.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Extras {
    /// PyTorch `spec.nprocPerNode` (`auto`, `cpu`, `gpu` or an integer).
    pub nproc_per_node: Option<String>,
    /// PyTorch `spec.elasticPolicy`; its presence changes env, success rules, the PodGroup
    /// and adds an HPA. Parsed on its own (see `from_value`) so a malformed policy is a
    /// problem rather than a silently dropped `Extras`.
    #[serde(skip)]
    pub elastic_policy: Option<ElasticPolicy>,
    /// TF `spec.successPolicy` (`""` or `AllWorkers`).
    pub success_policy: Option<String>,
    /// TF `spec.enableDynamicWorker`.
    #[serde(default)]
    pub enable_dynamic_worker: bool,
}

impl JobSnapshot {
    /// Parses a job object of one of the [`RUNNABLE_KINDS`], or an MPIJob (v2beta1 or v1; not
    /// in `RUNNABLE_KINDS` because the controller runs it only when asked to).
    pub fn from_value(object: &Value) -> Result<JobSnapshot, SnapshotError> {
        let text = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let spec = crate::job::lookup(api_version, kind)
            .filter(|s| {
                (RUNNABLE_KINDS.contains(&s.kind) && s.version == "v1")
                    || (s.kind == "MPIJob" && RUNNABLE_MPI_VERSIONS.contains(&s.version))
            })
            .ok_or_else(|| SnapshotError::UnsupportedKind {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
            })?;
        let view = JobView::build(spec, object);
        let mut problems = view.problems.clone();
        let meta = object.get("metadata");
        let annotations: BTreeMap<String, String> =
            parse_or_default(meta.and_then(|m| m.get("annotations")));
        let job_spec = object.get("spec");
        let mut run_policy: RunPolicy =
            parse_at(job_spec, "runPolicy", "/spec/runPolicy", &mut problems);
        if spec.kind == "MPIJob" && run_policy.clean_pod_policy.is_none() {
            // v1's legacy top-level field; upstream syncs the two with runPolicy winning.
            run_policy.clean_pod_policy = job_spec
                .and_then(|s| s.get("cleanPodPolicy"))
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        let mut extras: Extras = job_spec
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default();
        if spec.kind == "PyTorchJob" {
            extras.elastic_policy = parse_at(
                job_spec,
                "elasticPolicy",
                "/spec/elasticPolicy",
                &mut problems,
            );
        }
        let replicas = replicas_of(spec, &view, object, &mut problems);
        let mpi: MpiSpec = match spec.kind {
            "MPIJob" => parse_or_default(job_spec),
            _ => MpiSpec::default(),
        };
        let snapshot = JobSnapshot {
            spec,
            name: view.name.clone(),
            namespace: view.namespace.clone(),
            uid: meta_text(meta, "uid"),
            deleting: meta.and_then(|m| m.get("deletionTimestamp")).is_some(),
            recorded_restarts: annotations
                .get(RESTARTS_ANNOTATION)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            annotations,
            replicas,
            run_policy,
            extras,
            mpi,
            // A status we cannot read is rebuilt from the pods: the planner recomputes every
            // count, and losing old conditions is better than never running the job.
            status: parse_or_default(object.get("status")),
            problems,
            view,
        };
        Ok(snapshot.checked())
    }

    pub fn kind(&self) -> &'static str {
        self.spec.kind
    }

    /// Whether this controller runs the job: managedBy unset or the training operator.
    pub fn managed_by_us(&self) -> bool {
        matches!(
            self.run_policy.managed_by.as_deref(),
            None | Some(OUR_MANAGER)
        )
    }

    pub fn suspended(&self) -> bool {
        self.run_policy.suspend == Some(true)
    }

    pub fn replica(&self, name: &str) -> Option<&Replica> {
        self.replicas.iter().find(|r| r.rtype.name == name)
    }

    /// The Master (PyTorch, XGBoost, Paddle) or Chief/Master (TF), if the job has one.
    pub fn coordinator(&self) -> Option<&Replica> {
        self.replicas.iter().find(|r| r.role() == Role::Coordinator)
    }

    /// Sum of `replicas` over every replica type.
    pub fn total_replicas(&self) -> i32 {
        self.replicas.iter().map(|r| r.replicas).sum()
    }

    /// Structural checks beyond the view's: the controller must be able to build every pod.
    fn checked(mut self) -> JobSnapshot {
        let mut found = Vec::new();
        if self.name.is_empty() {
            found.push(problem("/metadata/name", "is required".into()));
        }
        for r in &self.view.replicas {
            if !r.known {
                let allowed = self.view.allowed_types.join(", ");
                found.push(problem(
                    &r.path,
                    format!(
                        "unknown replica type {}; {} allows {allowed}",
                        r.key,
                        self.kind()
                    ),
                ));
            }
            if r.replicas < 1 {
                found.push(problem(&r.path, "replicas must be at least 1".into()));
            } else if r.coordinator && r.replicas > 1 {
                found.push(problem(
                    &r.path,
                    format!("{} must have exactly 1 replica", r.replica_type),
                ));
            }
            if r.known && r.containers.is_empty() {
                found.push(problem(
                    &r.pod_spec_path,
                    "needs at least one container".into(),
                ));
            }
            if r.last_pod_name.len() > MAX_LABEL_LEN {
                found.push(problem(
                    "/metadata/name",
                    format!(
                        "pod name {} is longer than {MAX_LABEL_LEN} characters",
                        r.last_pod_name
                    ),
                ));
            }
        }
        if self
            .replicas
            .iter()
            .filter(|r| r.role() == Role::Coordinator)
            .count()
            > 1
        {
            found.push(problem(
                &self.view.replica_specs_path,
                "Chief and Master cannot both be set".into(),
            ));
        }
        if self.view.replicas.is_empty() && self.view.problems.is_empty() {
            found.push(problem(
                &self.view.replica_specs_path,
                "has no replica specs".into(),
            ));
        }
        found.extend(elastic::problems(&self));
        found.extend(mpi::problems(&self));
        self.problems.extend(found);
        self
    }
}

/// Known replica types whose template parses as a PodTemplateSpec, in kind-table order.
fn replicas_of(
    spec: &'static KindSpec,
    view: &JobView,
    object: &Value,
    problems: &mut Vec<Problem>,
) -> Vec<Replica> {
    spec.replica_types
        .iter()
        .filter_map(|rtype| {
            let rv = view
                .replicas
                .iter()
                .find(|r| r.known && r.replica_type == rtype.name)?;
            let template = parse_at(
                object.pointer(&rv.path),
                "template",
                &rv.template_path,
                problems,
            );
            let restart_policy = RestartPolicy::parse(&rv.restart_policy).unwrap_or_else(|| {
                problems.push(problem(
                    &format!("{}/restartPolicy", rv.path),
                    format!(
                        "unknown restartPolicy {:?}; use Always, OnFailure, Never or ExitCode",
                        rv.restart_policy
                    ),
                ));
                RestartPolicy::Never
            });
            Some(Replica {
                rtype,
                replicas: i32::try_from(rv.replicas).unwrap_or(i32::MAX),
                restart_policy,
                template,
            })
        })
        .collect()
}

/// Deserializes `parent[field]`; a value of the wrong shape is a problem at `path`.
fn parse_at<T: serde::de::DeserializeOwned + Default>(
    parent: Option<&Value>,
    field: &str,
    path: &str,
    problems: &mut Vec<Problem>,
) -> T {
    match parent.and_then(|p| p.get(field)) {
        None | Some(Value::Null) => T::default(),
        Some(v) => serde_json::from_value(quantities_as_strings(v.clone())).unwrap_or_else(|e| {
            problems.push(problem(path, format!("cannot be read: {e}")));
            T::default()
        }),
    }
}

/// CRDs store quantities as written (`nvidia.com/gpu: 1` is a number), while k8s-openapi's
/// `Quantity` reads only strings: turn numbers in resource maps, and in the `value` and
/// `averageValue` of an HPA metric `target`, into their decimal text.
fn quantities_as_strings(mut v: Value) -> Value {
    const QUANTITY_MAPS: &[&str] = &["limits", "requests", "overhead", "minResources"];
    const METRIC_TARGET_QUANTITIES: &[&str] = &["value", "averageValue"];
    fn walk(v: &mut Value, parent: &str) {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    let quantity = QUANTITY_MAPS.contains(&parent)
                        || (parent == "target" && METRIC_TARGET_QUANTITIES.contains(&k.as_str()));
                    match child {
                        Value::Number(n) if quantity => *child = Value::String(n.to_string()),
                        _ => walk(child, k),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, "")),
            _ => {}
        }
    }
    walk(&mut v, "");
    v
}

fn parse_or_default<T: serde::de::DeserializeOwned + Default>(v: Option<&Value>) -> T {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

fn meta_text(meta: Option<&Value>, key: &str) -> String {
    meta.and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn problem(path: &str, msg: String) -> Problem {
    Problem {
        path: path.to_string(),
        msg,
    }
}
