//! gangplank's webhooks in front of a test control plane, installed from deploy/ itself.
//!
//! `kubectl kustomize deploy/` renders the configurations users apply; only the Service
//! reference is swapped for `https://127.0.0.1:PORT/<path>` (no cluster network runs here)
//! and the caBundle is set, so every other setting (rules, matchPolicy, namespaceSelector,
//! failurePolicy, timeouts) is exercised as shipped.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::control_plane::{free_ports, gangplank_certs, FIELD_MANAGER};
use super::process::Process;
use super::{jobs, ControlPlane, Crds};

pub struct Webhooks {
    /// `https://127.0.0.1:PORT` of `gangplank serve`.
    pub url: String,
    pub policies: PathBuf,
    /// The CA of the server's certificate, PEM.
    pub ca_pem: Vec<u8>,
    server: Process,
}

impl Webhooks {
    /// The shipped policies' webhooks on a shared control plane, installed once per control
    /// plane and test binary.
    pub fn shared(control_plane: &'static ControlPlane) -> &'static Webhooks {
        static INSTALLED: Mutex<Vec<(String, &'static Webhooks)>> = Mutex::new(Vec::new());
        // Held during the install: a second test waits for the first one's server.
        let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, webhooks)) = installed.iter().find(|(url, _)| *url == control_plane.url) {
            return webhooks;
        }
        let policies = super::repo().join("policies");
        let webhooks = super::on_own_runtime(move || Webhooks::install(control_plane, policies));
        let webhooks: &'static Webhooks = Box::leak(Box::new(webhooks));
        installed.push((control_plane.url.clone(), webhooks));
        webhooks
    }

    /// Starts `gangplank serve --policies <policies>` and installs the configurations of
    /// deploy/ on `control_plane`, waiting until the apiserver calls both webhooks.
    pub async fn install(control_plane: &ControlPlane, policies: PathBuf) -> Webhooks {
        Webhooks::install_scoped(control_plane, policies, None).await
    }

    /// As [`Webhooks::install_scoped`], with deploy/'s `components` (e.g. `kueue`) added to
    /// the rendering, as a user includes them in their kustomization.
    pub async fn install_with_components(
        control_plane: &ControlPlane,
        policies: PathBuf,
        only: Option<&str>,
        components: &[&str],
    ) -> Webhooks {
        let [port] = free_ports();
        let webhooks =
            Webhooks::start_rendered(control_plane, policies, only, port, &[], components).await;
        let client = control_plane.client().await;
        webhooks
            .wait_active(&client, only.unwrap_or("default"))
            .await;
        webhooks
    }

    /// As [`Webhooks::install`]; with `only`, the configurations are renamed `<name>-<only>`
    /// and match that one namespace instead of deploy/'s selector, so that a second server
    /// can sit beside deploy/'s own (a baseline for the latency benchmark, say).
    pub async fn install_scoped(
        control_plane: &ControlPlane,
        policies: PathBuf,
        only: Option<&str>,
    ) -> Webhooks {
        // Per server: a control plane may see more than one (the latency benchmark).
        let [port] = free_ports();
        let webhooks = Webhooks::start_scoped(control_plane, policies, only, port, &[]).await;
        let client = control_plane.client().await;
        webhooks
            .wait_active(&client, only.unwrap_or("default"))
            .await;
        webhooks
    }

    /// Starts `gangplank serve` on `port` with `flags` added (`--client-ca=...`, say) and
    /// installs deploy/'s configurations pointing at it, scoped as
    /// [`Webhooks::install_scoped`] says, without waiting until the apiserver calls it (a
    /// test of a server the apiserver cannot call waits for that instead).
    pub async fn start_scoped(
        control_plane: &ControlPlane,
        policies: PathBuf,
        only: Option<&str>,
        port: u16,
        flags: &[String],
    ) -> Webhooks {
        Webhooks::start_rendered(control_plane, policies, only, port, flags, &[]).await
    }

