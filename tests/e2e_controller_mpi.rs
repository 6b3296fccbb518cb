//! MPIJob v2beta1 run by `gangplank controller --kinds=MPIJob` on a real kube-apiserver with
//! the mpi-operator's CRD, under deploy/controller/'s RBAC alone: the upstream example `pi`
//! gets its ConfigMap (hostfile), SSH key Secret, workers' Service and pods, and runs to
//! Succeeded when its launcher does (pod phases written through the status subresource).

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::Api;
use serde_json::Value;
use support::controller::{set_exited, set_running, wait_pods, Controller};
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_controller_mpi",
    [the_upstream_pi_example_runs_to_success_with_deploys_rbac]
);

fn pi() -> Value {
    let path = support::corpus().join("upstream-examples/mpi-operator/v2beta1/pi/pi.yaml");
    let text = std::fs::read_to_string(path).expect("the corpus's pi.yaml");
    yaml_serde::from_str(&text).expect("YAML")
}

async fn the_upstream_pi_example_runs_to_success_with_deploys_rbac() {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::MpiV2beta1);
    let kubeconfig = support::controller::deploys_identity(control_plane).await;
    let args = [
        "--kinds=MPIJob",
        "--leader-elect=false",
        "--gang-scheduler=",
    ];
    let controller = Controller::start_as(control_plane, &kubeconfig, "controller-mpi", &args);
    let client = control_plane.client().await;
    let ns = control_plane.namespace("mpi").await;
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
        let conditions = job["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let done = conditions
            .iter()
            .any(|c| c["type"] == "Succeeded" && c["status"] == "True");
        done.then_some(())
            .ok_or_else(|| format!("{:#}\n{}", job["status"], controller.log()))
    })
    .await;
    let log = controller.log();
    assert!(
        !log.contains("forbidden") && !log.contains("Forbidden"),
        "{log}"
    );
}
