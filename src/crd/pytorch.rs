//! `kubeflow.org/v1` PyTorchJob: Master and Worker replicas, optionally elastic (torchrun
//! rendezvous), scalable through the Worker replica count.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{JobStatus, Metrics, ReplicaSpecs, RunPolicy};
use super::schemas;

/// The desired state of a PyTorchJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "PyTorchJob",
    plural = "pytorchjobs",
    singular = "pytorchjob",
    namespaced,
    status = "JobStatus",
    doc = "A distributed PyTorch training job.",
    scale(
        spec_replicas_path = ".spec.pytorchReplicaSpecs.Worker.replicas",
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
pub struct PyTorchJobSpec {
    /// Job-wide policies: clean-up, deadlines, retries, scheduling, suspension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// Elastic training: the Worker count may change between minReplicas and maxReplicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<ElasticPolicy>,
    /// Processes per node: auto, cpu, gpu or a number (torchrun `--nproc-per-node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nproc_per_node: Option<String>,
    /// Replica type (Master, Worker) to its replica spec.
    pub pytorch_replica_specs: ReplicaSpecs,
}

/// torchrun's elastic rendezvous and the HPA of an elastic job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElasticPolicy {
    /// Fewest workers the job runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// Most workers the job may be scaled to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    /// Rendezvous backend: c10d, etcd or etcd-v2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_backend: Option<String>,
    /// Rendezvous port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_port: Option<i32>,
    /// Rendezvous host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_host: Option<String>,
    /// Rendezvous id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_id: Option<String>,
    /// Extra rendezvous settings (`<key>=<value>` pairs of `--rdzv-conf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_conf: Option<Vec<RdzvConf>>,
    /// Start a local standalone rendezvous backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standalone: Option<bool>,
    /// Deprecated: use `spec.nprocPerNode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_proc_per_node: Option<i32>,
    /// Restarts of the worker group before the job fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
    /// Metrics for the HorizontalPodAutoscaler; no HPA without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::metrics")]
    pub metrics: Option<Metrics>,
}

/// One `--rdzv-conf` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RdzvConf {
    /// Setting name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Setting value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}
