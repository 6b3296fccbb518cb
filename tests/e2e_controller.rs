//! The lifecycle controller against a real kube-apiserver: `gangplank controller` runs as a
//! process; pod phases and container exits are written through the status subresource, as
//! envtest users do, since no kubelet (and no scheduler) runs here. The jobs' CRDs are
//! gangplank's own (crds/), so these also show the apiserver takes them and their status
//! subresource.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::{json, Value};
use support::controller::{pods_of, set_exited, set_running, wait_pods, Controller};
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_controller",
    [
        a_job_gets_its_pods_services_and_rendezvous_env,
        the_master_succeeding_succeeds_the_job_and_cleans_running_pods,
        a_worker_killed_with_137_is_recreated_and_counted,
        exit_code_1_under_the_exit_code_policy_fails_the_job,
        the_active_deadline_fails_the_job_with_no_other_event,
        suspend_deletes_the_pods_and_resume_recreates_them,
        pods_pending_past_the_start_deadline_get_the_watchdogs_condition,
        a_job_the_webhooks_would_refuse_fails_without_a_half_created_gang,
        a_template_the_controller_cannot_read_fails_the_job_naming_it,
        the_metrics_count_reconciles_and_transitions_by_kind,
        an_elastic_job_scaled_through_its_scale_subresource_follows,
        the_upstream_mpi_pi_example_runs_on_gangplanks_own_crd,
        a_tfjob_named_like_a_pytorchjob_takes_none_of_its_pods_or_services,
    ]
);

static CONTROLLER: OnceLock<Controller> = OnceLock::new();
/// Where the shared controller serves /metrics.
static METRICS_PORT: OnceLock<u16> = OnceLock::new();

/// The shared control plane with gangplank's own CRDs (crds/) and one controller (no gang
/// scheduler, no leader election).
fn control_plane() -> &'static ControlPlane {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::Gangplank);
    CONTROLLER.get_or_init(|| {
        let [port] = support::control_plane::free_ports();
        METRICS_PORT.get_or_init(|| port);
        let metrics = format!("--controller-metrics-addr=127.0.0.1:{port}");
        let args = [
            "--kinds=PyTorchJob,TFJob,XGBoostJob,PaddleJob,JAXJob,MPIJob",
            "--leader-elect=false",
            "--gang-scheduler=",
            "--start-deadline=0s",
            &metrics,
        ];
        Controller::start(control_plane, "controller", &args)
    });
    control_plane
}

/// The controller's log lines about `namespace` (for failure messages).
fn controller_log(namespace: &str) -> String {
    let log = CONTROLLER.get().map(Controller::log).unwrap_or_default();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(namespace) || l.contains("ERROR") || l.contains("WARN"))
        .collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

struct Test {
    client: kube::Client,
    ns: String,
}

async fn setup(name: &str) -> Test {
    let control_plane = control_plane();
    Test {
        client: control_plane.client().await,
        ns: control_plane.namespace(name).await,
    }
}

/// A PyTorchJob: 1 Master + `workers` Workers, restartPolicy ExitCode, cleanPodPolicy Running.
fn job(name: &str, workers: u32) -> Value {
    let mut job = jobs::pytorch_job(name, 1);
    for replica in ["Master", "Worker"] {
        job["spec"]["pytorchReplicaSpecs"][replica]["restartPolicy"] = "ExitCode".into();
    }
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers.into();
    job["spec"]["runPolicy"] = json!({"cleanPodPolicy": "Running", "backoffLimit": 3});
    job
}

impl Test {
    async fn create(&self, job: &Value) {
        jobs::create(&self.client, &self.ns, job, false)
            .await
            .expect("job created");
    }

    async fn get(&self, name: &str) -> Value {
        let job = jobs::pytorch_api(&self.client, &self.ns).get(name).await;
        serde_json::to_value(job.expect("job")).expect("JSON")
    }

    async fn patch(&self, name: &str, patch: Value) {
        let api = jobs::pytorch_api(&self.client, &self.ns);
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patched");
    }

