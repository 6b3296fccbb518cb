//! `kubeflow.org/v1` PaddleJob: Master and Worker replicas, scalable through the Worker count.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{JobStatus, Metrics, ReplicaSpecs, RunPolicy};
use super::schemas;

/// The desired state of a PaddleJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "PaddleJob",
    plural = "paddlejobs",
    singular = "paddlejob",
    namespaced,
    status = "JobStatus",
    doc = "A distributed PaddlePaddle training job.",
    scale(
        spec_replicas_path = ".spec.paddleReplicaSpecs.Worker.replicas",
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
pub struct PaddleJobSpec {
    /// Job-wide policies: clean-up, deadlines, retries, scheduling, suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// Elastic training bounds; upstream only defaults it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<PaddleElasticPolicy>,
    /// Replica type (Master, Worker) to its replica spec.
    pub paddle_replica_specs: ReplicaSpecs,
}

/// Elastic bounds of a PaddleJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaddleElasticPolicy {
    /// Fewest workers the job runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// Most workers the job may be scaled to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    /// Restarts before the job fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
    /// Metrics for the HorizontalPodAutoscaler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::metrics")]
    pub metrics: Option<Metrics>,
}