    async fn start_rendered(
        control_plane: &ControlPlane,
        policies: PathBuf,
        only: Option<&str>,
        port: u16,
        flags: &[String],
        components: &[&str],
    ) -> Webhooks {
        let dir = control_plane.dir.path();
        let tls = dir.join(format!("webhook-{port}-tls"));
        gangplank_certs(&tls, &["127.0.0.1"]);
        let mut args = serve_args(port, &tls, &policies);
        args.extend_from_slice(flags);
        let name = format!("gangplank-{port}");
        // As in a cluster: the server can read the API (its Node/Queue inventory).
        let kubeconfig = control_plane.kubeconfig.display().to_string();
        let env = [("KUBECONFIG", kubeconfig.as_str())];
        let server = Process::spawn_with_env(&name, super::gangplank(), &args, &env, dir);
        let ca = std::fs::read(tls.join("ca.crt")).expect("webhook ca.crt");
        let webhooks = Webhooks {
            url: format!("https://127.0.0.1:{port}"),
            policies,
            ca_pem: ca.clone(),
            server,
        };
        let client = control_plane.client().await;
        for configuration in render_deploy(control_plane, components) {
            let mut configuration = webhooks.point_at_self(configuration, &ca);
            if let Some(namespace) = only {
                scope_to(&mut configuration, namespace);
            }
            apply(&client, configuration).await;
        }
        webhooks
    }

    /// Kills `gangplank serve` (as a crash or an outage would); its webhook configurations
    /// stay registered, so the apiserver's calls to it fail.
    pub fn stop(&mut self) {
        self.server.stop();
    }

    /// The server's resident set size in KiB and the CPU time it used, from /proc.
    pub fn usage(&self) -> (Option<u64>, Option<Duration>) {
        (self.server.server_rss_kib(), self.server.server_cpu())
    }

    /// The server's `/metrics` (Prometheus text).
    pub async fn metrics(&self) -> String {
        let response = self
            .https()
            .get(format!("{}/metrics", self.url))
            .send()
            .await;
        let response = response.expect("GET /metrics");
        response.text().await.expect("metrics text")
    }

    /// Waits until the server's `/readyz` answers 200 (it answers clients without a
    /// certificate too).
    pub async fn wait_ready(&self) {
        let client = self.https();
        super::wait_for("gangplank serve ready", Duration::from_secs(60), || async {
            let response = client.get(format!("{}/readyz", self.url)).send().await;
            match response.map(|r| r.status()) {
                Ok(status) if status.is_success() => Ok(()),
                other => Err(format!("{other:?}; log tail:\n{}", self.server.tail(10))),
            }
        })
        .await
    }

    /// A client trusting the server's CA, presenting no certificate.
    fn https(&self) -> reqwest::Client {
        let ca = reqwest::Certificate::from_pem(&self.ca_pem).expect("CA PEM");
        reqwest::Client::builder()
            .tls_certs_only([ca])
            .no_proxy()
            .build()
            .expect("HTTP client")
    }

    /// The last lines of the server's log (its one JSON line per decision included).
    pub fn log_tail(&self, lines: usize) -> String {
        self.server.tail(lines)
    }

