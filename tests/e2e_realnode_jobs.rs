//! Training jobs that really run (issue 40 item 2): for every kind the controller runs, a job
//! whose ranks read the environment the controller injects (MASTER_ADDR/PORT, WORLD_SIZE,
//! RANK; PET_RDZV_ENDPOINT; TF_CONFIG; the JAX coordinator; PADDLE_MASTER; the MPI hostfile),
//! find each other over the cluster's DNS and Services, all-reduce a small tensor over TCP
//! (`examples/allreduce.rs`), check the sum and exit 0 — on a real node, through the real
//! kubelet, the controller on the host with the native gang. Each job reaches Succeeded, and
//! cleanPodPolicy and TTL then act on the real pods.

mod support;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::realnode::{self, node, RealNode};
use support::realnode_jobs::{wait_for_job_condition, Scenario};

macro_rules! tests {
    ($($test:ident),* $(,)?) => {
        vec![$((stringify!($test), (|| Box::pin($test())) as support::harness::Test)),*]
    };
}

fn main() {
    let tests = tests![
        pytorch_two_ranks_all_reduce_and_succeed,
        pytorch_four_ranks_all_reduce_and_succeed,
        pytorch_elastic_ranks_rendezvous_at_worker_0_and_succeed,
        tensorflow_chief_and_workers_all_reduce_by_tf_config_and_succeed,
        jax_processes_all_reduce_at_the_coordinator_and_succeed,
        xgboost_master_and_workers_all_reduce_and_succeed,
        paddle_nodes_all_reduce_at_paddle_master_and_succeed,
        mpi_launcher_reaches_workers_by_hostfile_names_and_succeeds,
        clean_pod_policy_all_and_the_ttl_remove_the_pods_then_the_job,
        a_worker_exiting_1_under_on_failure_is_restarted_by_the_kubelet_and_the_job_succeeds,
        a_retryable_exit_code_under_exit_code_recreates_the_pod_and_the_job_succeeds,
        backoff_limit_exhausted_fails_the_job_with_the_reason,
        a_worker_pod_deleted_mid_run_is_recreated_and_the_job_succeeds,
        a_gang_the_node_cannot_hold_sits_pending_and_the_watchdog_names_why,
    ];
    realnode::run_suite("e2e_realnode_jobs", realnode::DEFAULT_DOMAIN, tests)
}

const IMAGE: &str = "localhost/gangplank-test/allreduce:1";

/// The all-reduce program (`cargo build --example allreduce`, which `cargo test
/// --all-targets` builds) packed as an image with the libraries it links, loaded once.
fn allreduce_image(node: &RealNode) -> &'static str {
    static LOADED: OnceLock<()> = OnceLock::new();
    LOADED.get_or_init(|| {
        let binary = example_binary();
        let tarball = node.dir.path().join("allreduce.tar");
        let mkimage = node.tool_dir().join("mkimage.py");
        let out = std::process::Command::new("python3")
            .arg(&mkimage)
            .arg(&tarball)
            .arg("--binary")
            .arg(format!("{}:/allreduce", binary.display()))
            .args(["--with-libs", "--tag", IMAGE])
            .output()
            .expect("run mkimage.py");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        node.import(&[&tarball]);
    });
    IMAGE
}

/// target/<profile>/examples/allreduce beside this test binary, built if missing.
fn example_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let binary = profile_dir.join("examples/allreduce");
    if !binary.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "--example", "allreduce"])
            .current_dir(support::repo())
            .status()
            .expect("cargo build --example allreduce");
        assert!(status.success(), "cargo build --example allreduce failed");
    }
    binary
}

/// A replica spec of `count` pods running the program (`args` after it), container `name`.
fn replicas(count: u32, container: &str, restart: &str, args: &[&str]) -> Value {
    json!({
        "replicas": count,
        "restartPolicy": restart,
        "template": {"spec": {
            "containers": [{
                "name": container,
                "image": IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/allreduce"],
                "args": args,
            }],
            "terminationGracePeriodSeconds": 1,
        }},
    })
}

