//! What exists in the cluster for one job, as the I/O shell read it: the pods and Services the
//! job owns, its PodGroup, and the cluster facts the gang watchdog explains a stall with.
//! Also the two fields of an observed pod every rule reads, [`name`] and [`phase`].

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::rbac::v1::Role;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::Value;

/// Objects owned by the job (controller owner reference to its uid) and related facts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub pods: Vec<Pod>,
    pub services: Vec<Service>,
    /// The job's PodGroup, when a gang scheduler is configured and it exists.
    pub pod_group: Option<Value>,
    /// The job's HPA `<job>` (PyTorchJob only), when it exists and the job controls it.
    pub hpa: Option<HorizontalPodAutoscaler>,
    /// MPIJob: its `<job>-config` ConfigMap, when it exists and the job controls it.
    pub config_map: Option<ConfigMap>,
    /// MPIJob v2beta1: the state of its `<job>-ssh` Secret, when the job controls it.
    pub ssh_secret: SshSecret,
    /// MPIJob v1: the launcher's ServiceAccount, Role and RoleBinding `<job>-launcher`.
    pub launcher_rbac: LauncherRbac,
    /// Objects the job does not control that hold names its own objects must have: MPIJob's
    /// `<job>-config`, `<job>-ssh`, `<job>-launcher` (read every reconcile), and the pods and
    /// Services a create found taken (another workload's pods are not in the job's caches,
    /// which select by operator label: only the 409 of a create shows them).
    pub foreign: Vec<Foreign>,
    pub facts: ClusterFacts,
}

/// An object holding a name one of the job's own objects must have, controlled by someone
/// else (or by no one): never adopted, written, mounted or exec'd into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    /// Its kind: `Pod`, `Service`, `ConfigMap`, ...
    pub kind: String,
    pub name: String,
    /// Its controller as `<Kind> <name>`, from its controller owner reference; `None` when it
    /// has none.
    pub controller: Option<String>,
}

impl Foreign {
    /// The `kind` object `name` with these owner references.
    pub fn new(kind: &str, name: &str, owner_refs: &[OwnerReference]) -> Foreign {
        let controller = owner_refs
            .iter()
            .find(|r| r.controller == Some(true))
            .map(|r| format!("{} {}", r.kind, r.name));
        Foreign {
            kind: kind.to_string(),
            name: name.to_string(),
            controller,
        }
    }

    /// `controlled by PyTorchJob train`, or `with no controller`.
    pub fn owner(&self) -> String {
        match &self.controller {
            Some(c) => format!("controlled by {c}"),
            None => "with no controller".to_string(),
        }
    }

    /// `Pod train-worker-0 (controlled by PyTorchJob train)`, for messages.
    pub fn describe(&self) -> String {
        format!("{} {} ({})", self.kind, self.name, self.owner())
    }
}

/// Whether `owner_refs` name the object with uid `uid` as controller: what makes an object a
/// job's own (a name alone never does).
pub fn controlled_by(owner_refs: &[OwnerReference], uid: &str) -> bool {
    owner_refs
        .iter()
        .any(|r| r.uid == uid && r.controller == Some(true))
}

/// An MPIJob's SSH key Secret as the controller found it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SshSecret {
    #[default]
    Absent,
    /// Both keys are there: it is never rewritten (no key rotation under a running job).
    Intact,
    /// A key is missing or empty (edited by hand): no pod could log in with it, so it gets a
    /// new pair.
    Damaged,
}

/// A v1 MPIJob's launcher identity, as far as the job controls it: the ServiceAccount and
/// RoleBinding only need to exist; the Role's rules follow the worker count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LauncherRbac {
    pub service_account: bool,
    pub role: Option<Role>,
    pub role_binding: bool,
}

/// Facts about the cluster that only the I/O shell can read, as plain data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// Pod name → message of its latest `FailedScheduling` Event.
    pub failed_scheduling: BTreeMap<String, String>,
    /// PersistentVolumeClaims the job's pods mount that do not exist.
    pub missing_pvcs: Vec<String>,
    /// `<reason>: <message>` of each distinct Warning or `Unschedulable` Event on the job's
    /// PodGroup recorded
    /// within a minute of the latest one (Volcano's `Unschedulable`: it records two per
    /// cycle, the cause and a summary), read while the gang waits (see
    /// [`podgroup::unschedulable_message`](super::podgroup::unschedulable_message)).
    pub pod_group_warnings: Vec<String>,
    /// Why the API server refused the last write of the job's PodGroup (no such API: the
    /// gang scheduler is not installed; a schema or webhook refusal), set by the I/O shell
    /// when it plans again after that write failed.
    pub pod_group_refused: Option<String>,
    /// Why the Volcano Queue the job's PodGroup names takes nothing in, when Volcano does
    /// not say it itself (read while the PodGroup has no phase or is Pending).
    pub queue_problem: Option<QueueProblem>,
}

/// A Volcano Queue that admits no PodGroup, in the cases Volcano leaves unsaid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueProblem {
    /// The Queue does not exist: Volcano gives the PodGroup no phase and records nothing.
    Missing(String),
    /// The Queue is not Open (Closed, Closing): Volcano keeps the PodGroup Pending and its
    /// Events say only "pod group is not ready".
    NotOpen { queue: String, state: String },
}

impl Observed {
    pub fn pod(&self, name: &str) -> Option<&Pod> {
        self.pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }

    pub fn has_service(&self, name: &str) -> bool {
        self.services
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some(name))
    }
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

pub fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}
