//! Kueue and scheduler-plugins' Coscheduling beside a test control plane: where their
//! binaries, CRDs and configuration are, and the requirement of the suites that run them.
//!
//! Entry points: [`find`] says where the assets are; [`requirement`] (Kueue's suites) and
//! [`coscheduling_requirement`] (the Coscheduling suites) for a suite's harness, which skips
//! every test with the reason printed when the assets are not on the machine.
//!
//! The assets are built once per machine, offline, by
//! `../shared/tools/kueue/kueue-test-assets.sh` into `~/.cache/kube-test-assets/kueue-v<version>/`
//! (or the directory `KUEUE_ASSETS` names): `bin/kueue-manager` (Kueue v0.19.2),
//! `bin/kube-scheduler` (kube-scheduler v1.36.2 with the Coscheduling plugin),
//! `crds/kueue/*.yaml`, `crds/scheduler-plugins/scheduling.x-k8s.io_podgroups.yaml`,
//! `conf/kueue/` (Kueue's config/components) and `conf/coscheduling-scheduler-config.yaml`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ControlPlane;

const HOW_TO_GET: &str = "build them once with ../shared/tools/kueue/kueue-test-assets.sh \
    (MIRROR=<dir of the fetched kubernetes-sigs/kueue, kubernetes-sigs/scheduler-plugins, \
    openshift/microshift and patrickmn/go-cache git trees>; about 40 minutes on 2 cores; it \
    prints `export KUEUE_ASSETS=...`), or put Kueue v0.19.2's kueue-manager and a \
    kube-scheduler with scheduler-plugins' Coscheduling plugin in DIR/bin, Kueue's CRDs \
    (config/components/crd/bases) in DIR/crds/kueue, scheduler-plugins' \
    manifests/crds/scheduling.x-k8s.io_podgroups.yaml in DIR/crds/scheduler-plugins and its \
    manifests/coscheduling/scheduler-config.yaml in DIR/conf/coscheduling-scheduler-config.yaml, \
    and set KUEUE_ASSETS=DIR";

/// A Kueue assets directory (see the module doc).
#[derive(Debug, Clone)]
pub struct KueueAssets {
    pub dir: PathBuf,
}

impl KueueAssets {
    pub fn manager(&self) -> PathBuf {
        self.dir.join("bin/kueue-manager")
    }

    /// kube-scheduler v1.36.2 built with the Coscheduling plugin registered.
    pub fn coscheduling_scheduler(&self) -> PathBuf {
        self.dir.join("bin/kube-scheduler")
    }

    /// Kueue's CRDs, one file each.
    pub fn kueue_crds(&self) -> PathBuf {
        self.dir.join("crds/kueue")
    }

    /// scheduler-plugins' `scheduling.x-k8s.io` PodGroup CRD.
    pub fn pod_group_crd(&self) -> PathBuf {
        self.dir
            .join("crds/scheduler-plugins/scheduling.x-k8s.io_podgroups.yaml")
    }

    /// Upstream's sample KubeSchedulerConfiguration for Coscheduling (its kubeconfig path is
    /// a placeholder, `REPLACE_ME_WITH_KUBE_CONFIG_PATH`).
    pub fn coscheduling_conf(&self) -> PathBuf {
        self.dir.join("conf/coscheduling-scheduler-config.yaml")
    }

    /// Kueue's `config/components` (manager configuration, RBAC, webhook manifests).
    pub fn kueue_conf(&self) -> PathBuf {
        self.dir.join("conf/kueue")
    }

    fn missing(&self) -> Option<String> {
        let needed = [
            self.manager(),
            self.coscheduling_scheduler(),
            self.pod_group_crd(),
            self.coscheduling_conf(),
            self.kueue_crds().join("kueue.x-k8s.io_clusterqueues.yaml"),
            self.kueue_conf().join("webhook/manifests.yaml"),
        ];
        super::assets::missing_files(needed)
    }
}

/// The Kueue suites' requirement (see `harness`): kube-scheduler and
/// kube-controller-manager beside the control plane's binaries, and the Kueue assets.
pub fn requirement() -> Result<(), String> {
    super::assets::scheduler_requirement()?;
    find().map(drop)
}

/// The Coscheduling suites' requirement: kube-controller-manager (the garbage collector) and
/// the Kueue assets, which carry the Coscheduling kube-scheduler.
pub fn coscheduling_requirement() -> Result<(), String> {
    requirement()
}

