//! The controller process under what happens to processes: killed mid-reconcile and
//! restarted (no duplicate pods, no pod made twice), and run as two replicas (one leads; the
//! other takes over when the leader dies), and with deploy/'s RBAC alone; and where a user
//! first meets it: without the Lease namespace, or without the right to use Leases, it says
//! so and exits. Against a real kube-apiserver.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::controller::{pods_of, wait_pods, Controller};
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_controller_process",
    [
        a_controller_killed_mid_reconcile_and_restarted_creates_no_duplicates,
        of_two_replicas_one_leads_and_the_other_takes_over_when_it_dies,
        the_controller_runs_with_deploys_rbac_alone,
        serve_with_controller_answers_webhooks_and_runs_jobs,
        sigterm_stops_the_controller_and_releases_its_lease,
        without_the_lease_namespace_the_controller_exits_naming_it_and_the_fixes,
        forbidden_leases_make_the_controller_exit_naming_the_namespace_and_the_fixes,
        a_namespace_selector_the_api_server_refuses_makes_the_controller_exit_naming_the_flag,
    ]
);

fn control_plane() -> &'static ControlPlane {
    ControlPlane::shared(&support::assets::get(), Crds::TrainingV1)
}

fn tf_job(name: &str, workers: u32) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": {"Worker": {
            "replicas": workers,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{"name": "tensorflow", "image": jobs::IMAGE}]}},
        }}},
    })
}

async fn a_controller_killed_mid_reconcile_and_restarted_creates_no_duplicates() {
    let control_plane = control_plane();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("restart").await;
    let args = [
        "--kinds=PyTorchJob",
        "--leader-elect=false",
        "--gang-scheduler=",
    ];
    let first = Controller::start(control_plane, "controller-first", &args);
    let mut job = jobs::pytorch_job("bert", 1);
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 16.into();
    jobs::create(&client, &ns, &job, false)
        .await
        .expect("created");
    // Kill it as soon as the gang is partly created.
    let before = support::wait_for("the first pods", Duration::from_secs(30), || async {
        let pods = pods_of(&client, &ns, "bert").await;
        (!pods.is_empty())
            .then_some(pods)
            .ok_or_else(|| "none yet".to_string())
    })
    .await;
    drop(first);
    let second = Controller::start(control_plane, "controller-second", &args);
    wait_pods(&client, &ns, "bert", 17).await;
    let after = pods_of(&client, &ns, "bert").await;
    for pod in &before {
        let same = after.iter().find(|p| p.metadata.name == pod.metadata.name);
        let uid = same.and_then(|p| p.metadata.uid.clone());
        assert_eq!(
            uid, pod.metadata.uid,
            "{:?} was made again",
            pod.metadata.name
        );
    }
    // Settled: a few more seconds bring no 18th pod.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        pods_of(&client, &ns, "bert").await.len(),
        17,
        "{}",
        second.log()
    );
}

async fn of_two_replicas_one_leads_and_the_other_takes_over_when_it_dies() {
    let control_plane = control_plane();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("leader").await;
    let lease_ns = format!("--lease-namespace={ns}");
    let args = [
        "--kinds=TFJob",
        "--leader-elect=true",
        lease_ns.as_str(),
        "--lease-name=tf-leader",
        "--gang-scheduler=",
    ];
    let mut replicas = vec![
        Controller::start(control_plane, "replica-a", &args),
        Controller::start(control_plane, "replica-b", &args),
    ];
    let leading = |c: &Controller| c.log().contains("\"leading\"");
    let leader = support::wait_for("one leader", Duration::from_secs(30), || async {
        let leaders: Vec<usize> = (0..2).filter(|&i| leading(&replicas[i])).collect();
        match leaders.as_slice() {
            [one] => Ok(*one),
            other => Err(format!("leaders: {other:?}")),
        }
    })
    .await;
    jobs::create(&client, &ns, &tf_job("first", 2), false)
        .await
        .expect("created");
    wait_pods(&client, &ns, "first", 2).await;
    // Still exactly one leader once it has worked.
    let follower = 1 - leader;
    assert!(
        !leading(&replicas[follower]),
        "both lead:\n{}",
        replicas[follower].log()
    );

    replicas.remove(leader); // killed
    let survivor = &replicas[0];
    support::wait_for(
        "the follower takes over",
        Duration::from_secs(45),
        || async {
            leading(survivor)
                .then_some(())
                .ok_or_else(|| "not yet".to_string())
        },
    )
    .await;
    jobs::create(&client, &ns, &tf_job("second", 3), false)
        .await
        .expect("created");
    wait_pods(&client, &ns, "second", 3).await;
}

