//! `gangplank controller`: the lifecycle controller (pods, Services, PodGroups, status,
//! restarts, deadlines, gang watchdog) for the v1 training kinds, with leader election.
//! `gangplank serve --controller` runs the same beside the webhooks, for small clusters.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use futures::FutureExt as _;
use kube::runtime::events::Reporter;
use tracing::{error, info, warn};

use crate::controller::cluster_domain::ClusterDomain;
use crate::controller::leader::{Elector, LeaseConfig, LeaseError};
use crate::controller::managed::Managed;
use crate::controller::metrics::ControllerMetrics;
use crate::controller::snapshot::RUNNABLE_KINDS;
use crate::controller::{runner, Config, GangScheduler, Scope, StuckAction};
use crate::duration::parse_duration;
use crate::error_chain;
use crate::exit;
use crate::job::KindSpec;

/// Settings of the lifecycle controller, shared by `controller` and `serve --controller`.
#[derive(Debug, Clone, Args)]
pub struct ControllerOptions {
    /// Kinds to run (kubeflow.org/v1; add MPIJob for kubeflow.org/v2beta1 MPIJobs, or
    /// MPIJob/v1 for the training operator's kubeflow.org/v1 MPIJobs, not both). Never run
    /// the upstream training-operator or mpi-operator on the same kinds: both would create
    /// each job's pods (deploy/README.md).
    #[arg(long, value_delimiter = ',', default_values_t = RUNNABLE_KINDS.iter().map(|k| k.to_string()), env = "GANGPLANK_KINDS")]
    pub kinds: Vec<String>,
    /// Namespaces to serve, separated by commas; none (the default) serves every namespace.
    /// With a list, every watch and write of the controller is in those namespaces only, so
    /// RoleBindings there are all the rights it needs (deploy/controller-namespaced); jobs
    /// elsewhere are never reconciled.
    #[arg(long, value_delimiter = ',', env = "GANGPLANK_NAMESPACES")]
    pub namespaces: Vec<String>,
    /// Act only on jobs in namespaces whose labels match this label selector (the syntax of
    /// `kubectl get -l`, e.g. `gangplank.dev/managed=true`); empty (the default) acts in
    /// every namespace. Jobs elsewhere are not reconciled and nothing is written there; a
    /// namespace that gains or loses the label is picked up or left without a restart.
    /// Needs list and watch on namespaces (deploy/controller/rbac.yaml); not used with
    /// --namespaces, whose list is then the allow-list (a RoleBinding cannot grant reading
    /// Namespaces), as the controller says at start.
    #[arg(long, default_value = "", env = "GANGPLANK_NAMESPACE_SELECTOR")]
    pub namespace_selector: String,
    /// Gang scheduler whose PodGroups the controller writes: `volcano`, `kubernetes` (the
    /// native scheduling.k8s.io/v1alpha2 PodGroup of Kubernetes 1.36; pods keep the default
    /// scheduler), a scheduler-plugins scheduler name (e.g. `scheduler-plugins-scheduler`),
    /// or empty for none.
    #[arg(long, default_value = "volcano", env = "GANGPLANK_GANG_SCHEDULER")]
    pub gang_scheduler: String,
    /// How long a job's pods may stay Pending before the gang watchdog acts, for jobs that
    /// set no schedulingPolicy.scheduleTimeoutSeconds; 0s turns it off for them.
    #[arg(long, default_value = "15m", value_parser = parse_duration, env = "GANGPLANK_START_DEADLINE")]
    pub start_deadline: Duration,
    /// What the watchdog does with a stuck gang: fail the job, or delete and recreate the
    /// whole gang (counted against backoffLimit).
    #[arg(long, value_enum, default_value = "fail", env = "GANGPLANK_ON_STUCK")]
    pub on_stuck: OnStuck,
    /// Image of the init container that makes PyTorch workers wait for the master's DNS name
    /// (it runs `sh -c` with `nslookup`, `date` and `sleep`, as user 65532: any busybox or
    /// alpine image will do; air-gapped clusters pass their mirror's copy, by digest).
    #[arg(
        long,
        default_value = crate::controller::injected::PYTORCH_INIT_IMAGE,
        env = "GANGPLANK_PYTORCH_INIT_IMAGE"
    )]
    pub pytorch_init_image: String,
    /// How long a PyTorch worker's init container waits for the master's name before it
    /// fails (the worker's pod then restarts under its restartPolicy and the job's backoff).
    #[arg(long, default_value = "200s", value_parser = parse_duration, env = "GANGPLANK_PYTORCH_INIT_TIMEOUT")]
    pub pytorch_init_timeout: Duration,
    /// The cluster's DNS domain (the kubelet's clusterDomain): init containers wait for
    /// `<pod>.<namespace>.svc.<domain>.`, a complete name no search list changes.
    #[arg(long, default_value = "cluster.local", value_parser = ClusterDomain::parse, env = "GANGPLANK_CLUSTER_DOMAIN")]
    pub cluster_domain: ClusterDomain,
    /// Image of the init container that copies kubectl into a v1 MPIJob's launcher (it runs
    /// `cp /bin/kubectl /opt/kube/kubectl` as user 65532).
    #[arg(
        long,
        default_value = crate::controller::injected::KUBECTL_DELIVERY_IMAGE,
        env = "GANGPLANK_MPI_KUBECTL_DELIVERY_IMAGE"
    )]
    pub mpi_kubectl_delivery_image: String,
    /// Hold a coordination.k8s.io Lease so that only one replica reconciles.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "GANGPLANK_LEADER_ELECT")]
    pub leader_elect: bool,
    /// Namespace of the Lease (the controller's own).
    #[arg(long, default_value = "gangplank-system", env = "POD_NAMESPACE")]
    pub lease_namespace: String,
    /// Name of the Lease.
    #[arg(
        long,
        default_value = "gangplank-controller",
        env = "GANGPLANK_LEASE_NAME"
    )]
    pub lease_name: String,
    /// Also create the native PodGroups (scheduling.k8s.io/v1alpha2) of Kubeflow Trainer
    /// TrainJobs that gangplank's trainer_gang policy gave Kubernetes' native gang (`gang:
    /// kubernetes`; docs/src/trainjob.md). The Trainer and JobSet run the TrainJobs.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", env = "GANGPLANK_TRAINJOBS")]
    pub trainjobs: bool,
    /// Where to serve the controller's /metrics and /healthz over plain HTTP; empty for none.
    #[arg(long, default_value = "", env = "GANGPLANK_CONTROLLER_METRICS_ADDR")]
    pub controller_metrics_addr: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnStuck {
    Fail,
    RestartGang,
}