/// Creates `job` in a namespace of its own with a controller for `kind`, waits for Succeeded,
/// and checks every pod printed the all-reduce's result (cleanPodPolicy None keeps them).
async fn runs_to_succeeded(namespace: &str, kind: &str, mut job: Value) -> Finished {
    let node = node();
    let image = allreduce_image(node);
    assert_eq!(image, IMAGE);
    let kinds = format!("--kinds={kind}");
    let scenario = Scenario::new(node, namespace, &[kinds.as_str()]);
    let name = job["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    job["metadata"]["namespace"] = json!(namespace);
    // Pods kept to read their logs; no restart allowed unless the test says so.
    let run_policy = &mut job["spec"]["runPolicy"];
    run_policy["cleanPodPolicy"] = json!("None");
    if run_policy.get("backoffLimit").is_none() {
        run_policy["backoffLimit"] = json!(0);
    }
    let created = Instant::now();
    node.apply(&job.to_string());
    let client = node.client().await;
    let api_version = job["apiVersion"].as_str().unwrap_or_default().to_string();
    let api = kube::Api::namespaced_with(
        client.clone(),
        namespace,
        &support::jobs::resource(&api_version, kind),
    );
    wait_for_job_condition(&api, &name, "Succeeded", Duration::from_secs(150), || {
        scenario.diagnose()
    })
    .await;
    let took = created.elapsed();

    let pods = support::controller::pods_of(&client, namespace, &name).await;
    assert!(!pods.is_empty(), "{}", scenario.diagnose());
    for pod in &pods {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let logs = scenario_logs(node, namespace, &pod_name);
        let ok = logs.contains("as expected") || logs.contains("mpi worker");
        assert!(ok, "{pod_name} did not all-reduce: {logs}");
    }
    eprintln!(
        "realnode: {kind} {name} ({} pods): create → Succeeded in {:.1} s",
        pods.len(),
        took.as_secs_f64()
    );
    Finished { scenario, pods }
}

/// A job that ran to Succeeded: its controller (still running) and its pods at the end.
struct Finished {
    scenario: Scenario<'static>,
    pods: Vec<k8s_openapi::api::core::v1::Pod>,
}

impl Finished {
    fn pod(&self, name: &str) -> &k8s_openapi::api::core::v1::Pod {
        self.pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no pod {name}: {}", self.scenario.diagnose()))
    }
}

fn container_status(
    pod: &k8s_openapi::api::core::v1::Pod,
) -> k8s_openapi::api::core::v1::ContainerStatus {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .cloned()
        .unwrap_or_default()
}

fn scenario_logs(node: &RealNode, namespace: &str, pod: &str) -> String {
    let out = node.kubectl(&["-n", namespace, "logs", pod]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn pytorch(name: &str, workers: u32) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {
            "Master": replicas(1, "pytorch", "OnFailure", &[]),
            "Worker": replicas(workers, "pytorch", "OnFailure", &[]),
        }},
    })
}

async fn pytorch_two_ranks_all_reduce_and_succeed() {
    runs_to_succeeded("rj-pytorch-2", "PyTorchJob", pytorch("ar", 1)).await;
}

async fn pytorch_four_ranks_all_reduce_and_succeed() {
    runs_to_succeeded("rj-pytorch-4", "PyTorchJob", pytorch("ar", 3)).await;
}

async fn pytorch_elastic_ranks_rendezvous_at_worker_0_and_succeed() {
    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ar"},
        "spec": {
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 2, "rdzvBackend": "c10d"},
            "pytorchReplicaSpecs": {"Worker": replicas(2, "pytorch", "OnFailure", &[])},
        },
    });
    runs_to_succeeded("rj-pytorch-elastic", "PyTorchJob", job).await;
}

