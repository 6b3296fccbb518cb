//! deploy/controller/owned-objects-policy.yaml: besides pods, the controller creates only
//! objects a training job controls, named after it, in the shapes src/controller builds
//! (the legitimate objects below are copies of what services.rs, hpa.rs, mpi/objects.rs and
//! mpi/kubexec/mod.rs produce for a job; the controller suites run the real ones through the
//! same policies).

use serde_json::{json, Value};

use super::{client_as, control_plane, owned_by, refused, try_create, Attack, CONTROLLER};

const UID: &str = "00000000-0000-0000-0000-000000000030";

/// An object of `kind` named `name` that PyTorchJob (or `owner_kind`) `job` controls.
fn owned(api_version: &str, kind: &str, name: &str, owner_kind: &str, job: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {
            "name": name,
            "labels": {"training.kubeflow.org/job-name": job},
            "ownerReferences": owned_by(owner_kind, job, UID),
        },
    })
}

/// The headless Service of replica worker-0 (src/controller/services.rs).
fn replica_service() -> Value {
    let mut service = owned("v1", "Service", "train-worker-0", "PyTorchJob", "train");
    service["spec"] = json!({
        "clusterIP": "None",
        "selector": {"training.kubeflow.org/job-name": "train",
                     "training.kubeflow.org/replica-index": "0"},
        "ports": [{"name": "pytorchjob-port", "port": 23456}],
    });
    service
}

pub async fn the_controller_makes_only_headless_services_its_jobs_own() {
    let plane = control_plane().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-services").await;
    let attempt = |service: Value| try_create(controller.clone(), ns.clone(), service);
    let headless = "creates only headless Services";
    let attacks: [Attack; 5] = [
        (
            "a LoadBalancer",
            |s| s["spec"] = json!({"type": "LoadBalancer", "ports": [{"port": 443}]}),
            "is type LoadBalancer",
        ),
        (
            "a NodePort",
            |s| s["spec"] = json!({"type": "NodePort", "ports": [{"port": 22, "nodePort": 30022}]}),
            "is type NodePort",
        ),
        (
            "externalIPs",
            |s| s["spec"] = json!({"externalIPs": ["203.0.113.7"], "ports": [{"port": 443}]}),
            headless,
        ),
        (
            "no owner",
            |s| s["metadata"]["ownerReferences"] = json!([]),
            "has no such controller ownerReference",
        ),
        (
            "another name",
            |s| s["metadata"]["name"] = "kubernetes-dashboard".into(),
            "are named train or train-...",
        ),
    ];
    for (what, attack, expected) in attacks {
        let mut service = replica_service();
        attack(&mut service);
        refused(what, expected, || attempt(service.clone())).await;
    }
    attempt(replica_service())
        .await
        .expect("a replica's headless Service");
    // The v2beta1 MPIJob's one Service `<job>` (src/controller/mpi/objects.rs).
    let mut mpi = owned("v1", "Service", "pi", "MPIJob", "pi");
    mpi["spec"] = json!({"clusterIP": "None", "publishNotReadyAddresses": false,
                         "selector": {"training.kubeflow.org/job-name": "pi"}});
    attempt(mpi).await.expect("an MPIJob's headless Service");
}

/// The HPA of elastic PyTorchJob `train` (src/controller/hpa.rs).
fn hpa() -> Value {
    let mut hpa = owned(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        "train",
        "PyTorchJob",
        "train",
    );
    hpa["spec"] = json!({
        "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "train"},
        "minReplicas": 1, "maxReplicas": 4,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                     "target": {"type": "Utilization", "averageUtilization": 80}}}],
    });
    hpa
}

pub async fn the_controllers_hpa_scales_only_its_own_job() {
    let plane = control_plane().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-hpa").await;
    let mut aimed = hpa();
    aimed["spec"]["scaleTargetRef"] =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    let message = refused(
        "an HPA aimed at a Deployment",
        "scales its own job train",
        || try_create(controller.clone(), ns.clone(), aimed.clone()),
    )
    .await;
    assert!(
        message.contains("this one scales Deployment web"),
        "{message}"
    );
    try_create(controller, ns, hpa())
        .await
        .expect("the elastic job's own HPA");
}

