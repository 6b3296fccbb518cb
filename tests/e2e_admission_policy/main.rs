//! The fence around the controller's ServiceAccount that the API server itself keeps
//! (deploy/controller/admission-policy.yaml, ValidatingAdmissionPolicy), and the webhooks'
//! matchConditions that let that ServiceAccount's bookkeeping through while gangplank serve
//! is down. Requests are sent as the controller would send them, impersonating its
//! ServiceAccount (`system:serviceaccount:gangplank-system:gangplank-controller`), with
//! deploy/controller's RBAC installed, so each refusal here is the policy's, not RBAC's.
//!
//! Also deploy/priorityclass-policy.yaml: only pods in gangplank-system may use the
//! PriorityClass gangplank-critical, whoever creates them.
//!
//! The allow-list fence (issue 41) has its own modules: `allow_list` (managed namespaces,
//! subresources and exec, deletes, the released-at annotation), `sandbox` (what a pod the
//! controller creates may not reach) and `owned_objects` (Services, HPAs, the v1 launcher's
//! RBAC objects). There the ServiceAccount is also bound to cluster-admin, as a grant far
//! wider than deploy/ gives would be: every refusal is the policies' alone.
//!
//! Run: `cargo test --test e2e_admission_policy`.

mod allow_list;
mod owned_objects;
mod sandbox;
#[path = "../support/mod.rs"]
mod support;

use std::time::Duration;

use allow_list::{
    the_controller_deletes_only_what_a_job_controls_and_jobs_past_their_ttl,
    the_controller_never_connects_to_a_pod_nor_writes_a_subresource_but_job_status,
    the_controller_writes_nothing_in_a_namespace_not_labelled_managed,
    the_released_at_annotation_is_written_by_the_controller_alone,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use owned_objects::{
    the_controller_makes_only_headless_services_its_jobs_own,
    the_controllers_hpa_scales_only_its_own_job, the_controllers_podgroups_belong_to_their_job,
    the_v1_launchers_rbac_grants_exec_only_on_its_own_workers,
};
use sandbox::the_controllers_pods_stay_in_their_sandbox_whatever_their_owner;
use serde_json::{json, Value};
use support::rbac::Install;
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_admission_policy",
    [
        the_controller_writes_nothing_in_kube_system_or_its_own_namespace_but_its_lease,
        the_controller_creates_only_pods_its_jobs_control_under_their_names,
        only_a_v1_mpijob_launcher_pod_runs_as_its_own_launcher_service_account,
        the_controller_changes_nothing_on_a_job_but_its_bookkeeping_annotations,
        the_controller_only_lifts_its_release_gate_from_a_pod,
        the_controllers_annotation_patch_succeeds_while_the_webhook_is_down,
        only_gangplanks_own_pods_may_use_gangplank_critical,
        the_controller_writes_nothing_in_a_namespace_not_labelled_managed,
        the_controller_never_connects_to_a_pod_nor_writes_a_subresource_but_job_status,
        the_controller_deletes_only_what_a_job_controls_and_jobs_past_their_ttl,
        the_released_at_annotation_is_written_by_the_controller_alone,
        the_controllers_pods_stay_in_their_sandbox_whatever_their_owner,
        the_controller_makes_only_headless_services_its_jobs_own,
        the_controllers_hpa_scales_only_its_own_job,
        the_controllers_podgroups_belong_to_their_job,
        the_v1_launchers_rbac_grants_exec_only_on_its_own_workers,
    ]
);

const CONTROLLER: &str = "system:serviceaccount:gangplank-system:gangplank-controller";

/// The control plane with deploy/controller's RBAC and admission policies installed, once.
async fn control_plane() -> &'static ControlPlane {
    let plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    static INSTALLED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    INSTALLED
        .get_or_init(|| async {
            plane.ensure_namespace("gangplank-system").await;
            Install::render(plane, "admission-policy", &["controller"], &[]).apply(plane);
            // A grant far wider than deploy/ gives (a stolen token on a cluster whose RBAC
            // went wrong): what is refused below is refused by the policies alone.
            let wide = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "gangplank-controller-too-wide"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "gangplank-controller", "namespace": "gangplank-system"}],
            });
            support::controller::apply(&plane.client().await, &wide).await;
            // In force once the API server's policy informer has it: a dry run refused.
            let controller = client_as(plane, CONTROLLER).await;
            let probe = job_pod("probe", "00000000-0000-0000-0000-000000000000");
            refused(
                "the admission policies in force",
                "writes nothing in",
                || try_pod(controller.clone(), "kube-system".into(), probe.clone()),
            )
            .await;
        })
        .await;
    plane
}

