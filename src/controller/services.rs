//! The headless Service of each replica, named like its pod so that `<job>-<type>-<index>`
//! resolves to the pod (MASTER_ADDR, TF_CONFIG and friends rely on it).
//!
//! Entry point: [`build`].

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::naming::{self, JOB_ROLE};
use super::pods;
use super::snapshot::{JobSnapshot, Replica};

/// The Service of replica `index` of `replica`: `clusterIP: None`, selecting exactly that
/// pod, with every named port of the pod's default container.
pub fn build(job: &JobSnapshot, replica: &Replica, index: i32) -> Service {
    let mut selector = naming::replica_labels(job, replica, index);
    selector.remove(JOB_ROLE);
    Service {
        metadata: ObjectMeta {
            name: Some(naming::replica_name(job, replica, index)),
            namespace: Some(job.namespace.clone()),
            labels: Some(selector.clone()),
            owner_references: Some(vec![naming::owner_reference(job)]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            selector: Some(selector),
            ports: Some(ports(job, replica)),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Named ports of the pod's default container, default port included.
fn ports(job: &JobSnapshot, replica: &Replica) -> Vec<ServicePort> {
    let spec = replica.template.spec.clone().unwrap_or_default();
    pods::default_ports(job, &spec)
        .into_iter()
        .filter_map(|p| {
            Some(ServicePort {
                name: Some(p.name?),
                port: p.container_port,
                ..ServicePort::default()
            })
        })
        .collect()
}
