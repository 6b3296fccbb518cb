//! The storage and network policies through a real kube-apiserver and kubectl: the webhook
//! server (`serve`, with the control plane's kubeconfig, as in a cluster) watches the
//! PersistentVolumeClaims, StorageClasses, NetworkPolicies and Namespaces the test creates
//! through the API; `kubectl apply` of a job that shares a ReadWriteOnce claim is refused
//! naming the claim, a job isolated by a NetworkPolicy is warned (and refused where the
//! `network` policy's `refuse` parameter is set), and objects created after the server
//! started reach the policies through the watch.
//!
//! These servers run without `--client-ca`, as deploy/ ships, so the apiserver is a caller
//! gangplank cannot tell from any pod that reaches the port: the verdicts are the same, and
//! the messages withhold what the namespace holds (the claim's modes and class, the
//! provisioner, the NetworkPolicy's name; issue 41 item 3). tests/admission/withheld_names.rs
//! shows the names told to a caller `--client-ca` verified.

mod support;

use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{json, Value};
use support::{jobs, ControlPlane, Crds, Webhooks};

e2e_suite!(
    "e2e_storage_network",
    [
        a_shared_read_write_once_claim_is_refused_at_kubectl_apply,
        a_read_write_many_claim_is_admitted_and_a_missing_one_warned,
        an_unbound_claim_its_class_cannot_give_is_refused,
        a_network_policy_that_isolates_the_job_is_warned_at_kubectl_apply,
        with_refuse_set_an_isolating_network_policy_refuses_the_job,
    ]
);

async fn plane() -> &'static ControlPlane {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    Webhooks::shared(control_plane);
    control_plane
}

/// A 1 Master + 2 Worker PyTorchJob whose pods all mount claim `claim` (read-write).
fn job_with_claim(name: &str, claim: &str) -> Value {
    let mut job = jobs::pytorch_job(name, 1);
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(2);
    for r in ["Master", "Worker"] {
        let spec = &mut job["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"];
        spec["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
        spec["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    }
    job
}

/// Creates `object` (a claim, StorageClass, NetworkPolicy) through the API.
async fn create(client: &kube::Client, namespace: Option<&str>, object: Value) {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let resource = gangplank::cluster::watch::storage_and_network_resources()
        .into_iter()
        .find(|r| r.kind == kind)
        .unwrap_or_else(|| panic!("{kind} is one of the inventory's kinds"));
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {kind}: {e}"));
}

fn claim(name: &str, modes: &[&str], class: Option<&str>) -> Value {
    let mut claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": modes, "resources": {"requests": {"storage": "10Gi"}}}});
    if let Some(class) = class {
        claim["spec"]["storageClassName"] = json!(class);
    }
    claim
}

/// `kubectl apply --dry-run=server` of `job` until its outcome satisfies `done` (the watch
/// brings objects created a moment ago within about a second), then `kubectl apply` for
/// real, which must end the same way: (applied, stderr, where kubectl prints warnings).
async fn apply_until(
    control_plane: &ControlPlane,
    ns: &str,
    job: &Value,
    what: &str,
    done: impl Fn(bool, &str) -> bool,
) -> (bool, String) {
    let (dry_ok, _) = support::wait_for(what, Duration::from_secs(30), || {
        let (ok, _, stderr) =
            control_plane.kubectl_apply_output(Some(ns), job, &["--dry-run=server"]);
        let reached = done(ok, &stderr);
        async move {
            if reached {
                Ok((ok, stderr))
            } else {
                Err(stderr)
            }
        }
    })
    .await;
    let (ok, _, stderr) = control_plane.kubectl_apply_output(Some(ns), job, &[]);
    assert_eq!(ok, dry_ok, "the dry run and the apply agree: {stderr}");
    (ok, stderr)
}

async fn a_shared_read_write_once_claim_is_refused_at_kubectl_apply() {
    let control_plane = plane().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("rwo").await;
    create(
        &client,
        Some(&ns),
        claim("checkpoints", &["ReadWriteOnce"], Some("")),
    )
    .await;
    let job = job_with_claim("sft", "checkpoints");
    let (ok, stderr) = apply_until(
        control_plane,
        &ns,
        &job,
        "the claim reaches the policies",
        |ok, err| !ok && err.contains("[storage]"),
    )
    .await;
    assert!(!ok);
    assert!(
        stderr.contains("checkpoints")
            && stderr.contains("3 pods")
            && stderr.contains("details withheld")
            && !stderr.contains("ReadWriteOnce"),
        "{stderr}"
    );
}

async fn a_read_write_many_claim_is_admitted_and_a_missing_one_warned() {
    let control_plane = plane().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("rwx").await;
    create(
        &client,
        Some(&ns),
        claim("shared", &["ReadWriteMany"], Some("")),
    )
    .await;
    let (ok, stderr) = apply_until(
        control_plane,
        &ns,
        &job_with_claim("sft", "shared"),
        "the RWX claim reaches the policies",
        |ok, err| ok && !err.contains("[storage]"),
    )
    .await;
    assert!(ok, "{stderr}");
    let (ok, stderr) = apply_until(
        control_plane,
        &ns,
        &job_with_claim("later", "not-yet"),
        "a missing claim is warned",
        |ok, err| ok && err.contains("[storage]"),
    )
    .await;
    assert!(ok && stderr.contains("not-yet"), "{stderr}");
}

async fn an_unbound_claim_its_class_cannot_give_is_refused() {
    let control_plane = plane().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("ebs").await;
    let class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": format!("{ns}-gp3")}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer"});
    create(&client, None, class).await;
    let asked = claim("data", &["ReadWriteMany"], Some(&format!("{ns}-gp3")));
    create(&client, Some(&ns), asked).await;
    let (ok, stderr) = apply_until(
        control_plane,
        &ns,
        &job_with_claim("sft", "data"),
        "the class reaches the policies",
        |ok, err| !ok && err.contains("[storage]"),
    )
    .await;
    assert!(
        !ok && stderr.contains("its class's provisioner cannot give")
            && !stderr.contains("ebs.csi.aws.com")
            && !stderr.contains("gp3"),
        "{stderr}"
    );
}

fn network_policy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name}, "spec": spec})
}

