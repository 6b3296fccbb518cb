//! The MPIJob's shared objects: the ConfigMap `<job>-config` (hostfile, discover_hosts.sh),
//! the headless Service `<job>` and the SSH Secret `<job>-ssh`.
//!
//! Entry points: [`config_map`], [`service`], [`ssh_secret`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{config_name, fqdn, launcher_name, secret_name, DISCOVER_HOSTS, HOSTFILE};
use crate::controller::config::Config;
use crate::controller::naming;
use crate::controller::observed::{name, phase};
use crate::controller::snapshot::JobSnapshot;

/// Secret keys, as `kubernetes.io/ssh-auth` names them (the public one is the operator's).
pub const SSH_PRIVATE_KEY: &str = "ssh-privatekey";
pub const SSH_PUBLIC_KEY: &str = "ssh-publickey";
pub const SSH_AUTH_TYPE: &str = "kubernetes.io/ssh-auth";

/// The ConfigMap the launcher mounts at `/etc/mpi`. `workers` are the job's worker pods;
/// discover_hosts.sh lists the Running ones (Horovod elastic polls it), sorted by name.
pub fn config_map(job: &JobSnapshot, workers: &[&Pod], config: &Config) -> ConfigMap {
    ConfigMap {
        metadata: meta(job, config_name(job)),
        data: Some(BTreeMap::from([
            (HOSTFILE.to_string(), hostfile(job, config)),
            (
                DISCOVER_HOSTS.to_string(),
                discover_hosts(job, workers, config),
            ),
        ])),
        ..ConfigMap::default()
    }
}

/// One line per host with its slots: `host slots=N` for OpenMPI, `host:N` for Intel MPI and
/// MPICH; the launcher first when it runs as a worker.
fn hostfile(job: &JobSnapshot, config: &Config) -> String {
    let slots = job.mpi.slots_per_worker;
    let line = |pod: &str| match job.mpi.mpi_implementation.as_str() {
        "OpenMPI" => format!("{} slots={slots}\n", fqdn(job, pod, config)),
        _ => format!("{}:{slots}\n", fqdn(job, pod, config)),
    };
    let workers = job.replica("Worker").map_or(0, |w| w.replicas);
    launcher_as_worker(job)
        .into_iter()
        .chain((0..workers).map(|i| format!("{}-worker-{i}", job.name)))
        .map(|pod| line(&pod))
        .collect()
}

fn discover_hosts(job: &JobSnapshot, workers: &[&Pod], config: &Config) -> String {
    let mut running: Vec<&str> = workers
        .iter()
        .filter(|p| phase(p) == "Running")
        .map(|p| name(p))
        .collect();
    running.sort_unstable();
    let hosts = launcher_as_worker(job)
        .into_iter()
        .chain(running.into_iter().map(str::to_string));
    let echo: String = hosts
        .map(|h| format!("echo {}\n", fqdn(job, &h, config)))
        .collect();
    format!("#!/bin/sh\n{echo}")
}

fn launcher_as_worker(job: &JobSnapshot) -> Option<String> {
    job.mpi.run_launcher_as_worker.then(|| launcher_name(job))
}

/// The headless Service `<job>` that gives every pod a DNS name (`<pod>.<job>.<ns>.svc`).
/// Not-ready addresses are published when the launcher is also a worker, so mpirun on the
/// launcher can resolve itself before its readiness probe passes.
pub fn service(job: &JobSnapshot) -> Service {
    Service {
        metadata: meta(job, job.name.clone()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            selector: Some(naming::job_labels(job)),
            publish_not_ready_addresses: Some(job.mpi.run_launcher_as_worker),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The SSH Secret without its keys: the planner stays pure and deterministic, so the I/O
/// shell generates the key pair when it creates this object, and never again (an existing
/// Secret is never rewritten under a running job).
pub fn ssh_secret(job: &JobSnapshot) -> Secret {
    Secret {
        metadata: meta(job, secret_name(job)),
        type_: Some(SSH_AUTH_TYPE.to_string()),
        ..Secret::default()
    }
}

/// Metadata of the job's shared objects: label `app=<job>` and the owner reference.
pub(super) fn meta(job: &JobSnapshot, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(job.namespace.clone()),
        // `app` as the mpi-operator sets it; the job's labels so that the controller's
        // caches (selected by operator-name) see the Service it made.
        labels: Some(
            naming::job_labels(job)
                .into_iter()
                .chain([("app".to_string(), job.name.clone())])
                .collect(),
        ),
        owner_references: Some(vec![naming::owner_reference(job)]),
        ..ObjectMeta::default()
    }
}
