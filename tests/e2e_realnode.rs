//! On a real node (kubelet, containerd, cluster DNS; `tests/support/realnode.rs`): PyTorchJob
//! workers wait for the Master's name in `init-pytorch` and start as soon as it resolves
//! (issue 43: busybox's nslookup never counted a short name as resolved, so the Worker's init
//! never finished), and a Master whose name never appears fails the Worker's init, after the
//! bounded wait, with the name it waited for.

mod support;

use std::time::Duration;

use kube::api::PostParams;
use support::realnode::{self, node};
use support::realnode_jobs::{
    init_status, pytorch_rendezvous, ready_since_ms, wait_for_condition, Scenario,
};

fn main() {
    let tests: Vec<(&'static str, support::harness::Test)> = vec![
        (
            "the_masters_service_missing_for_a_while_holds_the_worker_until_it_is_back",
            || {
                Box::pin(
                    the_masters_service_missing_for_a_while_holds_the_worker_until_it_is_back(),
                )
            },
        ),
        ("a_tarball_that_is_no_image_is_refused_naming_it", || {
            Box::pin(a_tarball_that_is_no_image_is_refused_naming_it())
        }),
        (
            "the_wait_works_with_busybox_1_37_as_in_the_default_alpine_image",
            || Box::pin(the_wait_works_with_busybox_1_37_as_in_the_default_alpine_image()),
        ),
        (
            "pytorch_worker_starts_once_the_masters_name_resolves",
            || Box::pin(pytorch_worker_starts_once_the_masters_name_resolves()),
        ),
        (
            "a_master_that_never_resolves_fails_the_workers_init_with_its_name",
            || Box::pin(a_master_that_never_resolves_fails_the_workers_init_with_its_name()),
        ),
        (
            "busybox_nslookup_fails_a_short_name_that_resolves_and_passes_its_complete_name",
            || {
                Box::pin(
                    busybox_nslookup_fails_a_short_name_that_resolves_and_passes_its_complete_name(
                    ),
                )
            },
        ),
    ];
    realnode::run_suite("e2e_realnode", realnode::DEFAULT_DOMAIN, tests)
}

async fn pytorch_worker_starts_once_the_masters_name_resolves() {
    support::realnode_jobs::rendezvous_succeeds(node(), "rn-rdv", realnode::BUSYBOX).await;
}

/// The default init image is alpine 3.24, whose busybox is 1.37: the same wait with Debian
/// 13's busybox 1.37 (alpine itself is on docker.io, out of reach here).
async fn the_wait_works_with_busybox_1_37_as_in_the_default_alpine_image() {
    let node = node();
    match support::realnode_jobs::load_busybox_137(node) {
        Ok(image) => support::realnode_jobs::rendezvous_succeeds(node, "rn-bb137", image).await,
        Err(why) => support::skip(&format!(
            "the_wait_works_with_busybox_1_37: no busybox 1.37 image here: {why}"
        )),
    }
}

async fn a_master_that_never_resolves_fails_the_workers_init_with_its_name() {
    let node = node();
    let scenario = Scenario::new(node, "rn-nomaster", &["--pytorch-init-timeout=4s"]);
    let client = node.client().await;
    let job = pytorch_rendezvous("lost", 0, false);
    scenario
        .pytorch_jobs(&client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(job).expect("job"),
        )
        .await
        .expect("create the job");
    let failed = wait_for_condition(
        &scenario,
        &client,
        "lost",
        "Failed",
        Duration::from_secs(90),
    )
    .await;
    let worker = scenario.pod(&client, "lost-worker-0").await;
    let init = init_status(&worker, "init-pytorch");
    let terminated = init
        .state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .unwrap_or_else(|| {
            panic!(
                "init-pytorch did not end: {init:?}\n{}",
                scenario.diagnose()
            )
        });
    assert_eq!(terminated.exit_code, 1, "{terminated:?}");
    // FallbackToLogsOnError: the reason is in the pod's status, not only in its log.
    let message = terminated.message.unwrap_or_default();
    let name = format!("lost-master-0.{}.svc.cluster.local.", scenario.namespace);
    assert!(
        message.contains(&format!(
            "gave up waiting for the master: {name} did not resolve within 4s"
        )),
        "{message}"
    );
    let master = scenario.pod(&client, "lost-master-0").await;
    assert!(
        ready_since_ms(&master).is_none(),
        "the Master never became Ready"
    );
    let said = message.lines().find(|l| l.contains("gave up"));
    eprintln!(
        "realnode: lost: Failed ({}): init-pytorch said: {}",
        failed["reason"],
        said.unwrap_or_default()
    );
}

