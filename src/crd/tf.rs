//! `kubeflow.org/v1` TFJob: Chief (or Master), Worker, PS and Evaluator replicas; no scale
//! subresource, as upstream.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{JobStatus, ReplicaSpecs, RunPolicy};

/// The desired state of a TFJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "TFJob",
    plural = "tfjobs",
    singular = "tfjob",
    namespaced,
    status = "JobStatus",
    doc = "A distributed TensorFlow training job.",
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
pub struct TFJobSpec {
    /// Job-wide policies: clean-up, deadlines, retries, scheduling, suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// When the job succeeds: "" (the Chief, or worker 0 without one) or AllWorkers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<String>,
    /// Workers may join and leave: TF_CONFIG lists only the chief, PS and the worker itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_dynamic_worker: Option<bool>,
    /// Replica type (Chief, Master, Worker, PS, Evaluator) to its replica spec.
    pub tf_replica_specs: ReplicaSpecs,
}