/// A client that sends every request as `user` (the admin token may impersonate).
async fn client_as(plane: &ControlPlane, user: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(&plane.kubeconfig).expect("kubeconfig");
    let options = kube::config::KubeConfigOptions::default();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("client config");
    config.auth_info.impersonate = Some(user.to_string());
    kube::Client::try_from(config).expect("client")
}

/// A pod as the controller makes it for replica `<job>-worker-0` of PyTorchJob `job`.
fn job_pod(job: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{job}-worker-0"),
            "labels": {"training.kubeflow.org/job-name": job},
            "ownerReferences": owned_by("PyTorchJob", job, uid),
        },
        // Restricted, as gangplank-system's Pod Security admission (which runs first) wants.
        "spec": {"containers": [{
            "name": "pytorch",
            "image": jobs::IMAGE,
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "runAsNonRoot": true,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        }]},
    })
}

/// An attack: what it is, how it changes the controller's ordinary object, and the words
/// the refusal must carry.
type Attack = (&'static str, fn(&mut Value), &'static str);

/// An answer: Ok, or the refusal's code and message.
type Answer = Result<(), (u16, String)>;

fn answer<T>(result: Result<T, kube::Error>) -> Answer {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err((status.code, status.message)),
        Err(e) => Err((0, e.to_string())),
    }
}

/// Creates `pod` in `ns` (owned arguments: the future outlives no borrow, so it can be
/// retried from a closure).
async fn create_pod(client: kube::Client, ns: String, pod: Value) -> Answer {
    let api: Api<Pod> = Api::namespaced(client, &ns);
    let pod: Pod = serde_json::from_value(pod).expect("pod");
    answer(api.create(&PostParams::default(), &pod).await)
}

/// As [`create_pod`], as a dry run (admission runs, nothing is stored): what a refusal is
/// tried with, so that an attempt made before the policy is in force leaves nothing behind.
async fn try_pod(client: kube::Client, ns: String, pod: Value) -> Answer {
    let api: Api<Pod> = Api::namespaced(client, &ns);
    let pod: Pod = serde_json::from_value(pod).expect("pod");
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    answer(api.create(&params, &pod).await)
}

/// A dry-run create of any object in `ns` (its plural is its kind lowercased + "s").
async fn try_create(client: kube::Client, ns: String, object: Value) -> Answer {
    let text = |k: &str| object[k].as_str().unwrap_or_default().to_string();
    let resource = jobs::resource(&text("apiVersion"), &text("kind"));
    let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &resource);
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    answer(api.create(&params, &object).await)
}

/// The controller ownerReference of an object job `job` (a PyTorchJob, or `kind`) makes.
fn owned_by(kind: &str, job: &str, uid: &str) -> Value {
    json!([{
        "apiVersion": "kubeflow.org/v1", "kind": kind, "name": job,
        "uid": uid, "controller": true, "blockOwnerDeletion": true,
    }])
}

/// A merge patch of job `name` through `api`, with the controller's field manager.
async fn patch_job(api: Api<DynamicObject>, name: &'static str, body: Value) -> Answer {
    let params = PatchParams {
        field_manager: Some("gangplank-controller".into()),
        ..PatchParams::default()
    };
    answer(api.patch(name, &params, &Patch::Merge(&body)).await)
}

/// The policies reach the API server's admission through an informer: the first refusal
/// may take a moment. Retries `attempt` until it is refused with `expected` in the message.
async fn refused<F, Fut>(what: &str, expected: &str, mut attempt: F) -> String
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    let expected = expected.to_string();
    support::wait_for(what, Duration::from_secs(30), || {
        let expected = expected.clone();
        let attempt = attempt();
        async move {
            match attempt.await {
                Err((403, message)) if message.contains(&expected) => Ok(message),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await
}

async fn the_controller_writes_nothing_in_kube_system_or_its_own_namespace_but_its_lease() {
    let plane = control_plane().await;
    let controller = client_as(plane, CONTROLLER).await;
    // RBAC lets it (cluster-wide pods create); the policy does not.
    for ns in ["kube-system", "gangplank-system"] {
        let pod = job_pod("train", "00000000-0000-0000-0000-000000000001");
        let message = refused(
            &format!("a pod in {ns} refused"),
            "writes nothing in",
            || try_pod(controller.clone(), ns.to_string(), pod.clone()),
        )
        .await;
        assert!(message.contains(&format!("namespace {ns}")), "{message}");
    }
    // Its Lease is the one write it makes there; another Lease is refused.
    let leases: Api<Lease> = Api::namespaced(controller.clone(), "gangplank-system");
    let lease = |name: &str| -> Lease {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"holderIdentity": "test"}}),
        )
        .expect("lease")
    };
    let other = lease("someone-elses");
    let message = refused("another Lease refused", "leader Lease", || {
        let (leases, other) = (leases.clone(), other.clone());
        async move { answer(leases.create(&PostParams::default(), &other).await) }
    })
    .await;
    assert!(message.contains("someone-elses"), "{message}");
    leases
        .create(&PostParams::default(), &lease("gangplank-controller"))
        .await
        .expect("the controller creates its own Lease");
    // Renewed as src/controller/leader.rs does: read, then replace.
    let mut renewed = leases.get("gangplank-controller").await.expect("its Lease");
    if let Some(spec) = renewed.spec.as_mut() {
        spec.holder_identity = Some("test-2".into());
    }
    leases
        .replace("gangplank-controller", &PostParams::default(), &renewed)
        .await
        .expect("and renews it");
}

