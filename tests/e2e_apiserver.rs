//! End to end: a real kube-apiserver calls `gangplank serve` for jobs created through its API.
//!
//! The test starts etcd and kube-apiserver on loopback (random ports, a temp dir, a static
//! token, certificates from `gangplank certs`), starts the gangplank binary, installs the
//! upstream training CRDs and the webhook configurations of `deploy/webhooks.yaml` with the
//! Service swapped for `https://127.0.0.1:PORT` and the caBundle set, and then, over the REST
//! API:
//!
//! - a valid job is stored with gangplank's defaults (scheduler, PodGroup minAvailable);
//! - an invalid job is refused with gangplank's message, and so is an update that breaks a rule;
//! - a server-side dry run returns the mutated job and stores nothing;
//! - a job in kube-system never reaches gangplank (the namespaceSelector).
//!
//! # Requirements (else the test prints why it skipped, and passes)
//!
//! - `KUBEBUILDER_ASSETS`: a directory holding `etcd` and `kube-apiserver`, the envtest
//!   convention; `setup-envtest use -p path` (sigs.k8s.io/controller-runtime/tools/setup-envtest)
//!   prints one. kube-apiserver 1.22 or later (it must label namespaces with
//!   `kubernetes.io/metadata.name`). Set but incomplete is an error, not a skip.
//! - The upstream CRDs: `GANGPLANK_CORPUS`, else `../shared/corpus` (`upstream-crds/`).
//!
//! The processes log into a temp dir; on failure their tails are printed and the dir is kept.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

const NAMESPACE: &str = "gangplank-e2e";
/// A static bearer token in `system:masters`: the apiserver lives and dies with the test.
const TOKEN: &str = "gangplank-e2e-admin";
const IMAGE: &str = "registry.example.com/ml/pytorch:2.4.0@sha256:\
                     897f10e5f6f63d68a5e340c9ce4546f4720b48ee657e891e18c2b7515b5566c5";
/// The v1 training CRDs. The v2beta1 MPIJob CRD has the same name as the v1 one
/// (mpijobs.kubeflow.org), so a cluster has one or the other; the cases use PyTorchJob.
const CRDS: [&str; 6] = [
    "pytorchjobs",
    "tfjobs",
    "mpijobs",
    "xgboostjobs",
    "paddlejobs",
    "jaxjobs",
];
const SKIP_HINT: &str = "a directory with etcd and kube-apiserver, e.g. from \
    `go run sigs.k8s.io/controller-runtime/tools/setup-envtest@latest use -p path`; \
    see tests/e2e_apiserver.rs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_admits_training_jobs_through_gangplank() {
    let Some(assets) = assets() else { return };
    let Some(crds) = upstream_crds() else { return };
    let env = Env::start(&assets).await;
    env.install_crds(&crds).await;
    env.create_namespace(NAMESPACE).await;
    env.install_webhooks().await;

    valid_job_is_stored_with_its_defaults(&env).await;
    invalid_job_is_refused_with_gangplanks_message(&env).await;
    update_that_breaks_a_rule_is_refused(&env).await;
    dry_run_returns_the_mutated_job_and_stores_nothing(&env).await;
    jobs_in_kube_system_do_not_reach_gangplank(&env).await;
}

// ---------------------------------------------------------------------------------------------
// The cases

async fn valid_job_is_stored_with_its_defaults(env: &Env) {
    let job = pytorch_job("e2e-valid", 1);
    let (status, created) = env.create_job(NAMESPACE, &job, "").await;
    assert_eq!(status, StatusCode::CREATED, "create: {created}");
    // Read it back: what etcd holds, after the CRD schema pruned unknown fields.
    let (status, stored) = env.get_job(NAMESPACE, "e2e-valid").await;
    assert_eq!(status, StatusCode::OK, "get: {stored}");
    assert_gang_defaults(&stored, 3);
}

async fn invalid_job_is_refused_with_gangplanks_message(env: &Env) {
    let job = pytorch_job("e2e-two-masters", 2);
    let (status, refusal) = env.create_job(NAMESPACE, &job, "").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refusal}");
    assert_refused_by_gangplank(&refusal);
    let (status, _) = env.get_job(NAMESPACE, "e2e-two-masters").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a refused job is not stored");
}

