//! A real gangplank server on 127.0.0.1 with generated certificates, and an HTTPS client
//! that trusts only the test CA, as the apiserver trusts only the caBundle.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use gangplank::admission::certs::{Bundle, Ca};
use gangplank::admission::client_identity::RequiredIdentity;
use gangplank::admission::handler::Limits;
use gangplank::admission::{CertFiles, Config, Metrics, PolicyStore, Server, ServingCert};
use gangplank::cluster::ClusterHandle;
use serde_json::{json, Value};
use tokio::sync::oneshot;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A manifest from examples/ as JSON.
pub fn example(name: &str) -> Value {
    let path = repo().join("examples").join(name);
    let text = std::fs::read_to_string(&path).expect("example readable");
    yaml_serde::from_str(&text).expect("example parses")
}

/// Copies the shipped policies (without their tests) into `dir`, so a test may edit them.
pub fn copy_policies(dir: &Path) {
    copy_dir(&repo().join("policies"), dir);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read policies") {
        let entry = entry.expect("entry");
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "tests" {
                copy_dir(&path, &to.join(&name));
            }
        } else {
            std::fs::copy(&path, to.join(&name)).expect("copy");
        }
    }
}

/// What a test server is built from.
pub struct Options {
    pub policies: PathBuf,
    pub eval_timeout: Duration,
    pub max_evaluations: usize,
    pub shutdown_delay: Duration,
    pub max_connections: usize,
    pub max_body_bytes: usize,
    pub review_bytes_in_flight: usize,
    pub review_budget_wait: Duration,
    /// `--client-ca`: the CA whose client certificates the admission routes require.
    pub client_ca: Option<PathBuf>,
    /// `--metrics-addr`.
    pub metrics_addr: Option<SocketAddr>,
    /// `--client-ca-subject` / `--client-san`, with `client_ca`.
    pub client_identity: Option<RequiredIdentity>,
    /// `data.cluster` (the inventory a cluster-aware server watches); empty by default.
    pub cluster: ClusterHandle,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policies: repo().join("policies"),
            eval_timeout: Duration::from_secs(2),
            max_evaluations: 2,
            shutdown_delay: Duration::ZERO,
            max_connections: gangplank::admission::server::DEFAULT_MAX_CONNECTIONS,
            max_body_bytes: gangplank::admission::server::DEFAULT_MAX_BODY_BYTES,
            review_bytes_in_flight: gangplank::admission::server::DEFAULT_REVIEW_BYTES_IN_FLIGHT,
            review_budget_wait: gangplank::admission::server::DEFAULT_REVIEW_BUDGET_WAIT,
            client_ca: None,
            metrics_addr: None,
            client_identity: None,
            cluster: ClusterHandle::default(),
        }
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    /// `--metrics-addr`'s listener, when the options set one.
    pub metrics_addr: Option<SocketAddr>,
    pub ca: Ca,
    /// The pair the server started with.
    pub first: Bundle,
    pub cert_files: CertFiles,
    pub metrics: Arc<Metrics>,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

