//! `gangplank serve`: the admission webhooks over HTTPS, with policy and certificate hot
//! reload.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tracing::{error, info, warn};

use crate::admission::certs::{self, Bundle};
use crate::admission::client_auth::ClientCa;
use crate::admission::client_identity::RequiredIdentity;
use crate::admission::handler::Limits;
use crate::admission::server::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_REVIEW_VALUES,
    DEFAULT_REVIEW_BYTES_IN_FLIGHT,
};
use crate::admission::{error_chain, CertFiles, Config, Metrics, PolicyStore, Server, ServingCert};
use crate::cluster::ClusterHandle;
use crate::duration::parse_duration;
use crate::exit;
use crate::images::{Keychain, Pinner};
use crate::trainer::RuntimeCatalog;

use super::shutdown::shutdown_signal;

/// The webhook's `timeoutSeconds` in deploy/: evaluation must give up before it.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8443", env = "GANGPLANK_ADDR")]
    pub addr: SocketAddr,
    /// Serving certificate chain, PEM, leaf first; reloaded when it changes. Without it,
    /// an ephemeral self-signed certificate is generated.
    #[arg(long, env = "GANGPLANK_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key of the serving certificate, PEM.
    #[arg(long, env = "GANGPLANK_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Policy directory: *.rego, lib/, params.yaml, exceptions/; reloaded when it changes.
    #[arg(long, default_value = "policies", env = "GANGPLANK_POLICIES")]
    pub policies: PathBuf,
    #[command(flatten)]
    pub policy_flags: super::policy_flags::PolicyFlags,
    /// Where the ephemeral certificate's CA is written, without --tls-cert
    /// [default: <temp dir>/gangplank-ca.crt].
    #[arg(long, env = "GANGPLANK_EPHEMERAL_CA")]
    pub ephemeral_ca: Option<PathBuf>,
    /// Names of the ephemeral certificate, besides the --addr IP.
    #[arg(
        long,
        default_values = ["localhost", "127.0.0.1"],
        env = "GANGPLANK_EPHEMERAL_NAMES",
        value_delimiter = ','
    )]
    pub ephemeral_names: Vec<String>,
    /// Longest a review may wait for and run policy evaluation before it is refused; keep
    /// it below the webhook's timeoutSeconds (5 s).
    #[arg(long, default_value = "2s", value_parser = parse_duration, env = "GANGPLANK_EVAL_TIMEOUT")]
    pub eval_timeout: Duration,
    /// Evaluations running at once (0: one per CPU); more wait for a slot.
    #[arg(long, default_value_t = 0, env = "GANGPLANK_MAX_EVALUATIONS")]
    pub max_evaluations: usize,
    /// Largest AdmissionReview, in bytes; a larger one is refused with a message saying by how
    /// much (the default fits the largest the apiserver sends: 3 MiB objects with
    /// managedFields, and oldObject on UPDATE).
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES, env = "GANGPLANK_MAX_BODY_BYTES")]
    pub max_body_bytes: usize,
    /// JSON values a review may hold to be judged (metadata.managedFields not counted); more
    /// is refused with a message. Judging holds 1-2 KiB per value: raise it with the Pod's
    /// memory limit.
    #[arg(long, default_value_t = DEFAULT_MAX_REVIEW_VALUES, env = "GANGPLANK_MAX_REVIEW_VALUES")]
    pub max_review_values: usize,
    /// Bytes of reviews judged at once, counted in KiB; a larger review is judged alone. Judging
    /// takes 12–16 times a review's size in memory, so the default (8 MiB) holds ~100 MiB at
    /// most; raise it with the Pod's memory limit (RELIABILITY.md, "Large reviews").
    #[arg(long, default_value_t = DEFAULT_REVIEW_BYTES_IN_FLIGHT, env = "GANGPLANK_REVIEW_BYTES_IN_FLIGHT")]
    pub review_bytes_in_flight: usize,
    /// Longest a review waits for room among --review-bytes-in-flight before it is refused
    /// with a message (code 429); keep it below the webhook's timeoutSeconds (5 s).
    #[arg(long, default_value = "2s", value_parser = parse_duration, env = "GANGPLANK_REVIEW_BUDGET_WAIT")]
    pub review_budget_wait: Duration,
    /// How often the policy directory and certificate files are checked for changes.
    #[arg(long, default_value = "500ms", value_parser = parse_duration, env = "GANGPLANK_RELOAD_INTERVAL")]
    pub reload_interval: Duration,
    /// After SIGTERM, how long to keep serving with /readyz failing before closing the
    /// listener, so that the Service stops routing here first; 5s suits a Deployment.
    #[arg(long, default_value = "0s", value_parser = parse_duration, env = "GANGPLANK_SHUTDOWN_DELAY")]
    pub shutdown_delay: Duration,
    /// Open connections at most; at the bound a new connection closes the least recently
    /// active one, so that idle clients cannot lock the apiserver out.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS, env = "GANGPLANK_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// CA (PEM) that signs the apiserver's client certificate: /mutate, /validate and
    /// /metrics then answer only clients presenting a certificate it signed (403 otherwise);
    /// /healthz and /readyz answer anyone (the kubelet's probes present none). Reloaded when
    /// it changes. The apiserver presents one only where its AdmissionConfiguration can be
    /// set (docs/src/serve.md, "Mutual TLS").
    #[arg(long, env = "GANGPLANK_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// With --client-ca: the subject CommonName the client certificate must carry, e.g. the
    /// apiserver's `kube-apiserver-webhook-client` (repeat or comma-separate for several; a
    /// certificate passes with one of these or of --client-san). A certificate the CA signed
    /// for anything else is refused (403): the CA may sign more than the apiserver's.
    #[arg(
        long,
        env = "GANGPLANK_CLIENT_CA_SUBJECT",
        value_delimiter = ',',
        requires = "client_ca"
    )]
    pub client_ca_subject: Vec<String>,
    /// With --client-ca: a DNS or URI subjectAltName the client certificate must carry
    /// (repeat or comma-separate for several; exact match, no wildcards).
    #[arg(
        long,
        env = "GANGPLANK_CLIENT_SAN",
        value_delimiter = ',',
        requires = "client_ca"
    )]
    pub client_san: Vec<String>,
    /// Whose image pull secrets digest pinning reads: `off` (--registry-credentials and
    /// anonymous access only), `namespaced` (the Secrets of namespaces whose RoleBinding
    /// grants the reads: deploy/image-pinning-namespaced sets it), `cluster` (any namespace a
    /// review names: deploy/image-pinning; needs --client-ca, else the server does not start,
    /// since any caller could make it read another namespace's secrets).
    #[arg(long, value_enum, default_value_t = PullSecrets::Off, env = "GANGPLANK_PULL_SECRETS")]
    pub pull_secrets: PullSecrets,
    /// Serve /metrics over plain HTTP on this address (e.g. 0.0.0.0:9090) instead of the
    /// webhook port, for Prometheus; deploy/'s NetworkPolicy admits monitoring to it.
    #[arg(long, env = "GANGPLANK_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Async worker threads (0: one per CPU).
    #[arg(long, default_value_t = 0, env = "GANGPLANK_WORKER_THREADS")]
    pub worker_threads: usize,
    /// Registry credentials (docker `config.json` format) for image digest pinning, used for
    /// registries that no pull secret of the job covers.
    #[arg(long, env = "GANGPLANK_REGISTRY_CREDENTIALS")]
    pub registry_credentials: Option<PathBuf>,
    /// Also run the lifecycle controller in this process (small clusters; large ones run
    /// `gangplank controller` as its own Deployment, deploy/controller/).
    #[arg(long, env = "GANGPLANK_CONTROLLER")]
    pub controller: bool,
    #[command(flatten)]
    pub controller_options: super::controller::ControllerOptions,
    /// Watch Nodes and Volcano Queues (when a cluster is reachable: in-cluster or
    /// KUBECONFIG) so that policies can refuse gangs the cluster can never schedule
    /// (`data.cluster`). Admission never waits on it.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "GANGPLANK_CLUSTER_INVENTORY")]
    pub cluster_inventory: bool,
    /// What the cluster inventory may hold, in MiB (estimated: Node classes and names,
    /// claims, NetworkPolicies, Namespaces). Past it new Nodes are left out, and a kind of
    /// objects that does not fit is unknown: the policies then say capacity is unknown and
    /// admit, rather than the webhook run out of memory. deploy/README.md "Sizing" gives
    /// what clusters of each size need.
    #[arg(long, default_value_t = crate::cluster::watch::DEFAULT_MAX_MIB, env = "GANGPLANK_INVENTORY_MAX_MIB")]
    pub inventory_max_mib: usize,
}

