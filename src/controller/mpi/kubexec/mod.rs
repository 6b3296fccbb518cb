//! MPIJob `kubeflow.org/v1` as the training operator (v1.9) runs it, kubectl-exec transport:
//! no SSH and no Services. mpirun on the launcher `<job>-launcher` starts its ranks with
//! `kubexec.sh`, which runs `kubectl exec` into the worker pods `<job>-worker-<i>` (they only
//! sleep). The launcher gets `kubectl` from an init container and the right to exec into its
//! workers, and nothing else, from the Role `<job>-launcher` bound to its own ServiceAccount:
//! the workers the job is observed to control, so the Role follows them as they appear and go
//! (see [`role_rules`]), and the launcher starts only once all of them exist.
//!
//! Entry points: [`config_map`], [`service_account`], [`role`], [`role_rules`],
//! [`role_binding`] (the shared objects) and [`pods`] (what launcher and workers get).
//!
//! Upstream's quirks not reproduced, because no client reads them: the Failed condition's
//! doubled reason `MPIJobMPIJobFailed` (here `MPIJobFailed`, as for every other kind; the
//! Kubeflow SDK, Katib and the dashboard read condition *types*) and the success Event
//! reason `mpijobsSucceeded` (here `MPIJobSucceeded`).

pub mod pods;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

use super::objects::meta;
use super::{config_name, launcher_name, DISCOVER_HOSTS, HOSTFILE};
use crate::controller::observed::{name, phase};
use crate::controller::snapshot::JobSnapshot;

/// The script mpirun uses as its remote shell (`OMPI_MCA_plm_rsh_agent`).
pub const KUBEXEC: &str = "kubexec.sh";
/// Where the init container puts `kubectl` in the launcher.
pub const KUBECTL_MOUNT_PATH: &str = "/opt/kube";
/// Resource names ending in this are GPUs (`nvidia.com/gpu`, `amd.com/gpu`).
const GPU_SUFFIX: &str = ".com/gpu";

/// Whether the launcher asks for a GPU: then it is also a host of the hostfile, and keeps
/// the NVIDIA variables the container runtime sets.
pub fn is_gpu_launcher(job: &JobSnapshot) -> bool {
    let Some(spec) = job
        .replica("Launcher")
        .and_then(|l| l.template.spec.as_ref())
    else {
        return false;
    };
    spec.containers.iter().any(|c| {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .is_some_and(|limits| limits.keys().any(|k| k.ends_with(GPU_SUFFIX)))
    })
}

/// `<job>-config`: the hostfile (`<pod> slots=N`, pods addressed by name since kubectl
/// exec needs no DNS), `kubexec.sh`, and discover_hosts.sh with the Running workers.
pub fn config_map(job: &JobSnapshot, workers: &[&Pod]) -> ConfigMap {
    ConfigMap {
        metadata: meta(job, config_name(job)),
        data: Some(BTreeMap::from([
            (HOSTFILE.to_string(), hostfile(job)),
            (KUBEXEC.to_string(), kubexec(job)),
            (DISCOVER_HOSTS.to_string(), discover_hosts(job, workers)),
        ])),
        ..ConfigMap::default()
    }
}

fn hosts_with_slots<I: IntoIterator<Item = String>>(job: &JobSnapshot, workers: I) -> Vec<String> {
    let launcher = is_gpu_launcher(job).then(|| launcher_name(job));
    launcher.into_iter().chain(workers).collect()
}

fn hostfile(job: &JobSnapshot) -> String {
    let slots = job.mpi.slots_per_worker;
    let count = job.replica("Worker").map_or(0, |w| w.replicas);
    hosts_with_slots(job, worker_names(job, count))
        .iter()
        .map(|h| format!("{h} slots={slots}\n"))
        .collect()
}

fn worker_names(job: &JobSnapshot, count: i32) -> impl Iterator<Item = String> + '_ {
    (0..count).map(move |i| format!("{}-worker-{i}", job.name))
}

/// `kubectl exec <pod> [--container <mainContainer>] -- /bin/sh -c "$*"`: the first
/// argument mpirun passes is the host, i.e. the pod.
fn kubexec(job: &JobSnapshot) -> String {
    let container = job
        .mpi
        .main_container
        .as_deref()
        .filter(|c| !c.is_empty())
        .map(|c| format!(" --container {c}"))
        .unwrap_or_default();
    format!(
        "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n{KUBECTL_MOUNT_PATH}/kubectl exec ${{POD_NAME}}{container} -- /bin/sh -c \"$*\""
    )
}

/// Horovod elastic's host discovery: the Running workers (sorted by name), each with its
/// slots, after the launcher when it is a GPU launcher.
fn discover_hosts(job: &JobSnapshot, workers: &[&Pod]) -> String {
    let slots = job.mpi.slots_per_worker;
    let mut running: Vec<String> = workers
        .iter()
        .filter(|p| phase(p) == "Running")
        .map(|p| name(p).to_string())
        .collect();
    running.sort_unstable();
    let echo: String = hosts_with_slots(job, running)
        .iter()
        .map(|h| format!("\necho {h}:{slots}"))
        .collect();
    format!("#!/bin/sh{echo}")
}

/// The launcher's own identity, so its exec rights are not the namespace default's.
pub fn service_account(job: &JobSnapshot) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(job, launcher_name(job)),
        ..ServiceAccount::default()
    }
}

/// Read pods (kubectl resolves the target), and exec into the job's own workers: the pods
/// observed with this job as their controller (see [`controlled_by`]), never names alone, since
/// a pod `<job>-worker-0` of another workload (a PyTorchJob of the same name) is not the
/// launcher's to enter. No owned worker, no exec rule: a rule whose `resourceNames` list is
/// empty would allow exec into every pod of the namespace.
///
/// [`controlled_by`]: crate::controller::observed::controlled_by
pub fn role_rules(workers: &[&Pod]) -> Vec<PolicyRule> {
    let rule = |verbs: &[&str], resource: &str, names: Option<Vec<String>>| PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec![resource.to_string()]),
        resource_names: names,
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        non_resource_urls: None,
    };
    let mut names: Vec<String> = workers.iter().map(|p| name(p).to_string()).collect();
    names.sort_unstable();
    names.dedup();
    let mut rules = vec![rule(&["get", "list", "watch"], "pods", None)];
    if !names.is_empty() {
        rules.push(rule(&["create"], "pods/exec", Some(names)));
    }
    rules
}

/// The launcher's Role, with exec rights on `workers` (the job's own, as observed).
pub fn role(job: &JobSnapshot, workers: &[&Pod]) -> Role {
    Role {
        metadata: meta(job, launcher_name(job)),
        rules: Some(role_rules(workers)),
    }
}

pub fn role_binding(job: &JobSnapshot) -> RoleBinding {
    let name = launcher_name(job);
    RoleBinding {
        metadata: meta(job, name.clone()),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_string(),
            kind: "Role".to_string(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_string(),
            name,
            namespace: Some(job.namespace.clone()),
            api_group: None,
        }]),
    }
}
