//! JAX (`jax.distributed.initialize`): coordinator address and port, process count and id.

use k8s_openapi::api::core::v1::EnvVar;

use super::{host, port_of, var};
use crate::controller::snapshot::JobSnapshot;

/// The variables of worker `index`, in upstream's order.
pub fn vars(job: &JobSnapshot, index: i32) -> Vec<EnvVar> {
    vec![
        var("PYTHONUNBUFFERED", "1"),
        var("COORDINATOR_PORT", port_of(job, "Worker").to_string()),
        var("COORDINATOR_ADDRESS", host(job, "Worker", 0)),
        var("NUM_PROCESSES", job.total_replicas().to_string()),
        var("PROCESS_ID", index.to_string()),
    ]
}
