//! What the mpi-operator adds to the launcher and worker pods on top of the generic pod
//! (name, labels, owner, restartPolicy, gang decoration): hostname and subdomain under the
//! job's Service, SSH keys, the launcher's MPI environment and config mount, the workers'
//! sshd command. The operator configures the first container, as upstream does.
//!
//! Entry point: [`decorate`].

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EnvVar, KeyToPath, PodSpec, SecretVolumeSource, Volume,
    VolumeMount,
};

use super::objects::{SSH_PRIVATE_KEY, SSH_PUBLIC_KEY};
use super::{config_name, secret_name, CONFIG_MOUNT_PATH, DISCOVER_HOSTS, HOSTFILE};
use crate::controller::env::var;
use crate::controller::snapshot::{JobSnapshot, Replica, ROOT_SSH_PATH};
use crate::job::kinds::Role;

const SSH_VOLUME: &str = "ssh-auth";
/// The `<job>-config` volume, in both MPI versions' pods.
pub(super) const CONFIG_VOLUME: &str = "mpi-job-config";
/// mpirun retries the SSH connection while a worker's sshd is still starting.
const SSH_RETRY: &str = "-o ConnectionAttempts=10";

/// Adds the MPI parts to the pod `name` of `replica`.
pub fn decorate(job: &JobSnapshot, replica: &Replica, name: &str, spec: &mut PodSpec) {
    spec.hostname = Some(name.to_string());
    spec.subdomain = Some(job.name.clone());
    if spec.host_network == Some(true) {
        // Resolves the other pods' short names without the namespace or cluster domain.
        spec.dns_policy = Some("ClusterFirstWithHostNet".to_string());
    }
    let launcher = replica.role() == Role::Launcher;
    if let Some(c) = spec.containers.first_mut() {
        if launcher {
            append_env(c, launcher_env(job));
        } else {
            if c.command.as_ref().is_none_or(Vec::is_empty)
                && c.args.as_ref().is_none_or(Vec::is_empty)
            {
                c.command = Some(vec!["/usr/sbin/sshd".into(), "-De".into()]);
            }
            append_env(c, vec![var("K_MPI_JOB_ROLE", "worker")]);
        }
    }
    mount_ssh(job, spec);
    if launcher {
        mount_config(job, spec);
    }
}

/// The launcher's variables, in the mpi-operator's order: role, the implementation's
/// hostfile and SSH settings with the slots, and blank NVIDIA variables so a launcher that
/// only runs mpirun never grabs a GPU (unless it is also a worker).
fn launcher_env(job: &JobSnapshot) -> Vec<EnvVar> {
    let hostfile = format!("{CONFIG_MOUNT_PATH}/{HOSTFILE}");
    let slots = job.mpi.slots_per_worker.to_string();
    let mut vars = vec![var("K_MPI_JOB_ROLE", "launcher")];
    match job.mpi.mpi_implementation.as_str() {
        "OpenMPI" => vars.extend([
            var("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
            var("OMPI_MCA_orte_default_hostfile", hostfile),
            var("OMPI_MCA_plm_rsh_args", SSH_RETRY),
            var("OMPI_MCA_orte_set_default_slots", slots),
        ]),
        "Intel" => vars.extend([
            var("I_MPI_HYDRA_HOST_FILE", hostfile),
            var("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", SSH_RETRY),
            var("I_MPI_PERHOST", slots),
        ]),
        _ => vars.extend([
            var("HYDRA_HOST_FILE", hostfile),
            var("HYDRA_LAUNCH_EXTRA_ARGS", SSH_RETRY),
        ]),
    }
    if !job.mpi.run_launcher_as_worker {
        vars.extend([
            var("NVIDIA_VISIBLE_DEVICES", ""),
            var("NVIDIA_DRIVER_CAPABILITIES", ""),
        ]);
    }
    vars
}

/// The Secret's keys as `id_rsa`, `id_rsa.pub` and `authorized_keys` at sshAuthMountPath.
fn mount_ssh(job: &JobSnapshot, spec: &mut PodSpec) {
    let path = job.mpi.ssh_auth_mount_path.clone();
    let item = |key: &str, path: &str| KeyToPath {
        key: key.to_string(),
        path: path.to_string(),
        mode: None,
    };
    let volume = Volume {
        name: SSH_VOLUME.to_string(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret_name(job)),
            default_mode: (path == ROOT_SSH_PATH).then_some(0o600),
            items: Some(vec![
                item(SSH_PRIVATE_KEY, "id_rsa"),
                item(SSH_PUBLIC_KEY, "id_rsa.pub"),
                item(SSH_PUBLIC_KEY, "authorized_keys"),
            ]),
            optional: None,
        }),
        ..Volume::default()
    };
    add_volume(spec, volume, &path);
}

/// hostfile (0444) and discover_hosts.sh (0555, it is executed) at `/etc/mpi`.
fn mount_config(job: &JobSnapshot, spec: &mut PodSpec) {
    let items = vec![
        config_item(HOSTFILE, 0o444),
        config_item(DISCOVER_HOSTS, 0o555),
    ];
    add_volume(spec, config_volume(job, items), CONFIG_MOUNT_PATH);
}

/// The `<job>-config` ConfigMap as a volume with `items`.
pub(super) fn config_volume(job: &JobSnapshot, items: Vec<KeyToPath>) -> Volume {
    Volume {
        name: CONFIG_VOLUME.to_string(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_name(job),
            items: Some(items),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// A ConfigMap key mounted under its own name with file `mode`.
pub(super) fn config_item(key: &str, mode: i32) -> KeyToPath {
    KeyToPath {
        key: key.to_string(),
        path: key.to_string(),
        mode: Some(mode),
    }
}

pub(super) fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_string(),
        mount_path: path.to_string(),
        ..VolumeMount::default()
    }
}

/// The volume, and its mount at `path` in the first container (the one the operators
/// configure).
pub(super) fn add_volume(spec: &mut PodSpec, volume: Volume, path: &str) {
    let name = volume.name.clone();
    spec.volumes.get_or_insert_with(Vec::new).push(volume);
    if let Some(c) = spec.containers.first_mut() {
        c.volume_mounts
            .get_or_insert_with(Vec::new)
            .push(mount(&name, path));
    }
}

fn append_env(c: &mut Container, vars: Vec<EnvVar>) {
    c.env.get_or_insert_with(Vec::new).extend(vars);
}
