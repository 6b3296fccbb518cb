//! MPIJob `kubeflow.org/v2beta1` as the mpi-operator (v0.8) runs it, SSH transport: one
//! launcher pod `<job>-launcher` runs `mpirun`, which reaches the worker pods
//! `<job>-worker-<i>` over SSH through the headless Service `<job>`, reading the hosts from
//! the ConfigMap `<job>-config` and the key from the Secret `<job>-ssh`.
//!
//! MPIJob `kubeflow.org/v1` (the training operator's, kubectl-exec transport) shares the
//! launcher/worker rules here and differs in its objects and pods: see [`kubexec`].
//!
//! Entry points: [`MpiSpec`](super::snapshot::MpiSpec) (the spec fields, defaulted, parsed
//! with the job), [`objects`] (ConfigMap, Service, Secret request), [`pods`] (what the
//! launcher and workers get on top of the generic pod), [`launcher_may_start`]
//! (launcherCreationPolicy).
//!
//! Difference from upstream: the launcher is a pod owned by the MPIJob, not a batch/v1 Job.
//! The generic planner then gives it what it gives every pod: restartPolicy (OnFailure
//! restarts in place), restarts counted against backoffLimit, activeDeadlineSeconds from a
//! timer, ttlSecondsAfterFinished and cleanPodPolicy — the fields upstream hands to the Job.

pub mod kubexec;
pub mod objects;
pub mod pods;

use super::config::Config;
use super::observed::phase;
use super::restart::RestartPolicy;
use super::snapshot::{JobSnapshot, Replica};
use crate::job::kinds::{is_mpi_v2, Role};
use crate::job::problem::Problem;
use k8s_openapi::api::core::v1::Pod;

/// Where the hostfile and discover_hosts.sh are mounted in the launcher.
pub const CONFIG_MOUNT_PATH: &str = "/etc/mpi";
pub const HOSTFILE: &str = "hostfile";
pub const DISCOVER_HOSTS: &str = "discover_hosts.sh";

/// Whether `job` is a v2beta1 MPIJob (the mpi-operator's, SSH transport).
pub fn is_v2(job: &JobSnapshot) -> bool {
    is_mpi_v2(job.spec)
}

/// Whether `job` is a v1 MPIJob (the training operator's, kubectl-exec transport).
pub fn is_v1(job: &JobSnapshot) -> bool {
    job.kind() == "MPIJob" && job.spec.version == "v1"
}

/// Either MPIJob: one launcher, workers, no per-pod Services.
pub fn is_mpi(job: &JobSnapshot) -> bool {
    job.kind() == "MPIJob"
}

pub fn config_name(job: &JobSnapshot) -> String {
    format!("{}-config", job.name)
}

pub fn secret_name(job: &JobSnapshot) -> String {
    format!("{}-ssh", job.name)
}

pub fn launcher_name(job: &JobSnapshot) -> String {
    format!("{}-launcher", job.name)
}

/// `<pod>.<job>.<ns>.svc[.<cluster domain>]`: a pod's name under the job's Service.
pub fn fqdn(job: &JobSnapshot, pod: &str, config: &Config) -> String {
    let domain = config.domain_suffix();
    format!("{pod}.{}.{}.svc{domain}", job.name, job.namespace)
}

/// Offset between a worker's name index and its replica-index label: with
/// runLauncherAsWorker the launcher is rank 0 and worker `i` is rank `i + 1`.
pub fn index_offset(job: &JobSnapshot, replica: &Replica) -> i32 {
    let shifted = is_v2(job) && replica.role() == Role::Worker && job.mpi.run_launcher_as_worker;
    i32::from(shifted)
}