    /// Waits until the job has condition `type_` True; the condition. On timeout, panics
    /// with the job's status and the controller's log about this namespace.
    async fn wait_condition(&self, name: &str, type_: &str, limit: Duration) -> Value {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let job = self.get(name).await;
            if let Some(condition) = jobs::true_condition(&job, type_) {
                return condition;
            }
            if std::time::Instant::now() >= deadline {
                panic!(
                    "{name}: no {type_} condition after {limit:?}; status:\n{:#}\ncontroller log:\n{}",
                    job["status"],
                    controller_log(&self.ns)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until an Event with `reason` was recorded in the namespace; its note.
    async fn wait_event(&self, reason: &str) -> String {
        jobs::wait_event(&self.client, &self.ns, reason).await
    }

    /// Creates `job` (named bert), which must end Failed with `named` in the condition's
    /// message and without a single pod.
    async fn assert_fails_creating_nothing(&self, job: &Value, named: &str) {
        self.create(job).await;
        let failed = self
            .wait_condition("bert", "Failed", Duration::from_secs(20))
            .await;
        let message = failed["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(named),
            "the condition names {named}: {failed}"
        );
        let pods = pods_of(&self.client, &self.ns, "bert").await;
        assert!(pods.is_empty(), "no pod was created");
    }

    async fn all_running(&self, name: &str, pods: &[String]) {
        for pod in pods {
            set_running(&self.client, &self.ns, pod, "pytorch").await;
        }
        self.wait_condition(name, "Running", Duration::from_secs(20))
            .await;
    }
}

fn env_of(pod: &k8s_openapi::api::core::v1::Pod) -> Vec<(String, String)> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let pytorch = containers
        .iter()
        .find(|c| c.name == "pytorch")
        .expect("pytorch container");
    pytorch
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect()
}

async fn a_job_gets_its_pods_services_and_rendezvous_env() {
    let t = setup("objects").await;
    t.create(&job("bert", 2)).await;
    let names = wait_pods(&t.client, &t.ns, "bert", 3).await;
    assert_eq!(names, ["bert-master-0", "bert-worker-0", "bert-worker-1"]);
    let job = t.get("bert").await;
    let uid = job["metadata"]["uid"].as_str().expect("uid").to_string();
    let pods = pods_of(&t.client, &t.ns, "bert").await;
    let worker = pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("bert-worker-1"))
        .expect("worker-1");
    let env = env_of(worker);
    for (name, value) in [
        ("MASTER_ADDR", "bert-master-0"),
        ("MASTER_PORT", "23456"),
        ("WORLD_SIZE", "3"),
        ("RANK", "2"),
        ("PET_NNODES", "3"),
        ("PET_NODE_RANK", "2"),
    ] {
        assert!(
            env.contains(&(name.to_string(), value.to_string())),
            "{name}={value} not in {env:?}"
        );
    }
    let labels = worker.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("training.kubeflow.org/replica-type")
            .map(String::as_str),
        Some("worker")
    );
    assert_eq!(
        labels
            .get("training.kubeflow.org/replica-index")
            .map(String::as_str),
        Some("1")
    );
    let owner = &worker.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        (uid.as_str(), Some(true))
    );
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(t.client.clone(), &t.ns);
    support::wait_for("3 headless services", Duration::from_secs(20), || async {
        let list = services
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let headless: Vec<_> = list
            .items
            .iter()
            .filter(|s| s.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None"))
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        (headless.len() == 3)
            .then_some(())
            .ok_or_else(|| format!("{headless:?}"))
    })
    .await;
    t.wait_condition("bert", "Created", Duration::from_secs(10))
        .await;
}

async fn the_master_succeeding_succeeds_the_job_and_cleans_running_pods() {
    let t = setup("success").await;
    t.create(&job("bert", 2)).await;
    let pods = wait_pods(&t.client, &t.ns, "bert", 3).await;
    t.all_running("bert", &pods).await;
    set_exited(&t.client, &t.ns, "bert-master-0", "pytorch", 0).await;
    t.wait_condition("bert", "Succeeded", Duration::from_secs(20))
        .await;
    // cleanPodPolicy Running: the still-running workers go, the finished master stays.
    let left = wait_pods(&t.client, &t.ns, "bert", 1).await;
    assert_eq!(left, ["bert-master-0"]);
    let job = t.get("bert").await;
    assert!(
        job["status"]["completionTime"].is_string(),
        "{:#}",
        job["status"]
    );
    // The running workers count as succeeded, once; nothing stays active.
    let counts = |rtype: &str| {
        let status = &job["status"]["replicaStatuses"][rtype];
        (status["active"].clone(), status["succeeded"].clone())
    };
    assert_eq!(
        counts("Master"),
        (Value::Null, json!(1)),
        "{:#}",
        job["status"]
    );
    assert_eq!(
        counts("Worker"),
        (Value::Null, json!(2)),
        "{:#}",
        job["status"]
    );
    // Settled: a finished job is not written again and again.
    let version = job["metadata"]["resourceVersion"].clone();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = t.get("bert").await;
    assert_eq!(
        later["metadata"]["resourceVersion"], version,
        "written again: {:#}",
        later["status"]
    );
}

