//! etcd + kube-apiserver on loopback: random ports, a temp dir, a static admin token, the
//! upstream CRDs installed by server-side apply.
//!
//! Started once per test binary and per CRD set ([`ControlPlane::shared`]); the processes end
//! with the binary (see `process`). Every test asks for its own namespace, so tests of one
//! binary run side by side without seeing each other's jobs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use super::assets::Assets;
use super::process::Process;

/// A static bearer token in `system:masters`: the apiserver lives and dies with the tests.
pub const TOKEN: &str = "gangplank-tests-admin";
/// Field manager of everything the test harness applies.
pub const FIELD_MANAGER: &str = "gangplank-tests";
/// The label of the namespaces gangplank's controller serves (deploy/controller's
/// allow-list-policy.yaml and its --namespace-selector).
pub const MANAGED_LABEL: &str = "gangplank.dev/managed";
/// An apiserver that is not ready by then is broken, not slow (it takes ~5 s here).
const START_LIMIT: Duration = Duration::from_secs(60);
const START_ATTEMPTS: usize = 3;

/// Which CRDs a control plane has. `mpijobs.kubeflow.org` is either the training-operator's
/// v1 MPIJob or the mpi-operator's v2beta1 one (same name, different schemas): a cluster runs
/// one operator or the other, so a control plane has one or the other too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crds {
    /// The six kubeflow.org/v1 training CRDs, Volcano's PodGroup and Queue, and the
    /// scheduler-plugins PodGroup.
    TrainingV1,
    /// The same with the mpi-operator's v2beta1 MPIJob in place of the v1 one.
    MpiV2beta1,
    /// gangplank's own CRDs as `kubectl apply -f crds/` installs them (crds/, generated from
    /// src/crd/: the five v1 kinds and MPIJob v2beta1), with the PodGroup CRDs.
    Gangplank,
    /// `TrainingV1` and Kubeflow Trainer v2's TrainJob, TrainingRuntime and
    /// ClusterTrainingRuntime: v2.3.0's CRDs from the corpus when it is there, else the
    /// project's stand-ins in `tests/data/crds/` (schema-less, so admission is what is tested).
    Trainer,
}

impl Crds {
    /// The CRD files: upstream's from the corpus (`../shared/corpus/upstream-crds`) when it
    /// is there, else the project's own `crds/` and the small PodGroup and Queue CRDs of
    /// `tests/data/crds/` (a fresh clone has no corpus; the suites that compare with
    /// upstream's schemas need it and say so).
    fn files(self) -> Vec<PathBuf> {
        let upstream = super::corpus().join("upstream-crds");
        let ours = super::repo().join("crds");
        let (dir, mpi, third_party) = if upstream.is_dir() {
            let mpi = match self {
                Crds::TrainingV1 | Crds::Trainer => upstream.join("kubeflow.org_mpijobs.yaml"),
                Crds::MpiV2beta1 => upstream.join("kubeflow.org_mpijobs.v2beta1.yaml"),
                Crds::Gangplank => ours.join("kubeflow.org_mpijobs.v2beta1.yaml"),
            };
            let dir = if self == Crds::Gangplank {
                &ours
            } else {
                &upstream
            };
            (dir.clone(), mpi, upstream.clone())
        } else {
            let mpi = match self {
                Crds::TrainingV1 | Crds::Trainer => {
                    ours.join("mpijob-v1/kubeflow.org_mpijobs.yaml")
                }
                Crds::MpiV2beta1 | Crds::Gangplank => {
                    ours.join("kubeflow.org_mpijobs.v2beta1.yaml")
                }
            };
            (ours.clone(), mpi, super::repo().join("tests/data/crds"))
        };
        let jobs = [
            "kubeflow.org_pytorchjobs.yaml",
            "kubeflow.org_tfjobs.yaml",
            "kubeflow.org_xgboostjobs.yaml",
            "kubeflow.org_paddlejobs.yaml",
            "kubeflow.org_jaxjobs.yaml",
        ];
        let mut files: Vec<_> = jobs.iter().map(|f| dir.join(f)).collect();
        files.push(mpi);
        for f in [
            "scheduling.volcano.sh_podgroups.yaml",
            "scheduling.volcano.sh_queues.yaml",
            "scheduling.x-k8s.io_podgroups.yaml",
        ] {
            files.push(third_party.join(f));
        }
        if self == Crds::Trainer {
            files.extend(trainer_crds());
        }
        files
    }
}

