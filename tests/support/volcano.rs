//! Volcano beside a test control plane: vc-scheduler and vc-controller-manager (v1.16) with
//! Volcano's own CRDs, and kube-controller-manager for the garbage collector.
//!
//! Entry points: [`ControlPlane::shared_with`](super::ControlPlane::shared_with) with
//! [`Scheduling::Volcano`](super::Scheduling::Volcano) starts them (see
//! [`ControlPlane::start_volcano`]); [`requirement`] for the suite's harness (the suite is
//! skipped, with the reason printed, without the binaries); [`find`] says where they are;
//! [`pod_group`] and [`queue`] are the API resources; [`wait_pod_group`], [`wait_bound`] and
//! [`reap`] are the waits the Volcano suites share.
//!
//! The binaries are built once per machine by `../shared/tools/volcano-test-assets.sh` into
//! `~/.cache/kube-test-assets/volcano-<version>/` (`bin/`, `crds/`, `conf/`), or named by
//! `VOLCANO_ASSETS`. No kube-scheduler runs on a Volcano plane: every pod the suites make asks
//! for `schedulerName: volcano`. kube-controller-manager runs the garbage collector (a deleted
//! job takes its PodGroup and pods with it through ownerReferences) and the namespace
//! controller, never node-lifecycle (it would taint the kubelet-less nodes unreachable).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;

use super::control_plane::{free_ports, FIELD_MANAGER};
use super::scheduler::Placement;
use super::ControlPlane;

/// Volcano's scheduler name, as the shipped policies and the controller write it.
pub const SCHEDULER_NAME: &str = "volcano";
const BINARIES: [&str; 2] = ["bin/vc-scheduler", "bin/vc-controller-manager"];
/// The CRDs the suites use; every `crds/*.yaml` is installed (the scheduler's informers
/// wait for HyperNodes and NodeShards, the controller-manager's for Jobs and Commands).
const CRDS: [&str; 2] = [
    "scheduling.volcano.sh_podgroups.yaml",
    "scheduling.volcano.sh_queues.yaml",
];
const HOW_TO_GET: &str = "build them once with ../shared/tools/volcano-test-assets.sh (about 16 \
    minutes on 2 cores; it prints `export VOLCANO_ASSETS=...`), or put Volcano v1.16's \
    vc-scheduler and vc-controller-manager (from its release images \
    volcanosh/vc-scheduler and volcanosh/vc-controller-manager, /vc-scheduler and \
    /vc-controller-manager) in DIR/bin, its CRDs (installer/helm/chart/volcano/crd/bases) in \
    DIR/crds and installer/helm/chart/volcano/config/volcano-scheduler.conf in DIR/conf, and set \
    VOLCANO_ASSETS=DIR";
/// Both binaries answer /healthz in about a second here; 60 s is a broken start.
const START_LIMIT: Duration = Duration::from_secs(60);

/// A Volcano assets directory: `bin/`, `crds/`, `conf/volcano-scheduler.conf`.
#[derive(Debug, Clone)]
pub struct VolcanoAssets {
    pub dir: PathBuf,
}

impl VolcanoAssets {
    pub fn scheduler(&self) -> PathBuf {
        self.dir.join("bin/vc-scheduler")
    }

    pub fn controller_manager(&self) -> PathBuf {
        self.dir.join("bin/vc-controller-manager")
    }

    pub fn scheduler_conf(&self) -> PathBuf {
        self.dir.join("conf/volcano-scheduler.conf")
    }

    fn missing(&self) -> Option<String> {
        let mut needed: Vec<PathBuf> = BINARIES.iter().map(|b| self.dir.join(b)).collect();
        needed.push(self.scheduler_conf());
        needed.extend(CRDS.iter().map(|c| self.dir.join("crds").join(c)));
        super::assets::missing_files(needed)
    }
}

/// The suite's requirement (see `harness`): kube-controller-manager beside the control
/// plane's binaries, and Volcano's assets.
pub fn requirement() -> Result<(), String> {
    super::assets::scheduler_requirement()?;
    find().map(drop)
}

/// `VOLCANO_ASSETS`, else the newest `~/.cache/kube-test-assets/volcano-*/` with both
/// binaries; `Err` saying where to get them when there is none. Panics when
/// `VOLCANO_ASSETS` is set but lacks a file (a broken set-up, and a skip would hide it), as
/// `KUBEBUILDER_ASSETS` does.
pub fn find() -> Result<VolcanoAssets, String> {
    let missing = |dir: &Path| VolcanoAssets { dir: dir.into() }.missing();
    super::assets::find_versioned(
        "VOLCANO_ASSETS",
        "volcano-",
        "bin/vc-scheduler and bin/vc-controller-manager",
        HOW_TO_GET,
        missing,
    )
    .map(|dir| VolcanoAssets { dir })
    .map_err(|why| format!("no Volcano: {why}"))
}