/// Whether the launcher may be created: once every worker pod exists as the job's own (a
/// create that found a worker's name held by another workload never lets it start; v1's Role
/// grants exec only on workers observed, see [`kubexec::role_rules`]), which for
/// launcherCreationPolicy `AtStartup` is all (upstream creates the workers, then the launcher,
/// in one pass; here the launcher follows as soon as the cache shows them), and for
/// `WaitForWorkersReady` once every worker pod is Ready too, so mpirun does not race sshd
/// (mpi-operator #481, #443).
pub fn launcher_may_start(job: &JobSnapshot, workers: &[&Pod]) -> bool {
    let expected = job.replica("Worker").map_or(0, |w| w.replicas);
    let enough = |n: usize| usize::try_from(expected).is_ok_and(|e| n >= e);
    let live = workers
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none());
    if !enough(live.count()) {
        return false;
    }
    job.mpi.launcher_creation_policy != "WaitForWorkersReady"
        || enough(workers.iter().filter(|p| is_ready(p)).count())
}

fn is_ready(pod: &Pod) -> bool {
    phase(pod) == "Running"
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `"<n>/<m> workers are evicted"` when any worker pod was evicted: both MPI operators fail
/// the job (reason `MPIJobEvicted`) rather than restarting a gang whose node went away.
pub fn evicted_workers(job: &JobSnapshot, workers: &[&Pod]) -> Option<String> {
    if !is_mpi(job) {
        return None;
    }
    let evicted = workers
        .iter()
        .filter(|p| phase(p) == "Failed")
        .filter(|p| p.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Evicted"))
        .count();
    (evicted > 0).then(|| format!("{evicted}/{} workers are evicted", workers.len()))
}

/// The mpi-operator's Volcano queue fallback: the job's `scheduling.volcano.sh/queue-name`
/// annotation, for jobs written for Volcano's own conventions.
pub fn volcano_queue_annotation(job: &JobSnapshot) -> Option<String> {
    if !is_v2(job) {
        return None;
    }
    let queue = job.annotations.get("scheduling.volcano.sh/queue-name")?;
    (!queue.is_empty()).then(|| queue.clone())
}

/// The mpi-operator's PodGroup priority fallback: the launcher template's
/// priorityClassName, else the workers'.
pub fn template_priority_class(job: &JobSnapshot) -> Option<String> {
    if !is_v2(job) {
        return None;
    }
    ["Launcher", "Worker"].into_iter().find_map(|t| {
        let spec = job.replica(t)?.template.spec.as_ref()?;
        spec.priority_class_name.clone().filter(|p| !p.is_empty())
    })
}

/// What the MPI operators' validation refuses beyond the generic checks: a launcher (both
/// versions; upstream v1 says "Master ReplicaSpec must be present"), and v2beta1's fields.
pub fn problems(job: &JobSnapshot) -> Vec<Problem> {
    if !is_mpi(job) {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut add = |path: &str, msg: String| {
        found.push(Problem {
            path: path.to_string(),
            msg,
        })
    };
    let specs = &job.view.replica_specs_path;
    // A Launcher with more than one replica is already refused by the generic checks.
    if job.replica("Launcher").is_none() {
        add(&format!("{specs}/Launcher"), "is required".into());
    }
    if !is_v2(job) {
        return found;
    }
    for r in &job.replicas {
        if !matches!(
            r.restart_policy,
            RestartPolicy::Never | RestartPolicy::OnFailure
        ) {
            add(
                &format!("{specs}/{}/restartPolicy", r.rtype.name),
                format!(
                    "{:?} is not supported by MPIJob v2beta1; use Never or OnFailure",
                    r.restart_policy
                ),
            );
        }
    }
    let spec = &job.mpi;
    if spec.slots_per_worker < 0 {
        add("/spec/slotsPerWorker", "must be at least 0".into());
    }
    if spec.ssh_auth_mount_path.is_empty() {
        add("/spec/sshAuthMountPath", "is required".into());
    }
    if !matches!(
        spec.mpi_implementation.as_str(),
        "OpenMPI" | "Intel" | "MPICH"
    ) {
        add(
            "/spec/mpiImplementation",
            format!(
                "{:?} is not one of OpenMPI, Intel, MPICH",
                spec.mpi_implementation
            ),
        );
    }
    if !matches!(
        spec.launcher_creation_policy.as_str(),
        "AtStartup" | "WaitForWorkersReady"
    ) {
        add(
            "/spec/launcherCreationPolicy",
            format!(
                "{:?} is not one of AtStartup, WaitForWorkersReady",
                spec.launcher_creation_policy
            ),
        );
    }
    found
}
