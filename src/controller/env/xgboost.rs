//! XGBoost (Rabit/collective): master address, world size, rank and the worker list.

use k8s_openapi::api::core::v1::EnvVar;

use super::{host, port_of, var};
use crate::controller::snapshot::{JobSnapshot, Replica};
use crate::job::kinds::Role;

/// The variables of replica `index` of `replica`, in upstream's order.
pub fn vars(job: &JobSnapshot, replica: &Replica, index: i32) -> Vec<EnvVar> {
    let masters = job.replica("Master").map_or(0, |m| m.replicas);
    let rank = if replica.role() == Role::Worker {
        index + masters
    } else {
        index
    };
    let total = job.total_replicas();
    let mut vars = vec![
        var("MASTER_PORT", port_of(job, "Master").to_string()),
        var("MASTER_ADDR", host(job, "Master", 0)),
        var("WORLD_SIZE", total.to_string()),
        var("RANK", rank.to_string()),
        var("PYTHONUNBUFFERED", "1"),
    ];
    if total > 1 {
        // Upstream lists total-1 worker names, i.e. assumes exactly one Master.
        let workers: Vec<String> = (0..total - 1).map(|i| host(job, "Worker", i)).collect();
        vars.push(var("WORKER_PORT", port_of(job, "Worker").to_string()));
        vars.push(var("WORKER_ADDRS", workers.join(",")));
    }
    vars
}
