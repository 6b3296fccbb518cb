//! `gangplank controller --namespace-selector=gangplank.dev/managed=true` against a real
//! kube-apiserver: a job runs only where its namespace carries the label; elsewhere nothing
//! is written (no pod, no status) and the job is counted in
//! `gangplank_controller_unmanaged_jobs`. A namespace that loses the label is left while
//! every other job runs on; one that gains it has its jobs picked up without a restart.
//! (A selector the API server refuses: tests/e2e_controller_process.rs.)
//!
//! Run: `cargo test --test e2e_controller_selector`.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::controller::{pods_of, wait_pods, Controller};
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_controller_selector",
    [jobs_run_only_where_the_namespace_carries_the_label_and_follow_it]
);

const SELECTOR: &str = "--namespace-selector=gangplank.dev/managed=true";

/// Labels `namespace` managed (`true`) or takes the label away (`false`).
async fn set_managed(client: &kube::Client, namespace: &str, managed: bool) {
    let value = managed.then_some("true");
    let patch = json!({"metadata": {"labels": {"gangplank.dev/managed": value}}});
    Api::<Namespace>::all(client.clone())
        .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("label {namespace}: {e}"));
}

/// What the controller's /metrics says of `namespace`'s unmanaged jobs (`None`: no series).
async fn unmanaged_jobs(port: u16, namespace: &str) -> Result<Option<f64>, String> {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    let text = client
        .get(&url)
        .send()
        .await
        .map_err(|e| e.to_string())?
        .text()
        .await
        .map_err(|e| e.to_string())?;
    let series = format!("gangplank_controller_unmanaged_jobs{{job_namespace=\"{namespace}\"}} ");
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok()))
}

/// Waits until the gauge says `want` for `namespace`.
async fn wait_unmanaged(port: u16, namespace: &str, want: Option<f64>, controller: &Controller) {
    let what = format!("gangplank_controller_unmanaged_jobs of {namespace} at {want:?}");
    support::wait_for(&what, Duration::from_secs(30), || async {
        let got = unmanaged_jobs(port, namespace).await?;
        (got == want)
            .then_some(())
            .ok_or_else(|| format!("{got:?}\n{}", controller.log()))
    })
    .await;
}

/// No pod and no status: the controller wrote nothing for job `name`.
async fn assert_untouched(client: &kube::Client, namespace: &str, name: &str) {
    assert!(
        pods_of(client, namespace, name).await.is_empty(),
        "{namespace}/{name} has pods"
    );
    let stored = jobs::stored_pytorch_job(client, namespace, name).await;
    assert!(
        stored.get("status").is_none_or(|s| s.is_null()),
        "{namespace}/{name}: {stored:#}"
    );
}

async fn jobs_run_only_where_the_namespace_carries_the_label_and_follow_it() {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::Gangplank);
    let client = control_plane.client().await;
    let keep = control_plane.namespace("keep").await;
    let flip = control_plane.namespace("flip").await;
    let never = control_plane.unmanaged_namespace("never").await;
    let [port] = support::control_plane::free_ports();
    let metrics = format!("--controller-metrics-addr=127.0.0.1:{port}");
    let args = [
        "--kinds=PyTorchJob",
        "--leader-elect=false",
        "--gang-scheduler=",
        "--start-deadline=0s",
        SELECTOR,
        metrics.as_str(),
    ];
    let controller = Controller::start(control_plane, "controller-selector", &args);
    let create = |ns: String, name: &'static str| {
        let client = client.clone();
        async move {
            jobs::create(&client, &ns, &jobs::pytorch_job(name, 1), false)
                .await
                .unwrap_or_else(|e| panic!("create {ns}/{name}: {e}"));
        }
    };
    for ns in [&keep, &flip, &never] {
        create(ns.clone(), "first").await;
    }
    wait_pods(&client, &keep, "first", 3).await;
    wait_pods(&client, &flip, "first", 3).await;
    // Counted means seen and left: only then is "no pods" an answer, not a race.
    wait_unmanaged(port, &never, Some(1.0), &controller).await;
    assert_untouched(&client, &never, "first").await;

    // flip loses its label: its new job gets nothing, a new job in keep still runs.
    set_managed(&client, &flip, false).await;
    wait_unmanaged(port, &flip, Some(1.0), &controller).await;
    create(flip.clone(), "late").await;
    create(keep.clone(), "still").await;
    wait_pods(&client, &keep, "still", 3).await;
    wait_unmanaged(port, &flip, Some(2.0), &controller).await;
    assert_untouched(&client, &flip, "late").await;

    // flip labelled again: its job is picked up, no restart.
    set_managed(&client, &flip, true).await;
    wait_pods(&client, &flip, "late", 3).await;
    wait_unmanaged(port, &flip, None, &controller).await;
    assert_eq!(
        unmanaged_jobs(port, &never).await,
        Ok(Some(1.0)),
        "never is still left alone"
    );
    assert_untouched(&client, &never, "first").await;

    let log = controller.log();
    assert!(
        !log.contains("reconcile failed"),
        "a namespace left is no error:\n{log}"
    );
    for ns in [&never, &flip] {
        let warnings = log
            .lines()
            .filter(|l| {
                l.contains("--namespace-selector does not match") && l.contains(ns.as_str())
            })
            .count();
        assert_eq!(warnings, 1, "one warning for {ns}:\n{log}");
    }
}
