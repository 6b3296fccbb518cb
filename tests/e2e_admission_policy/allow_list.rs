//! deploy/controller/allow-list-policy.yaml and released-at-policy.yaml: the controller
//! writes only in namespaces labelled gangplank.dev/managed=true, no subresource but its jobs'
//! status, never a connection to a pod, and deletes only what a training job controls; the
//! annotation the gang watchdog trusts is the controller's alone.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::support::{self, jobs, ControlPlane};
use super::{
    answer, client_as, control_plane, create_pod, job_pod, patch_pod, refused, try_pod, Answer,
    CONTROLLER,
};

const UID: &str = "00000000-0000-0000-0000-000000000020";

fn label(plane: &ControlPlane, ns: &str, value: &str) {
    let label = format!("gangplank.dev/managed={value}");
    support::rbac::kubectl(plane, &["label", "namespace", ns, &label, "--overwrite"]);
}

/// The merge patch of a job's status that src/controller/reconcile.rs sends, in essence.
async fn patch_status(client: kube::Client, ns: String, job: &'static str) -> Answer {
    let api = jobs::pytorch_api(&client, &ns);
    let body = json!({"status": {"conditions": [{
        "type": "Created", "status": "True", "reason": "PyTorchJobCreated",
        "message": "created", "lastTransitionTime": "2026-12-01T00:00:00Z",
        "lastUpdateTime": "2026-12-01T00:00:00Z",
    }]}});
    answer(
        api.patch_status(job, &PatchParams::default(), &Patch::Merge(&body))
            .await,
    )
}

pub async fn the_controller_writes_nothing_in_a_namespace_not_labelled_managed() {
    let plane = control_plane().await;
    let admin = plane.client().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.unmanaged_namespace("vap-unmanaged").await;
    let pod = job_pod("train", UID);
    let hint = format!("kubectl label namespace {ns} gangplank.dev/managed=true");
    let why = "acts only in namespaces labelled gangplank.dev/managed=true";
    let message = refused("a pod in an unlabelled namespace", why, || {
        try_pod(controller.clone(), ns.clone(), pod.clone())
    })
    .await;
    assert!(message.contains(&hint), "{message}");
    // Status writes too: a job there gets no write at all.
    jobs::create(&admin, &ns, &jobs::pytorch_job("train", 1), false)
        .await
        .expect("a user's job in an unmanaged namespace");
    let message = refused("a status write there", why, || {
        patch_status(controller.clone(), ns.clone(), "train")
    })
    .await;
    assert!(message.contains("pytorchjobs/status train"), "{message}");
    // Any value but "true" is as good as none.
    label(plane, &ns, "yes");
    refused("a pod in a namespace labelled yes", why, || {
        try_pod(controller.clone(), ns.clone(), pod.clone())
    })
    .await;
    // Labelled: admitted (the namespace reaches the policy through an informer).
    label(plane, &ns, "true");
    support::wait_for("the label seen", Duration::from_secs(30), || {
        let attempt = try_pod(controller.clone(), ns.clone(), pod.clone());
        async move { attempt.await.map_err(|e| format!("{e:?}")) }
    })
    .await;
    patch_status(controller.clone(), ns.clone(), "train")
        .await
        .expect("the job's status, once the namespace is managed");
    // kube-system and the install namespace stay closed whatever their labels say.
    for closed in ["kube-system", "gangplank-system"] {
        label(plane, closed, "true");
        refused(&format!("{closed} labelled"), "writes nothing in", || {
            try_pod(controller.clone(), closed.to_string(), pod.clone())
        })
        .await;
        let unlabel = "gangplank.dev/managed-";
        support::rbac::kubectl(plane, &["label", "namespace", closed, unlabel]);
    }
}

/// A POST to `path` (a subresource of a pod), as kubectl exec, attach and port-forward
/// begin: admission runs before the connection would be upgraded.
async fn post(client: kube::Client, path: String, body: Value) -> Answer {
    let body = serde_json::to_vec(&body).expect("body");
    let request = axum::http::Request::post(path)
        .header("Content-Type", "application/json")
        .body(body)
        .expect("request");
    answer(client.request_text(request).await)
}

pub async fn the_controller_never_connects_to_a_pod_nor_writes_a_subresource_but_job_status() {
    let plane = control_plane().await;
    let admin = plane.client().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-connect").await;
    create_pod(admin.clone(), ns.clone(), job_pod("train", UID))
        .await
        .expect("a pod of the job");
    let pod = format!("/api/v1/namespaces/{ns}/pods/train-worker-0");
    let why = "never execs, attaches, port-forwards or proxies";
    let attempts = [
        ("exec", "/exec?command=sh&stdin=true&stdout=true", json!({})),
        ("attach", "/attach?stdin=true&stdout=true", json!({})),
        ("port-forward", "/portforward?ports=22", json!({})),
        (
            "a binding to a node of its choice",
            "/binding",
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "train-worker-0"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-7"}}),
        ),
        (
            "an eviction",
            "/eviction",
            json!({"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": "train-worker-0"}}),
        ),
    ];
    for (what, sub, body) in attempts {
        let message = refused(what, why, || {
            post(controller.clone(), format!("{pod}{sub}"), body.clone())
        })
        .await;
        assert!(message.contains("train-worker-0"), "{what}: {message}");
    }
    let pods: Api<Pod> = Api::namespaced(controller.clone(), &ns);
    let status = json!({"status": {"phase": "Succeeded"}});
    refused("a pod's status", why, || {
        let pods = pods.clone();
        let status = status.clone();
        async move {
            answer(
                pods.patch_status(
                    "train-worker-0",
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await,
            )
        }
    })
    .await;
    jobs::create(&admin, &ns, &jobs::pytorch_job("train", 1), false)
        .await
        .expect("the job");
    patch_status(controller, ns, "train")
        .await
        .expect("the job's own status is the controller's to write");
}