/// UPDATE goes through both webhooks too (with oldObject): the stored valid job cannot be
/// patched into an invalid one.
async fn update_that_breaks_a_rule_is_refused(env: &Env) {
    let patch = json!({"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2}}}});
    let path = job_path(NAMESPACE, "e2e-valid");
    let merge_patch = Some((&patch, "application/merge-patch+json"));
    let (status, refusal) = env.request(Method::PATCH, &path, merge_patch).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refusal}");
    assert_refused_by_gangplank(&refusal);
    let (_, stored) = env.get_job(NAMESPACE, "e2e-valid").await;
    let masters = &stored["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"];
    assert_eq!(masters, 1, "the stored job is unchanged");
}

async fn dry_run_returns_the_mutated_job_and_stores_nothing(env: &Env) {
    let job = pytorch_job("e2e-dry-run", 1);
    let (status, returned) = env.create_job(NAMESPACE, &job, "?dryRun=All").await;
    assert_eq!(status, StatusCode::CREATED, "dry run: {returned}");
    assert_gang_defaults(&returned, 3);
    let (status, _) = env.get_job(NAMESPACE, "e2e-dry-run").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a dry run stores nothing");
}

async fn jobs_in_kube_system_do_not_reach_gangplank(env: &Env) {
    // The apiserver creates kube-system shortly after it reports ready.
    env.wait("namespace kube-system", Duration::from_secs(30), || async {
        let (status, body) = env
            .api(Method::GET, "/api/v1/namespaces/kube-system", None)
            .await;
        expect(status, StatusCode::OK, &body)
    })
    .await;
    // Two Masters: gangplank would refuse this, so being stored proves it was never asked.
    let job = pytorch_job("e2e-excluded", 2);
    let (status, stored) = env.create_job("kube-system", &job, "").await;
    assert_eq!(status, StatusCode::CREATED, "{stored}");
    let master = &stored["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"];
    assert!(master.get("schedulerName").is_none(), "mutated: {stored}");
}

fn assert_gang_defaults(job: &Value, pods: u64) {
    let replicas = &job["spec"]["pytorchReplicaSpecs"];
    for replica in ["Master", "Worker"] {
        let scheduler = &replicas[replica]["template"]["spec"]["schedulerName"];
        assert_eq!(scheduler, "volcano", "{replica} scheduler: {job}");
    }
    let min_available = &job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"];
    assert_eq!(min_available, pods, "PodGroup minAvailable: {job}");
}

/// The apiserver wraps the webhook's message: `admission webhook "<name>" denied the request:
/// [policy] path: message`.
fn assert_refused_by_gangplank(status: &Value) {
    let message = status["message"].as_str().unwrap_or_default();
    for expected in [
        "admission webhook \"validate.gangplank.dev\" denied the request",
        "[coordinator] /spec/pytorchReplicaSpecs/Master/replicas:",
        "Master has 2 replicas",
    ] {
        assert!(message.contains(expected), "{expected:?} not in {status}");
    }
}

/// A small PyTorchJob (Master + 2 Workers, image pinned by digest, no GPUs) that only the
/// coordinator rule objects to, when `masters` is not 1.
fn pytorch_job(name: &str, masters: u32) -> Value {
    let replica = |replicas: u32| {
        json!({
            "replicas": replicas,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{
                "name": "pytorch",
                "image": IMAGE,
                "command": ["python", "/workspace/train.py"],
            }]}},
        })
    };
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(masters), "Worker": replica(2)}},
    })
}

fn job_path(namespace: &str, name: &str) -> String {
    format!("/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}")
}

/// For `Env::wait` probes: the status seen, with the body, while it is not the one wanted.
fn expect(status: StatusCode, wanted: StatusCode, body: &Value) -> Result<(), String> {
    if status == wanted {
        Ok(())
    } else {
        Err(format!("{status}: {body}"))
    }
}

// ---------------------------------------------------------------------------------------------
// Requirements

