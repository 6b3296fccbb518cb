//! `kubeflow.org/v1` XGBoostJob: Master and Worker replicas (Rabit tracker on the master).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{JobStatus, ReplicaSpecs, RunPolicy};

/// The desired state of an XGBoostJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "XGBoostJob",
    plural = "xgboostjobs",
    singular = "xgboostjob",
    namespaced,
    status = "JobStatus",
    doc = "A distributed XGBoost training job.",
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
pub struct XGBoostJobSpec {
    /// Job-wide policies: clean-up, deadlines, retries, scheduling, suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// Replica type (Master, Worker) to its replica spec.
    pub xgb_replica_specs: ReplicaSpecs,
}
