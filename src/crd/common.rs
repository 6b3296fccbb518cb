//! Types every kubeflow.org/v1 training kind shares: replica specs, `runPolicy` and the job
//! status, as upstream's `common_types.go` defines them (reference: upstream-training-operator.md §1).
//!
//! Fields whose upstream schema is an embedded Kubernetes type get a hand-written schema from
//! [`schemas`] (k8s-openapi is built without its `schemars` feature).

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::MetricSpec;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schemas;

/// Replica type (`Master`, `Worker`, `PS`, ...) to its replica spec.
pub type ReplicaSpecs = BTreeMap<String, ReplicaSpec>;

/// How many pods of one replica type to run, from which template, restarted how.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    /// Desired number of pods of this replica type; unset means the kind's default (1; 0 for
    /// MPI workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The pod template of this replica type; its own `restartPolicy` is overridden by the
    /// replica spec's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::pod_template")]
    pub template: Option<PodTemplateSpec>,
    /// Always, OnFailure, Never or ExitCode (exit codes 1-127 fail the job, 128 and above
    /// restart the pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// Policies for the whole job: pod clean-up, deadlines, retries, gang scheduling, suspension.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicy {
    /// Which pods to delete when the job finishes: All, Running or None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<String>,
    /// Seconds after the job finished before it is deleted; unset means never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Seconds after startTime before the job is failed and its pods stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Pod restarts allowed before the job is marked Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// Gang-scheduling settings for the job's PodGroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,
    /// True deletes the job's running pods and stops creating new ones; false resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub suspend: Option<bool>,
    /// The controller that runs this job: unset or `kubeflow.org/training-operator` for
    /// gangplank (or the upstream operator), `kueue.x-k8s.io/multikueue` for MultiKueue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
}

/// What the job's PodGroup asks of the gang scheduler (Volcano or scheduler-plugins).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    /// Pods that must be schedulable together before any starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<i32>,
    /// Scheduler queue; immutable once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::immutable_queue")]
    pub queue: Option<String>,
    /// Resources the whole gang needs (resource name to quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::quantity_map")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// PriorityClass of the PodGroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Seconds the gang may wait to be scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

/// The observed state of a job, written by the controller through the status subresource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// Conditions in the order they were added; the last one is the job's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<JobCondition>>,
    /// Replica type to the counts of its pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_statuses: Option<BTreeMap<String, ReplicaStatus>>,
    /// When the controller first saw the job (reset on resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::date_time")]
    pub start_time: Option<Time>,
    /// When the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::date_time")]
    pub completion_time: Option<Time>,
    /// When the controller last reconciled the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::date_time")]
    pub last_reconcile_time: Option<Time>,
}

/// One condition: Created, Running, Restarting, Succeeded, Suspended or Failed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// The condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// `<Kind><Reason>`, e.g. PyTorchJobRunning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Details for a human.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition was last updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::date_time")]
    pub last_update_time: Option<Time>,
    /// When the condition last changed status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::date_time")]
    pub last_transition_time: Option<Time>,
}

/// Pod counts of one replica type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// Pods running now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<i32>,
    /// Pods that reached phase Succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    /// Pods that reached phase Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
    /// Deprecated: use `selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schemas::label_selector")]
    pub label_selector: Option<LabelSelector>,
    /// The replica type's pods as a label selector string (the scale subresource reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// Autoscaling metrics of an elastic job (autoscaling/v2 MetricSpec), for its HPA.
pub type Metrics = Vec<MetricSpec>;