/// Volcano's HyperNode (cluster-scoped).
pub fn hypernode() -> ApiResource {
    ApiResource {
        group: "topology.volcano.sh".into(),
        version: "v1alpha1".into(),
        api_version: "topology.volcano.sh/v1alpha1".into(),
        kind: "HyperNode".into(),
        plural: "hypernodes".into(),
    }
}

/// The assets' scheduler conf with vc-scheduler's `network-topology-aware` plugin (which
/// scores HyperNodes; the allocate action keeps a hard `networkTopology` gang inside one)
/// appended to its last tier, written into `dir`.
fn topology_conf(assets: &VolcanoAssets, dir: &Path) -> PathBuf {
    let path = assets.scheduler_conf();
    let conf = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let written = dir.join("volcano-scheduler-topology.conf");
    let conf = format!("{}\n  - name: network-topology-aware\n", conf.trim_end());
    std::fs::write(&written, conf).unwrap_or_else(|e| panic!("{}: {e}", written.display()));
    written
}

/// Volcano's PodGroup.
pub fn pod_group() -> ApiResource {
    volcano_resource("PodGroup", "podgroups")
}

/// Volcano's Queue (cluster-scoped).
pub fn queue() -> ApiResource {
    volcano_resource("Queue", "queues")
}

fn volcano_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "scheduling.volcano.sh".into(),
        version: "v1beta1".into(),
        api_version: "scheduling.volcano.sh/v1beta1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

impl ControlPlane {
    /// Installs Volcano's CRDs over the upstream PodGroup and Queue ones (the same names:
    /// server-side apply with force takes them over), then starts kube-controller-manager,
    /// vc-controller-manager (PodGroup and Queue controllers) and vc-scheduler with leader
    /// election off, and waits until both Volcano binaries answer /healthz and the `default`
    /// Queue exists. Panics with the log tails when they do not.
    /// With `topology`, vc-scheduler runs [`topology_conf`]: the assets' conf with the
    /// `network-topology-aware` plugin added.
    pub(super) async fn start_volcano(&self, topology: bool) {
        let assets = find().unwrap_or_else(|why| panic!("{why}"));
        let conf = if topology {
            topology_conf(&assets, self.dir.path())
        } else {
            assets.scheduler_conf()
        };
        self.install_volcano_crds(&assets).await;
        let kubeconfig = format!("--kubeconfig={}", self.kubeconfig.display());
        self.spawn_controller_manager();
        let [manager_port, scheduler_port] = free_ports();
        let manager = vec![
            kubeconfig.clone(),
            "--leader-elect=false".into(),
            "--controllers=pg-controller,queue-controller".into(),
            format!("--scheduler-name={SCHEDULER_NAME}"),
            "--enable-healthz".into(),
            format!("--healthz-address=127.0.0.1:{manager_port}"),
            "--listen-address=127.0.0.1:0".into(),
        ];
        self.spawn(
            "vc-controller-manager",
            &assets.controller_manager(),
            &manager,
        );
        let scheduler = vec![
            kubeconfig,
            "--leader-elect=false".into(),
            format!("--scheduler-conf={}", conf.display()),
            format!("--scheduler-name={SCHEDULER_NAME}"),
            // Volcano's default is 1 s too; said here because the tests' bounds assume it.
            "--schedule-period=1s".into(),
            "--default-queue=default".into(),
            "--enable-healthz".into(),
            format!("--healthz-address=127.0.0.1:{scheduler_port}"),
            "--listen-address=127.0.0.1:0".into(),
            "--cache-dumper=false".into(),
        ];
        self.spawn("vc-scheduler", &assets.scheduler(), &scheduler);
        self.wait_healthz("vc-controller-manager", manager_port)
            .await;
        self.wait_healthz("vc-scheduler", scheduler_port).await;
        let client = self.client().await;
        let queues: Api<DynamicObject> = Api::all_with(client, &queue());
        super::wait_for(
            "vc-controller-manager creates Queue default",
            START_LIMIT,
            || async {
                match queues.get_opt("default").await {
                    Ok(Some(_)) => Ok(()),
                    Ok(None) => Err(format!(
                        "not yet; vc-controller-manager log tail:\n{}",
                        self.log_tail("vc-controller-manager", 10)
                    )),
                    Err(e) => Err(e.to_string()),
                }
            },
        )
        .await;
    }

