//! A real OCI registry for the digest-pinning tests: Debian's `docker-registry` (CNCF
//! distribution 2.8) on 127.0.0.1, a random port and temporary storage, with images pushed
//! over the registry HTTP API (no docker, no skopeo).
//!
//! Entry points: [`binary`] (the registry, or why the suites skip), [`Registry::start`]
//! (open, htpasswd or token auth), [`Registry::push_image`] and [`Registry::push_manifest`];
//! [`TokenServer`]: the Bearer realm for a registry configured with `auth: token:`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use base64::Engine as _;
use serde_json::{json, Value};

use super::control_plane::free_ports;
use super::process::Process;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// `/usr/bin/docker-registry` (or `GANGPLANK_DOCKER_REGISTRY`), or why it is not usable.
pub fn binary() -> Result<PathBuf, String> {
    let path = std::env::var_os("GANGPLANK_DOCKER_REGISTRY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/docker-registry"));
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no registry binary at {} (install Debian's docker-registry package: apt-get install docker-registry; .ci/run does)",
            path.display()
        ))
    }
}

/// How the registry checks who pulls.
pub enum Auth {
    Open,
    Htpasswd { user: String, password: String },
    Token(Arc<TokenServer>),
}

pub struct Registry {
    /// `127.0.0.1:PORT`: the registry part of image references.
    pub host: String,
    auth: Auth,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
    process: Option<Process>,
}

impl Registry {
    /// Starts a registry and waits until it answers `/v2/`.
    pub async fn start(auth: Auth) -> Registry {
        let binary = binary().expect("docker-registry binary");
        let dir = tempfile::tempdir().expect("temp dir");
        let [port] = free_ports();
        let host = format!("127.0.0.1:{port}");
        let auth_config = match &auth {
            Auth::Open => String::new(),
            Auth::Htpasswd { user, password } => {
                let hash = bcrypt::hash(password, 4).expect("bcrypt");
                let file = dir.path().join("htpasswd");
                std::fs::write(&file, format!("{user}:{hash}\n")).expect("write htpasswd");
                format!(
                    "auth:\n  htpasswd:\n    realm: gangplank-test\n    path: {}\n",
                    file.display()
                )
            }
            Auth::Token(server) => {
                let bundle = dir.path().join("token-ca.crt");
                std::fs::write(&bundle, &server.cert_pem).expect("write cert bundle");
                format!(
                    "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    rootcertbundle: {}\n",
                    server.realm(),
                    TokenServer::SERVICE,
                    TokenServer::ISSUER,
                    bundle.display()
                )
            }
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\n{auth_config}",
            dir.path().join("data").display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).expect("write registry config");
        let args = vec!["serve".to_string(), config_path.display().to_string()];
        let process = Process::spawn(&format!("registry-{port}"), &binary, &args, dir.path());
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("HTTP client");
        let registry = Registry {
            host,
            auth,
            http,
            _dir: dir,
            process: Some(process),
        };
        registry.wait_ready().await;
        registry
    }

    /// Stops the registry: lookups then meet a closed port.
    pub fn stop(&mut self) {
        self.process.take();
    }

    /// `127.0.0.1:PORT/<repo>:<tag>`.
    pub fn image(&self, repo: &str, tag: &str) -> String {
        format!("{}/{repo}:{tag}", self.host)
    }