async fn a_worker_killed_with_137_is_recreated_and_counted() {
    let t = setup("restart").await;
    t.create(&job("bert", 2)).await;
    let pods = wait_pods(&t.client, &t.ns, "bert", 3).await;
    t.all_running("bert", &pods).await;
    let before = pods_of(&t.client, &t.ns, "bert").await;
    let old_uid = before[1].metadata.uid.clone();
    set_exited(&t.client, &t.ns, "bert-worker-0", "pytorch", 137).await;
    let restarting = t
        .wait_condition("bert", "Restarting", Duration::from_secs(20))
        .await;
    assert_eq!(restarting["reason"], "PyTorchJobRestarting", "{restarting}");
    let why = restarting["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("Recreating bert-worker-0 (exit code 137)"),
        "names the pod and its exit code: {restarting}"
    );
    t.wait_event("PyTorchJobRestarting").await;
    t.wait_event("ExitedWithCode").await;
    support::wait_for(
        "bert-worker-0 recreated",
        Duration::from_secs(20),
        || async {
            let pods = pods_of(&t.client, &t.ns, "bert").await;
            let worker = pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some("bert-worker-0"));
            match worker {
                Some(p) if p.metadata.uid != old_uid => Ok(()),
                other => Err(format!("{:?}", other.map(|p| &p.metadata.uid))),
            }
        },
    )
    .await;
    let job = t.get("bert").await;
    let restarts = &job["metadata"]["annotations"]["gangplank.dev/restarts"];
    assert_eq!(
        restarts, "1",
        "a recreation counts against backoffLimit: {:#}",
        job["metadata"]
    );
    // Recreated but Pending (no kubelet here): still Restarting, not Running (upstream flips
    // back to Running at once, #1711). A few seconds of reconciles change nothing.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let job = t.get("bert").await;
    assert!(
        jobs::true_condition(&job, "Restarting").is_some()
            && jobs::true_condition(&job, "Running").is_none(),
        "restarting while bert-worker-0 is Pending: {:#}\n{}",
        job["status"],
        controller_log(&t.ns)
    );
    // Every replica runs again: Running replaces Restarting.
    set_running(&t.client, &t.ns, "bert-worker-0", "pytorch").await;
    t.wait_condition("bert", "Running", Duration::from_secs(20))
        .await;
    let job = t.get("bert").await;
    assert!(
        jobs::true_condition(&job, "Restarting").is_none(),
        "{:#}",
        job["status"]
    );
}

async fn exit_code_1_under_the_exit_code_policy_fails_the_job() {
    let t = setup("exit-1").await;
    t.create(&job("bert", 1)).await;
    let pods = wait_pods(&t.client, &t.ns, "bert", 2).await;
    t.all_running("bert", &pods).await;
    set_exited(&t.client, &t.ns, "bert-worker-0", "pytorch", 1).await;
    let failed = t
        .wait_condition("bert", "Failed", Duration::from_secs(20))
        .await;
    assert_eq!(failed["reason"], "PyTorchJobFailed", "{failed}");
}

async fn the_active_deadline_fails_the_job_with_no_other_event() {
    let t = setup("deadline").await;
    let mut job = job("bert", 1);
    job["spec"]["runPolicy"]["activeDeadlineSeconds"] = 4.into();
    t.create(&job).await;
    let pods = wait_pods(&t.client, &t.ns, "bert", 2).await;
    t.all_running("bert", &pods).await;
    // Nothing touches the job or its pods from here on: only the controller's own timer can
    // fail it (upstream #3358).
    let failed = t
        .wait_condition("bert", "Failed", Duration::from_secs(30))
        .await;
    assert_eq!(failed["reason"], "PyTorchJobFailed", "{failed}");
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("active longer than specified deadline"),
        "{failed}"
    );
}

