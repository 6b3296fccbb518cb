//! MPIJob kubeflow.org/v1 run by `gangplank controller --kinds=MPIJob/v1` on a real
//! kube-apiserver with the training operator's CRDs, under deploy/controller/'s RBAC alone
//! (with deploy/controller-namespaced and deploy/controller-mpi-v1, behind its admission
//! policies): the upstream example `tensorflow-mnist` gets its ConfigMap (hostfile,
//! kubexec.sh), the launcher's ServiceAccount, Role and RoleBinding, sleeping workers and a
//! launcher with kubectl delivered, and runs to Succeeded when its launcher does; a
//! hand-deleted or hand-edited ConfigMap comes back as it should be, once; and an MPIJob
//! named like a PyTorchJob gets no exec right into that job's pods.

mod support;

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::Api;
use serde_json::{json, Value};
use support::controller::{set_exited, set_running, wait_pods, Controller};
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_controller_mpi_v1",
    [
        the_upstream_mnist_example_runs_to_success_with_deploys_rbac,
        every_upstream_v1_example_reaches_its_pods,
        a_deleted_or_edited_config_map_is_repaired_not_duplicated,
        a_config_map_of_another_owner_is_never_adopted,
        a_launcher_cannot_exec_into_a_same_named_pytorchjobs_pods,
    ],
    support::corpus_requirement
);

const ARGS: [&str; 3] = [
    "--kinds=MPIJob/v1",
    "--leader-elect=false",
    "--gang-scheduler=",
];

/// One controller (admin credentials) for the tests that do not check RBAC.
fn controller() -> &'static ControlPlane {
    static CONTROLLER: std::sync::OnceLock<Controller> = std::sync::OnceLock::new();
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    CONTROLLER.get_or_init(|| Controller::start(control_plane, "controller-mpi-v1-admin", &ARGS));
    control_plane
}

fn example(file: &str) -> Value {
    let path = support::corpus()
        .join("upstream-examples/training-operator/mpi")
        .join(file);
    let text = std::fs::read_to_string(path).expect("the corpus's v1 MPIJob example");
    yaml_serde::from_str(&text).expect("YAML")
}

async fn the_upstream_mnist_example_runs_to_success_with_deploys_rbac() {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    let ns = control_plane.namespace("mpi-v1").await;
    // The MPI components hold only where deploy/controller-namespaced binds them.
    let kubeconfig =
        support::controller::deploys_confined_identity(control_plane, "controller-mpi-v1", &ns)
            .await;
    let namespaces = format!("--namespaces={ns}");
    let [kinds, elect, gang] = ARGS;
    let args = [kinds, elect, gang, namespaces.as_str()];
    let controller = Controller::start_as(control_plane, &kubeconfig, "controller-mpi-v1", &args);
    let client = control_plane.client().await;
    let job = example("tensorflow-mnist.yaml");
    jobs::create(&client, &ns, &job, false)
        .await
        .expect("created");
    let name = "tensorflow-mnist";
    let names = wait_pods(&client, &ns, name, 3).await;
    let (launcher, w0, w1) = (
        format!("{name}-launcher"),
        format!("{name}-worker-0"),
        format!("{name}-worker-1"),
    );
    assert_eq!(
        names,
        [launcher.clone(), w0.clone(), w1.clone()],
        "{}",
        controller.log()
    );

    let config: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let data = config
        .get(&format!("{name}-config"))
        .await
        .expect("config")
        .data;
    let data = data.unwrap_or_default();
    assert_eq!(
        data.get("hostfile").map(String::as_str),
        Some(format!("{w0} slots=1\n{w1} slots=1\n").as_str())
    );
    assert!(
        data.get("kubexec.sh")
            .is_some_and(|s| s.contains("/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh")),
        "{data:?}"
    );
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    accounts
        .get(&launcher)
        .await
        .expect("the launcher's ServiceAccount");
    // The exec rule follows the workers the controller has observed (none at first: a rule
    // with no resourceNames would open every pod), so it may come one reconcile later.
    let roles: Api<Role> = Api::namespaced(client.clone(), &ns);
    let expected = json!([w0, w1]);
    support::wait_for(
        "the launcher's Role names both workers",
        Duration::from_secs(30),
        || async {
            let rules = json!(roles.get(&launcher).await.map_err(|e| e.to_string())?.rules);
            if rules[1]["resourceNames"] == expected {
                Ok(())
            } else {
                Err(rules.to_string())
            }
        },
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns);
    let binding = bindings.get(&launcher).await.expect("the RoleBinding");
    assert_eq!(binding.role_ref.name, launcher);

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let launcher_pod = json!(pods.get(&launcher).await.expect("launcher"));
    assert_eq!(launcher_pod["spec"]["serviceAccountName"], json!(launcher));
    assert_eq!(
        launcher_pod["spec"]["initContainers"][0]["name"],
        json!("kubectl-delivery")
    );
    let worker = json!(pods.get(&w0).await.expect("worker"));
    assert_eq!(worker["spec"]["containers"][0]["command"], json!(["sleep"]));

    for pod in [&w0, &w1, &launcher] {
        set_running(&client, &ns, pod, "mpi").await;
    }
    let api = jobs::api_for(&client, &ns, &job);
    wait_condition(&api, name, "Running", &controller).await;
    set_exited(&client, &ns, &launcher, "mpi", 0).await;
    wait_condition(&api, name, "Succeeded", &controller).await;
    // cleanPodPolicy Running: the still-running workers go, the finished launcher stays.
    let names = wait_pods(&client, &ns, name, 1).await;
    assert_eq!(names, std::slice::from_ref(&launcher));
    let log = controller.log();
    assert!(
        !log.contains("forbidden") && !log.contains("Forbidden"),
        "{log}"
    );
}