    async fn wait_ready(&self) {
        let url = format!("http://{}/v2/", self.host);
        super::wait_for("registry answers /v2/", Duration::from_secs(30), || async {
            match self.http.get(&url).send().await {
                Ok(r) if r.status().is_success() || r.status() == 401 => Ok(()),
                Ok(r) => Err(format!("status {}", r.status())),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
    }

    fn authorize(&self, request: reqwest::RequestBuilder, repo: &str) -> reqwest::RequestBuilder {
        match &self.auth {
            Auth::Open => request,
            Auth::Htpasswd { user, password } => request.basic_auth(user, Some(password)),
            Auth::Token(server) => request.bearer_auth(server.mint(repo, &["pull", "push"])),
        }
    }

    /// Uploads `bytes` as a blob (POST a session, PUT with its digest); returns the digest.
    pub async fn push_blob(&self, repo: &str, bytes: &[u8]) -> String {
        let digest = sha256(bytes);
        let url = format!("http://{}/v2/{repo}/blobs/uploads/", self.host);
        let started = self.authorize(self.http.post(url), repo).send().await;
        let started = started.expect("start upload");
        assert_eq!(
            started.status(),
            202,
            "start upload: {:?}",
            started.text().await
        );
        let location = started.headers()["location"]
            .to_str()
            .expect("location")
            .to_string();
        let location = if location.starts_with('/') {
            format!("http://{}{location}", self.host)
        } else {
            location
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        let url = format!("{location}{separator}digest={digest}");
        let put = self
            .authorize(self.http.put(url), repo)
            .body(bytes.to_vec());
        let put = put.send().await.expect("upload blob");
        assert_eq!(put.status(), 201, "upload blob: {:?}", put.text().await);
        digest
    }

    /// PUTs `bytes` as the manifest `reference` (a tag); returns the digest the registry
    /// reports, after checking it is the sha256 of the bytes sent.
    pub async fn push_manifest(
        &self,
        repo: &str,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> String {
        let url = format!("http://{}/v2/{repo}/manifests/{reference}", self.host);
        let put = self
            .authorize(self.http.put(url), repo)
            .header("content-type", media_type)
            .body(bytes.to_vec());
        let put = put.send().await.expect("put manifest");
        let status = put.status();
        let digest = put
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert_eq!(status, 201, "put manifest: {:?}", put.text().await);
        assert_eq!(
            digest,
            sha256(bytes),
            "the registry's digest is the sha256 of the bytes"
        );
        digest
    }

    /// A single-platform image (config + one layer, `seed` making it unique) as an OCI or
    /// Docker v2 manifest under `repo:tag`; returns the manifest's bytes and digest.
    pub async fn push_image(
        &self,
        repo: &str,
        tag: &str,
        media_type: &str,
        seed: &str,
    ) -> (Vec<u8>, String) {
        let bytes = self.image_manifest(repo, media_type, seed).await;
        let digest = self.push_manifest(repo, tag, media_type, &bytes).await;
        (bytes, digest)
    }

    async fn image_manifest(&self, repo: &str, media_type: &str, seed: &str) -> Vec<u8> {
        let (config_type, layer_type) = if media_type == OCI_MANIFEST {
            (
                "application/vnd.oci.image.config.v1+json",
                "application/vnd.oci.image.layer.v1.tar+gzip",
            )
        } else {
            (
                "application/vnd.docker.container.image.v1+json",
                "application/vnd.docker.image.rootfs.diff.tar.gzip",
            )
        };
        let config = json!({"architecture": "amd64", "os": "linux", "seed": seed}).to_string();
        let layer = format!("layer of {seed}");
        let config_digest = self.push_blob(repo, config.as_bytes()).await;
        let layer_digest = self.push_blob(repo, layer.as_bytes()).await;
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": media_type,
            "config": {"mediaType": config_type, "size": config.len(), "digest": config_digest},
            "layers": [{"mediaType": layer_type, "size": layer.len(), "digest": layer_digest}],
        });
        serde_json::to_vec_pretty(&manifest).expect("JSON")
    }

    /// A multi-arch image: amd64 and arm64 children pushed by digest, then an OCI index or a
    /// Docker manifest list (`list_type`) under `repo:tag`. Returns (index digest, children).
    pub async fn push_multi_arch(
        &self,
        repo: &str,
        tag: &str,
        list_type: &str,
    ) -> (String, Vec<String>) {
        let child_type = if list_type == OCI_INDEX {
            OCI_MANIFEST
        } else {
            DOCKER_MANIFEST
        };
        let mut entries = Vec::new();
        let mut children = Vec::new();
        for arch in ["amd64", "arm64"] {
            let bytes = self
                .image_manifest(repo, child_type, &format!("{repo}-{tag}-{arch}"))
                .await;
            let digest = sha256(&bytes);
            self.push_manifest(repo, &digest, child_type, &bytes).await;
            entries.push(json!({
                "mediaType": child_type, "size": bytes.len(), "digest": digest,
                "platform": {"architecture": arch, "os": "linux"},
            }));
            children.push(digest);
        }
        let index = json!({"schemaVersion": 2, "mediaType": list_type, "manifests": entries});
        let bytes = serde_json::to_vec(&index).expect("JSON");
        (
            self.push_manifest(repo, tag, list_type, &bytes).await,
            children,
        )
    }

    /// The registry's log (for assertion messages).
    pub fn log_tail(&self, lines: usize) -> String {
        self.process
            .as_ref()
            .map(|p| p.tail(lines))
            .unwrap_or_default()
    }
}

pub fn sha256(bytes: &[u8]) -> String {
    gangplank::images::digest::sha256(bytes)
}

/// The Bearer realm of a registry configured with `auth: token:`: issues ES256 JWTs whose
/// x5c certificate is the one in the registry's `rootcertbundle`, granting what the scope
/// asks; counts the tokens it issued.
pub struct TokenServer {
    pub addr: SocketAddr,
    pub cert_pem: String,
    cert_der: Vec<u8>,
    key: EcdsaKeyPair,
    /// Requests answered with a token.
    pub issued: AtomicUsize,
    /// When set, token requests must carry these Basic credentials.
    pub require: Option<(String, String)>,
}

impl TokenServer {
    pub const SERVICE: &'static str = "gangplank-test-registry";
    pub const ISSUER: &'static str = "gangplank-test-issuer";

    /// Serves `GET /token?scope&service` on 127.0.0.1 until the test ends.
    pub async fn start(require: Option<(String, String)>) -> Arc<TokenServer> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let params =
            rcgen::CertificateParams::new(vec!["token-issuer".to_string()]).expect("params");
        let cert = params.self_signed(&key).expect("certificate");
        let signing =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &key.serialize_der())
                .expect("signing key");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let server = Arc::new(TokenServer {
            addr: listener.local_addr().expect("addr"),
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            key: signing,
            issued: AtomicUsize::new(0),
            require,
        });
        let state = Arc::clone(&server);
        let app = axum::Router::new()
            .route("/token", axum::routing::get(token))
            .with_state(state);
        tokio::spawn(async move { axum::serve(listener, app).await });
        server
    }

    pub fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// A JWT the registry accepts for `actions` on `repo`.
    pub fn mint(&self, repo: &str, actions: &[&str]) -> String {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let header = json!({
            "typ": "JWT", "alg": "ES256",
            "x5c": [base64::engine::general_purpose::STANDARD.encode(&self.cert_der)],
        });
        let claims = json!({
            "iss": Self::ISSUER, "sub": "tester", "aud": Self::SERVICE,
            "exp": now + 300, "nbf": now - 10, "iat": now, "jti": format!("{now}-{repo}-{}", self.issued.load(Ordering::SeqCst)),
            "access": [{"type": "repository", "name": repo, "actions": actions}],
        });
        let signing_input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let signature = self
            .key
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .expect("sign");
        format!("{signing_input}.{}", b64(signature.as_ref()))
    }
}

async fn token(
    axum::extract::State(server): axum::extract::State<Arc<TokenServer>>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Some((user, password)) = &server.require {
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        let given = headers.get("authorization").and_then(|v| v.to_str().ok());
        if given != Some(expected.as_str()) {
            return (axum::http::StatusCode::UNAUTHORIZED, "bad credentials").into_response();
        }
    }
    // scope=repository:<name>:pull
    let query = query.unwrap_or_default();
    let scope = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("scope="))
        .map(|s| s.replace("%3A", ":").replace("%2F", "/"))
        .unwrap_or_default();
    let repo = scope
        .strip_prefix("repository:")
        .and_then(|s| s.rsplit_once(':'))
        .map(|(name, _)| name.to_string())
        .unwrap_or_default();
    server.issued.fetch_add(1, Ordering::SeqCst);
    let token = server.mint(&repo, &["pull"]);
    let body = json!({"token": token, "expires_in": 300}).to_string();
    ([("content-type", "application/json")], body).into_response()
}