fn assets() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS") else {
        // Written to stderr directly: libtest captures eprintln!, and a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: KUBEBUILDER_ASSETS not set ({SKIP_HINT})"
        );
        return None;
    };
    let dir = PathBuf::from(dir);
    for binary in ["etcd", "kube-apiserver"] {
        assert!(
            dir.join(binary).is_file(),
            "KUBEBUILDER_ASSETS={} has no {binary} ({SKIP_HINT})",
            dir.display()
        );
    }
    Some(dir)
}

fn upstream_crds() -> Option<PathBuf> {
    let corpus = std::env::var_os("GANGPLANK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"));
    let dir = corpus.join("upstream-crds");
    if dir.is_dir() {
        Some(dir)
    } else {
        let shown = dir.display();
        // Written to stderr directly: libtest captures eprintln!, and a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: upstream CRDs not found at {shown} (set GANGPLANK_CORPUS)"
        );
        None
    }
}

// ---------------------------------------------------------------------------------------------
// The environment: etcd, kube-apiserver, gangplank

/// A child process, killed when dropped; its output goes to `<dir>/<name>.log`.
struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    fn spawn(name: &'static str, command: &mut Command, dir: &Path) -> Process {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log).expect("create log");
        let err = out.try_clone().expect("clone log handle");
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Process { name, child, log }
    }

    /// Panics with the log's tail if the process has exited.
    fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited ({status}):\n{}", self.name, self.tail());
        }
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Env {
    /// Declared before `dir`: the processes stop before their files go.
    processes: Mutex<Vec<Process>>,
    /// `https://127.0.0.1:PORT` of the apiserver and of gangplank.
    api: String,
    webhook: String,
    /// Trusts the two CAs `gangplank certs` made, and nothing else.
    client: reqwest::Client,
    dir: tempfile::TempDir,
}

impl Drop for Env {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
            for process in processes.iter() {
                eprintln!("---- {} log (tail) ----\n{}", process.name, process.tail());
            }
            // Kept for a look at the whole logs and the certificates.
            self.dir.disable_cleanup(true);
            eprintln!("(kept {})", self.dir.path().display());
        }
    }
}

impl Env {
    /// etcd, kube-apiserver and `gangplank serve`, each answering its health check.
    async fn start(assets: &Path) -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = |name: &str| dir.path().join(name).display().to_string();
        let [etcd_port, peer_port, api_port, webhook_port] = free_ports();

        // Serving certificates for both servers, from the command users run.
        let api_tls = dir.path().join("apiserver-tls");
        certs(&api_tls, &["localhost", "127.0.0.1"]);
        let webhook_tls = dir.path().join("webhook-tls");
        certs(&webhook_tls, &["127.0.0.1"]);
        // Service-account token signing: the apiserver refuses to start without a key.
        let sa_key = rcgen::KeyPair::generate().expect("service-account key");
        std::fs::write(file("sa.key"), sa_key.serialize_pem()).expect("write sa.key");
        std::fs::write(file("sa.pub"), sa_key.public_key_pem()).expect("write sa.pub");
        let token_line = format!("{TOKEN},gangplank-e2e,gangplank-e2e,\"system:masters\"\n");
        std::fs::write(file("tokens.csv"), token_line).expect("write tokens.csv");

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd = [
            format!("--data-dir={}", file("etcd")),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
        ];
        let pem = |dir: &Path, name: &str| dir.join(name).display().to_string();
        let apiserver = [
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", file("apiserver-cert-dir")),
            format!("--tls-cert-file={}", pem(&api_tls, "tls.crt")),
            format!("--tls-private-key-file={}", pem(&api_tls, "tls.key")),
            format!("--token-auth-file={}", file("tokens.csv")),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-issuer=https://127.0.0.1:{api_port}"),
            format!("--service-account-key-file={}", file("sa.pub")),
            format!("--service-account-signing-key-file={}", file("sa.key")),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
        ];
        let gangplank = [
            "serve".into(),
            format!("--addr=127.0.0.1:{webhook_port}"),
            format!("--tls-cert={}", pem(&webhook_tls, "tls.crt")),
            format!("--tls-key={}", pem(&webhook_tls, "tls.key")),
            format!("--policies={}/policies", env!("CARGO_MANIFEST_DIR")),
        ];