#[derive(Debug, Args)]
pub struct ControllerArgs {
    #[command(flatten)]
    pub options: ControllerOptions,
}

impl ControllerArgs {
    pub fn run(self) -> u8 {
        let Self { options } = self;
        match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(options.run(super::shutdown::shutdown_signal())),
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                exit::UNREADABLE
            }
        }
    }
}

impl ControllerOptions {
    /// Runs the controllers until `shutdown` resolves; an exit code.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> u8 {
        let (kinds, scope, config) = match self.settings() {
            Ok(settings) => settings,
            Err(message) => {
                error!(error = %message, "invalid controller settings");
                return exit::UNREADABLE;
            }
        };
        let Some(client) = connect().await else {
            return exit::UNREADABLE;
        };
        let native = config.gang == Some(GangScheduler::Kubernetes) || self.trainjobs;
        if native && !native_gang_served(&client).await {
            return exit::UNREADABLE;
        }

        let metrics = Arc::new(ControllerMetrics::new());
        if let Err(message) = serve_metrics(&self.controller_metrics_addr, metrics.clone()).await {
            error!(error = %message, "cannot serve controller metrics");
            return exit::UNREADABLE;
        }
        let shutdown = shutdown.boxed().shared();
        let managed = match self
            .managed(&client, &scope, &metrics, shutdown.clone())
            .await
        {
            Ok(managed) => managed,
            Err(message) => {
                error!(error = %message, "invalid controller settings");
                return exit::UNREADABLE;
            }
        };
        if self.trainjobs {
            tokio::spawn(crate::trainer::native::run(
                client.clone(),
                scope.clone(),
                managed.clone(),
                shutdown.clone(),
            ));
        }
        let identity = identity();
        let shared = runner::Shared {
            metrics: metrics.clone(),
            reporter: Reporter {
                controller: "gangplank-controller".into(),
                instance: Some(identity.clone()),
            },
            managed,
        };
        if !self.leader_elect {
            let run = runner::run(client, kinds, &scope, config, shared, shutdown.clone());
            drained(run, shutdown).await;
            return exit::OK;
        }
        let elector = Elector::new(
            client.clone(),
            LeaseConfig {
                namespace: self.lease_namespace,
                name: self.lease_name,
                identity,
                lease_duration: Duration::from_secs(15),
                retry_period: Duration::from_secs(2),
            },
        );
        tokio::select! {
            acquired = elector.acquire() => if let Err(e) = acquired {
                error!(apiserver = %e.api_message(), "{}", lease_fix(&e));
                return exit::UNREADABLE;
            },
            () = shutdown.clone() => return exit::OK,
        }
        metrics.set_leader(true);
        let run = runner::run(client, kinds, &scope, config, shared, shutdown.clone());
        let code = tokio::select! {
            () = drained(run, shutdown) => exit::OK,
            why = elector.keep() => {
                // Reconciling on without the Lease could race the new leader: stop, and let
                // the Deployment restart this replica as a follower.
                error!(reason = %why, "lost the leader Lease; exiting");
                exit::FAILED
            }
        };
        metrics.set_leader(false);
        if tokio::time::timeout(DRAIN, elector.release())
            .await
            .is_err()
        {
            warn!("could not release the leader Lease in time (API server unreachable?); the next leader waits out its duration");
        }
        code
    }

    /// The namespaces acted in: those `--namespace-selector` matches, watched from now on;
    /// every one without a selector, or with `--namespaces` (said in a log line).
    async fn managed(
        &self,
        client: &kube::Client,
        scope: &Scope,
        metrics: &Arc<ControllerMetrics>,
        shutdown: impl std::future::Future<Output = ()> + Send + Clone + 'static,
    ) -> Result<Managed, String> {
        let selector = self.namespace_selector.trim();
        if selector.is_empty() {
            return Ok(Managed::every());
        }
        if *scope != Scope::Cluster {
            info!(selector, "--namespace-selector is not used with --namespaces: the namespaces listed are the allow-list (a RoleBinding cannot grant reading Namespace objects); deploy/controller's admission policies still require the label for every write");
            return Ok(Managed::every());
        }
        Managed::start(client, selector, metrics.clone(), shutdown).await
    }

    fn settings(&self) -> Result<(Vec<&'static KindSpec>, Scope, Config), String> {
        let mut kinds = Vec::new();
        for name in &self.kinds {
            let spec = runnable(name).ok_or_else(|| {
                format!(
                    "--kinds: {name} is not one the controller runs ({}, {OPT_IN_MPI})",
                    RUNNABLE_KINDS.join(", ")
                )
            })?;
            // A kind named twice (a component's second --kinds repeating one) runs once.
            if !kinds.iter().any(|k: &&KindSpec| std::ptr::eq(*k, spec)) {
                kinds.push(spec);
            }
        }
        let mpi_versions = kinds.iter().filter(|k| k.kind == "MPIJob").count();
        if mpi_versions > 1 {
            // One CRD named mpijobs.kubeflow.org serves the cluster; two controllers would
            // both act on every MPIJob.
            return Err("--kinds: MPIJob (v2beta1) and MPIJob/v1 exclude each other: a cluster has one MPIJob CRD (crds/README.md)".to_string());
        }
        let scope = Scope::from_flag(&self.namespaces)?;
        let config = Config {
            gang: GangScheduler::from_flag(self.gang_scheduler.trim()),
            start_deadline: (!self.start_deadline.is_zero()).then_some(self.start_deadline),
            on_stuck: match self.on_stuck {
                OnStuck::Fail => StuckAction::Fail,
                OnStuck::RestartGang => StuckAction::RestartGang,
            },
            pytorch_init_image: self.pytorch_init_image.clone(),
            pytorch_init_timeout: self.pytorch_init_timeout,
            cluster_domain: self.cluster_domain.clone(),
            mpi_kubectl_delivery_image: self.mpi_kubectl_delivery_image.clone(),
            ..Config::default()
        };
        Ok((kinds, scope, config))
    }
}