/// Least privilege that works: the controller with nothing but deploy/controller/'s RBAC
/// runs a gang-scheduled job (Lease, PodGroup, pods, Services, status, Events) and an
/// elastic PyTorchJob's HorizontalPodAutoscaler.
async fn the_controller_runs_with_deploys_rbac_alone() {
    let control_plane = control_plane();
    let kubeconfig = support::controller::deploys_identity(control_plane).await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("rbac").await;
    // As deploy/controller/deployment.yaml runs it: the namespace watch of the selector
    // needs its own rule (deploy/controller/rbac.yaml).
    let args = [
        "--kinds=XGBoostJob,PyTorchJob",
        "--leader-elect=true",
        "--lease-namespace=gangplank-system",
        "--gang-scheduler=volcano",
        "--namespace-selector=gangplank.dev/managed=true",
    ];
    let controller = Controller::start_as(control_plane, &kubeconfig, "controller-rbac", &args);
    let job = json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "XGBoostJob",
        "metadata": {"name": "iris"},
        "spec": {"xgbReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [{"name": "xgboost", "image": jobs::IMAGE}]}}},
            "Worker": {"replicas": 2, "restartPolicy": "Never", "template": {"spec": {"containers": [{"name": "xgboost", "image": jobs::IMAGE}]}}},
        }},
    });
    jobs::create(&client, &ns, &job, false)
        .await
        .expect("created");
    // Volcano would admit the PodGroup; here the test does, as envtest users do.
    let groups: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        &ns,
        &jobs::resource("scheduling.volcano.sh/v1beta1", "PodGroup"),
    );
    let name = support::wait_for("the PodGroup", Duration::from_secs(30), || async {
        let list = groups
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|g| g.metadata.name.clone())
            .collect();
        match names.as_slice() {
            [one] => Ok(one.clone()),
            _ => Err(format!("{names:?}\n{}", controller.log())),
        }
    })
    .await;
    let group = serde_json::to_value(groups.get(&name).await.expect("PodGroup")).expect("JSON");
    assert_eq!(group["spec"]["minMember"], 3, "{group:#}");
    let admitted = json!({"status": {"phase": "Running"}});
    let params = kube::api::PatchParams::default();
    groups
        .patch(&name, &params, &kube::api::Patch::Merge(&admitted))
        .await
        .expect("admit");
    wait_pods(&client, &ns, "iris", 3).await;
    let api = jobs::api_for(&client, &ns, &job);
    support::wait_for("status written", Duration::from_secs(20), || async {
        let stored =
            serde_json::to_value(api.get("iris").await.map_err(|e| e.to_string())?).expect("JSON");
        let created = stored["status"]["conditions"][0]["type"] == "Created";
        created
            .then_some(())
            .ok_or_else(|| format!("{:#}\n{}", stored["status"], controller.log()))
    })
    .await;
    // An elastic PyTorchJob with metrics gets its HorizontalPodAutoscaler.
    let mut elastic = jobs::pytorch_job("elastic", 1);
    let spec = elastic["spec"].as_object_mut().expect("spec");
    spec.remove("pytorchReplicaSpecs");
    spec.insert(
        "pytorchReplicaSpecs".into(),
        json!({"Worker": {
            "replicas": 2, "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{"name": "pytorch", "image": jobs::IMAGE}]}},
        }}),
    );
    spec.insert("elasticPolicy".into(), json!({"minReplicas": 1, "maxReplicas": 4, "metrics": [{
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }]}));
    jobs::create(&client, &ns, &elastic, false)
        .await
        .expect("created");
    let hpas: kube::Api<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler> =
        kube::Api::namespaced(client.clone(), &ns);
    support::wait_for("the HPA", Duration::from_secs(30), || async {
        match hpas.get_opt("elastic").await {
            Ok(Some(hpa)) => Ok(hpa),
            other => Err(format!("{other:?}\n{}", controller.log())),
        }
    })
    .await;
    let log = controller.log();
    assert!(
        !log.contains("forbidden") && !log.contains("Forbidden"),
        "{log}"
    );
}

/// Small clusters run one process: `gangplank serve --controller` answers webhooks and runs
/// jobs.
async fn serve_with_controller_answers_webhooks_and_runs_jobs() {
    let control_plane = control_plane();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("serve-controller").await;
    let [port] = support::control_plane::free_ports();
    let args: Vec<String> = [
        "serve",
        &format!("--addr=127.0.0.1:{port}"),
        &format!("--policies={}", support::repo().join("policies").display()),
        &format!(
            "--ephemeral-ca={}",
            control_plane
                .file(&format!("serve-{port}-ca.crt"))
                .display()
        ),
        "--controller",
        "--kinds=PaddleJob",
        "--leader-elect=false",
        "--gang-scheduler=",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let kubeconfig = control_plane.kubeconfig.display().to_string();
    let env = [("KUBECONFIG", kubeconfig.as_str())];
    let server = support::process::Process::spawn_with_env(
        "serve-controller",
        support::gangplank(),
        &args,
        &env,
        control_plane.dir.path(),
    );
    let job = json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": "ernie"},
        "spec": {"paddleReplicaSpecs": {"Worker": {
            "replicas": 2,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{"name": "paddle", "image": jobs::IMAGE}]}},
        }}},
    });
    jobs::create(&client, &ns, &job, false)
        .await
        .expect("created");
    wait_pods(&client, &ns, "ernie", 2).await;
    // The webhook half answers on the same process.
    let ca = std::fs::read(control_plane.file(&format!("serve-{port}-ca.crt"))).expect("CA");
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).expect("PEM")])
        .no_proxy()
        .build()
        .expect("client");
    let ready = http
        .get(format!("https://127.0.0.1:{port}/readyz"))
        .send()
        .await;
    let status = ready.map(|r| r.status().as_u16()).unwrap_or_default();
    assert_eq!(status, 200, "{}", server.log_text());
}