/// The v1 MPIJob `mpi` launcher's Role with exec on `workers`
/// (src/controller/mpi/kubexec/mod.rs, role_rules).
fn launcher_role(workers: &[&str]) -> Value {
    let mut role = owned(
        "rbac.authorization.k8s.io/v1",
        "Role",
        "mpi-launcher",
        "MPIJob",
        "mpi",
    );
    role["rules"] = json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"], "resourceNames": workers},
    ]);
    role
}

fn launcher_binding(role_kind: &str, role: &str, account: &str) -> Value {
    let mut binding = owned(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "mpi-launcher",
        "MPIJob",
        "mpi",
    );
    binding["roleRef"] =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role});
    binding["subjects"] = json!([{"kind": "ServiceAccount", "name": account}]);
    binding
}

pub async fn the_v1_launchers_rbac_grants_exec_only_on_its_own_workers() {
    let plane = control_plane().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-launcher-rbac").await;
    let attempt = |object: Value| try_create(controller.clone(), ns.clone(), object);
    let role_refused = "grants something else";
    let mut everywhere = launcher_role(&[]);
    everywhere["rules"][1]
        .as_object_mut()
        .map(|r| r.remove("resourceNames"));
    refused("exec on every pod", role_refused, || {
        attempt(everywhere.clone())
    })
    .await;
    let foreign = launcher_role(&["train-worker-0"]);
    refused("exec on another job's pod", role_refused, || {
        attempt(foreign.clone())
    })
    .await;
    let mut secrets = launcher_role(&["mpi-worker-0"]);
    secrets["rules"][0]["resources"] = json!(["secrets"]);
    refused("reading Secrets", role_refused, || attempt(secrets.clone())).await;
    let binding_refused = "binds something else";
    let admin = launcher_binding("ClusterRole", "cluster-admin", "mpi-launcher");
    refused("a binding to cluster-admin", binding_refused, || {
        attempt(admin.clone())
    })
    .await;
    let default = launcher_binding("Role", "mpi-launcher", "default");
    refused(
        "the namespace's default account bound",
        binding_refused,
        || attempt(default.clone()),
    )
    .await;
    let mut unowned = owned("v1", "ConfigMap", "mpi-config", "MPIJob", "mpi");
    unowned["metadata"]["ownerReferences"] = json!([]);
    refused(
        "an unowned ConfigMap",
        "no such controller ownerReference",
        || attempt(unowned.clone()),
    )
    .await;

    let mut binding = launcher_binding("Role", "mpi-launcher", "mpi-launcher");
    binding["subjects"][0]["namespace"] = ns.clone().into();
    let mut config = owned("v1", "ConfigMap", "mpi-config", "MPIJob", "mpi");
    config["data"] = json!({"hostfile": "mpi-worker-0 slots=1\n"});
    let legitimate = [
        launcher_role(&["mpi-worker-0", "mpi-worker-1"]),
        binding,
        owned("v1", "ServiceAccount", "mpi-launcher", "MPIJob", "mpi"),
        config,
        owned("v1", "Secret", "mpi-ssh", "MPIJob", "mpi"),
    ];
    for object in legitimate {
        let what = format!("{} {}", object["kind"], object["metadata"]["name"]);
        attempt(object)
            .await
            .unwrap_or_else(|e| panic!("{what} as the controller makes it: {e:?}"));
    }
}

pub async fn the_controllers_podgroups_belong_to_their_job() {
    let plane = control_plane().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-podgroups").await;
    let attempt = |group: Value| try_create(controller.clone(), ns.clone(), group);
    // Volcano's PodGroup of PyTorchJob train (src/controller/podgroup.rs, `<job>-<kind>`).
    let group = || {
        let mut group = owned(
            "scheduling.volcano.sh/v1beta1",
            "PodGroup",
            "train-pytorchjob",
            "PyTorchJob",
            "train",
        );
        group["spec"] = json!({"minMember": 2});
        group
    };
    let mut unowned = group();
    unowned["metadata"]["ownerReferences"] = json!([]);
    refused(
        "an unowned PodGroup",
        "no such controller ownerReference",
        || attempt(unowned.clone()),
    )
    .await;
    let mut renamed = group();
    renamed["metadata"]["name"] = "other-team".into();
    refused(
        "a PodGroup named for another",
        "this one is podgroups other-team",
        || attempt(renamed.clone()),
    )
    .await;
    attempt(group()).await.expect("the job's own PodGroup");
}
