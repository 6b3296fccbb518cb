//! `kubeflow.org/v1` JAXJob: Worker replicas only (process 0 coordinates), scalable.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{JobStatus, ReplicaSpecs, RunPolicy};

/// The desired state of a JAXJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "JAXJob",
    plural = "jaxjobs",
    singular = "jaxjob",
    namespaced,
    status = "JobStatus",
    doc = "A distributed JAX training job.",
    scale(
        spec_replicas_path = ".spec.jaxReplicaSpecs.Worker.replicas",
        status_replicas_path = ".status.replicaStatuses.Worker.active",
        label_selector_path = ".status.replicaStatuses.Worker.selector"
    ),
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".status.conditions[-1:].type"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct JAXJobSpec {
    /// Job-wide policies: clean-up, deadlines, retries, scheduling, suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// Replica type (Worker) to its replica spec.
    pub jax_replica_specs: ReplicaSpecs,
}
