//! MPIJob v2beta1 run by `gangplank controller --kinds=MPIJob` on a real kube-apiserver with
//! the mpi-operator's CRD, under deploy/controller/'s RBAC alone (with
//! deploy/controller-namespaced and deploy/controller-mpi, behind its admission policies):
//! the upstream example `pi` gets its ConfigMap (hostfile), SSH key Secret, workers' Service
//! and pods, and runs to Succeeded when its launcher does (pod phases written through the
//! status subresource).

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::Api;
use serde_json::Value;
use support::controller::{set_exited, set_running, wait_pods, Controller};
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_controller_mpi",
    [
        the_upstream_pi_example_runs_to_success_with_deploys_rbac,
        every_upstream_v2beta1_example_reaches_its_pods,
        wait_for_workers_ready_holds_the_launcher_until_the_workers_run,
        suspend_deletes_the_pods_and_resume_brings_them_back,
        a_secret_that_lost_its_keys_gets_new_ones_and_an_intact_one_is_never_rotated,
    ],
    support::corpus_requirement
);

/// One controller (admin credentials) for the tests below; the RBAC test starts its own.
fn controller() -> &'static ControlPlane {
    static CONTROLLER: std::sync::OnceLock<Controller> = std::sync::OnceLock::new();
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::MpiV2beta1);
    CONTROLLER.get_or_init(|| {
        let args = [
            "--kinds=MPIJob",
            "--leader-elect=false",
            "--gang-scheduler=",
        ];
        Controller::start(control_plane, "controller-mpi-admin", &args)
    });
    control_plane
}

/// The upstream v2beta1 examples (pi for OpenMPI, Intel MPI and MPICH, Horovod, benchmarks).
fn examples() -> Vec<Value> {
    let dir = support::corpus().join("upstream-examples/mpi-operator/v2beta1");
    let mut found = Vec::new();
    for sub in std::fs::read_dir(&dir).expect("v2beta1 examples").flatten() {
        for file in std::fs::read_dir(sub.path())
            .expect("example dir")
            .flatten()
        {
            let text = std::fs::read_to_string(file.path()).expect("example");
            found.push(yaml_serde::from_str(&text).expect("YAML"));
        }
    }
    assert!(found.len() >= 5, "{} examples", found.len());
    found
}

fn pi() -> Value {
    let path = support::corpus().join("upstream-examples/mpi-operator/v2beta1/pi/pi.yaml");
    let text = std::fs::read_to_string(path).expect("the corpus's pi.yaml");
    yaml_serde::from_str(&text).expect("YAML")
}

async fn the_upstream_pi_example_runs_to_success_with_deploys_rbac() {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::MpiV2beta1);
    let ns = control_plane.namespace("mpi").await;
    // The MPI components hold only where deploy/controller-namespaced binds them.
    let kubeconfig =
        support::controller::deploys_confined_identity(control_plane, "controller-mpi", &ns).await;
    let namespaces = format!("--namespaces={ns}");
    let args = [
        "--kinds=MPIJob",
        "--leader-elect=false",
        "--gang-scheduler=",
        namespaces.as_str(),
    ];
    let controller = Controller::start_as(control_plane, &kubeconfig, "controller-mpi", &args);
    let client = control_plane.client().await;
    jobs::create(&client, &ns, &pi(), false)
        .await
        .expect("created");

    let names = wait_pods(&client, &ns, "pi", 3).await;
    assert_eq!(
        names,
        ["pi-launcher", "pi-worker-0", "pi-worker-1"],
        "{}",
        controller.log()
    );
    let config: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let hostfile = config
        .get("pi-config")
        .await
        .expect("pi-config")
        .data
        .unwrap_or_default();
    let hostfile = hostfile.get("hostfile").cloned().unwrap_or_default();
    for worker in ["pi-worker-0", "pi-worker-1"] {
        let line = format!("{worker}.pi.{ns}.svc slots=1");
        assert!(
            hostfile.lines().any(|l| l == line),
            "{line:?} not in hostfile:\n{hostfile}"
        );
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let key = secrets
        .get("pi-ssh")
        .await
        .expect("pi-ssh")
        .data
        .unwrap_or_default();
    let private = key.get("ssh-privatekey").map_or(0, |k| k.0.len());
    assert!(
        private > 100,
        "an SSH private key was generated ({private} bytes)"
    );
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let service = services.get("pi").await.expect("the workers' Service");
    let cluster_ip = service.spec.and_then(|s| s.cluster_ip);
    assert_eq!(cluster_ip.as_deref(), Some("None"), "headless");

    for worker in ["pi-worker-0", "pi-worker-1"] {
        set_running(&client, &ns, worker, "mpi-worker").await;
    }
    set_running(&client, &ns, "pi-launcher", "mpi-launcher").await;
    set_exited(&client, &ns, "pi-launcher", "mpi-launcher", 0).await;
    let api = jobs::api_for(&client, &ns, &pi());
    support::wait_for("pi Succeeded", Duration::from_secs(30), || async {
        let job =
            serde_json::to_value(api.get("pi").await.map_err(|e| e.to_string())?).expect("JSON");
        jobs::true_condition(&job, "Succeeded")
            .map(drop)
            .ok_or_else(|| format!("{:#}\n{}", job["status"], controller.log()))
    })
    .await;
    let log = controller.log();
    assert!(
        !log.contains("forbidden") && !log.contains("Forbidden"),
        "{log}"
    );
}

