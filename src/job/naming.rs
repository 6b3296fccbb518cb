//! Names the operator derives from a job: pods and Services are `<job>-<type>-<index>`; and
//! the labels every pod of a replica type carries ([`type_pod_labels`]), which the JobView's
//! podLabels and the controller's pods share.

use std::collections::BTreeMap;

use super::kinds::{is_mpi_v2, KindSpec};

pub const JOB_NAME: &str = "training.kubeflow.org/job-name";
pub const OPERATOR_NAME: &str = "training.kubeflow.org/operator-name";
pub const REPLICA_TYPE: &str = "training.kubeflow.org/replica-type";
pub const REPLICA_INDEX: &str = "training.kubeflow.org/replica-index";
pub const JOB_ROLE: &str = "training.kubeflow.org/job-role";

/// Kubernetes names of pods and Services must fit a DNS-1035 label: 63 characters.
pub const MAX_LABEL_LEN: usize = 63;

/// The name of replica `index` of type `replica_type`, as the upstream operator builds it:
/// lower-cased type, `/` replaced by `-`.
pub fn pod_name(job: &str, replica_type: &str, index: i64) -> String {
    format!("{job}-{}-{index}", replica_type.to_lowercase()).replace('/', "-")
}

/// Labels every object of the job carries: job-name and operator-name.
pub fn labels_of_job(name: &str, spec: &KindSpec) -> BTreeMap<String, String> {
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
    if is_mpi_v2(spec) {
        labels.insert(JOB_ROLE.to_string(), type_label.to_string());
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names_follow_upstream() {
        assert_eq!(pod_name("mnist", "Worker", 7), "mnist-worker-7");
        assert_eq!(pod_name("mnist", "PS", 0), "mnist-ps-0");
    }
}