/// What to do about a Lease that cannot be had, naming the flags (and their env vars) that
/// fix it: the message a user reads when the controller exits at start.
fn lease_fix(e: &LeaseError) -> String {
    const LOCAL: &str = "or, for a local run with a single replica, pass --leader-elect=false \
                         (GANGPLANK_LEADER_ELECT=false)";
    match e {
        LeaseError::NamespaceMissing { namespace, .. } => format!(
            "leader election needs the namespace {namespace:?} for its Lease, and this cluster \
             has none: create it (kubectl create namespace {namespace}), pass \
             --lease-namespace=<an existing namespace> (POD_NAMESPACE), {LOCAL}"
        ),
        LeaseError::Forbidden {
            namespace, verb, ..
        } => format!(
            "leader election may not {verb} Leases in namespace {namespace:?}: grant this \
             identity get, create and update on leases.coordination.k8s.io there (as \
             deploy/controller/rbac.yaml does for gangplank-system), pass \
             --lease-namespace=<a namespace where it may> (POD_NAMESPACE), {LOCAL}"
        ),
    }
}

/// How long reconciles under way may take to finish after the shutdown signal. They end in
/// well under a second when the API answers; when it does not, kube-runtime would wait for
/// them (and their retries) indefinitely, and the pod would only go at SIGKILL.
const DRAIN: Duration = Duration::from_secs(10);