/// The Trainer's three CRDs: v2.3.0's from the corpus, or the project's stand-ins.
fn trainer_crds() -> Vec<PathBuf> {
    let upstream = super::corpus().join("trainer-v2.3.0/crds");
    let dir = if upstream.is_dir() {
        upstream
    } else {
        super::repo().join("tests/data/crds")
    };
    ["trainjobs", "trainingruntimes", "clustertrainingruntimes"]
        .iter()
        .map(|plural| dir.join(format!("trainer.kubeflow.org_{plural}.yaml")))
        .collect()
}

/// What runs beside etcd and kube-apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduling {
    /// Nothing: the tests play the scheduler and the kubelet.
    None,
    /// kube-scheduler with its default plugins, and kube-controller-manager running the
    /// garbage collector and the namespace controller (never node-lifecycle: it would taint
    /// the kubelet-less nodes unreachable). Nodes come from `nodes::SimNode`.
    Scheduler,
    /// As `Scheduler`, with Kubernetes-native gang scheduling (KEP-4671): the
    /// `GenericWorkload` and `GangScheduling` gates on the apiserver and the scheduler, and
    /// `scheduling.k8s.io/v1alpha2` served.
    NativeGang,
    /// Volcano's vc-scheduler and vc-controller-manager with Volcano's own CRDs, and
    /// kube-controller-manager as for `Scheduler`; no kube-scheduler (see `volcano`).
    Volcano,
    /// As `Volcano`, with vc-scheduler's `network-topology-aware` plugin on (HyperNodes).
    VolcanoTopology,
    /// scheduler-plugins' Coscheduling kube-scheduler with its own PodGroup CRD, and
    /// kube-controller-manager as for `Scheduler` (see `coscheduling`).
    Coscheduling,
}

/// The feature gates both the apiserver and kube-scheduler need for native gangs, and for a
/// PodGroup's `schedulingConstraints.topology` (TopologyAwareWorkloadScheduling, 1.36 alpha:
/// without it the apiserver drops the field and kube-scheduler ignores it).
pub const NATIVE_GANG_GATES: &str =
    "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true";

pub struct ControlPlane {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// Admin kubeconfig for kubectl, the Python SDK and [`ControlPlane::client`].
    pub kubeconfig: PathBuf,
    pub assets: Assets,
    pub crds: Crds,
    pub scheduling: Scheduling,
    /// PEM of the CA that signed the apiserver's serving certificate.
    pub ca_pem: Vec<u8>,
    /// Declared before `dir`: the processes stop before their files go.
    processes: Mutex<Vec<Process>>,
    /// How the kube-apiserver was started, to start it again ([`ControlPlane::restart_apiserver`]).
    apiserver_args: Vec<String>,
    namespaces: AtomicUsize,
    pub dir: tempfile::TempDir,
}