/// A dry-run delete of `name` through `api`.
async fn try_delete(api: Api<DynamicObject>, name: &'static str) -> Answer {
    let params = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    answer(api.delete(name, &params).await)
}

pub async fn the_controller_deletes_only_what_a_job_controls_and_jobs_past_their_ttl() {
    let plane = control_plane().await;
    let admin = plane.client().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-deletes").await;
    let mut bystander = job_pod("web", UID);
    bystander["metadata"]["ownerReferences"] = json!([]);
    create_pod(admin.clone(), ns.clone(), bystander)
        .await
        .expect("a pod no job controls");
    let service = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
        "spec": {"ports": [{"port": 80}]},
    });
    support::controller::apply(&admin, &service).await;
    create_pod(admin.clone(), ns.clone(), job_pod("train", UID))
        .await
        .expect("a pod of the job");
    let pods = jobs::resource("v1", "Pod");
    let services = jobs::resource("v1", "Service");
    let pods: Api<DynamicObject> = Api::namespaced_with(controller.clone(), &ns, &pods);
    let services: Api<DynamicObject> = Api::namespaced_with(controller.clone(), &ns, &services);
    let why = "has no such controller ownerReference";
    let message = refused("an unowned pod deleted", why, || {
        try_delete(pods.clone(), "web-worker-0")
    })
    .await;
    assert!(message.contains("pods web-worker-0"), "{message}");
    refused("an unowned Service deleted", why, || {
        try_delete(services.clone(), "web")
    })
    .await;
    try_delete(pods, "train-worker-0")
        .await
        .expect("a pod its job controls: a restart, a scale-down, cleanPodPolicy");

    jobs::create(&admin, &ns, &jobs::pytorch_job("kept", 1), false)
        .await
        .expect("a job without a TTL");
    let mut finite = jobs::pytorch_job("finite", 1);
    finite["spec"]["runPolicy"] = json!({"ttlSecondsAfterFinished": 60});
    jobs::create(&admin, &ns, &finite, false)
        .await
        .expect("a job with a TTL");
    let api = jobs::pytorch_api(&controller, &ns);
    let message = refused(
        "a job without a TTL deleted",
        "only after its spec.runPolicy.ttlSecondsAfterFinished",
        || try_delete(api.clone(), "kept"),
    )
    .await;
    assert!(message.contains("pytorchjobs kept sets none"), "{message}");
    try_delete(api, "finite")
        .await
        .expect("a job past its own TTL is the controller's to delete");
}

pub async fn the_released_at_annotation_is_written_by_the_controller_alone() {
    let plane = control_plane().await;
    let admin = plane.client().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-released-at").await;
    let stamp = "gangplank.dev/released-at";
    let why = "is written only by the gangplank controller";
    // A pod created with it: a template that asked for it, a bare pod.
    let mut forged = job_pod("early", UID);
    forged["metadata"]["annotations"] = json!({stamp: "2099-01-01T00:00:00Z"});
    let message = refused("a pod created with the stamp", why, || {
        try_pod(admin.clone(), ns.clone(), forged.clone())
    })
    .await;
    assert!(message.contains("pod early-worker-0"), "{message}");

    let gate = "gangplank.dev/release-order";
    let mut gated = job_pod("gated", UID);
    gated["spec"]["schedulingGates"] = json!([{"name": gate}]);
    create_pod(admin.clone(), ns.clone(), gated)
        .await
        .expect("a gated pod, as the controller creates it");
    let as_admin: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let stamp_at = |value: &str| json!({"metadata": {"annotations": {stamp: value}}});
    let future = stamp_at("2099-01-01T00:00:00Z");
    refused("the stamp added by a tenant", why, || {
        patch_pod(as_admin.clone(), "gated-worker-0", future.clone())
    })
    .await;
    // The controller's release (src/controller/apply.rs, Action::ReleasePods).
    let mut release = json!({"spec": {"schedulingGates": [{"name": gate, "$patch": "delete"}]}});
    release["metadata"] = stamp_at("2026-12-01T05:00:00Z")["metadata"].clone();
    let as_controller: Api<Pod> = Api::namespaced(controller, &ns);
    patch_pod(as_controller, "gated-worker-0", release)
        .await
        .expect("the controller stamps the pod it releases");
    refused("the stamp moved by a tenant", why, || {
        patch_pod(as_admin.clone(), "gated-worker-0", future.clone())
    })
    .await;
    let other = json!({"metadata": {"annotations": {"example.com/note": "kept"}}});
    patch_pod(as_admin, "gated-worker-0", other)
        .await
        .expect("a tenant's update that leaves the stamp as it is");
}