async fn the_controller_creates_only_pods_its_jobs_control_under_their_names() {
    let plane = control_plane().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-pods").await;
    let uid = "00000000-0000-0000-0000-000000000002";

    let mut orphan = job_pod("train", uid);
    orphan["metadata"]["ownerReferences"] = json!([]);
    refused(
        "a pod no job controls",
        "no such controller ownerReference",
        || try_pod(controller.clone(), ns.to_string(), orphan.clone()),
    )
    .await;

    let mut foreign_owner = job_pod("train", uid);
    foreign_owner["metadata"]["ownerReferences"][0]["apiVersion"] = "apps/v1".into();
    foreign_owner["metadata"]["ownerReferences"][0]["kind"] = "Deployment".into();
    refused(
        "a pod a Deployment controls",
        "no such controller ownerReference",
        || try_pod(controller.clone(), ns.to_string(), foreign_owner.clone()),
    )
    .await;

    let mut mislabelled = job_pod("train", uid);
    mislabelled["metadata"]["labels"]["training.kubeflow.org/job-name"] = "other".into();
    let message = refused(
        "a pod labelled for another job",
        "with job-name other",
        || try_pod(controller.clone(), ns.to_string(), mislabelled.clone()),
    )
    .await;
    assert!(message.contains("for job train"), "{message}");

    let mut renamed = job_pod("train", uid);
    renamed["metadata"]["name"] = "coredns-1".into();
    refused(
        "a pod named outside its job",
        "this one is named coredns-1",
        || try_pod(controller.clone(), ns.to_string(), renamed.clone()),
    )
    .await;

    create_pod(controller.clone(), ns.clone(), job_pod("train", uid))
        .await
        .expect("the pod the controller makes for its job is admitted");
}

async fn only_a_v1_mpijob_launcher_pod_runs_as_its_own_launcher_service_account() {
    let plane = control_plane().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-launcher").await;
    let uid = "00000000-0000-0000-0000-000000000003";
    // A PyTorchJob pod given the launcher identity of MPIJob `mpi` (exec on its workers).
    let mut borrowed = job_pod("train", uid);
    borrowed["spec"]["serviceAccountName"] = "mpi-launcher".into();
    let message = refused(
        "another job's launcher identity",
        "-launcher ServiceAccount",
        || try_pod(controller.clone(), ns.to_string(), borrowed.clone()),
    )
    .await;
    assert!(message.contains("ServiceAccount mpi-launcher"), "{message}");

    let mut launcher = job_pod("mpi", uid);
    launcher["metadata"]["name"] = "mpi-launcher".into();
    launcher["metadata"]["ownerReferences"][0]["kind"] = "MPIJob".into();
    launcher["spec"]["serviceAccountName"] = "mpi-launcher".into();
    let mut worker_as_launcher = launcher.clone();
    worker_as_launcher["metadata"]["name"] = "mpi-worker-0".into();
    refused(
        "a worker with the launcher's identity",
        "-launcher ServiceAccount",
        || {
            try_pod(
                controller.clone(),
                ns.to_string(),
                worker_as_launcher.clone(),
            )
        },
    )
    .await;
    create_pod(controller.clone(), ns.to_string(), launcher.clone())
        .await
        .expect("the v1 MPIJob's launcher runs as its own launcher ServiceAccount");
}