/// Whose pull secrets image pinning may read (`--pull-secrets`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PullSecrets {
    /// None: pinning uses --registry-credentials and anonymous access.
    Off,
    /// Those the RBAC grants per namespace (deploy/image-pinning-namespaced).
    Namespaced,
    /// Those of any namespace (deploy/image-pinning's ClusterRoleBinding).
    Cluster,
}

/// Why the pull-secret reads asked for are refused, if they are: cluster-wide reads on
/// behalf of whoever posts a review need the caller to be the apiserver (`--client-ca`), or
/// the reads confined by RBAC to namespaces that opted in.
fn refused_pull_secrets(pull_secrets: PullSecrets, client_ca: bool) -> Option<String> {
    (pull_secrets == PullSecrets::Cluster && !client_ca).then(|| {
        "--pull-secrets=cluster without --client-ca: anyone who reaches the webhook port could post a review naming any namespace and make gangplank read that namespace's pull secrets (and learn which private tags exist). Either set --client-ca (GANGPLANK_CLIENT_CA: only the apiserver's certificate is judged; docs/src/serve.md, \"Mutual TLS\"), or read pull secrets only where a RoleBinding grants it: deploy/image-pinning-namespaced instead of deploy/image-pinning (--pull-secrets=namespaced)".to_string()
    })
}

