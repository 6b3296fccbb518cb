//! [`JobSnapshot`]: a job object parsed once for the planner.
//!
//! Entry point: [`JobSnapshot::from_value`], in [`super::checks`]. The kind table and
//! [`JobView`] from [`crate::job`] supply replica types, roles, default container and port;
//! this module adds what only the controller needs (typed pod templates, runPolicy, the
//! elastic policy and MPI fields, status, restart count).
//!
//! The snapshot is the leaf that the rules ([`elastic`](super::elastic),
//! [`mpi`](super::mpi), [`naming`](super::naming), [`podgroup`](super::podgroup), …) read:
//! it parses and never calls them. Their checks are added by [`super::checks`].

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::MetricSpec;
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;
use serde_json::Value;

use super::restart::{RestartPolicy, RESTARTS_ANNOTATION};
use super::status::JobStatus;
use crate::job::kinds::{KindSpec, ReplicaType, Role};
use crate::job::problem::Problem;
use crate::job::view::JobView;

/// Kinds this controller runs in their kubeflow.org/v1 form.
pub const RUNNABLE_KINDS: &[&str] = &["PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob"];

/// MPIJob runs in its `kubeflow.org/v2beta1` form (mpi-operator semantics, see
/// [`mpi`](super::mpi)) and its `kubeflow.org/v1` form (training operator semantics, see
/// [`mpi::kubexec`](super::mpi::kubexec)).
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

/// `spec.elasticPolicy` of a PyTorchJob (kubeflow.org/v1 `ElasticPolicy`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ElasticPolicy {
    pub min_replicas: Option<i32>,
    pub max_replicas: Option<i32>,
    /// `c10d`, `etcd` or `etcd-v2`; not an enum in the CRD, so passed through as written.
    pub rdzv_backend: Option<String>,
    pub rdzv_port: Option<i32>,
    pub rdzv_host: Option<String>,
    pub rdzv_id: Option<String>,
    pub rdzv_conf: Option<Vec<RdzvConf>>,
    pub standalone: Option<bool>,
    /// Deprecated in favour of `spec.nprocPerNode`; still honoured.
    pub n_proc_per_node: Option<i32>,
    pub max_restarts: Option<i32>,
    /// autoscaling/v2 metrics; an HPA exists only when this is set.
    pub metrics: Option<Vec<MetricSpec>>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct RdzvConf {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: String,
}

impl ElasticPolicy {
    /// `(min, max)` Worker replicas as upstream defaults them in memory: both unset take the
    /// Worker count, one unset copies the other.
    pub fn bounds(&self, workers: i32) -> (i32, i32) {
        match (self.min_replicas, self.max_replicas) {
            (Some(min), Some(max)) => (min, max),
            (Some(min), None) => (min, min),
            (None, Some(max)) => (max, max),
            (None, None) => (workers, workers),
        }
    }
}

/// Default `sshAuthMountPath`; only there are the key files made 0600 (sshd refuses a
/// group-readable key under /root, other paths are left to the image's user).
pub const ROOT_SSH_PATH: &str = "/root/.ssh";

/// The MPIJob spec fields beyond replicas and runPolicy, with the operators' defaults
/// (v2beta1's, and v1's `mainContainer`; a field of the other version stays at its default,
/// the apiserver prunes it).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct MpiSpec {
    pub slots_per_worker: i32,
    /// v1: the container `kubexec.sh` execs into (`kubectl exec --container`).
    pub main_container: Option<String>,
    pub run_launcher_as_worker: bool,
    pub ssh_auth_mount_path: String,
    pub launcher_creation_policy: String,
    pub mpi_implementation: String,
}

impl Default for MpiSpec {
    fn default() -> MpiSpec {
        MpiSpec {
            slots_per_worker: 1,
            main_container: None,
            run_launcher_as_worker: false,
            ssh_auth_mount_path: ROOT_SSH_PATH.to_string(),
            launcher_creation_policy: "AtStartup".to_string(),
            mpi_implementation: "OpenMPI".to_string(),
        }
    }
}

impl JobSnapshot {
    /// The job object parsed, without the checks that read it: only
    /// [`JobSnapshot::from_value`] (in [`super::checks`]) calls it, and adds them.
    pub(super) fn parse(object: &Value) -> Result<JobSnapshot, SnapshotError> {
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
        Ok(snapshot)
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

/// Index of the container the operator configures: the one named as the kind's default
/// container, else the first (upstream's defaulting puts the port there).
pub fn default_container(job: &JobSnapshot, spec: &PodSpec) -> Option<usize> {
    job.spec
        .default_container
        .and_then(|n| spec.containers.iter().position(|c| c.name == n))
        .or_else(|| (!spec.containers.is_empty()).then_some(0))
}