/// Why upstream's init container never finished (issue 43), on the same kubelet, DNS and
/// busybox: `nslookup kubernetes` resolves under the first search domain and still exits 1,
/// because the other two answer NXDOMAIN; the complete name with its dot exits 0.
async fn busybox_nslookup_fails_a_short_name_that_resolves_and_passes_its_complete_name() {
    let node = node();
    let pod = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: nslookup-probe, namespace: default}}
spec:
  restartPolicy: Never
  containers:
  - name: probe
    image: {image}
    imagePullPolicy: Never
    command: [sh, -c, 'nslookup kubernetes; echo "short=$?"; nslookup kubernetes.default.svc.cluster.local.; echo "full=$?"']
"#,
        image = support::realnode::BUSYBOX
    );
    node.apply(&pod);
    let out = node.kubectl(&[
        "wait",
        "--for=jsonpath={.status.phase}=Succeeded",
        "--timeout=60s",
        "pod/nslookup-probe",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let logs = node.kubectl(&["logs", "nslookup-probe"]);
    let logs = String::from_utf8_lossy(&logs.stdout).to_string();
    assert!(
        logs.contains("Name:\tkubernetes.default.svc.cluster.local")
            || logs.contains("kubernetes.default.svc.cluster.local"),
        "{logs}"
    );
    assert!(
        logs.contains("short=1"),
        "the short name fails though it resolved: {logs}"
    );
    assert!(logs.contains("full=0"), "{logs}");
}

/// The Master's Service deleted while the controller is down (a crash, an upgrade): the
/// Worker's init container keeps waiting for the name, and once the controller is back and
/// recreates the Service the job runs to Succeeded.
async fn the_masters_service_missing_for_a_while_holds_the_worker_until_it_is_back() {
    let node = node();
    let mut scenario = Scenario::new(node, "rn-nosvc", &[]);
    let client = node.client().await;
    let job = pytorch_rendezvous("gap", 4, true);
    scenario
        .pytorch_jobs(&client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(job).expect("job"),
        )
        .await
        .expect("create the job");
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client.clone(), "rn-nosvc");
    support::wait_for("the Master's Service", Duration::from_secs(60), || async {
        services
            .get("gap-master-0")
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;
    scenario.stop_controller();
    services
        .delete("gap-master-0", &Default::default())
        .await
        .expect("delete the Master's Service");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let worker = scenario.pod(&client, "gap-worker-0").await;
    let init = init_status(&worker, "init-pytorch");
    assert!(
        init.state.as_ref().is_some_and(|s| s.running.is_some()),
        "the Worker still waits in init-pytorch: {init:?}"
    );
    scenario.start_controller();
    wait_for_condition(
        &scenario,
        &client,
        "gap",
        "Succeeded",
        Duration::from_secs(120),
    )
    .await;
    let log = scenario.logs("gap-worker-0", "init-pytorch");
    let waits = log.matches("does not resolve yet").count();
    assert!(waits >= 5, "it waited through the gap: {log}");
    eprintln!("realnode: the Master's Service gone ~10 s with the controller down: the Worker looked {waits} times, then the job Succeeded");
}

/// An image tarball that is not an image: the node refuses it, and the error names the file.
async fn a_tarball_that_is_no_image_is_refused_naming_it() {
    let node = node();
    let bogus = node.dir.path().join("not-an-image.tar");
    std::fs::write(&bogus, b"this is not a tar archive").expect("write");
    let err = node.try_import(&[&bogus]).err().unwrap_or_default();
    assert!(err.contains("not-an-image.tar"), "{err}");
}