impl ControlPlane {
    /// The control plane of this test binary with these CRDs, started on first use.
    pub fn shared(assets: &Assets, crds: Crds) -> &'static ControlPlane {
        ControlPlane::shared_with(assets, crds, Scheduling::None)
    }

    /// The control plane of this test binary with these CRDs and this scheduling, started on
    /// first use and kept until the binary exits.
    pub fn shared_with(
        assets: &Assets,
        crds: Crds,
        scheduling: Scheduling,
    ) -> &'static ControlPlane {
        static PLANES: Mutex<Vec<&'static ControlPlane>> = Mutex::new(Vec::new());
        // Held while a control plane starts: a second test asking for the same one waits
        // for it instead of starting another.
        let mut planes = PLANES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(plane) = planes
            .iter()
            .find(|p| p.crds == crds && p.scheduling == scheduling)
        {
            return plane;
        }
        let plane: &'static ControlPlane =
            Box::leak(Box::new(ControlPlane::start_with(assets, crds, scheduling)));
        planes.push(plane);
        plane
    }

    /// A control plane of its own (for a test that must change cluster-wide state). It is
    /// torn down when dropped.
    pub fn start(assets: &Assets, crds: Crds) -> ControlPlane {
        ControlPlane::start_with(assets, crds, Scheduling::None)
    }

    /// As [`ControlPlane::start`], with a scheduler as `scheduling` says.
    pub fn start_with(assets: &Assets, crds: Crds, scheduling: Scheduling) -> ControlPlane {
        ControlPlane::start_with_apiserver_flags(assets, crds, scheduling, Vec::new())
    }

    /// As [`ControlPlane::start_with`], with `flags` added to the kube-apiserver's
    /// (`--admission-control-config-file=...`, say).
    pub fn start_with_apiserver_flags(
        assets: &Assets,
        crds: Crds,
        scheduling: Scheduling,
        flags: Vec<String>,
    ) -> ControlPlane {
        let assets = assets.clone();
        super::on_own_runtime(move || start_with_retries(assets, crds, scheduling, flags))
    }

    /// A client with the admin token, bound to the caller's runtime.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig");
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .expect("client config");
        kube::Client::try_from(config).expect("client")
    }

    /// Creates a namespace of its own for one test: `<prefix>-<n>`, labelled
    /// `gangplank.dev/managed=true` as the install guide tells users to label the namespaces
    /// their jobs run in (deploy/controller's allow-list policy refuses the controller's
    /// writes anywhere else).
    pub async fn namespace(&self, prefix: &str) -> String {
        self.namespace_labelled(prefix, json!({MANAGED_LABEL: "true"}))
            .await
    }

    /// As [`ControlPlane::namespace`], without the `gangplank.dev/managed` label: a
    /// namespace the controller must not write in.
    pub async fn unmanaged_namespace(&self, prefix: &str) -> String {
        self.namespace_labelled(prefix, json!({})).await
    }

    async fn namespace_labelled(&self, prefix: &str, labels: Value) -> String {
        let n = self.namespaces.fetch_add(1, Ordering::Relaxed);
        let prefix: String = prefix.chars().take(50).collect();
        let name = format!("{prefix}-{n}");
        let namespaces: Api<Namespace> = Api::all(self.client().await);
        let namespace =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
                .expect("namespace object");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        name
    }

    /// Creates `name` unless it exists (manifests name their own namespaces).
    pub async fn ensure_namespace(&self, name: &str) {
        let namespaces: Api<Namespace> = Api::all(self.client().await);
        let namespace =
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace object");
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => panic!("create namespace {name}: {e}"),
        }
    }

    /// Fails with every process's log tail if one has exited.
    pub fn check_running(&self) -> Result<(), String> {
        let mut processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
        processes.iter_mut().try_for_each(Process::check_running)
    }

    /// Starts a process that lives as long as this control plane (gangplank serve, say).
    pub fn spawn(&self, name: &str, program: &Path, args: &[String]) {
        let process = Process::spawn(name, program, args, self.dir.path());
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(process);
    }

    /// Kills the processes named `name` (SIGKILL, as when they crash) and keeps their log in
    /// `<name>-stopped.log`; the rest of the control plane runs on.
    pub fn stop(&self, name: &str) {
        let mut processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
        let mut logs = Vec::new();
        processes.retain_mut(|p| {
            let stop = p.name == name;
            if stop {
                p.stop();
                logs.push(p.log_text());
            }
            !stop
        });
        assert!(!logs.is_empty(), "no process {name} runs");
        let _ = std::fs::write(self.file(&format!("{name}-stopped.log")), logs.concat());
    }

    /// The last lines of one process's log.
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        let processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
        processes
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.tail(lines))
            .unwrap_or_default()
    }

    /// PriorityClass `training-high`, which benches/data/pytorchjob-9-platform.yaml names, as
    /// the cluster's default class: the priority policy, reading this cluster's classes,
    /// admits the platform job (a class the cluster lacks is refused).
    pub fn create_platform_priority_class(&self) {
        let class = serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "training-high"},
            "value": 1000,
            "globalDefault": true,
        });
        self.kubectl_apply(None, &class, &[])
            .expect("PriorityClass training-high");
    }

    /// `kubectl apply -f` of `object` (in `namespace`, when given) with `extra` flags, as a
    /// user runs it: Ok(stdout) or Err(stderr).
    pub fn kubectl_apply(
        &self,
        namespace: Option<&str>,
        object: &Value,
        extra: &[&str],
    ) -> Result<String, String> {
        let (ok, stdout, stderr) = self.kubectl_apply_output(namespace, object, extra);
        if ok {
            Ok(stdout)
        } else {
            Err(stderr)
        }
    }

    /// As [`ControlPlane::kubectl_apply`]: whether it succeeded, stdout and stderr (where
    /// kubectl prints the webhooks' warnings, success or not).
    pub fn kubectl_apply_output(
        &self,
        namespace: Option<&str>,
        object: &Value,
        extra: &[&str],
    ) -> (bool, String, String) {
        let name = object["metadata"]["name"].as_str().unwrap_or("object");
        let kind = object["kind"].as_str().unwrap_or("object");
        let file = self.file(&format!(
            "apply-{}-{kind}-{name}.json",
            namespace.unwrap_or("cluster")
        ));
        std::fs::write(&file, object.to_string()).expect("write manifest");
        let mut command = std::process::Command::new(self.assets.kubectl());
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("apply");
        if let Some(ns) = namespace {
            command.args(["-n", ns]);
        }
        let output = command
            .args(extra)
            .arg("-f")
            .arg(&file)
            .output()
            .expect("run kubectl");
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        (output.status.success(), stdout, stderr)
    }

    /// A kubeconfig (file `file` in the temp dir) that holds a token of ServiceAccount
    /// `namespace/name` and nothing else: a component then runs as it is deployed, with that
    /// identity's rights and username (`system:serviceaccount:<namespace>:<name>`).
    pub fn service_account_kubeconfig(&self, namespace: &str, name: &str, file: &str) -> PathBuf {
        let output = std::process::Command::new(self.assets.kubectl())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["create", "token", name, "-n", namespace])
            .output()
            .expect("kubectl create token");
        assert!(
            output.status.success(),
            "kubectl create token {name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let token = String::from_utf8(output.stdout)
            .expect("token")
            .trim()
            .to_string();
        let admin = std::fs::read_to_string(&self.kubeconfig).expect("kubeconfig");
        let start = admin.find("token: ").expect("admin token line");
        let end = admin[start..].find('\n').map_or(admin.len(), |i| start + i);
        let limited = format!("{}token: {token}{}", &admin[..start], &admin[end..]);
        let path = self.file(file);
        std::fs::write(&path, limited).expect("write kubeconfig");
        path
    }

    /// A path in the control plane's temp dir.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Why one start failed.