async fn the_controller_changes_nothing_on_a_job_but_its_bookkeeping_annotations() {
    let plane = control_plane().await;
    let admin = plane.client().await;
    let ns = plane.namespace("vap-jobs").await;
    jobs::create(&admin, &ns, &jobs::pytorch_job("bert", 1), false)
        .await
        .expect("created by a user");
    let controller = client_as(plane, CONTROLLER).await;
    let api: Api<DynamicObject> = jobs::pytorch_api(&controller, &ns);
    let patch = |body: Value| patch_job(api.clone(), "bert", body);
    let spec = json!({"spec": {"runPolicy": {"backoffLimit": 99}}});
    refused("a spec change", "only its bookkeeping annotations", || {
        patch(spec.clone())
    })
    .await;
    let queue = json!({"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "vip"}}});
    refused(
        "another annotation",
        "only its bookkeeping annotations",
        || patch(queue.clone()),
    )
    .await;
    let labels = json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "vip"}}});
    refused("a label", "only its bookkeeping annotations", || {
        patch(labels.clone())
    })
    .await;
    // What src/controller/apply.rs sends (Action::PatchJobAnnotations).
    let bookkeeping = json!({"metadata": {"annotations": {
        "gangplank.dev/restarts": "1", "gangplank.dev/restarted-pods": "bert-worker-0",
    }}});
    patch(bookkeeping)
        .await
        .expect("the restart-count annotations are the controller's to write");
}

/// A strategic merge patch of pod `name` through `api`, with the controller's field manager.
async fn patch_pod(api: Api<Pod>, name: &'static str, body: Value) -> Answer {
    let params = PatchParams {
        field_manager: Some("gangplank-controller".into()),
        ..PatchParams::default()
    };
    answer(api.patch(name, &params, &Patch::Strategic(&body)).await)
}

async fn the_controller_only_lifts_its_release_gate_from_a_pod() {
    let plane = control_plane().await;
    let admin = plane.client().await;
    let ns = plane.namespace("vap-release").await;
    let gate = "gangplank.dev/release-order";
    let mut pod = job_pod("gated", "00000000-0000-0000-0000-000000000003");
    pod["spec"]["schedulingGates"] = json!([{"name": "example.com/quota"}, {"name": gate}]);
    create_pod(admin, ns.clone(), pod)
        .await
        .expect("a gated pod, as the controller creates it");
    let controller = client_as(plane, CONTROLLER).await;
    let api: Api<Pod> = Api::namespaced(controller, &ns);
    let patch = |body: Value| patch_pod(api.clone(), "gated-worker-0", body);
    let lift =
        |name: &str| json!({"spec": {"schedulingGates": [{"name": name, "$patch": "delete"}]}});
    let why = "may only lift its scheduling gate";
    refused("another gate lifted", why, || {
        patch(lift("example.com/quota"))
    })
    .await;
    let image =
        json!({"spec": {"containers": [{"name": "pytorch", "image": "registry.example/other:1"}]}});
    refused("an image changed", why, || patch(image.clone())).await;
    let label = json!({"metadata": {"labels": {"app": "web"}}});
    refused("a label added", why, || patch(label.clone())).await;
    let annotation = json!({"metadata": {"annotations": {"example.com/owner": "me"}}});
    refused("another annotation", why, || patch(annotation.clone())).await;
    let node = json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "n1"}}});
    refused("node selection while gated", why, || patch(node.clone())).await;

    // What src/controller/apply.rs sends (Action::ReleasePods).
    let mut release = lift(gate);
    release["metadata"] =
        json!({"annotations": {"gangplank.dev/released-at": "2026-11-29T05:00:00Z"}});
    patch(release)
        .await
        .expect("lifting its own gate and stamping the time are the controller's");
    let after = api.get("gated-worker-0").await.expect("the pod");
    let gates: Vec<String> = after
        .spec
        .iter()
        .flat_map(|s| s.scheduling_gates.iter().flatten())
        .map(|g| g.name.clone())
        .collect();
    assert_eq!(gates, ["example.com/quota"], "only its own gate went");
}