/// The identity `--client-ca-subject` and `--client-san` require. Names given but all blank
/// (an empty variable, say) are refused: the operator asked for a pin, and none would apply.
fn required_identity(
    subjects: Vec<String>,
    sans: Vec<String>,
) -> Result<Option<RequiredIdentity>, String> {
    let asked = !subjects.is_empty() || !sans.is_empty();
    match RequiredIdentity::new(subjects, sans) {
        None if asked => Err("--client-ca-subject / --client-san (GANGPLANK_CLIENT_CA_SUBJECT, GANGPLANK_CLIENT_SAN) are given but empty: name the CommonName or SAN of the apiserver's client certificate, or leave both unset to accept any certificate --client-ca signed".into()),
        identity => Ok(identity),
    }
}

/// Evaluations at once: `--max-evaluations`, or one per CPU when it is 0.
fn evaluations(max_evaluations: usize) -> usize {
    match max_evaluations {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    }
}

/// Threads of the blocking pool: one per evaluation slot, and four for the rest (policy and
/// certificate reloads, file reads, DNS). Evaluations take a slot before they take a thread,
/// so more would only idle; tokio's default (512) let the pool grow while reviews queued on
/// a busy machine, from 8 to 15 threads in a soak, each keeping its own allocator pages (+7
/// MiB of RSS; RELIABILITY.md "Soak").
fn blocking_threads(max_evaluations: usize) -> usize {
    evaluations(max_evaluations) + 4
}

