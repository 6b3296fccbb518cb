//! The planner's output: [`Plan`], a list of [`Action`]s (data, not calls), the desired
//! status, when to look again, and the Events to record.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::status::JobStatus;

/// What one reconcile of one job should do.
///
/// # Guarantees
/// - `actions` are in the order they should be applied: metadata patches (restart counts)
///   before the deletions they account for, deletions before creations, HPA and PodGroup
///   before pods, pods created before pods released.
/// - No [`Action::CreatePod`] or [`Action::CreateService`] names an object that is in
///   [`Observed`](super::Observed): replaying a plan after a crash creates no duplicates, and a
///   409 AlreadyExists on create only means the informer cache is behind.
/// - `status` is `None` only when the job is not ours (managedBy) or is being deleted; then
///   `actions` and `events` are empty too.
///
/// # Assumptions
/// The I/O shell applies the actions in order, stops at the first error and retries the whole
/// reconcile (the next plan sees what did happen), writes `status` through the status
/// subresource only when it differs from the stored one, and requeues after `requeue_after`
/// even when no watch event arrives — this is what makes deadlines fire (upstream #3358).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub status: Option<JobStatus>,
    pub requeue_after: Option<Duration>,
    pub events: Vec<Event>,
}

/// One change to the cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    CreatePod(Box<NewPod>),
    DeletePod {
        name: String,
        reason: DeleteReason,
    },
    CreateService(Box<Service>),
    DeleteService {
        name: String,
        reason: DeleteReason,
    },
    /// A whole PodGroup object (`apiVersion`, `kind`, `metadata`, `spec`).
    CreatePodGroup(Value),
    /// Replace the PodGroup's `spec` with this one (merge-patch `{"spec": ...}`).
    UpdatePodGroup {
        api_version: String,
        name: String,
        spec: Value,
    },
    DeletePodGroup {
        api_version: String,
        name: String,
    },
    /// An elastic PyTorchJob's autoscaling/v2 HPA (see [`hpa`](super::hpa)).
    CreateHpa(Box<HorizontalPodAutoscaler>),
    /// Replace the fields of the HPA's spec the controller owns (merge-patch `{"spec": ...}`:
    /// scaleTargetRef, min/maxReplicas, metrics; a merge patch replaces lists whole).
    UpdateHpa {
        name: String,
        spec: Box<HorizontalPodAutoscalerSpec>,
    },
    DeleteHpa {
        name: String,
    },
    /// An MPIJob's `<job>-config` (see [`mpi::objects`](super::mpi::objects)).
    CreateConfigMap(Box<ConfigMap>),
    /// Replace the ConfigMap's `data` (merge-patch `{"data": ...}`; every key is planned).
    UpdateConfigMap {
        name: String,
        data: BTreeMap<String, String>,
    },
    /// Create an MPIJob's SSH Secret. It comes without keys: the I/O shell generates the key
    /// pair and fills `data` (the planner is pure). An existing Secret is never planned again,
    /// so the key is never rotated under a running job.
    CreateSshSecret(Box<Secret>),
    /// The SSH Secret lost a key (edited by hand): merge-patch a freshly generated pair into
    /// its `data`. Pods see the new files through their Secret volume.
    RepairSshSecret {
        name: String,
    },
    /// MPIJob v1: the launcher's ServiceAccount `<job>-launcher` (see
    /// [`mpi::kubexec`](super::mpi::kubexec)).
    CreateServiceAccount(Box<ServiceAccount>),
    /// MPIJob v1: the Role `<job>-launcher` that lets the launcher `kubectl exec` into its
    /// workers, and only them.
    CreateRole(Box<Role>),
    /// Replace the Role's rules (merge-patch `{"rules": ...}`), when the workers changed.
    UpdateRole {
        name: String,
        rules: Vec<PolicyRule>,
    },
    /// MPIJob v1: binds the launcher's Role to its ServiceAccount.
    CreateRoleBinding(Box<RoleBinding>),
    /// ttlSecondsAfterFinished has passed: delete the job (its pods go with it by owner
    /// reference).
    DeleteJob,
    /// Merge-patch these annotations onto the job's metadata (restart bookkeeping, see
    /// [`restart::RESTARTS_ANNOTATION`](super::restart::RESTARTS_ANNOTATION)).
    PatchJobAnnotations(BTreeMap<String, String>),
    /// Lift the release gate from the pods `names`, in this order, each update answered
    /// before the next is sent (see [`release`](super::release)): kube-scheduler queues them
    /// so. Each pod is annotated with `at`, where the watchdog's clock starts for it.
    ReleasePods {
        names: Vec<String>,
        at: Time,
    },
}

/// A pod to create, with what k8s-openapi's PodSpec (1.33 API) cannot carry.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPod {
    pub pod: Pod,
    /// `spec.schedulingGroup.podGroupName` (Kubernetes 1.36, gate GenericWorkload): the
    /// native PodGroup the pod belongs to. Immutable, so it is set at creation or never.
    pub scheduling_group: Option<String>,
}

impl From<Pod> for NewPod {
    /// A pod in no native PodGroup.
    fn from(pod: Pod) -> NewPod {
        NewPod {
            pod,
            scheduling_group: None,
        }
    }
}

impl NewPod {
    /// The pod as the API server is sent it: `pod` with `spec.schedulingGroup` added.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        let mut object = serde_json::to_value(&self.pod)?;
        if let (Some(group), Some(spec)) = (
            &self.scheduling_group,
            object.get_mut("spec").and_then(Value::as_object_mut),
        ) {
            spec.insert(
                "schedulingGroup".to_string(),
                serde_json::json!({ "podGroupName": group }),
            );
        }
        Ok(object)
    }
}

/// Why a pod or Service is deleted; for logs, Events and metrics labels (a closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// The pod failed and its restart policy recreates it.
    Restart,
    /// Its index is not below `replicas` any more.
    ScaleDown,
    /// The job finished; cleanPodPolicy selects it.
    CleanUp,
    /// The job is suspended.
    Suspend,
    /// The gang watchdog restarts the whole gang.
    GangRestart,
}

impl DeleteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteReason::Restart => "restart",
            DeleteReason::ScaleDown => "scale-down",
            DeleteReason::CleanUp => "clean-up",
            DeleteReason::Suspend => "suspend",
            DeleteReason::GangRestart => "gang-restart",
        }
    }
}

/// A Kubernetes Event to record on the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    /// Upstream's reasons, e.g. `PyTorchJobRestarting`, `ExitedWithCode`.
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl Event {
    pub fn normal(reason: impl Into<String>, message: impl Into<String>) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            message: message.into(),
        }
    }

    pub fn warning(reason: impl Into<String>, message: impl Into<String>) -> Event {
        Event {
            type_: EventType::Warning,
            reason: reason.into(),
            message: message.into(),
        }
    }
}
