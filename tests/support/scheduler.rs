//! kube-scheduler and kube-controller-manager beside a test control plane, for the suites
//! where a real scheduler places (or refuses to place) pods.
//!
//! Entry points: [`ControlPlane::shared_with`](super::ControlPlane::shared_with) with a
//! [`Scheduling`] other than `None`; [`requirement`] for the suite's harness (the suite is
//! skipped, with the reason printed, when the binaries are not there); [`wait_placement`]
//! for what the scheduler did with a set of pods.
//!
//! No kubelet runs: the scheduler binds pods (`spec.nodeName`, `PodScheduled=True`) and the
//! tests still write pod phases. Nodes are simulated (`nodes::SimNode`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};

use super::control_plane::{Scheduling, NATIVE_GANG_GATES};
use super::ControlPlane;

/// The controllers of kube-controller-manager the suites need: the garbage collector
/// (ownerReferences: a deleted job takes its PodGroup and pods with it) and the namespace
/// controller. Never `nodelifecycle`: with no kubelet to renew leases it would taint every
/// node unreachable and evict its pods.
const CONTROLLERS: &str = "garbage-collector-controller,namespace-controller";

/// The suite's requirement (see `harness`): kube-scheduler and kube-controller-manager beside
/// the control plane's binaries.
pub fn requirement() -> Result<(), String> {
    super::assets::scheduler_requirement()
}

impl ControlPlane {
    /// Starts kube-scheduler and kube-controller-manager with the admin kubeconfig, leader
    /// election off (one of each per control plane) and no serving port (nothing probes them;
    /// the tests watch what they do to pods).
    pub(super) fn spawn_scheduling(&self) {
        let mut args = self.unserved_component_args();
        // To see the scheduler's reasoning in a failure's log tail (4: each plugin's verdict).
        if let Ok(level) = std::env::var("GANGPLANK_SCHEDULER_VERBOSITY") {
            args.push(format!("-v={level}"));
        }
        self.spawn("kube-scheduler", &self.assets.kube_scheduler(), &args);
        self.spawn_controller_manager();
    }

    /// kube-controller-manager with [`CONTROLLERS`] (plus podgroup-protection on a native
    /// gang plane): every plane that schedules pods, Volcano's included, runs one.
    pub(super) fn spawn_controller_manager(&self) {
        let mut args = self.unserved_component_args();
        let controllers = match self.scheduling {
            // Takes the finalizer off a deleted PodGroup once no pod names it, as in a cluster.
            Scheduling::NativeGang => format!("{CONTROLLERS},podgroup-protection-controller"),
            _ => CONTROLLERS.to_string(),
        };
        args.push(format!("--controllers={controllers}"));
        let program = self.assets.kube_controller_manager();
        self.spawn("kube-controller-manager", &program, &args);
    }

    /// The admin kubeconfig, leader election off, no serving port, and the native gang gates
    /// where the plane has them.
    fn unserved_component_args(&self) -> Vec<String> {
        let mut args = vec![
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--leader-elect=false".to_string(),
            "--secure-port=0".to_string(),
        ];
        if self.scheduling == Scheduling::NativeGang {
            args.push(format!("--feature-gates={NATIVE_GANG_GATES}"));
        }
        args
    }
}

impl ControlPlane {
    /// Fails with the reason when the apiserver, started with the native gang gates, does
    /// not serve `scheduling.k8s.io/v1alpha2` PodGroups (a kube-apiserver before 1.36 has
    /// another version of the API, or none).
    pub(super) async fn wait_native_gang_served(&self) {
        let client = self.client().await;
        let api: Api<DynamicObject> = Api::all_with(client, &native_pod_group());
        let what = "scheduling.k8s.io/v1alpha2 podgroups served (native gangs need kube-apiserver \
                    1.36 with GenericWorkload on)";
        super::wait_for(what, Duration::from_secs(30), || async {
            let list = api.list(&ListParams::default().limit(1)).await;
            list.map(drop).map_err(|e| e.to_string())
        })
        .await;
    }
}