/// deploy/'s webhook configurations pointed at a server that does not answer
/// (failurePolicy Fail): a user's update is refused, the controller's bookkeeping patch is
/// not, and neither is it for a tenant's ServiceAccount of the same name.
async fn the_controllers_annotation_patch_succeeds_while_the_webhook_is_down() {
    let plane = control_plane().await;
    let admin = plane.client().await;
    let ns = plane.namespace("webhook-down").await;
    jobs::create(&admin, &ns, &jobs::pytorch_job("llm", 1), false)
        .await
        .expect("created before the webhooks");
    // A port nothing listens on, and a CA: the call fails, as with every replica down.
    let [port] = support::control_plane::free_ports();
    let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &plane.ca_pem);
    let deploy = Install::render(plane, "webhook-down", &[], &[]);
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let mut configuration = deploy.all(kind)[0].clone();
        configuration["metadata"]["name"] = "gangplank-down".into();
        for hook in configuration["webhooks"].as_array_mut().expect("webhooks") {
            let path = hook["clientConfig"]["service"]["path"].clone();
            let url = format!("https://127.0.0.1:{port}{}", path.as_str().unwrap_or("/"));
            hook["clientConfig"] = json!({"url": url, "caBundle": ca});
            // Only this test's namespace: the other tests of this binary go on.
            hook["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": ns}});
        }
        support::controller::apply(&admin, &configuration).await;
    }
    let annotate = |client: kube::Client, value: &'static str| {
        let body = json!({"metadata": {"annotations": {"gangplank.dev/restarts": value}}});
        patch_job(jobs::pytorch_api(&client, &ns), "llm", body)
    };
    // The webhooks are in force: anyone else's same patch (the admin's) fails closed.
    let message = support::wait_for("the webhooks in force", Duration::from_secs(30), || async {
        match annotate(admin.clone(), "7").await {
            Err((_, message)) if message.contains("failed calling webhook") => Ok(message),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(message.contains("mutate.gangplank.dev"), "{message}");
    let tenant = format!("system:serviceaccount:{ns}:gangplank-controller");
    let tenant_client = client_as(plane, &tenant).await;
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "tenant-gangplank-controller", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gangplank-controller"},
        "subjects": [{"kind": "ServiceAccount", "name": "gangplank-controller", "namespace": ns}],
    });
    support::controller::apply(&admin, &role).await;
    let message = support::wait_for(
        "the tenant's same-named account judged",
        Duration::from_secs(30),
        || async {
            match annotate(tenant_client.clone(), "8").await {
                Err((_, message)) if message.contains("failed calling webhook") => Ok(message),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(message.contains("gangplank.dev"), "{message}");

    let controller = client_as(plane, CONTROLLER).await;
    annotate(controller, "1")
        .await
        .expect("the controller's bookkeeping skips the webhooks that are down");
    let stored = jobs::stored_pytorch_job(&admin, &ns, "llm").await;
    assert_eq!(
        stored["metadata"]["annotations"]["gangplank.dev/restarts"],
        "1"
    );
}

/// deploy/priorityclass-policy.yaml: a pod naming gangplank-critical is refused in a tenant's
/// namespace and in kube-system whoever sends it (the admin, as a tenant's Deployment would
/// through its ReplicaSet; the controller, as a job template naming it would), and admitted
/// in gangplank-system. The class itself is applied from deploy/, so the refusal is the
/// policy's, not the Priority plugin's "no PriorityClass".
async fn only_gangplanks_own_pods_may_use_gangplank_critical() {
    let plane = control_plane().await;
    support::rbac::kubectl(
        plane,
        &[
            "apply",
            "-f",
            &support::repo()
                .join("deploy/priorityclass.yaml")
                .display()
                .to_string(),
        ],
    );
    let tenant = plane.namespace("tenant").await;
    let critical = |uid: &str| {
        let mut pod = job_pod("greedy", uid);
        pod["spec"]["priorityClassName"] = "gangplank-critical".into();
        pod
    };
    let admin = plane.client().await;
    let controller = client_as(plane, CONTROLLER).await;
    for (who, client) in [("the admin", &admin), ("the controller", &controller)] {
        let pod = critical("00000000-0000-0000-0000-000000000009");
        let message = refused(
            &format!("{who}'s gangplank-critical pod in {tenant} refused"),
            "is for gangplank's own pods",
            || try_pod(client.clone(), tenant.clone(), pod.clone()),
        )
        .await;
        assert!(
            message.contains(&format!("pod greedy-worker-0 in {tenant} names it")),
            "{message}"
        );
    }
    let pod = critical("00000000-0000-0000-0000-00000000000a");
    refused("kube-system too", "is for gangplank's own pods", || {
        try_pod(admin.clone(), "kube-system".into(), pod.clone())
    })
    .await;
    // Its own namespace: admitted (a dry run, nothing stored), with the class's priority.
    try_pod(admin.clone(), "gangplank-system".into(), critical("x"))
        .await
        .expect("gangplank's own pods may use it");
    // Any other class, or none, passes in the tenant's namespace.
    try_pod(
        admin,
        tenant,
        job_pod("modest", "00000000-0000-0000-0000-00000000000b"),
    )
    .await
    .expect("a pod without the class");
}
