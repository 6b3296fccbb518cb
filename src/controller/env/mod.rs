//! The environment each framework's launcher reads, injected as upstream does, so training
//! scripts written for the Kubeflow operator run unchanged.
//!
//! Entry point: [`inject`]. One module per framework builds the variables of one pod.
//! As upstream, variables are appended to every container (TF: only `tensorflow`), after the
//! user's own: for a name set twice the kubelet uses the last, i.e. the operator's value.

mod jax;
mod paddle;
mod pytorch;
mod tf;
mod xgboost;

use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec};

use super::config::Config;
use super::snapshot::default_container;
use super::snapshot::{JobSnapshot, Replica};

/// Adds the framework's variables (and PyTorch's init container) to the pod of replica
/// `index` of `replica`.
pub fn inject(
    job: &JobSnapshot,
    replica: &Replica,
    index: i32,
    config: &Config,
    spec: &mut PodSpec,
) {
    match job.kind() {
        "PyTorchJob" => {
            append_to_all(spec, &pytorch::vars(job, replica, index));
            spec.init_containers
                .get_or_insert_with(Vec::new)
                .extend(pytorch::init_containers(job, replica, config));
        }
        "TFJob" => {
            if let Some(tf_config) = tf::tf_config(job, replica, index, config) {
                let vars = [var("TF_CONFIG", tf_config)];
                let named = |c: &&mut Container| c.name == "tensorflow";
                spec.containers
                    .iter_mut()
                    .filter(named)
                    .for_each(|c| append(c, &vars));
            }
        }
        "XGBoostJob" => append_to_all(spec, &xgboost::vars(job, replica, index)),
        "PaddleJob" => append_to_all(spec, &paddle::vars(job, replica, index)),
        "JAXJob" => append_to_all(spec, &jax::vars(job, index)),
        _ => {}
    }
}

/// The port of `replica`'s default container named as the kind's port, else the kind's
/// default number (upstream defaulting adds that port when it is missing).
pub fn port(job: &JobSnapshot, replica: &Replica) -> i32 {
    let (port_name, default) = job.spec.port.unwrap_or_default();
    replica
        .template
        .spec
        .as_ref()
        .and_then(|spec| {
            let c = spec.containers.get(default_container(job, spec)?)?;
            c.ports
                .as_ref()?
                .iter()
                .find(|p| p.name.as_deref() == Some(port_name))
        })
        .map_or(i32::from(default), |p| p.container_port)
}

/// Port of replica type `name` of the job, or the kind's default number when the job has no
/// such type.
fn port_of(job: &JobSnapshot, name: &str) -> i32 {
    match job.replica(name) {
        Some(r) => port(job, r),
        None => job.spec.port.map_or(0, |(_, n)| i32::from(n)),
    }
}

pub fn var(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.into()),
        value_from: None,
    }
}

/// A variable holding the pod's own IP (downward API).
fn pod_ip_var(name: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: "status.podIP".to_string(),
            }),
            ..EnvVarSource::default()
        }),
    }
}

/// `<job>-<type>-<index>`: the DNS name of a replica's headless Service.
fn host(job: &JobSnapshot, replica_type: &str, index: i32) -> String {
    crate::job::naming::pod_name(&job.name, replica_type, i64::from(index))
}

fn append_to_all(spec: &mut PodSpec, vars: &[EnvVar]) {
    spec.containers.iter_mut().for_each(|c| append(c, vars));
}

fn append(c: &mut Container, vars: &[EnvVar]) {
    c.env.get_or_insert_with(Vec::new).extend_from_slice(vars);
}