/// The API resource of Kubernetes-native PodGroups (1.36).
pub fn native_pod_group() -> ApiResource {
    ApiResource {
        group: "scheduling.k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "scheduling.k8s.io/v1alpha2".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    }
}

/// What the scheduler did with a set of pods, once each has either been bound or been found
/// unschedulable.
#[derive(Debug, Default, Clone)]
pub struct Placement {
    /// Pod name → node name.
    pub bound: BTreeMap<String, String>,
    /// Pod name → the scheduler's message (`PodScheduled=False`), or "" when it has not
    /// reported yet.
    pub pending: BTreeMap<String, String>,
}

impl Placement {
    pub fn all_bound(&self) -> bool {
        self.pending.is_empty() && !self.bound.is_empty()
    }

    /// Reads the pods of `namespace` matching `selector`.
    pub async fn read(client: &kube::Client, namespace: &str, selector: &str) -> Placement {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let params = ListParams::default().labels(selector);
        let pods = match api.list(&params).await {
            Ok(list) => list.items,
            Err(e) => panic!("list pods {selector} in {namespace}: {e}"),
        };
        let mut placement = Placement::default();
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                Some(node) => {
                    placement.bound.insert(name, node);
                }
                None => {
                    placement.pending.insert(name, unschedulable_message(&pod));
                }
            }
        }
        placement
    }

    /// Every pod bound, or every unbound pod reported unschedulable by the scheduler.
    fn settled(&self) -> bool {
        self.pending.values().all(|m| !m.is_empty())
    }

    pub fn summary(&self) -> String {
        let pending: Vec<String> = self
            .pending
            .iter()
            .map(|(pod, why)| format!("{pod}: {why}"))
            .collect();
        format!(
            "{} bound, {} pending [{}]",
            self.bound.len(),
            self.pending.len(),
            pending.join("; ")
        )
    }
}

/// The scheduler's message on an unbound pod (`PodScheduled=False`), or "" before it has
/// tried the pod.
fn unschedulable_message(pod: &Pod) -> String {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .map(|c| {
            let reason = c.reason.clone().unwrap_or_default();
            let message = c.message.clone().unwrap_or_default();
            format!("{reason}: {message}")
        })
        .unwrap_or_default()
}

/// Waits until the `expected` pods matching `selector` exist and each is either bound or
/// reported unschedulable, then keeps watching for `settle` (the scheduler retries
/// unschedulable pods on cluster events; a gang waits at Permit) and returns what it did.
/// Panics after `limit` with the pods' state and the scheduler's log tail: a scheduler that
/// neither binds nor reports is a broken set-up, not a verdict.
pub async fn wait_placement(
    control_plane: &ControlPlane,
    namespace: &str,
    selector: &str,
    expected: usize,
    settle: Duration,
    limit: Duration,
) -> Placement {
    let client = control_plane.client().await;
    let deadline = Instant::now() + limit;
    let mut stable_since: Option<(Instant, Placement)> = None;
    loop {
        if let Err(exited) = control_plane.check_running() {
            panic!("a control-plane process exited: {exited}");
        }
        let now = Placement::read(&client, namespace, selector).await;
        let count = now.bound.len() + now.pending.len();
        let done = count == expected && (now.all_bound() || now.settled());
        if now.all_bound() && count == expected {
            return now;
        }
        stable_since = match stable_since {
            Some((since, ref before)) if done && before.bound == now.bound => {
                if since.elapsed() >= settle {
                    return now;
                }
                Some((since, now))
            }
            _ if done => Some((Instant::now(), now)),
            _ => None,
        };
        if Instant::now() >= deadline {
            let state = stable_since
                .map(|(_, p)| p.summary())
                .unwrap_or_else(|| "pods not all created or not yet tried".into());
            let log = control_plane.log_tail("kube-scheduler", 20);
            panic!(
                "kube-scheduler did not settle {expected} pods ({selector}) in {namespace} \
                 within {limit:?}: {state}\nkube-scheduler log tail:\n{log}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