enum StartError {
    /// Another process took a port between our check and the bind: worth another try.
    PortTaken(String),
    Failed(String),
}

async fn start_with_retries(
    assets: Assets,
    crds: Crds,
    scheduling: Scheduling,
    flags: Vec<String>,
) -> ControlPlane {
    let mut last = String::new();
    for attempt in 1..=START_ATTEMPTS {
        match start_once(&assets, crds, scheduling, &flags).await {
            Ok(control_plane) => return control_plane,
            Err(StartError::PortTaken(why)) => {
                eprintln!("control plane attempt {attempt}: a port was taken, retrying: {why}");
                last = why;
            }
            Err(StartError::Failed(why)) => panic!("the test control plane did not start: {why}"),
        }
    }
    panic!("the test control plane did not start after {START_ATTEMPTS} attempts: {last}")
}

async fn start_once(
    assets: &Assets,
    crds: Crds,
    scheduling: Scheduling,
    flags: &[String],
) -> Result<ControlPlane, StartError> {
    let dir = tempfile::Builder::new()
        .prefix("gangplank-control-plane-")
        .tempdir()
        .map_err(|e| StartError::Failed(format!("temp dir: {e}")))?;
    super::process::remove_at_exit(dir.path());
    let [etcd_port, peer_port, api_port] = free_ports();
    let tls = dir.path().join("apiserver-tls");
    gangplank_certs(&tls, &["localhost", "127.0.0.1"]);
    let ca_pem = std::fs::read(tls.join("ca.crt")).expect("ca.crt");
    let url = format!("https://127.0.0.1:{api_port}");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_yaml(&url, &ca_pem)).expect("write kubeconfig");
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    write_apiserver_files(dir.path());
    let mut apiserver_args = apiserver_args(dir.path(), &etcd_url, api_port);
    apiserver_args.extend_from_slice(flags);
    if scheduling == Scheduling::NativeGang {
        apiserver_args.push(format!("--feature-gates={NATIVE_GANG_GATES}"));
        apiserver_args.push("--runtime-config=scheduling.k8s.io/v1alpha2=true".into());
    }
    let control_plane = ControlPlane {
        url,
        kubeconfig,
        assets: assets.clone(),
        crds,
        scheduling,
        ca_pem,
        processes: Mutex::new(Vec::new()),
        apiserver_args,
        namespaces: AtomicUsize::new(0),
        dir,
    };
    let etcd_args = etcd_args(control_plane.dir.path(), &etcd_url, peer_port);
    control_plane.spawn("etcd", &assets.etcd(), &etcd_args);
    control_plane.spawn_apiserver();
    control_plane.wait_ready().await?;
    control_plane.install_crds().await;
    if scheduling == Scheduling::NativeGang {
        control_plane.wait_native_gang_served().await;
    }
    match scheduling {
        Scheduling::None => {}
        Scheduling::Volcano => control_plane.start_volcano(false).await,
        Scheduling::VolcanoTopology => control_plane.start_volcano(true).await,
        Scheduling::Coscheduling => control_plane.start_coscheduling().await,
        Scheduling::Scheduler | Scheduling::NativeGang => control_plane.spawn_scheduling(),
    }
    Ok(control_plane)
}

