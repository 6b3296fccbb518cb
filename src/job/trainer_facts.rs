//! What the runtime and the Trainer decide about a Trainer v2 job (`input.job.trainer`): plain
//! data a JobView carries. `trainer::view` produces it; `job` knows its shape, not the
//! Trainer.

use serde::Serialize;

/// What the runtime and the Trainer decide about the job (`input.job.trainer`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrainerView {
    pub runtime: RuntimeView,
    /// The `mlPolicy` framework block: torch, mpi, jax, xgboost, flux; undefined for plain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework: Option<String>,
    /// Pods of the trainer step(s) and MPI nodes: the processes that train together.
    pub num_nodes: i64,
    /// `trainer.numProcPerNode`, else the runtime's MPI/Flux `numProcPerNode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_proc_per_node: Option<i64>,
    pub run_launcher_as_node: bool,
    /// `coscheduling` or `volcano`: the gang the Trainer's plugin creates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_group_policy: Option<String>,
    /// Where `podGroupPolicy` is (or would go) in the runtime.
    pub pod_group_policy_path: String,
    /// `podGroupPolicy.volcano.networkTopology` as the runtime writes it: the HyperNode tier
    /// Volcano keeps the gang inside (the network_topology policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<serde_json::Value>,
    /// The PodGroup `minMember` the Trainer writes: every replicatedJob's pods, initializers
    /// included.
    pub min_member: i64,
    /// Pods created with the JobSet, before any `dependsOn` is met.
    pub first_wave: i64,
    pub suspend: bool,
    /// `runtimePatches[].manager`, in order.
    pub patch_managers: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeView {
    pub kind: String,
    pub name: String,
    /// `<Kind>/<name>:` in a TrainJob's view (prefix of runtime paths), `""` in its own.
    pub path: String,
    pub found: bool,
    /// Why the runtime as read may be out of date (the watch is failing), if it may.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<String>,
}