    async fn install_volcano_crds(&self, assets: &VolcanoAssets) {
        let client = self.client().await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let dir = assets.dir.join("crds");
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        for path in files {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let value: Value = yaml_serde::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
            let crd: CustomResourceDefinition = serde_json::from_value(value)
                .unwrap_or_else(|e| panic!("{}: not a CRD: {e}", path.display()));
            let name = crd.metadata.name.clone().unwrap_or_default();
            crds.patch(&name, &params, &Patch::Apply(&crd))
                .await
                .unwrap_or_else(|e| panic!("apply Volcano CRD {}: {e}", path.display()));
            let (group, plural) = (crd.spec.group.clone(), crd.spec.names.plural.clone());
            for version in crd.spec.versions.iter().filter(|v| v.served) {
                let resource = ApiResource {
                    group: group.clone(),
                    version: version.name.clone(),
                    api_version: format!("{group}/{}", version.name),
                    kind: crd.spec.names.kind.clone(),
                    plural: plural.clone(),
                };
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                let what = format!("{}/{plural} served", resource.api_version);
                super::wait_for(&what, Duration::from_secs(30), || async {
                    let list = api.list(&ListParams::default().limit(1)).await;
                    list.map(drop).map_err(|e| e.to_string())
                })
                .await;
            }
        }
    }

    /// Waits for `GET http://127.0.0.1:{port}/healthz` to answer 200, failing early with the
    /// log tail if the process exits.
    async fn wait_healthz(&self, name: &str, port: u16) {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("HTTP client");
        let url = format!("http://127.0.0.1:{port}/healthz");
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Err(exited) = self.check_running() {
                panic!("{name} did not start: {exited}");
            }
            let last = match http.get(&url).send().await {
                Ok(r) if r.status().is_success() => return,
                Ok(r) => format!("{}", r.status()),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                panic!(
                    "{name} did not answer {url} within {START_LIMIT:?} (last: {last}); log \
                     tail:\n{}",
                    self.log_tail(name, 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// How long the Volcano suites wait for a PodGroup or a placement.
const WAIT: Duration = Duration::from_secs(60);

/// The job's PodGroup `<job>-pytorchjob`, if it exists.
pub async fn find_pod_group(client: &kube::Client, ns: &str, job: &str) -> Option<Value> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &pod_group());
    let name = format!("{job}-pytorchjob");
    match api.get_opt(&name).await {
        Ok(found) => found.and_then(|pg| serde_json::to_value(pg).ok()),
        Err(e) => panic!("get PodGroup {ns}/{name}: {e}"),
    }
}

/// Waits until the job's PodGroup exists and `accept` takes it.
pub async fn wait_pod_group(
    client: &kube::Client,
    ns: &str,
    job: &str,
    what: &str,
    accept: impl Fn(&Value) -> bool,
) -> Value {
    let what = format!("PodGroup of {ns}/{job}: {what}");
    super::wait_for(&what, WAIT, || async {
        match find_pod_group(client, ns, job).await {
            Some(pg) if accept(&pg) => Ok(pg),
            Some(pg) => Err(format!("{}", pg["status"])),
            None => Err("not created".to_string()),
        }
    })
    .await
}

/// The kubelet's part in a deletion: pods of `ns` with a deletionTimestamp are removed
/// (grace period 0), as a kubelet does once their containers stop.
pub async fn reap(client: &kube::Client, ns: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pods = api.list(&ListParams::default()).await.map(|l| l.items);
    let now = DeleteParams::default().grace_period(0);
    for pod in pods.unwrap_or_default() {
        if let (Some(name), Some(_)) = (&pod.metadata.name, &pod.metadata.deletion_timestamp) {
            let _ = api.delete(name, &now).await;
        }
    }
}

/// Waits until `job` has `count` pods and every one of them is bound; the placement.
pub async fn wait_bound(client: &kube::Client, ns: &str, job: &str, count: usize) -> Placement {
    super::wait_for(&format!("{count} pods of {job} bound"), WAIT, || async {
        reap(client, ns).await;
        let placement = Placement::read(client, ns, &super::jobs::selector(job)).await;
        let all = placement.bound.len() == count && placement.pending.is_empty();
        all.then_some(placement.clone())
            .ok_or_else(|| placement.summary())
    })
    .await
}