impl ControlPlane {
    fn spawn_apiserver(&self) {
        let program = self.assets.kube_apiserver();
        self.spawn("kube-apiserver", &program, &self.apiserver_args);
    }

    /// Kills the kube-apiserver (SIGKILL: no graceful shutdown, as when its node dies),
    /// leaves it down for `down`, starts it again with the same port, etcd and keys, and
    /// waits until it is ready. For a control plane of its own ([`ControlPlane::start`]):
    /// every client of it sees the outage.
    pub async fn restart_apiserver(&self, down: Duration) {
        {
            let mut processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
            let mut stopped = Vec::new();
            processes.retain_mut(|p| {
                let apiserver = p.name == "kube-apiserver";
                if apiserver {
                    p.stop();
                    stopped.push(p.log_text());
                }
                !apiserver
            });
            assert_eq!(stopped.len(), 1, "one kube-apiserver runs");
            // The restarted one writes the same log file: keep the first one's log.
            let earlier = self.file("kube-apiserver-before-restart.log");
            let _ = std::fs::write(earlier, stopped.concat());
        }
        tokio::time::sleep(down).await;
        self.spawn_apiserver();
        if let Err(StartError::Failed(why) | StartError::PortTaken(why)) = self.wait_ready().await {
            panic!("the kube-apiserver did not come back: {why}");
        }
    }