/// Resolution on, allowed to call only `host` (a registry on 127.0.0.1), over plain HTTP.
pub fn settings_for_host(host: &str) -> gangplank::images::Settings {
    gangplank::images::Settings {
        enabled: true,
        allowed_registries: vec![host.to_string()],
        plain_http_registries: vec![host.to_string()],
        ..gangplank::images::Settings::default()
    }
}

/// A policy set: the shipped policies with `imageResolution` set to `settings`.
pub fn policies_with(settings: gangplank::images::Settings) -> gangplank::policy::PolicySet {
    let mut sources =
        gangplank::policy::load::PolicySources::read_dir(&super::repo().join("policies"))
            .expect("read policies");
    sources.params.image_resolution = Some(settings);
    gangplank::policy::PolicySet::compile(sources).expect("compile policies")
}

/// A PyTorchJob whose Master runs `master` and Workers run `worker`.
pub fn job_with_images(master: &str, worker: &str) -> Value {
    let template =
        |image: &str| json!({"spec": {"containers": [{"name": "pytorch", "image": image}]}});
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "pinned", "namespace": "team-a"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template(master)},
            "Worker": {"replicas": 2, "template": template(worker)},
        }},
    })
}

/// A PyTorchJob whose Master runs one container per image.
pub fn job_running(images: &[String]) -> Value {
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "many", "namespace": "team-a"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": containers}}},
        }},
    })
}

/// What the webhooks decide for `job` with `pinner` (handler.rs's order: pin, review, add
/// the failed lookups).
pub async fn review_pinned(
    set: &gangplank::policy::PolicySet,
    pinner: &gangplank::images::Pinner,
    job: Value,
) -> gangplank::review::Decision {
    let mut input = gangplank::review::Input::create(job, "default");
    let pinning = pinner.pin(set, &mut input).await;
    let mut decision = gangplank::review::review(set, &input).expect("policies evaluate");
    decision.add_violations(gangplank::images::pin::failure_violations(&pinning, &input));
    decision
}