/// `KUEUE_ASSETS`, else the newest complete `~/.cache/kube-test-assets/kueue-v*/`; `Err`
/// saying how to build them when there is none. Panics when `KUEUE_ASSETS` is set but lacks a
/// file (a broken set-up, and a skip would hide it), as `KUBEBUILDER_ASSETS` does.
pub fn find() -> Result<KueueAssets, String> {
    let missing = |dir: &Path| KueueAssets { dir: dir.into() }.missing();
    super::assets::find_versioned(
        "KUEUE_ASSETS",
        "kueue-",
        "bin/kueue-manager and bin/kube-scheduler",
        HOW_TO_GET,
        missing,
    )
    .map(|dir| KueueAssets { dir })
    .map_err(|why| format!("no Kueue: {why}"))
}

/// Kueue's controller-manager ServiceAccount, as Kueue's own manifests install it: the
/// username of every request Kueue makes (suspend flips, flavor selectors).
pub const NAMESPACE: &str = "kueue-system";
pub const SERVICE_ACCOUNT: &str = "kueue-controller-manager";

/// The integrations the suites enable (Kueue's `integrations.frameworks`).
/// TFJob for e2e_kueue_differential's jobs of three pod sets.
const FRAMEWORKS: [&str; 3] = ["kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "batch/job"];

/// Kueue's webhooks the suites register: those of the enabled integrations and of Kueue's own
/// kinds. The others (Deployments, Pods, Ray, ...) have no handler in a Kueue that does not
/// enable them, and with their failurePolicy Fail would refuse every such object.
fn registered(path: &str) -> bool {
    ["pytorchjob", "tfjob", "batch-v1-job", "kueue-x-k8s-io"]
        .iter()
        .any(|p| path.contains(p))
}

/// How long a ClusterQueue gets to turn Active and a job to get its Workload.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long kueue-manager gets to answer /readyz (about 5 s here).
const START_LIMIT: std::time::Duration = std::time::Duration::from_secs(90);

/// What the suites set in Kueue's Configuration.
#[derive(Debug, Clone, Default)]
pub struct KueueOptions {
    /// `waitForPodsReady.timeout` (e.g. `"15s"`): an admitted workload whose job is not
    /// Running by then is evicted and requeued. `None`: no waitForPodsReady, Kueue's default.
    pub wait_for_pods_ready: Option<&'static str>,
}

impl ControlPlane {
    /// Starts Kueue as a user installs it: its CRDs, namespace `kueue-system`, its
    /// ServiceAccount (bound to cluster-admin: the suites test gangplank beside Kueue, not
    /// Kueue's RBAC) whose token kueue-manager runs with, its webhooks registered for real
    /// (certificates of `gangplank certs`, the configurations of its own manifests pointed at
    /// `https://127.0.0.1:PORT`). Waits until it is ready and its webhooks answer.
    ///
    /// Kueue v0.19.2 without its internal certificate management reads its metrics
    /// certificate from the fixed path /etc/kueue/metrics/certs: it runs in a private mount
    /// namespace (`unshare -m`, root; `unshare -rm` otherwise) where an overlay on /etc holds
    /// one. The visibility server (fixed certificate path too) is off by its feature gate.
    pub async fn start_kueue(&self, options: &KueueOptions) {
        let assets = find().unwrap_or_else(|why| panic!("{why}"));
        self.install_kueue_crds(&assets);
        self.ensure_namespace(NAMESPACE).await;
        self.kueue_identity();
        let kubeconfig =
            self.service_account_kubeconfig(NAMESPACE, SERVICE_ACCOUNT, "kueue-kubeconfig");
        let [health, webhook] = super::control_plane::free_ports();
        // Per start: a restarted Kueue gets new certificates and ports.
        let certs = self.file(&format!("kueue-certs-{health}"));
        super::control_plane::gangplank_certs(&certs, &["127.0.0.1"]);
        let config = self.file(&format!("kueue-config-{health}.yaml"));
        std::fs::write(&config, kueue_config(health, webhook, &certs, options))
            .expect("write Kueue's configuration");
        let program = PathBuf::from("unshare");
        let etc = self.file(&format!("kueue-etc-{health}"));
        let args = kueue_args(&assets, &etc, &certs, &config, &kubeconfig);
        self.spawn("kueue-manager", &program, &args);
        self.wait_kueue_ready(health).await;
        self.register_kueue_webhooks(&assets, webhook, &certs).await;
    }

    fn install_kueue_crds(&self, assets: &KueueAssets) {
        let dir = assets.kueue_crds();
        let dir = dir.display().to_string();
        super::rbac::kubectl(self, &["apply", "--server-side", "-f", &dir]);
        super::rbac::kubectl(
            self,
            &[
                "wait",
                "--for=condition=established",
                "--timeout=60s",
                "-f",
                &dir,
            ],
        );
    }

    /// Kueue's ServiceAccount, bound to cluster-admin.
    fn kueue_identity(&self) {
        let account = serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        });
        let binding = serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "kueue-manager-tests"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                "namespace": NAMESPACE}],
        });
        for object in [account, binding] {
            self.kubectl_apply(None, &object, &[])
                .unwrap_or_else(|e| panic!("Kueue's identity: {e}"));
        }
    }

    /// Stops kueue-manager (SIGKILL, as a crash would); its webhook configurations stay.
    pub fn stop_kueue(&self) {
        self.stop("kueue-manager");
    }

    async fn wait_kueue_ready(&self, health: u16) {
        let url = format!("http://127.0.0.1:{health}/readyz");
        super::wait_for("kueue-manager /readyz", START_LIMIT, || async {
            self.check_running()?;
            let answer = reqwest::get(&url).await.map_err(|e| e.to_string())?;
            let status = answer.status();
            status.is_success().then_some(()).ok_or(format!("{status}"))
        })
        .await;
    }

    /// Kueue's own webhook manifests (config/components/webhook), the [`registered`] ones,
    /// pointed at kueue-manager with the CA of its certificate.
    async fn register_kueue_webhooks(&self, assets: &KueueAssets, port: u16, certs: &Path) {
        use base64::Engine as _;
        let path = assets.kueue_conf().join("webhook/manifests.yaml");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let ca = std::fs::read(certs.join("ca.crt")).expect("Kueue's ca.crt");
        let ca = base64::engine::general_purpose::STANDARD.encode(ca);
        for doc in yaml_serde::Deserializer::from_str(&text) {
            let mut configuration: Value =
                serde::Deserialize::deserialize(doc).expect("Kueue's webhook manifests are YAML");
            let name = configuration["metadata"]["name"]
                .as_str()
                .unwrap_or_default();
            configuration["metadata"]["name"] = format!("kueue-{name}").into();
            let hooks = configuration["webhooks"].as_array_mut().expect("webhooks");
            hooks.retain(|h| {
                registered(h["clientConfig"]["service"]["path"].as_str().unwrap_or(""))
            });
            for hook in hooks {
                let path = hook["clientConfig"]["service"]["path"].clone();
                let url = format!("https://127.0.0.1:{port}{}", path.as_str().unwrap_or(""));
                hook["clientConfig"] = serde_json::json!({"url": url, "caBundle": ca});
            }
            self.kubectl_apply(None, &configuration, &["--server-side"])
                .unwrap_or_else(|e| panic!("Kueue's webhooks: {e}"));
        }
        self.wait_kueue_webhooks().await;
    }

    /// Until the apiserver calls Kueue's webhooks: a dry-run ResourceFlavor with an invalid
    /// label is refused by Kueue's validation, not by the CRD's schema.
    async fn wait_kueue_webhooks(&self) {
        let client = self.client().await;
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(client, &resource("ResourceFlavor", "resourceflavors"));
        let probe: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "webhook-probe"},
        }))
        .expect("ResourceFlavor");
        let params = kube::api::PostParams {
            dry_run: true,
            ..Default::default()
        };
        super::wait_for("Kueue's webhooks called", START_LIMIT, || async {
            self.check_running()?;
            match api.create(&params, &probe).await {
                Ok(_) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
    }
}

/// Kueue's Configuration (config.kueue.x-k8s.io/v1beta2).
fn kueue_config(health: u16, webhook: u16, certs: &Path, options: &KueueOptions) -> String {
    let frameworks: Vec<String> = FRAMEWORKS.iter().map(|f| format!("\"{f}\"")).collect();
    let mut config = format!(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nnamespace: {NAMESPACE}\n\
         health: {{healthProbeBindAddress: \"127.0.0.1:{health}\"}}\n\
         metrics: {{bindAddress: \"0\"}}\n\
         webhook: {{port: {webhook}, host: 127.0.0.1, certDir: \"{}\"}}\n\
         leaderElection: {{leaderElect: false}}\n\
         internalCertManagement: {{enable: false}}\n\
         integrations: {{frameworks: [{}]}}\n",
        certs.display(),
        frameworks.join(", "),
    );
    if let Some(timeout) = options.wait_for_pods_ready {
        // Requeued at once after an eviction (the default backoff starts at 60 s).
        config.push_str(&format!(
            "waitForPodsReady: {{timeout: {timeout}, blockAdmission: false, \
             requeuingStrategy: {{timestamp: Eviction, backoffBaseSeconds: 1}}}}\n"
        ));
    }
    config
}

/// `unshare` arguments: an overlay on /etc (upper and work dirs in `etc`, one per start)
/// with the metrics certificate, then kueue-manager in its place.
fn kueue_args(
    assets: &KueueAssets,
    etc: &Path,
    certs: &Path,
    config: &Path,
    kubeconfig: &Path,
) -> Vec<String> {
    let upper = etc.join("upper");
    let work = etc.join("work");
    let metrics = upper.join("kueue/metrics/certs");
    std::fs::create_dir_all(&metrics).expect("create the metrics cert dir");
    std::fs::create_dir_all(&work).expect("create the overlay work dir");
    for file in ["tls.crt", "tls.key"] {
        std::fs::copy(certs.join(file), metrics.join(file)).expect("copy the metrics cert");
    }
    let script = format!(
        "mount -t overlay overlay -o lowerdir=/etc,upperdir={},workdir={} /etc && \
             exec {} --config {} --kubeconfig {} --feature-gates=VisibilityOnDemand=false",
        upper.display(),
        work.display(),
        assets.manager().display(),
        config.display(),
        kubeconfig.display(),
    );
    let mut args = Vec::new();
    if !is_root() {
        args.push("-r".to_string());
    }
    args.extend(["-m", "--propagation", "private", "sh", "-c"].map(String::from));
    args.push(script);
    args
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A Kueue API resource (`kueue.x-k8s.io/v1beta2`).
pub fn resource(kind: &str, plural: &str) -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "kueue.x-k8s.io/v1beta2".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Kueue's objects for the GPU pool `pool=<ns>`: the ResourceFlavor `<ns>` that selects its
/// nodes, the ClusterQueue `<ns>` of `gpus` GPUs in that flavor (and ample cpu and memory),
/// for namespace `ns` only, and LocalQueue `lq` in `ns` pointing at it; waits until the
/// ClusterQueue is Active.
pub async fn gpu_queue(plane: &ControlPlane, ns: &str, gpus: u32) {
    let flavor = serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": ns}, "spec": {"nodeLabels": {"pool": ns}},
    });
    let quota =
        |name: &str, amount: Value| serde_json::json!({"name": name, "nominalQuota": amount});
    let cluster_queue = serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": ns},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [{"name": ns, "resources": [
                    quota("cpu", serde_json::json!(1000)),
                    quota("memory", serde_json::json!("10Ti")),
                    quota("nvidia.com/gpu", serde_json::json!(gpus)),
                ]}],
            }],
        },
    });
    let local_queue = serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": ns},
    });
    for object in [flavor, cluster_queue, local_queue] {
        plane
            .kubectl_apply(object["metadata"]["namespace"].as_str(), &object, &[])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let queues: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        plane.client().await,
        &resource("ClusterQueue", "clusterqueues"),
    );
    super::wait_for(
        &format!("ClusterQueue {ns} Active"),
        START_LIMIT,
        || async {
            let cq = queues.get(ns).await.map_err(|e| e.to_string())?;
            let cq = serde_json::to_value(cq).map_err(|e| e.to_string())?;
            super::jobs::true_condition(&cq, "Active")
                .map(drop)
                .ok_or(format!("{}", cq["status"]))
        },
    )
    .await;
}

/// A PyTorchJob of a Master and `workers` Workers of 8 GPUs each, in LocalQueue `lq`, with
/// no nodeSelector: the flavor Kueue admits it to gives it one.
pub fn queued_gpu_gang(name: &str, workers: u32) -> Value {
    let mut job = super::jobs::gpu_gang(name, workers, "unused");
    for r in ["Master", "Worker"] {
        let spec = job["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"]
            .as_object_mut()
            .expect("pod spec");
        spec.remove("nodeSelector");
    }
    job["metadata"]["labels"] = serde_json::json!({"kueue.x-k8s.io/queue-name": "lq"});
    job
}

/// The Workload Kueue made for job `name` in `ns`, once there is one.
pub async fn workload(client: &kube::Client, ns: &str, name: &str) -> Value {
    use kube::api::{Api, DynamicObject, ListParams};
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &resource("Workload", "workloads"));
    super::wait_for(
        &format!("the Workload of {ns}/{name}"),
        START_LIMIT,
        || async {
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let owned = list.items.into_iter().find(|w| {
                w.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.name == name)
            });
            let workload = owned.ok_or("none yet")?;
            serde_json::to_value(workload).map_err(|e| e.to_string())
        },
    )
    .await
}