    /// Waits for `/readyz` and for the namespaces the apiserver makes itself.
    async fn wait_ready(&self) -> Result<(), StartError> {
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(&self.ca_pem).expect("CA PEM")])
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("HTTP client");
        let deadline = Instant::now() + START_LIMIT;
        let mut last;
        for path in ["/readyz", "/api/v1/namespaces/kube-system"] {
            loop {
                if let Err(exited) = self.check_running() {
                    return Err(classify(exited));
                }
                let request = client.get(format!("{}{path}", self.url)).bearer_auth(TOKEN);
                match request.send().await {
                    Ok(response) if response.status().is_success() => break,
                    Ok(response) => last = format!("{path}: {}", response.status()),
                    Err(e) => last = format!("{path}: {}", gangplank::error_chain(&e)),
                }
                if Instant::now() >= deadline {
                    let logs = self.log_tail("kube-apiserver", 30);
                    let etcd = self.log_tail("etcd", 10);
                    return Err(StartError::Failed(format!(
                        "not ready within {START_LIMIT:?} (last: {last});\n\
                         kube-apiserver log tail:\n{logs}\netcd log tail:\n{etcd}"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    /// Server-side apply of each CRD, then waits until each is Established and served.
    async fn install_crds(&self) {
        let client = self.client().await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for path in self.crds.files() {
            let file = path.display().to_string();
            let crd = read_crd(&path);
            let name = crd.metadata.name.clone().expect("CRD name");
            crds.patch(&name, &params, &Patch::Apply(&crd))
                .await
                .unwrap_or_else(|e| panic!("apply CRD {file}: {e}"));
            let what = format!("CRD {name} established");
            super::wait_for(&what, Duration::from_secs(30), || async {
                let crd = crds.get(&name).await.map_err(|e| e.to_string())?;
                let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
                let ok = conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                ok.then_some(()).ok_or_else(|| format!("{conditions:?}"))
            })
            .await;
            self.wait_served(&client, &crd).await;
        }
    }

    /// Discovery lags "Established" a little: list the resource until it answers.
    async fn wait_served(&self, client: &kube::Client, crd: &CustomResourceDefinition) {
        let spec = &crd.spec;
        for version in spec.versions.iter().filter(|v| v.served) {
            let resource = ApiResource {
                group: spec.group.clone(),
                version: version.name.clone(),
                api_version: format!("{}/{}", spec.group, version.name),
                kind: spec.names.kind.clone(),
                plural: spec.names.plural.clone(),
            };
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let what = format!("{} {} served", resource.api_version, resource.plural);
            super::wait_for(&what, Duration::from_secs(30), || async {
                let list = api.list(&ListParams::default().limit(1)).await;
                list.map(drop).map_err(|e| e.to_string())
            })
            .await;
        }
    }
}

/// A process that exited on "address already in use" lost a port race.
fn classify(exited: String) -> StartError {
    if exited.contains("address already in use") {
        StartError::PortTaken(exited)
    } else {
        StartError::Failed(exited)
    }
}

fn read_crd(path: &Path) -> CustomResourceDefinition {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value: Value =
        yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{}: not a CRD: {e}", path.display()))
}

fn etcd_args(dir: &Path, client_url: &str, peer_port: u16) -> Vec<String> {
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    vec![
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client_url}"),
        format!("--advertise-client-urls={client_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=default={peer_url}"),
        // Tests create and delete thousands of objects; fsync per write is what makes etcd
        // slow on a shared disk, and this data lives only as long as the test binary.
        "--unsafe-no-fsync".into(),
        // 2 GiB by default: the inventory bench's 100,000 GPU Nodes (18 KB each, every one
        // written twice before the apiserver's first compaction) need more.
        "--quota-backend-bytes=8589934592".into(),
    ]
}

/// The service-account signing key (the apiserver refuses to start without one) and the
/// static token file, in `dir`. Written once: a restarted apiserver keeps them.
fn write_apiserver_files(dir: &Path) {
    let file = |name: &str| dir.join(name);
    let sa_key = rcgen::KeyPair::generate().expect("service-account key");
    std::fs::write(file("sa.key"), sa_key.serialize_pem()).expect("write sa.key");
    std::fs::write(file("sa.pub"), sa_key.public_key_pem()).expect("write sa.pub");
    let token_line = format!("{TOKEN},gangplank-tests,gangplank-tests,\"system:masters\"\n");
    std::fs::write(file("tokens.csv"), token_line).expect("write tokens.csv");
}

/// The flags envtest uses, with a static token for authentication (files of
/// [`write_apiserver_files`]).
fn apiserver_args(dir: &Path, etcd_url: &str, port: u16) -> Vec<String> {
    let file = |name: &str| dir.join(name).display().to_string();
    vec![
        format!("--etcd-servers={etcd_url}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", file("apiserver-cert-dir")),
        format!("--tls-cert-file={}", file("apiserver-tls/tls.crt")),
        format!("--tls-private-key-file={}", file("apiserver-tls/tls.key")),
        format!("--token-auth-file={}", file("tokens.csv")),
        "--authorization-mode=RBAC".into(),
        format!("--service-account-issuer=https://127.0.0.1:{port}"),
        format!("--service-account-key-file={}", file("sa.pub")),
        format!("--service-account-signing-key-file={}", file("sa.key")),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--allow-privileged=true".into(),
        // No controller-manager runs, so no namespace gets a `default` ServiceAccount; pods
        // could never be created with this plugin on (envtest turns it off too).
        "--disable-admission-plugins=ServiceAccount".into(),
    ]
}

fn kubeconfig_yaml(url: &str, ca_pem: &[u8]) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
  - name: gangplank-tests
    cluster:
      server: {url}
      certificate-authority-data: {ca}
users:
  - name: admin
    user:
      token: {TOKEN}
contexts:
  - name: gangplank-tests
    context:
      cluster: gangplank-tests
      user: admin
      namespace: default
current-context: gangplank-tests
"
    )
}

/// Ports the OS reports free now. Another process may take one before a server binds it;
/// that start is then retried with new ports.
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().expect("local addr").port())
}

/// `gangplank certs --out DIR --dns NAME...`: ca.crt, tls.crt, tls.key in `dir`.
pub fn gangplank_certs(dir: &Path, names: &[&str]) {
    let mut command = std::process::Command::new(super::gangplank());
    command.arg("certs").arg("--out").arg(dir);
    for name in names {
        command.arg("--dns").arg(name);
    }
    let output = command.output().expect("run gangplank certs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "gangplank certs: {stderr}");
}