impl ServeArgs {
    pub fn run(self) -> u8 {
        let workers = self.worker_threads;
        let mut runtime = tokio::runtime::Builder::new_multi_thread();
        runtime
            .enable_all()
            .thread_name("gangplank")
            .max_blocking_threads(blocking_threads(self.max_evaluations));
        if workers > 0 {
            runtime.worker_threads(workers);
        }
        match runtime.build() {
            Ok(rt) => rt.block_on(self.serve()),
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                exit::UNREADABLE
            }
        }
    }

    async fn serve(self) -> u8 {
        let Self {
            addr,
            tls_cert,
            tls_key,
            policies,
            policy_flags,
            ephemeral_ca,
            ephemeral_names,
            eval_timeout,
            max_evaluations,
            max_body_bytes,
            max_review_values,
            review_bytes_in_flight,
            review_budget_wait,
            reload_interval,
            shutdown_delay,
            max_connections,
            client_ca,
            client_ca_subject,
            client_san,
            pull_secrets,
            metrics_addr,
            worker_threads: _,
            registry_credentials,
            controller,
            controller_options,
            cluster_inventory,
            inventory_max_mib,
        } = self;
        if let Some(message) = refused_pull_secrets(pull_secrets, client_ca.is_some()) {
            error!(error = %message, "refusing to start");
            return exit::UNREADABLE;
        }
        if eval_timeout >= WEBHOOK_TIMEOUT {
            warn!(eval_timeout_ms = eval_timeout.as_millis() as u64,
                "--eval-timeout is not below the webhook's timeoutSeconds (5 s): the apiserver may time out before gangplank refuses");
        }
        let metrics = Arc::new(Metrics::new());
        let cluster = ClusterHandle::default();
        if cluster_inventory {
            let limits = crate::cluster::watch::Limits {
                max_bytes: inventory_max_mib.saturating_mul(1 << 20),
            };
            start_inventory(cluster.clone(), metrics.clone(), limits).await;
        }
        let store = match PolicyStore::load_configured(&policies, cluster, policy_flags.options()) {
            Ok(store) => store,
            Err(e) => {
                error!(dir = %policies.display(), error = %error_chain(&e), "cannot load policies");
                return exit::UNREADABLE;
            }
        };
        info!(dir = %policies.display(), policies = store.status().policies, "policies loaded");
        start_runtime_watch(store.runtimes().clone()).await;

        let cert = match (tls_cert, tls_key) {
            (Some(cert), Some(key)) => match ServingCert::from_files(CertFiles { cert, key }) {
                Ok(cert) => cert,
                Err(e) => {
                    error!(error = %error_chain(&e), "cannot load the serving certificate");
                    return exit::UNREADABLE;
                }
            },
            _ => {
                let mut names = ephemeral_names;
                if !addr.ip().is_unspecified() {
                    names.push(addr.ip().to_string());
                }
                names.sort();
                names.dedup();
                match ephemeral(&names, ephemeral_ca) {
                    Ok(cert) => cert,
                    Err(message) => {
                        error!(error = %message, "cannot set up an ephemeral certificate");
                        return exit::UNREADABLE;
                    }
                }
            }
        };
        let cert = Arc::new(cert);
        let max_evaluations = evaluations(max_evaluations);
        let images = match image_pinner(registry_credentials.as_deref(), pull_secrets).await {
            Ok(pinner) => Arc::new(pinner),
            Err(message) => {
                error!(error = %message, "cannot set up image digest pinning");
                return exit::UNREADABLE;
            }
        };
        let identity = match required_identity(client_ca_subject, client_san) {
            Ok(identity) => identity,
            Err(message) => {
                error!(error = %message, "refusing to start");
                return exit::UNREADABLE;
            }
        };
        let client_ca = match client_ca.as_deref().map(ClientCa::from_file).transpose() {
            Ok(ca) => ca.map(|ca| Arc::new(ca.requiring(identity))),
            Err(e) => {
                error!(error = %error_chain(&e), "cannot load --client-ca");
                return exit::UNREADABLE;
            }
        };
        let config = Config {
            addr,
            limits: Limits {
                eval_timeout,
                max_evaluations,
                max_values: max_review_values,
            },
            max_body_bytes,
            reload_interval,
            shutdown_delay,
            max_connections,
            review_bytes_in_flight,
            review_budget_wait,
            images,
            client_ca,
            metrics_addr,
        };
        let server = match Server::bind(config, Arc::new(store), cert, metrics).await {
            Ok(server) => server,
            Err(e) => {
                error!(error = %error_chain(&e), "cannot start the server");
                return exit::UNREADABLE;
            }
        };
        if let Ok(bound) = server.local_addr() {
            info!(addr = %bound, max_evaluations, eval_timeout_ms = eval_timeout.as_millis() as u64, "listening");
        }
        let webhooks = async {
            match server.run(shutdown_signal()).await {
                Ok(()) => exit::OK,
                Err(e) => {
                    error!(error = %error_chain(&e), "server failed");
                    exit::UNREADABLE
                }
            }
        };
        if !controller {
            return webhooks.await;
        }
        // Both halves stop on the same signal; if the controller ends first (it lost its
        // Lease, or cannot reach the API), the process ends with it, so that the pod restarts.
        tokio::select! {
            code = webhooks => code,
            code = controller_options.run(shutdown_signal()) => {
                if code != exit::OK {
                    error!("the controller stopped; stopping the webhooks too");
                }
                code
            }
        }
    }
}

/// The resolver, with the credentials file and, when `--pull-secrets` asks for them and a
/// cluster is reachable, its pull secrets. Without either (a local run), pinning works with
/// the file alone.
async fn image_pinner(
    credentials: Option<&std::path::Path>,
    pull_secrets: PullSecrets,
) -> Result<Pinner, String> {
    let credentials = match credentials {
        Some(path) => Keychain::from_file(path).map_err(|e| error_chain(&e))?,
        None => Keychain::default(),
    };
    let cluster = match pull_secrets {
        PullSecrets::Off => {
            info!("--pull-secrets=off: image pull secrets are not read");
            None
        }
        PullSecrets::Namespaced | PullSecrets::Cluster => match kube::Client::try_default().await {
            Ok(client) => Some(client),
            Err(e) => {
                warn!(reason = %e, "no cluster API configured: image pull secrets are not read");
                None
            }
        },
    };
    Ok(Pinner {
        cluster,
        credentials,
        ..Pinner::default()
    })
}