/// Names the test certificates are valid for.
pub fn names() -> Vec<String> {
    vec!["127.0.0.1".to_string(), "localhost".to_string()]
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::with(Options::default()).await
    }

    pub async fn with(opts: Options) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = Ca::generate(1).expect("CA");
        let first = ca.issue(&names(), 1).expect("leaf");
        first.write_to(dir.path()).expect("write certs");
        let cert_files = CertFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let cert = Arc::new(ServingCert::from_files(cert_files.clone()).expect("cert loads"));
        TestServer::serve(opts, dir, ca, first, cert_files, cert).await
    }

    /// Serves certificate files the caller laid out (a Secret-volume layout, say).
    pub async fn serve(
        opts: Options,
        dir: tempfile::TempDir,
        ca: Ca,
        first: Bundle,
        cert_files: CertFiles,
        cert: Arc<ServingCert>,
    ) -> TestServer {
        let metrics = Arc::new(Metrics::new());
        let store = PolicyStore::load_with_cluster(&opts.policies, opts.cluster.clone());
        let store = Arc::new(store.expect("policies load"));
        let config = Config {
            addr: "127.0.0.1:0".parse().expect("addr"),
            limits: Limits {
                eval_timeout: opts.eval_timeout,
                max_evaluations: opts.max_evaluations,
                max_values: gangplank::admission::server::DEFAULT_MAX_REVIEW_VALUES,
            },
            max_body_bytes: opts.max_body_bytes,
            reload_interval: Duration::from_millis(100),
            shutdown_delay: opts.shutdown_delay,
            max_connections: opts.max_connections,
            review_bytes_in_flight: opts.review_bytes_in_flight,
            review_budget_wait: opts.review_budget_wait,
            images: Default::default(),
            client_ca: opts.client_ca.as_deref().map(|path| {
                Arc::new(
                    gangplank::admission::client_auth::ClientCa::from_file(path)
                        .expect("client CA loads")
                        .requiring(opts.client_identity.clone()),
                )
            }),
            metrics_addr: opts.metrics_addr,
        };
        let server = Server::bind(config, store, cert, metrics.clone())
            .await
            .expect("binds");
        let addr = server.local_addr().expect("bound address");
        let metrics_addr = server.metrics_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            server
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .expect("server runs");
        });
        let client = client_for(&ca);
        let s = TestServer {
            addr,
            metrics_addr,
            ca,
            first,
            cert_files,
            metrics,
            client,
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
        };
        let readyz = s.url("/readyz");
        let client = s.client.clone();
        wait_until("the server is ready", Duration::from_secs(10), || {
            let (client, readyz) = (client.clone(), readyz.clone());
            async move {
                client
                    .get(readyz)
                    .send()
                    .await
                    .is_ok_and(|r| r.status() == 200)
            }
        })
        .await;
        s
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{}", self.addr, path)
    }

    /// POSTs a review and returns the HTTP status and the body as JSON (a body that is not
    /// JSON as a string).
    pub async fn post(&self, path: &str, review: &Value) -> (u16, Value) {
        let body = serde_json::to_vec(review).expect("serializes");
        let (status, body) = send(&self.client, self.url(path), body)
            .await
            .expect("request answered");
        let json = serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
        (status, json)
    }

    /// POSTs a review with a client of the test's own (in a task of its own, say); returns
    /// the HTTP status and the body as JSON, or what went wrong.
    pub async fn post_with(
        client: &reqwest::Client,
        url: String,
        body: Vec<u8>,
    ) -> Result<(u16, Value), String> {
        let (status, bytes) = send(client, url, body).await?;
        let json = serde_json::from_slice(&bytes).map_err(|e| format!("{e} ({status})"))?;
        Ok((status, json))
    }

    /// POSTs a review that must be answered with HTTP 200; returns its `response`.
    pub async fn admit(&self, path: &str, review: &Value) -> Value {
        let (status, body) = self.post(path, review).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(body["kind"], "AdmissionReview");
        assert_eq!(
            body["response"]["uid"], review["request"]["uid"],
            "uid echoed"
        );
        body["response"].clone()
    }

    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let r = self
            .client
            .get(self.url(path))
            .send()
            .await
            .expect("answered");
        (r.status().as_u16(), r.text().await.expect("text"))
    }

    /// The leaf certificate (DER) a new TLS connection is served.
    pub async fn served_leaf(&self) -> Vec<u8> {
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(self.ca.pem().as_bytes()).expect("CA")])
            .tls_info(true)
            .pool_max_idle_per_host(0)
            .build()
            .expect("client");
        let r = client
            .get(self.url("/healthz"))
            .send()
            .await
            .expect("answered");
        let info = r
            .extensions()
            .get::<reqwest::tls::TlsInfo>()
            .expect("TLS info");
        info.peer_certificate().expect("peer certificate").to_vec()
    }

    /// Sends the shutdown signal without waiting for the server to finish.
    pub fn begin_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Shuts down and waits until the server has drained and returned.
    pub async fn stop(mut self) {
        self.begin_shutdown();
        if let Some(task) = self.task.take() {
            task.await.expect("server task");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A client that trusts only the test CA.
/// POSTs `body` as JSON; the HTTP status and the body's bytes, or what went wrong.
async fn send(
    client: &reqwest::Client,
    url: String,
    body: Vec<u8>,
) -> Result<(u16, Vec<u8>), String> {
    let r = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    let status = r.status().as_u16();
    let bytes = r.bytes().await.map_err(|e| format!("{e:?}"))?;
    Ok((status, bytes.to_vec()))
}

pub fn client_for(ca: &Ca) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("CA")])
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// DER of a PEM certificate.
pub fn der(pem: &str) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("PEM certificate")
        .to_vec()
}

/// Polls `condition` until it holds, failing the test after `deadline`.
pub async fn wait_until<F, Fut>(what: &str, deadline: Duration, mut condition: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if condition().await {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An AdmissionReview v1 as the apiserver sends it.
pub fn review(
    uid: &str,
    operation: &str,
    object: &Value,
    old: Option<&Value>,
    dry_run: bool,
) -> Value {
    let subject = if object.is_null() {
        old.unwrap_or(object)
    } else {
        object
    };
    let api_version = subject["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = subject["kind"].as_str().unwrap_or_default();
    let gvk = json!({"group": group, "version": version, "kind": kind});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
            "requestKind": gvk,
            "name": subject["metadata"]["name"],
            "namespace": subject["metadata"]["namespace"],
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": old.cloned().unwrap_or(Value::Null),
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        }
    })
}

pub fn create(uid: &str, object: &Value) -> Value {
    review(uid, "CREATE", object, None, false)
}