async fn suspend_deletes_the_pods_and_resume_recreates_them() {
    let t = setup("suspend").await;
    t.create(&job("bert", 2)).await;
    wait_pods(&t.client, &t.ns, "bert", 3).await;
    t.patch("bert", json!({"spec": {"runPolicy": {"suspend": true}}}))
        .await;
    t.wait_condition("bert", "Suspended", Duration::from_secs(20))
        .await;
    wait_pods(&t.client, &t.ns, "bert", 0).await;
    t.patch("bert", json!({"spec": {"runPolicy": {"suspend": false}}}))
        .await;
    let names = wait_pods(&t.client, &t.ns, "bert", 3).await;
    assert_eq!(names, ["bert-master-0", "bert-worker-0", "bert-worker-1"]);
}

async fn pods_pending_past_the_start_deadline_get_the_watchdogs_condition() {
    let t = setup("watchdog").await;
    let mut job = job("bert", 2);
    job["spec"]["runPolicy"]["schedulingPolicy"] = json!({"scheduleTimeoutSeconds": 3});
    t.create(&job).await;
    wait_pods(&t.client, &t.ns, "bert", 3).await;
    // No scheduler runs here: the pods stay Pending, as a gang that cannot be placed does.
    let failed = t
        .wait_condition("bert", "Failed", Duration::from_secs(30))
        .await;
    let reason = failed["reason"].as_str().unwrap_or_default();
    assert_eq!(reason, "PyTorchJobStartDeadlineExceeded", "{failed}");
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Pending"),
        "the message says what is stuck: {message}"
    );
}

async fn a_job_the_webhooks_would_refuse_fails_without_a_half_created_gang() {
    let t = setup("invalid").await;
    // Two Masters: no webhook runs in this suite, as if it had been down.
    let mut job = job("bert", 2);
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2.into();
    t.assert_fails_creating_nothing(&job, "Master").await;
}

/// gangplank's CRDs keep pod templates as written (crds/README.md), so a broken one reaches
/// the controller: the job fails with the replica named, and nothing is created.
async fn a_template_the_controller_cannot_read_fails_the_job_naming_it() {
    let t = setup("broken-template").await;
    let mut job = job("bert", 1);
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] = "oops".into();
    t.assert_fails_creating_nothing(&job, "Worker").await;
}

async fn the_metrics_count_reconciles_and_transitions_by_kind() {
    let t = setup("metrics").await;
    t.create(&job("bert", 1)).await;
    t.wait_condition("bert", "Created", Duration::from_secs(20))
        .await;
    let port = METRICS_PORT.get().expect("metrics port");
    let url = format!("http://127.0.0.1:{port}/metrics");
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let text = client
        .get(&url)
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("text");
    let value = |series: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
    };
    let created =
        "gangplank_controller_job_transitions_total{kind=\"PyTorchJob\",transition=\"created\"}";
    assert!(value(created) >= 1.0, "{text}");
    assert!(value("gangplank_controller_reconciles_total{kind=\"PyTorchJob\"}") >= 1.0);
    assert_eq!(
        value("gangplank_controller_leader"),
        0.0,
        "no leader election in this suite"
    );
}

/// What the HPA does to an elastic PyTorchJob: it writes Worker replicas through the /scale
/// subresource (crds/ declares it). The controller adds the pod with the new WORLD_SIZE and
/// min:max bounds, and removes the surplus pod when scaled back.
async fn an_elastic_job_scaled_through_its_scale_subresource_follows() {
    let t = setup("elastic-scale").await;
    let mut elastic = job("gpt", 1);
    elastic["spec"]["elasticPolicy"] =
        json!({"minReplicas": 1, "maxReplicas": 4, "rdzvBackend": "c10d"});
    t.create(&elastic).await;
    wait_pods(&t.client, &t.ns, "gpt", 2).await;
    let api = jobs::pytorch_api(&t.client, &t.ns);
    let scale = |n: u32| json!({"spec": {"replicas": n}});
    let params = PatchParams::default();
    api.patch_scale("gpt", &params, &Patch::Merge(&scale(3)))
        .await
        .expect("scaled up through /scale");
    let names = wait_pods(&t.client, &t.ns, "gpt", 4).await;
    assert_eq!(
        names,
        [
            "gpt-master-0",
            "gpt-worker-0",
            "gpt-worker-1",
            "gpt-worker-2"
        ]
    );
    let pods = pods_of(&t.client, &t.ns, "gpt").await;
    let newest = pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("gpt-worker-2"))
        .expect("worker-2");
    let env = env_of(newest);
    for (name, value) in [("WORLD_SIZE", "4"), ("RANK", "3"), ("PET_NNODES", "1:4")] {
        assert!(
            env.contains(&(name.to_string(), value.to_string())),
            "{name}={value} not in {env:?}"
        );
    }
    api.patch_scale("gpt", &params, &Patch::Merge(&scale(1)))
        .await
        .expect("scaled down through /scale");
    let names = wait_pods(&t.client, &t.ns, "gpt", 2).await;
    assert_eq!(
        names,
        ["gpt-master-0", "gpt-worker-0"],
        "{}",
        controller_log(&t.ns)
    );
}