/// Starts watching the cluster's inventory (Nodes, storage and network objects, queues)
/// into `cluster`, if an API configuration exists; without one (a laptop, CI) the policies
/// just see no `data.cluster`.
async fn start_inventory(
    cluster: ClusterHandle,
    metrics: Arc<Metrics>,
    limits: crate::cluster::watch::Limits,
) {
    let Some(client) = api_client("no cluster inventory").await else {
        return;
    };
    tokio::spawn(crate::cluster::watch::run(client, cluster, metrics, limits));
    info!("watching Nodes, claims, StorageClasses, NetworkPolicies, Namespaces and queues for data.cluster");
}

/// Starts watching Trainer runtimes into `runtimes`, if an API configuration exists;
/// without one every TrainJob is refused, saying no runtime is known.
async fn start_runtime_watch(runtimes: RuntimeCatalog) {
    let Some(client) = api_client("no Trainer runtimes").await else {
        runtimes.set_unlisted("gangplank serve has no API configuration (in-cluster or KUBECONFIG), so it cannot read runtimes");
        return;
    };
    tokio::spawn(crate::trainer::catalog::watch::run(client, runtimes));
    info!("watching ClusterTrainingRuntimes and TrainingRuntimes for TrainJob admission");
}

/// A client from the in-cluster or KUBECONFIG configuration; `None`, logged with `what`
/// goes without, when there is none.
async fn api_client(what: &str) -> Option<kube::Client> {
    match kube::Config::infer().await.map(kube::Client::try_from) {
        Ok(Ok(client)) => Some(client),
        Ok(Err(e)) => {
            warn!(error = %error_chain(&e), "{what}: cannot build a client");
            None
        }
        Err(e) => {
            info!(reason = %error_chain(&e), "{what}: no in-cluster or KUBECONFIG configuration");
            None
        }
    }
}

/// A self-signed pair for a local run; its CA goes where a client can pick it up.
fn ephemeral(names: &[String], ca_path: Option<PathBuf>) -> Result<ServingCert, String> {
    let bundle = Bundle::generate(names, 7).map_err(|e| error_chain(&e))?;
    let ca_path = ca_path.unwrap_or_else(|| std::env::temp_dir().join("gangplank-ca.crt"));
    certs::write_file(&ca_path, &bundle.ca_pem, false).map_err(|e| error_chain(&e))?;
    warn!(
        ca = %ca_path.display(),
        names = %names.join(","),
        "no --tls-cert: serving an ephemeral self-signed certificate (valid 7 days, gone at exit); clients must trust the CA written to {}",
        ca_path.display()
    );
    ServingCert::from_pem(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes())
        .map_err(|e| error_chain(&e))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::admission::server::DEFAULT_REVIEW_BUDGET_WAIT;
    use crate::cli::{Cli, Command};

    #[test]
    fn the_review_budget_flags_default_to_the_servers_constants() {
        let cli = Cli::try_parse_from(["gangplank", "serve"]);
        let Ok(Cli {
            command: Command::Serve(args),
            ..
        }) = cli
        else {
            panic!("`gangplank serve` parses: {cli:?}");
        };
        assert_eq!(args.review_bytes_in_flight, DEFAULT_REVIEW_BYTES_IN_FLIGHT);
        assert_eq!(args.review_budget_wait, DEFAULT_REVIEW_BUDGET_WAIT);
        assert_eq!(args.pull_secrets, PullSecrets::Off, "closed by default");
    }

    #[test]
    fn cluster_wide_pull_secrets_need_a_client_ca_and_the_refusal_names_both_ways_out() {
        let refusal = refused_pull_secrets(PullSecrets::Cluster, false).expect("refused");
        assert!(
            refusal.contains("--client-ca") && refusal.contains("deploy/image-pinning-namespaced"),
            "{refusal}"
        );
        assert_eq!(refused_pull_secrets(PullSecrets::Cluster, true), None);
        assert_eq!(refused_pull_secrets(PullSecrets::Namespaced, false), None);
        assert_eq!(refused_pull_secrets(PullSecrets::Off, false), None);
    }

    #[test]
    fn a_client_identity_given_but_blank_is_refused_rather_than_pinning_nothing() {
        let refusal = required_identity(vec![" ".into()], vec![]).expect_err("blank");
        assert!(refusal.contains("given but empty"), "{refusal}");
        assert_eq!(required_identity(vec![], vec![]), Ok(None));
        let pinned = required_identity(vec![], vec!["apiserver.example".into()]);
        assert!(matches!(pinned, Ok(Some(_))), "{pinned:?}");
    }

    #[test]
    fn a_required_client_identity_needs_a_client_ca() {
        let cli = Cli::try_parse_from(["gangplank", "serve", "--client-ca-subject=kube-apiserver"]);
        assert!(cli.is_err(), "accepted without --client-ca: {cli:?}");
    }
}
