//! A pod from a replica template: upstream's name, labels, owner reference, restart policy,
//! default port, framework env, gang-scheduler decoration and release gate.
//!
//! Entry point: [`build`].

use k8s_openapi::api::core::v1::{ContainerPort, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::config::Config;
use super::env;
use super::mpi;
use super::naming;
use super::podgroup;
use super::release;
use super::snapshot::{default_container, JobSnapshot, Replica};

/// The pod of replica `index` of `replica`.
pub fn build(job: &JobSnapshot, replica: &Replica, index: i32, config: &Config) -> Pod {
    let template = &replica.template;
    let mut meta = ObjectMeta {
        name: Some(naming::replica_name(job, replica, index)),
        namespace: Some(job.namespace.clone()),
        labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
        annotations: template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.clone()),
        owner_references: Some(vec![naming::owner_reference(job)]),
        ..ObjectMeta::default()
    };
    meta.labels
        .get_or_insert_with(Default::default)
        .extend(naming::replica_labels(job, replica, index));
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.restart_policy = Some(replica.restart_policy.for_pod().to_string());
    add_default_port(job, &mut spec);
    env::inject(job, replica, index, config, &mut spec);
    if mpi::is_v2(job) {
        let name = naming::replica_name(job, replica, index);
        mpi::pods::decorate(job, replica, &name, &mut spec);
    } else if mpi::is_v1(job) {
        mpi::kubexec::pods::decorate(job, replica, config, &mut spec);
    }
    if let Some(gang) = &config.gang {
        podgroup::decorate(job, replica, gang, &mut meta, &mut spec);
    }
    if matches!(release::order(job, config.gang.as_ref()), Some(Ok(_))) {
        release::gate(&mut spec);
    }
    Pod {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}

/// Ports of the default container of `spec` as the pod will have them (default included).
pub fn default_ports(job: &JobSnapshot, spec: &PodSpec) -> Vec<ContainerPort> {
    let mut ports = default_container(job, spec)
        .and_then(|i| spec.containers.get(i))
        .and_then(|c| c.ports.clone())
        .unwrap_or_default();
    ensure_default_port(job, &mut ports);
    ports
}

/// Upstream defaulting, done in memory: the kind's named port on the default container
/// unless a port with that name is already there.
fn add_default_port(job: &JobSnapshot, spec: &mut PodSpec) {
    if job.spec.port.is_none() {
        return; // MPI: no port, and no empty `ports` list either
    }
    if let Some(c) = default_container(job, spec).and_then(|i| spec.containers.get_mut(i)) {
        ensure_default_port(job, c.ports.get_or_insert_with(Vec::new));
    }
}

fn ensure_default_port(job: &JobSnapshot, ports: &mut Vec<ContainerPort>) {
    let Some((name, number)) = job.spec.port else {
        return;
    };
    if !ports.iter().any(|p| p.name.as_deref() == Some(name)) {
        ports.push(ContainerPort {
            name: Some(name.to_string()),
            container_port: i32::from(number),
            ..ContainerPort::default()
        });
    }
}
