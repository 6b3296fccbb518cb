//! PyTorch: torchrun (`PET_*`) and `torch.distributed` (`MASTER_ADDR`, `RANK`, ...)
//! variables, and the init container that waits until the master's name resolves.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{host, port, port_of, var};
use crate::controller::config::Config;
use crate::controller::elastic;
use crate::controller::injected;
use crate::controller::snapshot::{ElasticPolicy, JobSnapshot, Replica};
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
    match elastic::of(job) {
        Some((policy, workers)) => vars.extend(elastic_vars(job, policy, workers)),
        None => vars.push(var("PET_NNODES", total.to_string())),
    }
    vars
}

/// torchrun's rendezvous variables, in upstream's order (`pytorch/elastic.go`).
fn elastic_vars(job: &JobSnapshot, policy: &ElasticPolicy, workers: i32) -> Vec<EnvVar> {
    let rdzv_host = policy
        .rdzv_host
        .clone()
        .unwrap_or_else(|| host(job, "Worker", 0));
    let rdzv_port = policy.rdzv_port.unwrap_or_else(|| port_of(job, "Worker"));
    let (min, max) = policy.bounds(workers);
    let mut vars = vec![
        var("PET_RDZV_ENDPOINT", format!("{rdzv_host}:{rdzv_port}")),
        var(
            "PET_RDZV_BACKEND",
            policy.rdzv_backend.as_deref().unwrap_or("c10d"),
        ),
        var("PET_NNODES", format!("{min}:{max}")),
    ];
    let optional = [
        (
            "PET_MAX_RESTARTS",
            policy.max_restarts.map(|n| n.to_string()),
        ),
        (
            "PET_NPROC_PER_NODE",
            policy.n_proc_per_node.map(|n| n.to_string()),
        ),
        ("PET_RDZV_ID", policy.rdzv_id.clone()),
        ("PET_RDZV_CONF", rdzv_conf(policy)),
        // torchrun reads the variable's presence, not its value.
        (
            "PET_STANDALONE",
            (policy.standalone == Some(true)).then(String::new),
        ),
    ];
    vars.extend(
        optional
            .into_iter()
            .filter_map(|(name, value)| Some(var(name, value?))),
    );
    vars
}

/// `k=v,k2=v2`; absent for an empty list (upstream would slice an empty string and panic).
fn rdzv_conf(policy: &ElasticPolicy) -> Option<String> {
    let conf = policy.rdzv_conf.as_ref().filter(|c| !c.is_empty())?;
    let pairs: Vec<String> = conf
        .iter()
        .map(|c| format!("{}={}", c.key, c.value))
        .collect();
    Some(pairs.join(","))
}

/// `spec.nprocPerNode` as upstream defaults it in memory: `auto` unless the (deprecated)
/// `elasticPolicy.nProcPerNode` is set.
fn nproc_per_node(job: &JobSnapshot) -> Option<String> {
    let elastic_nproc = job
        .extras
        .elastic_policy
        .as_ref()
        .is_some_and(|e| e.n_proc_per_node.is_some());
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
/// a master name that does not resolve yet. It waits for the Master's complete name
/// (`<job>-master-0.<ns>.svc.<cluster domain>.`), not upstream's short one: busybox's
/// nslookup fails a short name whenever any search domain answers NXDOMAIN, which on a real
/// cluster is always (the init container never finished). It runs as non-root, restricted (see
/// [`injected::security_context`]), whatever the pod's own containers run as.
pub fn init_containers(job: &JobSnapshot, replica: &Replica, config: &Config) -> Vec<Container> {
    if replica.role() != Role::Worker || job.replica("Master").is_none() {
        return Vec::new();
    }
    let master = config
        .cluster_domain
        .fqdn(&host(job, "Master", 0), &job.namespace);
    let command =
        injected::wait_for_name("the master", &master, config.pytorch_init_timeout.as_secs());
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
        command: Some(command),
        resources: Some(ResourceRequirements {
            limits: Some(resources("100m", "20Mi")),
            requests: Some(resources("50m", "10Mi")),
            ..ResourceRequirements::default()
        }),
        security_context: Some(injected::security_context()),
        // A worker stuck in Init shows why in `kubectl describe pod`: the name and the
        // last lookup's answer, not only "exit code 1".
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Container::default()
    }]
}