        let client = reqwest::Client::builder()
            .tls_certs_only([read_ca(&api_tls), read_ca(&webhook_tls)])
            // HTTPS_PROXY in the environment must not capture loopback calls.
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("HTTP client");
        let env = Env {
            processes: Mutex::new(Vec::new()),
            api: format!("https://127.0.0.1:{api_port}"),
            webhook: format!("https://127.0.0.1:{webhook_port}"),
            client,
            dir,
        };

        env.spawn("etcd", Command::new(assets.join("etcd")).args(etcd));
        // gangplank starts alongside: nothing it does needs the apiserver.
        let binary = env!("CARGO_BIN_EXE_gangplank");
        let mut serve = Command::new(binary);
        env.spawn("gangplank", serve.args(gangplank).env("RUST_LOG", "info"));
        env.wait_healthy("etcd", &format!("{etcd_url}/health"))
            .await;
        let mut kube_apiserver = Command::new(assets.join("kube-apiserver"));
        env.spawn("kube-apiserver", kube_apiserver.args(apiserver));
        env.wait_healthy("gangplank", &format!("{}/readyz", env.webhook))
            .await;
        env.wait(
            "kube-apiserver /readyz",
            Duration::from_secs(90),
            || async {
                let (status, body) = env.api(Method::GET, "/readyz", None).await;
                expect(status, StatusCode::OK, &body)
            },
        )
        .await;
        env
    }

    fn spawn(&self, name: &'static str, command: &mut Command) {
        let process = Process::spawn(name, command, self.dir.path());
        self.processes.lock().expect("processes").push(process);
    }

    /// Polls `probe` until it is Ok, failing after `limit` (with the probe's last error) or
    /// as soon as a process exits.
    async fn wait<T, F, Fut>(&self, what: &str, limit: Duration, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let deadline = Instant::now() + limit;
        loop {
            for process in self.processes.lock().expect("processes").iter_mut() {
                process.assert_running();
            }
            match probe().await {
                Ok(value) => return value,
                Err(last) if Instant::now() >= deadline => {
                    panic!("timed out after {limit:?}: {what}; last: {last}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Waits for a 2xx from an unauthenticated health endpoint.
    async fn wait_healthy(&self, what: &str, url: &str) {
        self.wait(what, Duration::from_secs(30), || async {
            match self.client.get(url).send().await {
                Ok(response) if response.status().is_success() => Ok(()),
                Ok(response) => Err(response.status().to_string()),
                Err(e) => Err(error_chain(&e)),
            }
        })
        .await
    }

    /// One apiserver call with a JSON body (or none): the status and the JSON answer
    /// (`Value::Null` when it is not JSON, as for /readyz).
    async fn api(&self, method: Method, path: &str, body: Option<&Value>) -> (StatusCode, Value) {
        let body = body.map(|b| (b, "application/json"));
        self.request(method, path, body).await
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<(&Value, &str)>,
    ) -> (StatusCode, Value) {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.api))
            .bearer_auth(TOKEN)
            .header("Accept", "application/json");
        if let Some((body, content_type)) = body {
            let bytes = serde_json::to_vec(body).expect("JSON body");
            request = request.header("Content-Type", content_type).body(bytes);
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status();
                let bytes = response.bytes().await.unwrap_or_default();
                let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                (status, json)
            }
            // Connection refused while the apiserver starts: a status no case accepts.
            Err(e) => (StatusCode::SERVICE_UNAVAILABLE, json!(error_chain(&e))),
        }
    }

    async fn create_job(&self, namespace: &str, job: &Value, query: &str) -> (StatusCode, Value) {
        let path = format!("/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs{query}");
        self.api(Method::POST, &path, Some(job)).await
    }

    async fn get_job(&self, namespace: &str, name: &str) -> (StatusCode, Value) {
        self.api(Method::GET, &job_path(namespace, name), None)
            .await
    }

    async fn install_crds(&self, dir: &Path) {
        for plural in CRDS {
            let path = dir.join(format!("kubeflow.org_{plural}.yaml"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let crd: Value = yaml_serde::from_str(&text).expect("CRD YAML");
            let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
            let (status, answer) = self.api(Method::POST, crds, Some(&crd)).await;
            assert_eq!(status, StatusCode::CREATED, "install {plural}: {answer}");
            let established = format!("CRD {plural} established");
            self.wait(&established, Duration::from_secs(30), || async {
                let path = format!("{crds}/{plural}.kubeflow.org");
                let (_, crd) = self.api(Method::GET, &path, None).await;
                let conditions = crd["status"]["conditions"].as_array().cloned();
                let established = conditions
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True");
                established
                    .then_some(())
                    .ok_or_else(|| crd["status"].to_string())
            })
            .await;
        }
    }

    async fn create_namespace(&self, name: &str) {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let (status, answer) = self
            .api(Method::POST, "/api/v1/namespaces", Some(&namespace))
            .await;
        assert_eq!(status, StatusCode::CREATED, "namespace {name}: {answer}");
        // Discovery lags "Established" a little: wait until the jobs are served here.
        self.wait("pytorchjobs served", Duration::from_secs(30), || async {
            let path = format!("/apis/kubeflow.org/v1/namespaces/{name}/pytorchjobs");
            let (status, body) = self.api(Method::GET, &path, None).await;
            expect(status, StatusCode::OK, &body)
        })
        .await;
    }

    /// The configurations of deploy/webhooks.yaml, pointed at the local server. The
    /// apiserver reads them through an informer, so wait until both are seen to act.
    async fn install_webhooks(&self) {
        use base64::Engine as _;
        let ca = std::fs::read(self.dir.path().join("webhook-tls/ca.crt")).expect("ca.crt");
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca);
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/webhooks.yaml");
        let text = std::fs::read_to_string(&path).expect("deploy/webhooks.yaml");
        for document in yaml_serde::Deserializer::from_str(&text) {
            let mut configuration: Value =
                serde::Deserialize::deserialize(document).expect("webhook configuration YAML");
            let resource = match configuration["kind"].as_str() {
                Some("MutatingWebhookConfiguration") => "mutatingwebhookconfigurations",
                Some("ValidatingWebhookConfiguration") => "validatingwebhookconfigurations",
                other => panic!("unexpected {other:?} in deploy/webhooks.yaml"),
            };
            for hook in configuration["webhooks"].as_array_mut().expect("webhooks") {
                let endpoint = hook["clientConfig"]["service"]["path"].clone();
                let url = format!("{}{}", self.webhook, endpoint.as_str().expect("path"));
                hook["clientConfig"] = json!({"url": url, "caBundle": ca_bundle});
            }
            let path = format!("/apis/admissionregistration.k8s.io/v1/{resource}");
            let (status, answer) = self.api(Method::POST, &path, Some(&configuration)).await;
            assert_eq!(status, StatusCode::CREATED, "install {resource}: {answer}");
        }

        self.wait("both webhooks active", Duration::from_secs(30), || async {
            let valid = pytorch_job("e2e-probe", 1);
            let (_, mutated) = self.create_job(NAMESPACE, &valid, "?dryRun=All").await;
            let spec = &mutated["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"];
            if spec["schedulerName"] != "volcano" {
                return Err(format!("not mutated yet: {mutated}"));
            }
            let invalid = pytorch_job("e2e-probe", 2);
            let (status, body) = self.create_job(NAMESPACE, &invalid, "?dryRun=All").await;
            expect(status, StatusCode::FORBIDDEN, &body)
        })
        .await;
    }
}

/// Ports the OS reports free now. Another process could take one before the servers bind
/// it; rare on loopback, and the failure would name the port.
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().expect("local addr").port())
}

/// `gangplank certs --out DIR --dns NAME...`: ca.crt, tls.crt, tls.key in `dir`.
fn certs(dir: &Path, names: &[&str]) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gangplank"));
    command.arg("certs").arg("--out").arg(dir);
    for name in names {
        command.arg("--dns").arg(name);
    }
    let output = command.output().expect("run gangplank certs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "gangplank certs: {stderr}");
}

/// "error sending request" alone does not say refused, reset or a certificate problem.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

fn read_ca(dir: &Path) -> reqwest::Certificate {
    let pem = std::fs::read(dir.join("ca.crt")).expect("ca.crt");
    reqwest::Certificate::from_pem(&pem).expect("CA certificate PEM")
}