/// What the kubelet does on a rollout: SIGTERM. The leader stops and gives its Lease up, so
/// the other replica need not wait out the lease duration.
async fn sigterm_stops_the_controller_and_releases_its_lease() {
    let control_plane = control_plane();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("sigterm").await;
    let lease_ns = format!("--lease-namespace={ns}");
    let args = [
        "--kinds=JAXJob",
        "--leader-elect=true",
        lease_ns.as_str(),
        "--gang-scheduler=",
    ];
    let mut controller = Controller::start(control_plane, "controller-sigterm", &args);
    support::wait_for("leading", Duration::from_secs(30), || async {
        let leads = controller.log().contains("\"leading\"");
        leads.then_some(()).ok_or_else(|| "not yet".to_string())
    })
    .await;
    let pid = controller
        .process
        .server_pid()
        .expect("the controller runs");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -TERM {pid}");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while controller.process.check_running().is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "still running 15 s after SIGTERM:\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client.clone(), &ns);
    let lease = leases.get("gangplank-controller").await.expect("the Lease");
    let holder = lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder, None, "released on shutdown");
}

/// Waits (at most `limit`) for `controller` to exit on its own, which must be with a
/// non-zero status; its log.
async fn exits_failing(controller: &mut Controller, limit: Duration) -> String {
    let deadline = std::time::Instant::now() + limit;
    while controller.process.check_running().is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "still running after {limit:?}:\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = controller.log();
    assert!(!controller.process.exit_success(), "exited 0:\n{log}");
    log
}

/// A first run against a cluster without the Lease namespace (the default,
/// gangplank-system, before deploy/ is applied): the controller names the namespace and the
/// three fixes, and exits, instead of retrying for ever.
async fn without_the_lease_namespace_the_controller_exits_naming_it_and_the_fixes() {
    let control_plane = control_plane();
    // Never created (gangplank-system may be: the RBAC test makes it).
    let args = [
        "--kinds=JAXJob",
        "--leader-elect=true",
        "--lease-namespace=gangplank-absent",
        "--gang-scheduler=",
    ];
    let mut controller = Controller::start(control_plane, "controller-no-lease-ns", &args);
    let log = exits_failing(&mut controller, Duration::from_secs(30)).await;
    for needed in [
        "gangplank-absent",
        "kubectl create namespace gangplank-absent",
        "--lease-namespace=",
        "--leader-elect=false",
    ] {
        assert!(log.contains(needed), "names {needed}:\n{log}");
    }
}

/// deploy/'s identity, whose Lease rights are in gangplank-system only, told to hold its
/// Lease elsewhere: after one lease duration of 403s (RBAC may still be being applied) it
/// names the namespace, the RBAC and the flags, and exits.
async fn forbidden_leases_make_the_controller_exit_naming_the_namespace_and_the_fixes() {
    let control_plane = control_plane();
    let kubeconfig = support::controller::deploys_identity(control_plane).await;
    let ns = control_plane.namespace("lease-forbidden").await;
    let lease_ns = format!("--lease-namespace={ns}");
    let args = [
        "--kinds=JAXJob",
        "--leader-elect=true",
        lease_ns.as_str(),
        "--gang-scheduler=",
    ];
    let mut controller = Controller::start_as(
        control_plane,
        &kubeconfig,
        "controller-lease-forbidden",
        &args,
    );
    let log = exits_failing(&mut controller, Duration::from_secs(60)).await;
    for needed in [
        format!("may not get Leases in namespace \\\"{ns}\\\""),
        "deploy/controller/rbac.yaml".to_string(),
        "--leader-elect=false".to_string(),
    ] {
        assert!(log.contains(&needed), "names {needed}:\n{log}");
    }
}

/// A `--namespace-selector` that is no label selector: the API server's reason and the flag
/// are named, and the controller exits rather than serve no namespace or every one.
async fn a_namespace_selector_the_api_server_refuses_makes_the_controller_exit_naming_the_flag() {
    let control_plane = control_plane();
    let args = [
        "--kinds=JAXJob",
        "--leader-elect=false",
        "--gang-scheduler=",
        "--namespace-selector=gangplank.dev/managed in true",
    ];
    let mut controller = Controller::start(control_plane, "controller-bad-selector", &args);
    let log = exits_failing(&mut controller, Duration::from_secs(30)).await;
    for needed in [
        "--namespace-selector \\\"gangplank.dev/managed in true\\\": the API server refuses it",
        "GANGPLANK_NAMESPACE_SELECTOR",
    ] {
        assert!(log.contains(needed), "names {needed}:\n{log}");
    }
}