/// Each example runs in a namespace of its own (three are called `pi`) with the second
/// controller, to the point where every pod exists.
async fn every_upstream_v2beta1_example_reaches_its_pods() {
    let control_plane = controller();
    let client = control_plane.client().await;
    for example in examples() {
        let ns = control_plane.namespace("mpi-example").await;
        jobs::create(&client, &ns, &example, false)
            .await
            .expect("created");
        let name = example["metadata"]["name"].as_str().expect("name");
        let specs = &example["spec"]["mpiReplicaSpecs"];
        let workers = specs["Worker"]["replicas"].as_u64().unwrap_or(0) as usize;
        let mut expected: Vec<String> = vec![format!("{name}-launcher")];
        expected.extend((0..workers).map(|i| format!("{name}-worker-{i}")));
        let names = wait_pods(&client, &ns, name, expected.len()).await;
        assert_eq!(names, expected, "{ns}/{name}");
    }
}

fn pi_in(ns: &str) -> Value {
    let mut job = pi();
    job["metadata"]["namespace"] = ns.into();
    job
}

async fn wait_for_workers_ready_holds_the_launcher_until_the_workers_run() {
    let control_plane = controller();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("mpi-wait").await;
    let mut job = pi_in(&ns);
    job["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady".into();
    jobs::create(&client, &ns, &job, false)
        .await
        .expect("created");
    let names = wait_pods(&client, &ns, "pi", 2).await;
    assert_eq!(
        names,
        ["pi-worker-0", "pi-worker-1"],
        "no launcher before the workers run"
    );
    for worker in ["pi-worker-0", "pi-worker-1"] {
        set_running(&client, &ns, worker, "mpi-worker").await;
    }
    let names = wait_pods(&client, &ns, "pi", 3).await;
    assert_eq!(names, ["pi-launcher", "pi-worker-0", "pi-worker-1"]);
}

async fn suspend_deletes_the_pods_and_resume_brings_them_back() {
    let control_plane = controller();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("mpi-suspend").await;
    jobs::create(&client, &ns, &pi_in(&ns), false)
        .await
        .expect("created");
    wait_pods(&client, &ns, "pi", 3).await;
    let api = jobs::api_for(&client, &ns, &pi());
    let patch = |suspend: bool| serde_json::json!({"spec": {"runPolicy": {"suspend": suspend}}});
    let params = kube::api::PatchParams::default();
    api.patch("pi", &params, &kube::api::Patch::Merge(&patch(true)))
        .await
        .expect("suspend");
    wait_pods(&client, &ns, "pi", 0).await;
    api.patch("pi", &params, &kube::api::Patch::Merge(&patch(false)))
        .await
        .expect("resume");
    wait_pods(&client, &ns, "pi", 3).await;
}

/// The job's next reconcile (here: an annotation on it) leaves an intact key alone and gives
/// a Secret whose keys were removed by hand a new pair, in the same Secret.
async fn a_secret_that_lost_its_keys_gets_new_ones_and_an_intact_one_is_never_rotated() {
    let control_plane = controller();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("mpi-secret").await;
    jobs::create(&client, &ns, &pi_in(&ns), false)
        .await
        .expect("created");
    wait_pods(&client, &ns, "pi", 3).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let public = || async {
        let secret = secrets.get("pi-ssh").await.expect("pi-ssh");
        let data = secret.data.unwrap_or_default();
        data.get("ssh-publickey")
            .map(|k| k.0.clone())
            .unwrap_or_default()
    };
    let first = public().await;
    let api = jobs::api_for(&client, &ns, &pi());
    let params = kube::api::PatchParams::default();
    let nudge =
        |n: u32| serde_json::json!({"metadata": {"annotations": {"test/nudge": n.to_string()}}});
    api.patch("pi", &params, &kube::api::Patch::Merge(&nudge(1)))
        .await
        .expect("nudge");
    let names = wait_pods(&client, &ns, "pi", 3).await;
    assert_eq!(names.len(), 3);
    assert_eq!(public().await, first, "an intact key is never rotated");

    // The API server keeps an ssh-auth Secret's private key non-empty; the public one can go.
    let strip = serde_json::json!({"data": {"ssh-publickey": null}});
    secrets
        .patch("pi-ssh", &params, &kube::api::Patch::Merge(&strip))
        .await
        .expect("hand edit");
    api.patch("pi", &params, &kube::api::Patch::Merge(&nudge(2)))
        .await
        .expect("nudge");
    support::wait_for("pi-ssh repaired", Duration::from_secs(30), || async {
        let secret = secrets.get("pi-ssh").await.map_err(|e| e.to_string())?;
        let data = secret.data.unwrap_or_default();
        let keys: Vec<&String> = data.keys().collect();
        let fresh = data
            .get("ssh-publickey")
            .is_some_and(|k| k.0.starts_with(b"ecdsa-sha2-nistp521 ") && k.0 != first);
        fresh.then_some(()).ok_or_else(|| format!("{keys:?}"))
    })
    .await;
}