/// The GPU example with `n` environment variables in its Master's container (20,000 make
/// a 1.4 MB job).
pub fn job_with_env(n: usize) -> Value {
    let mut job = example("pytorchjob-gpu.yaml");
    let env: Vec<Value> = (0..n)
        .map(|i| json!({"name": format!("PLATFORM_SETTING_{i:05}"), "value": format!("v-{i:05}-{}", "x".repeat(16))}))
        .collect();
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"] =
        Value::Array(env);
    job
}

/// `job` as `kubectl apply` makes the apiserver send it: the last-applied-configuration
/// annotation (the whole job again, as a string) and managedFields (an entry per list item).
pub fn as_applied(job: &Value) -> Value {
    let mut out = job.clone();
    let last = serde_json::to_string(job).expect("serializes");
    out["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": last});
    let env_fields: serde_json::Map<String, Value> = job["spec"]["pytorchReplicaSpecs"]["Master"]
        ["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let key = format!("k:{}", json!({"name": e["name"]}));
            (key, json!({".": {}, "f:name": {}, "f:value": {}}))
        })
        .collect();
    out["metadata"]["managedFields"] = json!([{
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "apiVersion": "kubeflow.org/v1",
        "time": "2026-11-26T12:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:pytorchReplicaSpecs": {"f:Master": {"f:template": {"f:spec": {
            "f:containers": {"k:{\"name\":\"pytorch\"}": {"f:env": env_fields}}
        }}}}}}
    }]);
    out
}

/// The JSONPatch of a response, decoded.
pub fn patch_of(response: &Value) -> json_patch::Patch {
    assert_eq!(response["patchType"], "JSONPatch");
    let raw = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("patch is a string"))
        .expect("patch is base64");
    serde_json::from_slice(&raw).expect("patch is a JSON patch")
}

/// The object as the apiserver stores it after /mutate: the patch applied.
pub fn apply(object: &Value, response: &Value) -> Value {
    let mut out = object.clone();
    if response.get("patch").is_some() {
        json_patch::patch(&mut out, &patch_of(response)).expect("patch applies");
    }
    out
}

/// `gangplank serve` as a process of its own (the binary cargo built), for what only a
/// process shows: its memory, its exit on SIGTERM, its log.
pub struct Spawned {
    pub child: std::process::Child,
    /// The address it logged as listening on.
    pub addr: String,
    /// Its log lines (JSON), as they come.
    pub log: std::sync::mpsc::Receiver<String>,
    /// Lines read before "listening".
    pub early: Vec<String>,
}

/// `gangplank` with no RUST_LOG of the caller's, in the repository.
pub fn gangplank() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_gangplank"));
    c.env_remove("RUST_LOG").current_dir(repo());
    c
}

impl Spawned {
    /// Starts `gangplank serve --addr 127.0.0.1:0 --log-format json <args>` with `env`, and
    /// waits until it logs its address.
    pub fn serve(args: &[&str], env: &[(&str, &str)]) -> Spawned {
        use std::io::{BufRead, BufReader};
        let mut child = gangplank()
            .args(["serve", "--addr", "127.0.0.1:0", "--log-format", "json"])
            .args(args)
            .envs(env.iter().copied())
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("gangplank serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, log) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut spawned = Spawned {
            child,
            addr: String::new(),
            log,
            early: Vec::new(),
        };
        spawned.addr = loop {
            let line = spawned
                .log
                .recv_timeout(Duration::from_secs(60))
                .expect("serve logs its address");
            let v: Value = serde_json::from_str(&line).expect("JSON log line");
            spawned.early.push(line);
            if v["fields"]["message"] == "listening" {
                break v["fields"]["addr"].as_str().expect("addr").to_string();
            }
        };
        spawned
    }

    /// The peak resident set of the process so far (`VmHWM`), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmHWM in /proc status")
    }
}

/// A spawned server never outlives its test, even one that fails half-way.
impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TLS client config that trusts the test CA and offers `alpn`.
pub fn tls_client(server: &TestServer, alpn: &[u8]) -> tokio_rustls::TlsConnector {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(server.ca.pem().as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("CA");
    }
    let mut config =
        rustls::ClientConfig::builder_with_provider(gangplank::admission::tls::provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Whether a request failed before the server processed any of it, so that a client retries
/// it: the connection failed (refused, or reset in the handshake), the HTTP/2 stream was
/// refused (`REFUSED_STREAM`: over the server's stream limit, sent before its SETTINGS
/// arrived; Go's HTTP/2 client, the apiserver's, retries these), or the client's connection
/// task was gone before it took the request.
pub fn not_sent(e: &reqwest::Error) -> bool {
    let debug = format!("{e:?}");
    e.is_connect() || debug.contains("REFUSED_STREAM") || debug.contains("DispatchGone")
}