async fn tensorflow_chief_and_workers_all_reduce_by_tf_config_and_succeed() {
    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "ar"},
        "spec": {"tfReplicaSpecs": {
            "Chief": replicas(1, "tensorflow", "OnFailure", &[]),
            "Worker": replicas(3, "tensorflow", "OnFailure", &[]),
        }},
    });
    runs_to_succeeded("rj-tf", "TFJob", job).await;
}

async fn jax_processes_all_reduce_at_the_coordinator_and_succeed() {
    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": "ar"},
        "spec": {"jaxReplicaSpecs": {"Worker": replicas(4, "jax", "OnFailure", &[])}},
    });
    runs_to_succeeded("rj-jax", "JAXJob", job).await;
}

async fn xgboost_master_and_workers_all_reduce_and_succeed() {
    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "XGBoostJob", "metadata": {"name": "ar"},
        "spec": {"xgbReplicaSpecs": {
            "Master": replicas(1, "xgboost", "OnFailure", &[]),
            "Worker": replicas(1, "xgboost", "OnFailure", &[]),
        }},
    });
    runs_to_succeeded("rj-xgboost", "XGBoostJob", job).await;
}

async fn paddle_nodes_all_reduce_at_paddle_master_and_succeed() {
    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": "ar"},
        "spec": {"paddleReplicaSpecs": {"Worker": replicas(2, "paddle", "OnFailure", &[])}},
    });
    runs_to_succeeded("rj-paddle", "PaddleJob", job).await;
}

async fn mpi_launcher_reaches_workers_by_hostfile_names_and_succeeds() {
    let job = json!({
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "ar"},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": replicas(1, "mpi", "OnFailure", &["mpi-launcher", "7070"]),
                "Worker": replicas(2, "mpi", "Never", &["mpi-worker", "7070"]),
            },
        },
    });
    runs_to_succeeded("rj-mpi", "MPIJob", job).await;
}

/// cleanPodPolicy All and ttlSecondsAfterFinished on real pods: once the job Succeeded its
/// pods are deleted (the kubelet stops them), and the job itself after the TTL.
async fn clean_pod_policy_all_and_the_ttl_remove_the_pods_then_the_job() {
    let node = node();
    allreduce_image(node);
    let namespace = "rj-cleanup";
    let scenario = Scenario::new(node, namespace, &[]);
    let mut job = pytorch("ar", 1);
    job["metadata"]["namespace"] = json!(namespace);
    job["spec"]["runPolicy"] =
        json!({"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 3, "backoffLimit": 0});
    node.apply(&job.to_string());
    let client = node.client().await;
    let api = support::jobs::pytorch_api(&client, namespace);
    wait_for_job_condition(&api, "ar", "Succeeded", Duration::from_secs(150), || {
        scenario.diagnose()
    })
    .await;
    let succeeded = Instant::now();
    let deadline = succeeded + Duration::from_secs(60);
    let mut pods_gone = None;
    loop {
        let pods = support::controller::pods_of(&client, namespace, "ar").await;
        if pods.is_empty() && pods_gone.is_none() {
            pods_gone = Some(succeeded.elapsed());
        }
        let job_gone = matches!(api.get_opt("ar").await, Ok(None));
        if job_gone && pods_gone.is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after 60 s: pods gone {pods_gone:?}, job gone {job_gone}\n{}",
            scenario.diagnose()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "realnode: cleanPodPolicy All: pods gone {:.1} s after Succeeded; TTL 3 s: job gone {:.1} s after",
        pods_gone.unwrap_or_default().as_secs_f64(),
        succeeded.elapsed().as_secs_f64()
    );
}

/// The Worker's replica spec, with `env` on its container and `volume` mounted at /marker.
fn worker_with(restart: &str, env: Value, volume: Value) -> Value {
    let mut spec = replicas(1, "pytorch", restart, &[]);
    let template = &mut spec["template"]["spec"];
    template["containers"][0]["env"] = env;
    template["containers"][0]["volumeMounts"] = json!([{"name": "marker", "mountPath": "/marker"}]);
    template["volumes"] = json!([volume.as_object().cloned().map(|mut v| {
        v.insert("name".into(), json!("marker"));
        Value::Object(v)
    })]);
    spec
}

fn pytorch_with_worker(worker: Value, backoff_limit: u32) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ar"},
        "spec": {
            "runPolicy": {"backoffLimit": backoff_limit},
            "pytorchReplicaSpecs": {
                "Master": replicas(1, "pytorch", "OnFailure", &[]),
                "Worker": worker,
            },
        },
    })
}

