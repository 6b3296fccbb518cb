//! `kubeflow.org/v1` MPIJob, as the training-operator v1.9 defines it: Launcher and Worker
//! replicas over the kubectl-exec transport, the legacy top-level `cleanPodPolicy`, and
//! `mainContainer`; no scale subresource, as upstream.
//!
//! Its CRD has the same name as the mpi-operator's v2beta1 one ([`super::mpi`]), so it is
//! written to `crds/mpijob-v1/`, out of the set that `kubectl apply -f crds/` installs.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{JobStatus, ReplicaSpecs, RunPolicy};

/// The desired state of a v1 MPIJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "MPIJob",
    plural = "mpijobs",
    singular = "mpijob",
    namespaced,
    status = "JobStatus",
    doc = "A distributed MPI training job, launched over kubectl exec (training-operator v1).",
    // Upstream's order, which is not the other kinds' (Age before State).
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".status.conditions[-1:].type"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MPIJobSpec {
    /// Slots per worker in the hostfile; the controller defaults it to 1 (the CRD does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_per_worker: Option<i32>,
    /// Deprecated: use `runPolicy.cleanPodPolicy`, which wins when both are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<String>,
    /// Name of the container in each pod that runs the MPI code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_container: Option<String>,
    /// Job-wide policies: clean-up, deadlines, retries, scheduling, suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// Replica type (Launcher, Worker) to its replica spec.
    pub mpi_replica_specs: ReplicaSpecs,
}
