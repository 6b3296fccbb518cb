//! Names, labels, selectors and owner references of the objects a job owns, as upstream
//! derives them, so that SDKs, dashboards and `kubectl -l` queries keep working.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::mpi;
use super::snapshot::{JobSnapshot, Replica};
use crate::job::kinds::Role;
use crate::job::naming::{labels_of_job, type_pod_labels};

// The label keys belong to the job's names (the JobView's podLabels carry them too); the
// controller reads them here, with the rest of what it names.
pub use crate::job::naming::{JOB_NAME, JOB_ROLE, OPERATOR_NAME, REPLICA_INDEX, REPLICA_TYPE};

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