/// OnFailure is the kubelet's: the Worker's container exits 1 once, the kubelet starts it
/// again in the same pod (an emptyDir keeps the marker), and the job still succeeds.
async fn a_worker_exiting_1_under_on_failure_is_restarted_by_the_kubelet_and_the_job_succeeds() {
    let env = json!([{"name": "ALLREDUCE_FAIL_FIRST", "value": "/marker"}]);
    let worker = worker_with("OnFailure", env, json!({"emptyDir": {}}));
    let finished =
        runs_to_succeeded("rj-onfailure", "PyTorchJob", pytorch_with_worker(worker, 3)).await;
    let status = container_status(finished.pod("ar-worker-0"));
    assert_eq!(status.restart_count, 1, "{status:?}");
    let exited = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .map(|t| (t.exit_code, t.finished_at.as_ref().map(|f| f.0.as_second())));
    assert_eq!(exited.map(|e| e.0), Some(1), "{status:?}");
    let started_again = status
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.started_at.as_ref())
        .map(|t| t.0.as_second());
    if let (Some(Some(exit)), Some(again)) = (exited.map(|e| e.1), started_again) {
        eprintln!(
            "realnode: OnFailure restart: exit 1 → running again in {} s (whole seconds)",
            again - exit
        );
    }
}

/// ExitCode is the controller's: exit 130 (retryable) deletes and recreates the pod, the
/// job shows Restarting, and the new pod (a hostPath keeps the marker) lets it succeed.
async fn a_retryable_exit_code_under_exit_code_recreates_the_pod_and_the_job_succeeds() {
    let dir = "/tmp/gangplank-realnode/rj-exitcode";
    let _ = std::fs::remove_dir_all(dir);
    let env = json!([
        {"name": "ALLREDUCE_FAIL_FIRST", "value": "/marker"},
        {"name": "ALLREDUCE_EXIT_CODE", "value": "130"},
    ]);
    let volume = json!({"hostPath": {"path": dir, "type": "DirectoryOrCreate"}});
    let worker = worker_with("ExitCode", env, volume);
    // Restarting is True only while the recreated pod is not running yet (Succeeded then
    // replaces it, as upstream's conditions do): watched while the job runs.
    let watcher = tokio::spawn(async {
        let client = node().client().await;
        let api = support::jobs::pytorch_api(&client, "rj-exitcode");
        let deadline = Instant::now() + Duration::from_secs(150);
        while Instant::now() < deadline {
            let job = api.get("ar").await.map(|j| json!(j)).unwrap_or_default();
            let conditions = job["status"]["conditions"].as_array().cloned();
            let restarting = conditions
                .unwrap_or_default()
                .into_iter()
                .find(|c| c["type"] == "Restarting" && c["status"] == "True");
            if let Some(condition) = restarting {
                return Some(condition);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    });
    let finished =
        runs_to_succeeded("rj-exitcode", "PyTorchJob", pytorch_with_worker(worker, 3)).await;
    let restarting = watcher.await.ok().flatten();
    let restarting =
        restarting.expect("the job showed Restarting=True while the pod was recreated");
    let message = restarting["message"].as_str().unwrap_or_default();
    assert!(message.contains("130"), "names the exit code: {restarting}");
    eprintln!("realnode: ExitCode 130: Restarting — {message}");
    let status = container_status(finished.pod("ar-worker-0"));
    assert_eq!(
        status.restart_count, 0,
        "a new pod, not a kubelet restart: {status:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A Worker that always exits 1 under OnFailure with backoffLimit 1: the job fails, and the
/// condition says it reached the backoff limit.
async fn backoff_limit_exhausted_fails_the_job_with_the_reason() {
    let node = node();
    allreduce_image(node);
    let namespace = "rj-backoff";
    let scenario = Scenario::new(node, namespace, &[]);
    let env = json!([{"name": "ALLREDUCE_ALWAYS_FAIL", "value": "1"}]);
    let mut job = pytorch_with_worker(worker_with("OnFailure", env, json!({"emptyDir": {}})), 1);
    job["metadata"]["namespace"] = json!(namespace);
    node.apply(&job.to_string());
    let client = node.client().await;
    let api = support::jobs::pytorch_api(&client, namespace);
    let failed = wait_for_job_condition(&api, "ar", "Failed", Duration::from_secs(150), || {
        scenario.diagnose()
    })
    .await;
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(message.contains("backoff limit"), "{failed}");
    eprintln!(
        "realnode: backoffLimit 1 exhausted: {} — {message}",
        failed["reason"]
    );
}

/// A running Worker's pod deleted (a node drain's stand-in): the controller creates it
/// again and the job succeeds.
async fn a_worker_pod_deleted_mid_run_is_recreated_and_the_job_succeeds() {
    let node = node();
    allreduce_image(node);
    let namespace = "rj-deleted";
    let env = json!([{"name": "ALLREDUCE_DELAY_SECS", "value": "6"}]);
    let worker = worker_with("OnFailure", env, json!({"emptyDir": {}}));
    let mut job = pytorch_with_worker(worker, 3);
    job["metadata"]["namespace"] = json!(namespace);
    let deleter = tokio::spawn(async move {
        let client = node.client().await;
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(client, namespace);
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            if let Ok(pod) = pods.get("ar-worker-0").await {
                let running = container_status(&pod)
                    .state
                    .is_some_and(|s| s.running.is_some());
                if running {
                    let uid = pod.metadata.uid.clone().unwrap_or_default();
                    let _ = pods.delete("ar-worker-0", &Default::default()).await;
                    return Some(uid);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    });
    let finished = runs_to_succeeded(namespace, "PyTorchJob", job).await;
    let deleted = deleter
        .await
        .ok()
        .flatten()
        .expect("the running worker was deleted");
    let now = finished
        .pod("ar-worker-0")
        .metadata
        .uid
        .clone()
        .unwrap_or_default();
    assert_ne!(now, deleted, "a new worker pod ran the job");
}

/// Two pods of one GPU each on a node that advertises one: the native gang binds neither,
/// and with the webhooks off nothing refuses it at create; the watchdog, past a short start
/// deadline, fails the job naming why.
async fn a_gang_the_node_cannot_hold_sits_pending_and_the_watchdog_names_why() {
    let node = node();
    allreduce_image(node);
    let patch = r#"{"status":{"capacity":{"example.com/gpu":"1"}}}"#;
    support::install::kubectl_ok(
        node,
        &[
            "patch",
            "node",
            "realnode",
            "--subresource=status",
            "--type=merge",
            "-p",
            patch,
        ],
    );
    let namespace = "rj-toobig";
    let scenario = Scenario::new(node, namespace, &["--start-deadline=10s"]);
    let mut job = pytorch("ar", 1);
    for replica in ["Master", "Worker"] {
        job["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]["containers"][0]
            ["resources"] = json!({"limits": {"example.com/gpu": 1}});
    }
    job["metadata"]["namespace"] = json!(namespace);
    node.apply(&job.to_string());
    let client = node.client().await;
    let api = support::jobs::pytorch_api(&client, namespace);
    let failed = wait_for_job_condition(&api, "ar", "Failed", Duration::from_secs(120), || {
        scenario.diagnose()
    })
    .await;
    let pods = support::controller::pods_of(&client, namespace, "ar").await;
    let bound = pods
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .count();
    assert_eq!(bound, 0, "no pod of the gang was bound");
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(message.contains("Pending"), "{failed}");
    eprintln!("realnode: gang too big: {} — {message}", failed["reason"]);
}
