//! `gangplank controller` as a process against a test control plane, and the kubelet's part
//! that no kubelet plays here: pod phases and container states written through the status
//! subresource, as envtest users do.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::process::Process;
use super::ControlPlane;

/// A running `gangplank controller`.
pub struct Controller {
    pub process: Process,
}

impl Controller {
    /// Starts `gangplank controller <args>` with the control plane's (admin) kubeconfig.
    pub fn start(control_plane: &ControlPlane, name: &str, args: &[&str]) -> Controller {
        Controller::start_as(control_plane, &control_plane.kubeconfig, name, args)
    }

    /// As [`Controller::start`], with the credentials of `kubeconfig`.
    pub fn start_as(
        control_plane: &ControlPlane,
        kubeconfig: &std::path::Path,
        name: &str,
        args: &[&str],
    ) -> Controller {
        let mut all = vec!["controller".to_string(), "--log-format=json".to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        let kubeconfig = kubeconfig.display().to_string();
        let env = [
            ("KUBECONFIG", kubeconfig.as_str()),
            ("RUST_LOG", "info,kube=warn"),
        ];
        let dir = control_plane.dir.path();
        let process = Process::spawn_with_env(name, super::gangplank(), &all, &env, dir);
        Controller { process }
    }

    pub fn log(&self) -> String {
        self.process.log_text()
    }
}

/// The pods of job `name` in `namespace`, sorted by name.
pub async fn pods_of(client: &kube::Client, namespace: &str, job: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(&format!("training.kubeflow.org/job-name={job}"));
    let mut pods = api.list(&params).await.map(|l| l.items).unwrap_or_default();
    pods.retain(|p| p.metadata.deletion_timestamp.is_none());
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    pods
}

/// Waits until job `name` has `count` live pods; their names.
pub async fn wait_pods(
    client: &kube::Client,
    namespace: &str,
    job: &str,
    count: usize,
) -> Vec<String> {
    let what = format!("{count} pods of {job}");
    super::wait_for(&what, Duration::from_secs(30), || async {
        let pods = pods_of(client, namespace, job).await;
        let names: Vec<String> = pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        (names.len() == count)
            .then_some(names.clone())
            .ok_or_else(|| format!("{names:?}"))
    })
    .await
}

/// The kubelet's report that every container of `pod` runs.
pub async fn set_running(client: &kube::Client, namespace: &str, pod: &str, container: &str) {
    let state = json!({"running": {"startedAt": now()}});
    set_pod_status(client, namespace, pod, "Running", container, state).await;
}

/// The kubelet's report that `container` of `pod` exited with `code` (phase Succeeded for 0,
/// else Failed).
pub async fn set_exited(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
    code: i32,
) {
    let phase = if code == 0 { "Succeeded" } else { "Failed" };
    let reason = if code == 0 { "Completed" } else { "Error" };
    let state = json!({"terminated": {
        "exitCode": code, "reason": reason, "startedAt": now(), "finishedAt": now(),
    }});
    set_pod_status(client, namespace, pod, phase, container, state).await;
}

async fn set_pod_status(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    phase: &str,
    container: &str,
    state: Value,
) {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let ready = phase == "Running";
    // The kubelet's pod conditions: Ready follows the containers.
    let ready_condition = if ready { "True" } else { "False" };
    let status = json!({"status": {
        "phase": phase,
        "startTime": now(),
        "conditions": [{"type": "Ready", "status": ready_condition, "lastTransitionTime": now()}],
        "containerStatuses": [{
            "name": container, "image": "test", "imageID": "", "ready": ready,
            "restartCount": 0, "state": state,
        }],
    }});
    api.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("set {pod} {phase}: {e}"));
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// deploy/controller/'s ServiceAccount, RBAC and admission policies, applied to the control
/// plane; a kubeconfig holding a token of that ServiceAccount and nothing else (so the
/// controller runs as deployed: its rights, and the fence around them).
pub async fn deploys_identity(control_plane: &ControlPlane) -> std::path::PathBuf {
    deploys_identity_with(control_plane, &[]).await
}

/// As [`deploys_identity`], with deploy/controller's RBAC as `components` (after
/// deploy/controller, e.g. `controller-mpi`) extend it: rendered by `kubectl kustomize`, as a
/// user installs them.
pub async fn deploys_identity_with(
    control_plane: &ControlPlane,
    components: &[&str],
) -> std::path::PathBuf {
    deploys_identity_bound(control_plane, components, &[]).await
}

/// As [`deploys_identity_with`], for an MPI component (`controller-mpi`,
/// `controller-mpi-v1`), which builds only after deploy/controller-namespaced: that
/// component, then `component`, with the controller's RoleBinding in `namespace` (run the
/// controller with `--namespaces=<namespace>`).
pub async fn deploys_confined_identity(
    control_plane: &ControlPlane,
    component: &str,
    namespace: &str,
) -> std::path::PathBuf {
    let binding = [("controller-namespaced/binding", namespace)];
    deploys_identity_bound(
        control_plane,
        &["controller-namespaced", component],
        &binding,
    )
    .await
}

/// As [`deploys_identity_with`], with `bindings` (a directory under deploy/ and the
/// namespace it is included into, as deploy/controller-namespaced's overlays do).
pub async fn deploys_identity_bound(
    control_plane: &ControlPlane,
    components: &[&str],
    bindings: &[(&str, &str)],
) -> std::path::PathBuf {
    control_plane.ensure_namespace("gangplank-system").await;
    let mut all = vec!["controller"];
    all.extend_from_slice(components);
    let name = format!("identity-{}", all.join("+"));
    super::rbac::Install::render(control_plane, &name, &all, bindings).apply(control_plane);
    let path = control_plane.service_account_kubeconfig(
        "gangplank-system",
        "gangplank-controller",
        "controller-kubeconfig",
    );
    wait_fenced(&path).await;
    path
}

/// Waits until deploy/controller's admission policies are in force for the identity of
/// `kubeconfig` (the API server reads them through an informer): a dry-run create of a Lease
/// other than the leader's, which its RBAC allows in gangplank-system in every install, is
/// refused by the policy.
async fn wait_fenced(kubeconfig: &std::path::Path) {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(config, &options)
        .await
        .expect("client config");
    let client = kube::Client::try_from(config).expect("client");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client, "gangplank-system");
    let probe =
        serde_json::from_value(json!({"metadata": {"name": "fence-probe"}})).expect("lease");
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    super::wait_for(
        "the controller's admission policies in force",
        Duration::from_secs(30),
        || async {
            match leases.create(&params, &probe).await {
                Err(kube::Error::Api(status))
                    if status.message.contains("ValidatingAdmissionPolicy") =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

/// Server-side apply of one manifest (plural: the kind lowercased + "s", true of these).
pub async fn apply(client: &kube::Client, object: &Value) {
    let text = |k: &str| object[k].as_str().expect("apiVersion and kind").to_string();
    let resource = super::jobs::resource(&text("apiVersion"), &text("kind"));
    let name = object["metadata"]["name"].as_str().expect("name");
    let api: kube::Api<kube::api::DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &resource),
        None => kube::Api::all_with(client.clone(), &resource),
    };
    let params = kube::api::PatchParams::apply("gangplank-tests").force();
    api.patch(name, &params, &kube::api::Patch::Apply(object))
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}
