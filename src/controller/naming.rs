//! Names, labels, selectors and owner references of the objects a job owns, as upstream
//! derives them, so that SDKs, dashboards and `kubectl -l` queries keep working.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::mpi;
use super::snapshot::{JobSnapshot, Replica};
use crate::job::kinds::Role;
use crate::job::KindSpec;

pub const JOB_NAME: &str = "training.kubeflow.org/job-name";
pub const OPERATOR_NAME: &str = "training.kubeflow.org/operator-name";
pub const REPLICA_TYPE: &str = "training.kubeflow.org/replica-type";
pub const REPLICA_INDEX: &str = "training.kubeflow.org/replica-index";
pub const JOB_ROLE: &str = "training.kubeflow.org/job-role";

/// `<job>-<type lowercased>-<index>`, the name of a pod and of its Service.
pub fn replica_name(job: &JobSnapshot, replica: &Replica, index: i32) -> String {
    if replica.rtype.unindexed {
        // One per job (the MPI launcher): `<job>-launcher`, as upstream names it.
        return format!("{}-{}", job.name, replica.type_label());
    }
    crate::job::naming::pod_name(&job.name, replica.rtype.name, i64::from(index))
}

/// The PodGroup's name: `<job>-<kind lowercased>`. Upstream names it `<job>`, so a
/// PyTorchJob and a JAXJob called `foo` in one namespace share (and fight over) one PodGroup;
/// the kind in the name keeps them apart.
pub fn pod_group_name(job: &JobSnapshot) -> String {
    format!("{}-{}", job.name, job.kind().to_lowercase())
}

/// Labels every object of the job carries: job-name and operator-name.
pub fn job_labels(job: &JobSnapshot) -> BTreeMap<String, String> {
    labels_of_job(&job.name, job.spec)
}

fn labels_of_job(name: &str, spec: &KindSpec) -> BTreeMap<String, String> {
    BTreeMap::from([
        (JOB_NAME.to_string(), name.to_string()),
        (OPERATOR_NAME.to_string(), spec.operator_name.to_string()),
    ])
}

/// Labels every pod of a replica type carries, whatever its index: the job's, the type
/// (`type_label`, lower-cased) and, for MPIJob v2beta1, `job-role` (the mpi-operator marks
/// every pod with its role: launcher or worker). The JobView's `podLabels` are these over
/// the template's labels, so what NetworkPolicies are matched against is what pods get.
pub fn type_pod_labels(job: &str, spec: &KindSpec, type_label: &str) -> BTreeMap<String, String> {
    let mut labels = labels_of_job(job, spec);
    labels.insert(REPLICA_TYPE.to_string(), type_label.to_string());
    if mpi::is_v2_kind(spec) {
        labels.insert(JOB_ROLE.to_string(), type_label.to_string());
    }
    labels
}

/// Labels of replica `index` of `replica`: the type's ([`type_pod_labels`]), the index and,
/// for the rank-0 pod, `job-role=master`. These are also the Service's selector, minus
/// job-role.
pub fn replica_labels(
    job: &JobSnapshot,
    replica: &Replica,
    index: i32,
) -> BTreeMap<String, String> {
    let mut labels = type_pod_labels(&job.name, job.spec, &replica.type_label());
    let label_index = index + mpi::index_offset(job, replica);
    labels.insert(REPLICA_INDEX.to_string(), label_index.to_string());
    if !mpi::is_v2(job) && is_master(job, replica, index) {
        labels.insert(JOB_ROLE.to_string(), "master".to_string());
    }
    labels
}

/// Upstream's `job-role=master`: the Master/Chief (the v1 MPI launcher), or worker-0 when the
/// job has none (PyTorch, TF, JAX; XGBoost and Paddle mark only a Master).
fn is_master(job: &JobSnapshot, replica: &Replica, index: i32) -> bool {
    match replica.role() {
        Role::Coordinator => true,
        // The training operator's MPIJob marks its launcher.
        Role::Launcher => mpi::is_v1(job),
        Role::Worker => {
            index == 0
                && job.coordinator().is_none()
                && matches!(job.kind(), "PyTorchJob" | "TFJob" | "JAXJob")
        }
        _ => false,
    }
}

/// `metav1.FormatLabelSelector` of a replica type's pods (job-name, operator-name,
/// replica-type, sorted by key), the `selector` upstream puts in replicaStatuses.
pub fn type_selector(job: &JobSnapshot, replica: &Replica) -> String {
    let mut labels = job_labels(job);
    labels.insert(REPLICA_TYPE.to_string(), replica.type_label());
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The owner reference every generated object carries: the job is the controller, and
/// foreground deletion of the job waits for it, so orphans never outlive their job.
pub fn owner_reference(job: &JobSnapshot) -> OwnerReference {
    OwnerReference {
        api_version: job.spec.api_version(),
        kind: job.kind().to_string(),
        name: job.name.clone(),
        uid: job.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