/// crds/kubeflow.org_mpijobs.v2beta1.yaml in use: the upstream `pi` example is stored with
/// the CRD's defaults and reaches its launcher and workers.
async fn the_upstream_mpi_pi_example_runs_on_gangplanks_own_crd() {
    if let Err(why) = support::corpus_requirement() {
        support::skip(&format!(
            "the_upstream_mpi_pi_example_runs_on_gangplanks_own_crd: {why}"
        ));
        return;
    }
    let t = setup("mpi-own-crd").await;
    let path = support::corpus().join("upstream-examples/mpi-operator/v2beta1/pi/pi.yaml");
    let text = std::fs::read_to_string(path).expect("the corpus's pi.yaml");
    let pi: Value = yaml_serde::from_str(&text).expect("YAML");
    t.create(&pi).await;
    let names = wait_pods(&t.client, &t.ns, "pi", 3).await;
    assert_eq!(
        names,
        ["pi-launcher", "pi-worker-0", "pi-worker-1"],
        "{}",
        controller_log(&t.ns)
    );
    let api = jobs::api_for(&t.client, &t.ns, &pi);
    let stored = serde_json::to_value(api.get("pi").await.expect("pi")).expect("JSON");
    assert_eq!(
        (
            stored["spec"]["runLauncherAsWorker"].clone(),
            stored["spec"]["launcherCreationPolicy"].clone(),
            stored["spec"]["mpiImplementation"].clone(),
        ),
        (json!(false), json!("AtStartup"), json!("OpenMPI")),
        "the CRD's defaults"
    );
}

/// Issue 32, item 3, for every kind: a TFJob `train` beside a running PyTorchJob `train` (both
/// name a pod and a Service `train-worker-0`). The TFJob's creates get 409 AlreadyExists;
/// before, it took them for its own. Now it reads them, finds the PyTorchJob as their
/// controller, names them on its Created condition (reason TFJobResourceExists), and leaves
/// them as they were: the PyTorchJob's pod and Service keep their owner and selector.
async fn a_tfjob_named_like_a_pytorchjob_takes_none_of_its_pods_or_services() {
    let t = setup("same-name").await;
    t.create(&job("train", 1)).await;
    wait_pods(&t.client, &t.ns, "train", 2).await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(t.client.clone(), &t.ns);
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(t.client.clone(), &t.ns);
    let theirs = pods
        .get("train-worker-0")
        .await
        .expect("the PyTorchJob's pod");

    let worker = json!({"replicas": 2, "restartPolicy": "Never", "template": {"spec": {
        "containers": [{"name": "tensorflow", "image": jobs::IMAGE}]}}});
    let tf = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "train"},
        "spec": {"tfReplicaSpecs": {"Worker": worker}},
    });
    t.create(&tf).await;
    let api = jobs::api_for(&t.client, &t.ns, &tf);
    let created = support::wait_for("the TFJob's verdict", Duration::from_secs(30), || async {
        let job = serde_json::to_value(api.get("train").await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        jobs::true_condition(&job, "Created")
            .filter(|c| c["reason"] == "TFJobResourceExists")
            .ok_or_else(|| format!("{:#}\n{}", job["status"], controller_log(&t.ns)))
    })
    .await;
    let message = created["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("train-worker-0 (controlled by PyTorchJob train)"),
        "{message}"
    );

    let kept = pods.get("train-worker-0").await.expect("pod");
    assert_eq!(kept.metadata.uid, theirs.metadata.uid, "the same pod");
    assert_eq!(
        kept.metadata.owner_references,
        theirs.metadata.owner_references
    );
    let service = services.get("train-worker-0").await.expect("service");
    let selector = service.spec.and_then(|s| s.selector).unwrap_or_default();
    assert_eq!(
        selector
            .get("training.kubeflow.org/operator-name")
            .map(String::as_str),
        Some("pytorchjob-controller"),
        "the PyTorchJob's Service, untouched"
    );
}
