//! PaddlePaddle: job id, node count and the master endpoint; the rank-0 pod advertises its
//! own IP.

use k8s_openapi::api::core::v1::EnvVar;

use super::{host, pod_ip_var, port_of, var};
use crate::controller::snapshot::{JobSnapshot, Replica};
use crate::job::kinds::Role;

/// The variables of replica `index` of `replica`, in upstream's order.
pub fn vars(job: &JobSnapshot, replica: &Replica, index: i32) -> Vec<EnvVar> {
    let mut vars = vec![
        var("PYTHONUNBUFFERED", "1"),
        var("PADDLE_JOB_ID", job.name.clone()),
        var("PADDLE_NNODES", job.total_replicas().to_string()),
    ];
    let has_master = job.replica("Master").is_some();
    let master_type = if has_master { "Master" } else { "Worker" };
    let master_port = port_of(job, master_type);
    let is_rank_zero = index == 0 && (!has_master || replica.role() == Role::Coordinator);
    if is_rank_zero {
        vars.push(pod_ip_var("POD_IP_DUMMY"));
        vars.push(var(
            "PADDLE_MASTER",
            format!("$(POD_IP_DUMMY):{master_port}"),
        ));
    } else {
        vars.push(var(
            "PADDLE_MASTER",
            format!("{}:{master_port}", host(job, master_type, 0)),
        ));
    }
    if has_master {
        vars.push(match replica.role() {
            Role::Coordinator => var("PADDLE_SERVER_NUM", "1"),
            _ => var("PADDLE_TRAINER_NUM", "1"),
        });
    }
    vars
}