/// The image of the first container of replica `replica` in the mutated job.
pub fn image_of(decision: &gangplank::review::Decision, replica: &str) -> String {
    let pointer = format!("/spec/pytorchReplicaSpecs/{replica}/template/spec/containers/0/image");
    decision
        .mutated
        .pointer(&pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Messages of the `images` policy's findings.
pub fn image_findings(decision: &gangplank::review::Decision) -> Vec<String> {
    decision
        .violations
        .iter()
        .filter(|v| v.policy == "images")
        .map(|v| format!("{} {}", v.action, v.msg))
        .collect()
}

/// The e2e suites' requirement: the registry binary.
pub fn requirement() -> Result<(), String> {
    binary().map(drop)
}

/// A copy of the shipped policy directory whose params.yaml has `imageResolution: settings`.
pub fn policies_dir_with(settings: &gangplank::images::Settings) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    write_policies_dir(settings, dir.path());
    dir
}

/// The shipped policies in `dir`, pinning images against `registry` (plain HTTP, 2 s budget),
/// as the webhook suites run them.
pub fn pinning_policies(registry: &Registry, dir: &std::path::Path) {
    write_policies_dir(
        &gangplank::images::Settings {
            budget: std::time::Duration::from_secs(2),
            ..settings_for_host(&registry.host)
        },
        dir,
    );
}

/// The shipped policies in `dir`, with params.yaml edited by `edit` (as JSON).
pub fn policies_with_params(dir: &std::path::Path, edit: impl FnOnce(&mut serde_json::Value)) {
    copy_dir(&super::repo().join("policies"), dir);
    let params_path = dir.join("params.yaml");
    let text = std::fs::read_to_string(&params_path).expect("read params.yaml");
    let mut params: serde_json::Value = yaml_serde::from_str(&text).expect("params YAML");
    edit(&mut params);
    let text = yaml_serde::to_string(&params).expect("params YAML");
    std::fs::write(&params_path, text).expect("write params.yaml");
}

/// Writes the shipped policies to `dir`, with `imageResolution: settings` in params.yaml.
pub fn write_policies_dir(settings: &gangplank::images::Settings, dir: &std::path::Path) {
    copy_dir(&super::repo().join("policies"), dir);
    let params_path = dir.join("params.yaml");
    let text = std::fs::read_to_string(&params_path).expect("read params.yaml");
    let mut params = gangplank::policy::ParamsFile::parse(&text, "params.yaml").expect("params");
    params.image_resolution = Some(settings.clone());
    let text = yaml_serde::to_string(&params).expect("params YAML");
    std::fs::write(&params_path, text).expect("write params.yaml");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// One request a [`Recorder`] received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// The `Authorization` header, if one was sent.
    pub authorization: Option<String>,
}

/// A stand-in host on 127.0.0.1 (a registry that misbehaves on purpose, or an internal
/// endpoint such as a cloud metadata service) that answers every request with `answer` and
/// records what it was asked.
pub struct Recorder {
    /// `127.0.0.1:PORT`.
    pub host: String,
    seen: Arc<std::sync::Mutex<Vec<Seen>>>,
}

impl Recorder {
    /// Serves until the test's runtime ends.
    pub async fn start<F>(answer: F) -> Recorder
    where
        F: Fn(&axum::http::Request<axum::body::Body>) -> axum::response::Response
            + Clone
            + Send
            + Sync
            + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let host = listener.local_addr().expect("addr").to_string();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let app =
            axum::Router::new().fallback(move |request: axum::http::Request<axum::body::Body>| {
                let (answer, log) = (answer.clone(), Arc::clone(&log));
                async move {
                    let authorization = request
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    log.lock().expect("log").push(Seen {
                        method: request.method().to_string(),
                        uri: request.uri().to_string(),
                        authorization,
                    });
                    answer(&request)
                }
            });
        tokio::spawn(async move { axum::serve(listener, app).await });
        Recorder { host, seen }
    }

    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("log").clone()
    }

    pub fn hits(&self) -> usize {
        self.seen().len()
    }
}

/// An answer: `status` with `headers` and `body`.
pub fn answer(status: u16, headers: &[(&str, String)], body: &str) -> axum::response::Response {
    let mut builder = axum::http::Response::builder().status(status);
    for (name, value) in headers {
        builder = builder.header(*name, value.as_str());
    }
    builder
        .body(axum::body::Body::from(body.to_string()))
        .expect("response")
}