async fn wait_condition(api: &Api<kube::api::DynamicObject>, name: &str, ty: &str, c: &Controller) {
    support::wait_for(&format!("{name} {ty}"), Duration::from_secs(30), || async {
        let job = serde_json::to_value(api.get(name).await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        jobs::true_condition(&job, ty)
            .map(drop)
            .ok_or_else(|| format!("{:#}\n{}", job["status"], c.log()))
    })
    .await;
}

/// Both v1 MPIJob examples of the corpus (the elastic one included) reach their pods.
async fn every_upstream_v1_example_reaches_its_pods() {
    let control_plane = controller();
    let client = control_plane.client().await;
    for file in ["tensorflow-mnist.yaml", "tensorflow-mnist-elastic.yaml"] {
        let job = example(file);
        let ns = control_plane.namespace("mpi-v1-example").await;
        jobs::create(&client, &ns, &job, false)
            .await
            .expect("created");
        let name = job["metadata"]["name"].as_str().expect("name");
        let workers = job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
            .as_u64()
            .unwrap_or(0) as usize;
        let mut expected = vec![format!("{name}-launcher")];
        expected.extend((0..workers).map(|i| format!("{name}-worker-{i}")));
        let names = wait_pods(&client, &ns, name, expected.len()).await;
        assert_eq!(names, expected, "{file}");
    }
}

async fn a_deleted_or_edited_config_map_is_repaired_not_duplicated() {
    let control_plane = controller();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("mpi-v1-repair").await;
    let job = example("tensorflow-mnist.yaml");
    jobs::create(&client, &ns, &job, false)
        .await
        .expect("created");
    wait_pods(&client, &ns, "tensorflow-mnist", 3).await;
    let config: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let name = "tensorflow-mnist-config";
    let want = config.get(name).await.expect("config").data;

    let edit = json!({"data": {"hostfile": "somewhere-else slots=64\n"}});
    config
        .patch(name, &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("hand edit");
    wait_data(&config, name, &want).await;
    config
        .delete(name, &DeleteParams::default())
        .await
        .expect("hand delete");
    wait_data(&config, name, &want).await;
    let all = config
        .list(&ListParams::default().labels("app=tensorflow-mnist"))
        .await
        .expect("list");
    assert_eq!(all.items.len(), 1, "one ConfigMap, not two");
}

async fn wait_data(
    api: &Api<ConfigMap>,
    name: &str,
    want: &Option<std::collections::BTreeMap<String, String>>,
) {
    support::wait_for(
        "the ConfigMap repaired",
        Duration::from_secs(30),
        || async {
            let have = api.get_opt(name).await.map_err(|e| e.to_string())?;
            match have.map(|c| c.data) {
                Some(data) if &data == want => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

/// A `<job>-config` someone else made (say, for an MPIJob of the other version) is neither
/// rewritten nor mounted: the job waits with ErrResourceExists and starts once it is gone.
async fn a_config_map_of_another_owner_is_never_adopted() {
    let control_plane = controller();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("mpi-v1-foreign").await;
    let config: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let foreign: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "tensorflow-mnist-config"},
        "data": {"hostfile": "someone-else slots=4\n"},
    }))
    .expect("ConfigMap");
    config
        .create(&Default::default(), &foreign)
        .await
        .expect("foreign ConfigMap");
    let job = example("tensorflow-mnist.yaml");
    jobs::create(&client, &ns, &job, false)
        .await
        .expect("created");
    let note = jobs::wait_event(&client, &ns, "ErrResourceExists").await;
    assert!(note.contains("tensorflow-mnist-config"), "{note}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    assert!(pods
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .is_empty());
    let kept = config.get("tensorflow-mnist-config").await.expect("kept");
    assert_eq!(kept.data, foreign.data, "not rewritten");
    assert_eq!(kept.metadata.owner_references, None, "not adopted");

    config
        .delete("tensorflow-mnist-config", &DeleteParams::default())
        .await
        .expect("deleted");
    let api = jobs::api_for(&client, &ns, &job);
    let nudge = json!({"metadata": {"annotations": {"test/nudge": "1"}}});
    api.patch(
        "tensorflow-mnist",
        &PatchParams::default(),
        &Patch::Merge(&nudge),
    )
    .await
    .expect("nudge");
    wait_pods(&client, &ns, "tensorflow-mnist", 3).await;
}

/// Issue 32, item 3. A PyTorchJob `train` runs (its pods `train-master-0`, `train-worker-0`,
/// `train-worker-1` made by gangplank's PyTorchJob controller); then an MPIJob v1 `train`
/// arrives, whose workers would have the same names. Before, its worker creates took the 409
/// for done, its launcher started, and its Role granted exec on `train-worker-0` and
/// `train-worker-1` by name: the PyTorchJob's pods, entered with the launcher's token. Now
/// the MPIJob says which pods hold its names and who owns them, starts no launcher, and its
/// launcher's ServiceAccount may exec into none of them (asked of the apiserver's RBAC); an
/// MPIJob of another name beside them runs as usual.
async fn a_launcher_cannot_exec_into_a_same_named_pytorchjobs_pods() {
    let control_plane = controller();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("mpi-v1-same-name").await;
    let _pytorch = Controller::start(
        control_plane,
        "controller-pytorch-same-name",
        &[
            "--kinds=PyTorchJob",
            "--leader-elect=false",
            "--gang-scheduler=",
        ],
    );
    let pytorch = support::jobs::pytorch_job("train", 1);
    jobs::create(&client, &ns, &pytorch, false)
        .await
        .expect("PyTorchJob created");
    let theirs = ["train-master-0", "train-worker-0", "train-worker-1"];
    assert_eq!(wait_pods(&client, &ns, "train", 3).await, theirs);

    let mut mpi = example("tensorflow-mnist.yaml");
    mpi["metadata"]["name"] = json!("train");
    jobs::create(&client, &ns, &mpi, false)
        .await
        .expect("MPIJob created");
    let api = jobs::api_for(&client, &ns, &mpi);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // Until the MPIJob reports the names held, or (as before) its launcher exists.
    let created = support::wait_for("the MPIJob's verdict", Duration::from_secs(30), || async {
        if pods
            .get_opt("train-launcher")
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Ok(None);
        }
        let job = serde_json::to_value(api.get("train").await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        jobs::true_condition(&job, "Created")
            .filter(|c| c["reason"] == "MPIJobResourceExists")
            .map(Some)
            .ok_or_else(|| format!("{:#}", job["status"]))
    })
    .await;
    let Some(created) = created else {
        panic!("the MPIJob started a launcher beside another job's workers");
    };
    let message = created["message"].as_str().unwrap_or_default();
    for worker in ["train-worker-0", "train-worker-1"] {
        assert!(
            message.contains(&format!("Pod {worker} (controlled by PyTorchJob train)")),
            "{message}"
        );
    }
    let note = jobs::wait_event(&client, &ns, "ErrResourceExists").await;
    assert!(note.contains("PyTorchJob train"), "{note}");

    let all = pods.list(&ListParams::default()).await.expect("pods");
    let names: Vec<String> = all
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names, theirs, "no launcher, no pod of the MPIJob's");
    let roles: Api<Role> = Api::namespaced(client.clone(), &ns);
    if let Some(role) = roles
        .get_opt("train-launcher")
        .await
        .expect("read the Role")
    {
        let rules = json!(role.rules);
        for pod in theirs {
            assert!(!rules.to_string().contains(pod), "{rules}");
        }
    }
    let launcher = format!("system:serviceaccount:{ns}:train-launcher");
    for pod in theirs {
        assert!(
            !may_exec(&client, &launcher, &ns, pod).await,
            "{launcher} may exec into {pod}"
        );
    }

    // The controller goes on with the rest: another MPIJob beside them runs, and its
    // launcher may exec into its own workers only.
    mpi["metadata"]["name"] = json!("other");
    jobs::create(&client, &ns, &mpi, false)
        .await
        .expect("second MPIJob created");
    let names = wait_pods(&client, &ns, "other", 3).await;
    assert_eq!(
        names,
        ["other-launcher", "other-worker-0", "other-worker-1"]
    );
    let other = format!("system:serviceaccount:{ns}:other-launcher");
    // The apiserver's authorizer reads Roles from its own cache: wait for the grant.
    support::wait_for(
        "exec into other-worker-0",
        Duration::from_secs(10),
        || async {
            match may_exec(&client, &other, &ns, "other-worker-0").await {
                true => Ok(()),
                false => Err(format!("{other} may not exec into other-worker-0")),
            }
        },
    )
    .await;
    assert!(!may_exec(&client, &other, &ns, "train-worker-0").await);
}

/// Whether `user` may create `pods/exec` on `pod` in `ns`, as the apiserver's authorizer
/// answers a SubjectAccessReview (`kubectl auth can-i create pods/exec --as=...`).
async fn may_exec(client: &kube::Client, user: &str, ns: &str, pod: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_string()),
            groups: Some(vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".to_string(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.to_string()),
                verb: Some("create".to_string()),
                resource: Some("pods".to_string()),
                subresource: Some("exec".to_string()),
                name: Some(pod.to_string()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api
        .create(&Default::default(), &review)
        .await
        .expect("SubjectAccessReview");
    answer.status.is_some_and(|s| s.allowed)
}
