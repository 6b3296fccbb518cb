//! What the training operator adds to a v1 MPIJob's pods on top of the generic pod: the
//! workers sleep (mpirun execs into them) and see `kubexec.sh`; the launcher gets its
//! ServiceAccount, `kubectl` from the kubectl-delivery init container, the config mount and
//! the variables that make OpenMPI and Intel MPI start ranks through `kubexec.sh`.
//!
//! Entry point: [`decorate`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, PodSpec, ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{is_gpu_launcher, KUBECTL_MOUNT_PATH, KUBEXEC};
use crate::controller::config::Config;
use crate::controller::env::var;
use crate::controller::injected;
use crate::controller::mpi::pods::{add_volume, config_item, config_volume, mount, CONFIG_VOLUME};
use crate::controller::mpi::{launcher_name, CONFIG_MOUNT_PATH, DISCOVER_HOSTS, HOSTFILE};
use crate::controller::snapshot::{JobSnapshot, Replica};
use crate::job::kinds::Role;

const KUBECTL_VOLUME: &str = "mpi-job-kubectl";
const DELIVERY_CONTAINER: &str = "kubectl-delivery";

/// Adds the v1 MPI parts to a pod of `replica`. The operator configures the first
/// container, as upstream does.
pub fn decorate(job: &JobSnapshot, replica: &Replica, config: &Config, spec: &mut PodSpec) {
    match replica.role() {
        Role::Launcher => decorate_launcher(job, config, spec),
        _ => decorate_worker(job, spec),
    }
}

/// A worker only has to stay up: `sleep 365d` unless the user gave a command or args
/// (upstream replaces the args of a pod that only has args; kept here, the user meant them).
fn decorate_worker(job: &JobSnapshot, spec: &mut PodSpec) {
    if let Some(c) = spec.containers.first_mut() {
        if c.command.as_ref().is_none_or(Vec::is_empty) && c.args.as_ref().is_none_or(Vec::is_empty)
        {
            c.command = Some(vec!["sleep".into()]);
            c.args = Some(vec!["365d".into()]);
        }
    }
    // Open MPI checks that the rsh agent's path exists on every rank.
    let items = vec![config_item(KUBEXEC, 0o555)];
    add_volume(spec, config_volume(job, items), CONFIG_MOUNT_PATH);
}

fn decorate_launcher(job: &JobSnapshot, config: &Config, spec: &mut PodSpec) {
    // Upstream overrides any ServiceAccount: the launcher needs exactly its exec rights.
    spec.service_account_name = Some(launcher_name(job));
    let gpu = is_gpu_launcher(job);
    if let Some(c) = spec.containers.first_mut() {
        add_env_unless_set(c, launcher_env());
        if !gpu {
            // A launcher that only runs mpirun must not grab the node's GPUs.
            let env = c.env.get_or_insert_with(Vec::new);
            env.push(var("NVIDIA_VISIBLE_DEVICES", ""));
            env.push(var("NVIDIA_DRIVER_CAPABILITIES", ""));
        }
    }
    spec.init_containers
        .get_or_insert_with(Vec::new)
        .push(delivery_container(job, config));
    let kubectl = Volume {
        name: KUBECTL_VOLUME.to_string(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    add_volume(spec, kubectl, KUBECTL_MOUNT_PATH);
    let items = vec![
        config_item(KUBEXEC, 0o555),
        config_item(HOSTFILE, 0o444),
        config_item(DISCOVER_HOSTS, 0o555),
    ];
    add_volume(spec, config_volume(job, items), CONFIG_MOUNT_PATH);
}

/// OpenMPI and Intel MPI start remote ranks through kubexec.sh, reading the hostfile.
fn launcher_env() -> Vec<EnvVar> {
    let kubexec = format!("{CONFIG_MOUNT_PATH}/{KUBEXEC}");
    vec![
        var("OMPI_MCA_plm_rsh_agent", kubexec.clone()),
        var(
            "OMPI_MCA_orte_default_hostfile",
            format!("{CONFIG_MOUNT_PATH}/{HOSTFILE}"),
        ),
        var("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
        var("I_MPI_HYDRA_BOOTSTRAP_EXEC", kubexec),
    ]
}

/// Copies `kubectl` into the shared emptyDir before the launcher starts: `cp` as the command,
/// so that upstream's image (whose entrypoint runs the same `cp` through a shell) and the
/// Kubernetes project's kubectl image (entrypoint `kubectl`) both serve. As non-root,
/// restricted (see [`injected::security_context`]); the copy is world-executable, so a launcher
/// running as any user can run it. `TARGET_DIR` and `NAMESPACE` are upstream's, for images
/// that read them.
fn delivery_container(job: &JobSnapshot, config: &Config) -> Container {
    let amounts = BTreeMap::from([
        ("cpu".to_string(), Quantity("100m".into())),
        ("memory".to_string(), Quantity("512Mi".into())),
        ("ephemeral-storage".to_string(), Quantity("5Gi".into())),
    ]);
    Container {
        name: DELIVERY_CONTAINER.to_string(),
        image: Some(config.mpi_kubectl_delivery_image.clone()),
        image_pull_policy: Some("IfNotPresent".to_string()),
        command: Some(vec![
            "cp".to_string(),
            "/bin/kubectl".to_string(),
            format!("{KUBECTL_MOUNT_PATH}/kubectl"),
        ]),
        env: Some(vec![
            var("TARGET_DIR", KUBECTL_MOUNT_PATH),
            var("NAMESPACE", job.namespace.clone()),
        ]),
        volume_mounts: Some(vec![
            mount(KUBECTL_VOLUME, KUBECTL_MOUNT_PATH),
            mount(CONFIG_VOLUME, CONFIG_MOUNT_PATH),
        ]),
        resources: Some(ResourceRequirements {
            limits: Some(amounts.clone()),
            requests: Some(amounts),
            ..ResourceRequirements::default()
        }),
        security_context: Some(injected::security_context()),
        ..Container::default()
    }
}

/// Each variable only if the container does not set it already: a user's own rsh agent or
/// hostfile wins.
fn add_env_unless_set(c: &mut Container, vars: Vec<EnvVar>) {
    let env = c.env.get_or_insert_with(Vec::new);
    for v in vars {
        if !env.iter().any(|e| e.name == v.name) {
            env.push(v);
        }
    }
}