    fn point_at_self(&self, mut configuration: Value, ca: &[u8]) -> Value {
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca);
        let hooks = configuration["webhooks"]
            .as_array_mut()
            .expect("webhooks list");
        for hook in hooks {
            let path = hook["clientConfig"]["service"]["path"]
                .as_str()
                .expect("deploy/ webhooks call a Service path")
                .to_string();
            hook["clientConfig"] =
                json!({"url": format!("{}{path}", self.url), "caBundle": ca_bundle});
        }
        configuration
    }

    /// The apiserver reads webhook configurations through an informer: wait until one dry
    /// run reaches both webhooks (the server logs one line per decision).
    pub async fn wait_active(&self, client: &kube::Client, namespace: &str) {
        super::wait_for("both webhooks called", Duration::from_secs(60), || async {
            let tail = || format!("\ngangplank serve log tail:\n{}", self.server.tail(15));
            self.probe(client, namespace)
                .await
                .map_err(|why| format!("{why}{}", tail()))
        })
        .await
    }

    /// One dry run: did it reach both webhooks?
    async fn probe(&self, client: &kube::Client, namespace: &str) -> Result<(), String> {
        let before = self.decisions();
        let probe = jobs::pytorch_job("webhook-probe", 1);
        jobs::create(client, namespace, &probe, true)
            .await
            .map_err(|e| e.to_string())?;
        let calls = self.decisions() - before;
        (calls >= 2)
            .then_some(())
            .ok_or_else(|| format!("{calls} of the 2 webhooks called"))
    }

    /// The server's decision log lines (JSON) for requests in `namespace`, oldest first:
    /// `span` holds endpoint, operation, object_name; `fields` the decision.
    pub fn decisions_in(&self, namespace: &str) -> Vec<Value> {
        self.server
            .log_text()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["fields"]["message"] == "admission decision")
            .filter(|line| line["span"]["namespace"] == namespace)
            .collect()
    }

    fn decisions(&self) -> usize {
        self.server.log_text().matches("admission decision").count()
    }
}

/// Renames `configuration` after `namespace` and makes each webhook match only it.
fn scope_to(configuration: &mut Value, namespace: &str) {
    let name = configuration["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    configuration["metadata"]["name"] = format!("{name}-{namespace}").into();
    let selector = json!({"matchLabels": {"kubernetes.io/metadata.name": namespace}});
    let hooks = configuration["webhooks"]
        .as_array_mut()
        .expect("webhooks list");
    for hook in hooks {
        hook["namespaceSelector"] = selector.clone();
    }
}

fn serve_args(port: u16, tls: &Path, policies: &Path) -> Vec<String> {
    vec![
        "serve".into(),
        format!("--addr=127.0.0.1:{port}"),
        format!("--tls-cert={}", tls.join("tls.crt").display()),
        format!("--tls-key={}", tls.join("tls.key").display()),
        format!("--policies={}", policies.display()),
        "--log-format=json".into(),
    ]
}

/// The webhook configurations of `kubectl kustomize deploy/` with `components` (and, on a
/// control plane with the Trainer's CRDs, the `deploy/trainer` component, as its kustomization
/// tells users).
fn render_deploy(control_plane: &ControlPlane, components: &[&str]) -> Vec<Value> {
    let mut all: Vec<&str> = components.to_vec();
    if control_plane.crds == Crds::Trainer {
        all.push("trainer");
    }
    let dir = if all.is_empty() {
        super::repo().join("deploy")
    } else {
        // kustomize takes relative paths only: an overlay at a fixed depth in the repo.
        let overlay = super::repo()
            .join("target/test-overlays")
            .join(all.join("+"));
        std::fs::create_dir_all(&overlay).expect("create overlay dir");
        let components: Vec<String> = all.iter().map(|c| format!("../../../deploy/{c}")).collect();
        let kustomization = format!(
            "resources: [../../../deploy]\ncomponents: [{}]\n",
            components.join(", ")
        );
        std::fs::write(overlay.join("kustomization.yaml"), kustomization).expect("write overlay");
        overlay
    };
    let output = std::process::Command::new(control_plane.assets.kubectl())
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("run kubectl kustomize");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "kubectl kustomize deploy/: {stderr}"
    );
    let text = String::from_utf8(output.stdout).expect("kustomize output is UTF-8");
    let configurations: Vec<Value> = yaml_serde::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("kustomize output is YAML"))
        .filter(|doc: &Value| {
            let kind = doc["kind"].as_str().unwrap_or_default();
            kind.ends_with("WebhookConfiguration")
        })
        .collect();
    assert_eq!(
        configurations.len(),
        2,
        "deploy/ renders a mutating and a validating configuration"
    );
    configurations
}

async fn apply(client: &kube::Client, configuration: Value) {
    let kind = configuration["kind"].as_str().expect("kind").to_string();
    let name = configuration["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    let resource = ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        plural: format!("{}s", kind.to_lowercase()),
        kind,
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(&configuration))
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}