/// Runs `work` (which stops on `shutdown` itself); once `shutdown` has fired, gives it
/// [`DRAIN`] to finish, then stops waiting for it.
async fn drained(
    work: impl std::future::Future<Output = ()>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let deadline = async {
        shutdown.await;
        tokio::time::sleep(DRAIN).await;
    };
    tokio::select! {
        () = work => {}
        () = deadline => warn!(drain_s = DRAIN.as_secs(), "reconciles still running after the shutdown signal (API server unreachable?); exiting without them"),
    }
}

/// MPIJob runs only when named in --kinds: `MPIJob` is kubeflow.org/v2beta1 (the
/// mpi-operator's API), `MPIJob/v1` the training operator's; a cluster that runs either
/// upstream operator for MPIJobs must stop it first.
const OPT_IN_MPI: &str =
    "and, when named, MPIJob (kubeflow.org/v2beta1) or MPIJob/v1 (kubeflow.org/v1)";

/// The kind table row of a kind the controller runs, by name (any case).
fn runnable(name: &str) -> Option<&'static KindSpec> {
    if name.eq_ignore_ascii_case("MPIJob") || name.eq_ignore_ascii_case("MPIJob/v2beta1") {
        return crate::job::lookup("kubeflow.org/v2beta1", "MPIJob");
    }
    if name.eq_ignore_ascii_case("MPIJob/v1") {
        return crate::job::lookup("kubeflow.org/v1", "MPIJob");
    }
    let known = RUNNABLE_KINDS
        .iter()
        .find(|k| k.eq_ignore_ascii_case(name))?;
    crate::job::lookup("kubeflow.org/v1", known)
}

/// A client from the in-cluster config or KUBECONFIG; says which API server it talks to, and
/// warns (naming it) when that server does not answer yet — the watches retry on their own.
async fn connect() -> Option<kube::Client> {
    let config = match kube::Config::infer().await {
        Ok(config) => config,
        Err(e) => {
            error!(error = %error_chain(&e), "no Kubernetes API configuration (in-cluster or KUBECONFIG)");
            return None;
        }
    };
    let url = config.cluster_url.to_string();
    let client = match kube::Client::try_from(config) {
        Ok(client) => client,
        Err(e) => {
            error!(%url, error = %error_chain(&e), "cannot build a client for the Kubernetes API");
            return None;
        }
    };
    match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
        Ok(Ok(version)) => info!(%url, version = %version.git_version, "Kubernetes API"),
        Ok(Err(e)) => {
            warn!(%url, error = %error_chain(&e), "the Kubernetes API does not answer yet; retrying")
        }
        Err(_) => warn!(%url, "the Kubernetes API did not answer within 10 s; retrying"),
    }
    Some(client)
}

