//! Operator-wide settings the planner reads: which gang scheduler runs, the watchdog's
//! default start deadline and what it does, the cluster's DNS domain, the PyTorch init
//! container and the v1 MPIJob launcher's kubectl-delivery image.

use std::time::Duration;

use super::cluster_domain::ClusterDomain;
use super::injected;

/// Settings that apply to every job. Built once by the I/O shell from flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Gang scheduler whose PodGroups the controller manages; `None` creates no PodGroups
    /// (upstream: `--gang-scheduler-name` unset).
    pub gang: Option<GangScheduler>,
    /// How long a job's pods may stay Pending before the watchdog acts, when the job sets no
    /// `schedulingPolicy.scheduleTimeoutSeconds`. `None` turns the watchdog off for such jobs.
    pub start_deadline: Option<Duration>,
    /// What the watchdog does once the start deadline has passed.
    pub on_stuck: StuckAction,
    /// Image of the `init-pytorch` container that waits for the master's DNS name
    /// (upstream `--pytorch-init-container-image`): it needs `sh`, `nslookup`, `date` and
    /// `sleep` (busybox has them all).
    pub pytorch_init_image: String,
    /// How long `init-pytorch` waits for the master's name before it fails the worker's
    /// init (upstream: 100 tries 2 s apart, `-max-tries`; here looked up every second).
    pub pytorch_init_timeout: Duration,
    /// The cluster's DNS domain: the names the init containers wait for are written in full
    /// under it, so the pod's search list never takes part.
    pub cluster_domain: ClusterDomain,
    /// Suffix after `<svc>.<ns>.svc` in TF_CONFIG and MPI hostfile addresses (upstream reads
    /// the `CUSTOM_CLUSTER_DOMAIN` environment variable; here it is explicit so `plan` stays
    /// pure). `None`, upstream's default, leaves the rest to the pods' search list, which
    /// getaddrinfo applies to names with dots too.
    pub address_domain: Option<String>,
    /// Image of the `kubectl-delivery` init container that copies `kubectl` into a v1
    /// MPIJob's launcher (upstream `--mpi-kubectl-delivery-image`): it runs
    /// `cp /bin/kubectl /opt/kube/kubectl`.
    pub mpi_kubectl_delivery_image: String,
}

impl Config {
    /// `.<cluster_domain>`, or nothing: what follows `.svc` in a Service's DNS name.
    pub fn domain_suffix(&self) -> String {
        self.address_domain
            .as_deref()
            .filter(|d| !d.is_empty())
            .map(|d| format!(".{d}"))
            .unwrap_or_default()
    }
}

impl Default for Config {
    /// Upstream's defaults, but for the injected containers' images (pinned by digest, see
    /// [`injected`]); the watchdog fails a job whose pods are still Pending after 15 minutes —
    /// long enough for a cold image pull of a multi-GB training image.
    fn default() -> Self {
        Config {
            gang: None,
            start_deadline: Some(Duration::from_secs(15 * 60)),
            on_stuck: StuckAction::Fail,
            pytorch_init_image: injected::PYTORCH_INIT_IMAGE.to_string(),
            pytorch_init_timeout: Duration::from_secs(200),
            cluster_domain: ClusterDomain::default(),
            address_domain: None,
            mpi_kubectl_delivery_image: injected::KUBECTL_DELIVERY_IMAGE.to_string(),
        }
    }
}

/// The gang scheduler and, with it, the PodGroup API the controller writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GangScheduler {
    /// `scheduling.volcano.sh/v1beta1` PodGroups; pods use schedulerName `volcano`.
    Volcano,
    /// `scheduling.x-k8s.io/v1alpha1` PodGroups; pods use the given schedulerName.
    SchedulerPlugins { scheduler_name: String },
    /// Kubernetes' own gang scheduling (1.36 `scheduling.k8s.io/v1alpha2` PodGroups, read by
    /// kube-scheduler's GangScheduling plugin); pods keep their scheduler (the default one)
    /// and name the group in `spec.schedulingGroup`.
    Kubernetes,
}

impl GangScheduler {
    /// Parses upstream's `--gang-scheduler-name`: `volcano` (any case) selects Volcano,
    /// `kubernetes` (any case) the native gang, any other non-empty value scheduler-plugins
    /// with that scheduler name, empty none.
    pub fn from_flag(name: &str) -> Option<GangScheduler> {
        match name {
            "" => None,
            n if n.eq_ignore_ascii_case("volcano") => Some(GangScheduler::Volcano),
            n if n.eq_ignore_ascii_case("kubernetes") => Some(GangScheduler::Kubernetes),
            n => Some(GangScheduler::SchedulerPlugins {
                scheduler_name: n.to_string(),
            }),
        }
    }

    /// The schedulerName pods that name none get; `None`: they keep the default scheduler.
    pub fn scheduler_name(&self) -> Option<&str> {
        match self {
            GangScheduler::Volcano => Some("volcano"),
            GangScheduler::SchedulerPlugins { scheduler_name } => Some(scheduler_name),
            GangScheduler::Kubernetes => None,
        }
    }
}

/// What the gang watchdog does with a job whose pods stayed Pending past the start deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StuckAction {
    /// Mark the job Failed, naming the cause; cleanPodPolicy then applies.
    Fail,
    /// Delete every pod of the gang so it is recreated (and rescheduled) together; counts as
    /// one restart against backoffLimit, so a gang that can never start still ends Failed.
    RestartGang,
}
