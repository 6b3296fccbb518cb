//! PyTorch: torchrun (`PET_*`) and `torch.distributed` (`MASTER_ADDR`, `RANK`, ...)
//! variables, and the init container that waits until the master's name resolves.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{host, port, var};
use crate::controller::config::Config;
use crate::controller::snapshot::{JobSnapshot, Replica};
use crate::job::kinds::Role;

/// The variables of replica `index` of `replica`, in upstream's order.
pub fn vars(job: &JobSnapshot, replica: &Replica, index: i32) -> Vec<EnvVar> {
    let total = job.total_replicas();
    let mut vars = vec![var("PYTHONUNBUFFERED", "1")];
    if let Some(master) = job.replica("Master") {
        let (addr, master_port) = (host(job, "Master", 0), port(job, master).to_string());
        let rank = if replica.role() == Role::Worker {
            index + 1
        } else {
            index
        };
        let world_size = i64::from(total) * nproc_as_int(job.extras.nproc_per_node.as_deref());
        vars.extend([
            var("MASTER_PORT", master_port.clone()),
            var("PET_MASTER_PORT", master_port),
            var("MASTER_ADDR", addr.clone()),
            var("PET_MASTER_ADDR", addr),
            var("WORLD_SIZE", world_size.to_string()),
            var("RANK", rank.to_string()),
            var("PET_NODE_RANK", rank.to_string()),
        ]);
    }
    if let Some(nproc) = nproc_per_node(job) {
        vars.push(var("PET_NPROC_PER_NODE", nproc));
    }
    if job.extras.elastic_policy.is_none() {
        vars.push(var("PET_NNODES", total.to_string()));
    }
    vars
}

/// `spec.nprocPerNode` as upstream defaults it in memory: `auto` unless the (deprecated)
/// `elasticPolicy.nProcPerNode` is set.
fn nproc_per_node(job: &JobSnapshot) -> Option<String> {
    let elastic_nproc = job
        .extras
        .elastic_policy
        .as_ref()
        .and_then(|e| e.get("nProcPerNode"))
        .is_some_and(|v| !v.is_null());
    match &job.extras.nproc_per_node {
        Some(n) => Some(n.clone()),
        None if elastic_nproc => None,
        None => Some("auto".to_string()),
    }
}

/// nprocPerNode as a number for WORLD_SIZE: `auto`, `cpu` and `gpu` count as 1 (upstream).
fn nproc_as_int(nproc: Option<&str>) -> i64 {
    nproc.and_then(|n| n.parse().ok()).unwrap_or(1)
}

/// `init-pytorch` for Worker pods of a job with a Master: workers would otherwise crash on
/// a master name that does not resolve yet.
pub fn init_containers(job: &JobSnapshot, replica: &Replica, config: &Config) -> Vec<Container> {
    if replica.role() != Role::Worker || job.replica("Master").is_none() {
        return Vec::new();
    }
    let master = host(job, "Master", 0);
    let tries = config.pytorch_init_max_tries;
    let script = format!(
        "err=1;for i in $(seq {tries}); do if nslookup {master}; then err=0 && break; fi;\
         echo waiting for master; sleep 2; done; exit $err"
    );
    let resources = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.to_string())),
            ("memory".to_string(), Quantity(memory.to_string())),
        ])
    };
    vec![Container {
        name: "init-pytorch".to_string(),
        image: Some(config.pytorch_init_image.clone()),
        image_pull_policy: Some("IfNotPresent".to_string()),
        command: Some(vec!["sh".into(), "-c".into(), script]),
        resources: Some(ResourceRequirements {
            limits: Some(resources("100m", "20Mi")),
            requests: Some(resources("50m", "10Mi")),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }]
}