/// With `--gang-scheduler kubernetes`: false (said in an error) when the API server does not
/// serve the native PodGroup, since no job's gang could then be created; when discovery
/// cannot answer (the server is not up yet), a warning and true, as for the watches.
async fn native_gang_served(client: &kube::Client) -> bool {
    use crate::cluster::discovery::{native_gang_api, NATIVE_GANG_GROUP_VERSION};
    match native_gang_api(client).await {
        Ok(true) => true,
        Ok(false) => {
            error!(
                "--gang-scheduler kubernetes: the API server does not serve {NATIVE_GANG_GROUP_VERSION} podgroups; start kube-apiserver (and kube-scheduler) with --feature-gates=GenericWorkload=true,GangScheduling=true and kube-apiserver with --runtime-config={NATIVE_GANG_GROUP_VERSION}=true, or choose another --gang-scheduler (GANGPLANK_GANG_SCHEDULER)"
            );
            false
        }
        Err(e) => {
            warn!(error = %error_chain(&e), "cannot ask the API server whether it serves {NATIVE_GANG_GROUP_VERSION} podgroups; going on");
            true
        }
    }
}

/// This replica's name in the Lease and in Events: the pod name, made unique per process so
/// that a restarted pod does not inherit its predecessor's Lease.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "gangplank".to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}-{}-{nanos:x}", std::process::id())
}

/// `/metrics` and `/healthz` over plain HTTP on `addr` (empty: none), in the background.
async fn serve_metrics(addr: &str, metrics: Arc<ControllerMetrics>) -> Result<(), String> {
    if addr.is_empty() {
        return Ok(());
    }
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| format!("--controller-metrics-addr {addr}: {e}"))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("bind {addr}: {e}"))?;
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            crate::admission::metrics::CONTENT_TYPE,
                        )],
                        metrics.render(),
                    )
                }
            }),
        );
    info!(%addr, "controller metrics on http://{addr}/metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            error!(error = %e, "controller metrics server stopped");
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    fn settings(args: &[&str]) -> Result<(Vec<&'static KindSpec>, Scope, Config), String> {
        let all = ["gangplank", "controller"].iter().chain(args);
        match Cli::try_parse_from(all).map(|cli| cli.command) {
            Ok(Command::Controller(ControllerArgs { options })) => options.settings(),
            other => Err(format!("not the controller command: {other:?}")),
        }
    }

    #[test]
    fn a_second_kinds_flag_adds_to_the_first_and_a_repeated_kind_runs_once() {
        // deploy/controller lists the v1 kinds; deploy/controller-mpi appends --kinds=MPIJob.
        let (kinds, _, _) = settings(&["--kinds=PyTorchJob,TFJob", "--kinds=MPIJob,TFJob"])
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = kinds
            .iter()
            .map(|k| k.api_version() + " " + k.kind)
            .collect();
        assert_eq!(
            names,
            [
                "kubeflow.org/v1 PyTorchJob",
                "kubeflow.org/v1 TFJob",
                "kubeflow.org/v2beta1 MPIJob"
            ]
        );
    }

    #[test]
    fn namespaces_confine_the_controller_and_none_is_the_whole_cluster() {
        let (_, scope, _) =
            settings(&["--namespaces=team-b,team-a"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            scope,
            Scope::Namespaces(vec!["team-a".into(), "team-b".into()])
        );
        let (_, scope, _) = settings(&[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(scope, Scope::Cluster);
        let refused = settings(&["--namespaces=Team_A"]).err().unwrap_or_default();
        assert!(
            refused.contains("\"Team_A\" is not a namespace name"),
            "{refused}"
        );
    }

    #[test]
    fn the_cluster_domain_defaults_to_cluster_local_and_a_bad_one_is_refused_at_start() {
        let (_, _, config) = settings(&[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.cluster_domain.as_str(), "cluster.local");
        assert_eq!(config.pytorch_init_timeout, Duration::from_secs(200));
        let (_, _, config) = settings(&[
            "--cluster-domain=corp.example.",
            "--pytorch-init-timeout=30s",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.cluster_domain.as_str(), "corp.example");
        assert_eq!(config.pytorch_init_timeout, Duration::from_secs(30));
        let refused = settings(&["--cluster-domain=cluster..local"])
            .err()
            .unwrap_or_default();
        assert!(refused.contains("--cluster-domain"), "{refused}");
        assert!(refused.contains("label 2 is empty"), "{refused}");
    }
}
