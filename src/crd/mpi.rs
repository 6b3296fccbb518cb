//! `kubeflow.org/v2beta1` MPIJob, as the mpi-operator v0.8 defines it: Launcher and Worker
//! replicas over SSH, with the MPI implementation, slots and launcher policy in the spec.
//!
//! The replica specs and replica counts are the v1 kinds' ([`super::common`]). `runPolicy` and
//! the status are not: the mpi-operator's CRD has no CEL rule on `schedulingPolicy.queue`,
//! and its conditions are a list map keyed by `type` whose `status` is an enum. Those are
//! written out here, so that each CRD says what its upstream says.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::common::{ReplicaSpecs, ReplicaStatus};
use super::schemas;

/// The desired state of a v2beta1 MPIJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v2beta1",
    kind = "MPIJob",
    plural = "mpijobs",
    singular = "mpijob",
    namespaced,
    status = "MPIJobStatus",
    doc = "A distributed MPI training job, launched over SSH (mpi-operator v2beta1)."
)]
#[serde(rename_all = "camelCase")]
pub struct MPIJobSpec {
    /// Slots per worker in the hostfile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub slots_per_worker: Option<i32>,
    /// Also run an MPI process in the launcher (it is then listed in the hostfile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub run_launcher_as_worker: Option<bool>,
    /// Job-wide policies: clean-up, deadlines, retries, scheduling, suspension, manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// Replica type (Launcher, Worker) to its replica spec.
    pub mpi_replica_specs: ReplicaSpecs,
    /// Directory the SSH key Secret is mounted at in every pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "/root/.ssh"))]
    pub ssh_auth_mount_path: Option<String>,
    /// AtStartup, or WaitForWorkersReady: create the launcher once every worker is Ready.
    /// Not an enum in the CRD, as upstream (the validating webhook checks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "AtStartup"))]
    pub launcher_creation_policy: Option<String>,
    /// OpenMPI, Intel or MPICH: decides the hostfile format and the launcher's env.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "OpenMPI", "enum" = ["OpenMPI", "Intel", "MPICH"]))]
    pub mpi_implementation: Option<String>,
}

/// Policies for the whole job, as the mpi-operator's `RunPolicy` (the v1 kinds' fields; the
/// queue without the v1 CRDs' immutability rule).
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
    /// Launcher retries (its Job's backoffLimit) before the job is marked Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// Gang-scheduling settings for the job's PodGroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,
    /// True deletes the job's running pods and stops creating new ones; false resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub suspend: Option<bool>,
    /// The controller that runs this job: unset or `kubeflow.org/mpi-operator` for gangplank
    /// (or the mpi-operator), `kueue.x-k8s.io/multikueue` for MultiKueue. Immutable. Neither
    /// rule is in upstream's CRD, nor in ours: the validating webhook checks both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
}

/// What the job's PodGroup asks of the gang scheduler (Volcano or scheduler-plugins).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    /// Pods that must be schedulable together before any starts (workers + launcher when
    /// unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<i32>,
    /// Scheduler queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

/// The observed state of an MPIJob, written by the controller through the status subresource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MPIJobStatus {
    /// At most one condition of each type, in the order they were added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
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
    /// The condition type; the list's key.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
    pub status: String,
    /// `MPIJob<Reason>`, e.g. MPIJobRunning.
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