async fn a_network_policy_that_isolates_the_job_is_warned_at_kubectl_apply() {
    let control_plane = plane().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("netpol").await;
    let deny = network_policy(
        "deny-all-ingress",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    );
    create(&client, Some(&ns), deny).await;
    let mut job = jobs::pytorch_job("ddp", 1);
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(2);
    let (ok, stderr) = apply_until(
        control_plane,
        &ns,
        &job,
        "the NetworkPolicy reaches the policies",
        |ok, err| ok && err.contains("[network]"),
    )
    .await;
    assert!(
        ok && stderr.contains("a NetworkPolicy of this namespace keeps")
            && !stderr.contains("deny-all-ingress"),
        "{stderr}"
    );
    // Letting the job's pods reach each other silences it.
    let allow = network_policy(
        "allow-same-job",
        json!({"podSelector": {"matchLabels": {"training.kubeflow.org/job-name": "ddp2"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"training.kubeflow.org/job-name": "ddp2"}}}]}]}),
    );
    create(&client, Some(&ns), allow).await;
    job["metadata"]["name"] = json!("ddp2");
    let (ok, stderr) = apply_until(
        control_plane,
        &ns,
        &job,
        "the allowing policy reaches the policies",
        |ok, err| ok && !err.contains("[network]"),
    )
    .await;
    assert!(ok, "{stderr}");
}

async fn with_refuse_set_an_isolating_network_policy_refuses_the_job() {
    let control_plane = plane().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("netpol-refuse").await;
    // A second server, refusing, for this one namespace (beside deploy/'s own).
    let dir = control_plane.file(&format!("policies-{ns}"));
    support::registry::policies_with_params(&dir, |params| {
        params["policies"]["network"]["params"]["refuse"] = json!(true);
    });
    let _refusing = Webhooks::install_scoped(control_plane, dir, Some(&ns)).await;
    let egress = network_policy(
        "egress-dns-only",
        json!({"podSelector": {}, "policyTypes": ["Egress"],
            "egress": [{"ports": [{"protocol": "UDP", "port": 53}]}]}),
    );
    create(&client, Some(&ns), egress).await;
    let mut job = jobs::pytorch_job("ddp", 1);
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(2);
    let (ok, stderr) = apply_until(
        control_plane,
        &ns,
        &job,
        "the refusing server sees the policy",
        |ok, err| !ok && err.contains("[network]"),
    )
    .await;
    assert!(
        !ok && stderr.contains("a NetworkPolicy of this namespace keeps")
            && !stderr.contains("egress-dns-only"),
        "{stderr}"
    );
}
