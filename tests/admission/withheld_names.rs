//! What a refusal tells a caller who is not the apiserver (issue 41 item 3): anyone who
//! reaches the webhook port can post a review naming any namespace, and the storage and
//! network policies then judged it against that namespace's claims and NetworkPolicies. The
//! verdict stays the same for them; the words name nothing the job itself does not (no
//! class, no provisioner, no modes, no NetworkPolicy, no port). Before, a review posted
//! without a certificate was told `class gp3`, `ReadWriteOnce` and `NetworkPolicy
//! default-deny`. Over real HTTPS, against the same inventory.

use gangplank::admission::certs::Ca;
use gangplank::cluster::{snapshot, ClusterHandle};
use serde_json::json;

use crate::client_auth::client_as;
use crate::support::{create, example, Options, TestServer};

/// team-a's claim `checkpoints` (ReadWriteOnce, class gp3) and a default-deny policy.
fn team_a() -> ClusterHandle {
    let items = vec![
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "checkpoints", "namespace": "team-a"},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "volumeName": "pvc-1"},
               "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"name": "default-deny", "namespace": "team-a"},
               "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
    ];
    let inventory = snapshot::from_items(items, "team-a").expect("inventory");
    ClusterHandle::fixed(&inventory)
}

/// The GPU example in team-a, all 9 pods mounting `checkpoints`.
fn review(uid: &str) -> Vec<u8> {
    let mut job = example("pytorchjob-gpu.yaml");
    job["metadata"]["namespace"] = "team-a".into();
    for replica in ["Master", "Worker"] {
        let spec = &mut job["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"];
        spec["volumes"] =
            json!([{"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}}]);
    }
    let mut review = create(uid, &job);
    review["request"]["namespace"] = "team-a".into();
    serde_json::to_vec(&review).expect("json")
}

/// POSTs the review to `server`'s `/validate` with `client`: whether it was allowed, the
/// refusal's message and the warnings.
async fn validate(
    client: &reqwest::Client,
    server: &TestServer,
    uid: &str,
) -> (bool, String, String) {
    let (status, answer) = TestServer::post_with(client, server.url("/validate"), review(uid))
        .await
        .expect("answered");
    assert_eq!(status, 200, "{answer}");
    let response = &answer["response"];
    let allowed = response["allowed"].as_bool().expect("allowed");
    let message = response["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (allowed, message, response["warnings"].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_without_a_client_certificate_gets_the_same_verdict_without_the_namespaces_names()
{
    let anonymous = TestServer::with(Options {
        cluster: team_a(),
        ..Options::default()
    })
    .await;
    let (allowed, message, warnings) = validate(&anonymous.client, &anonymous, "anon").await;
    assert!(!allowed, "refused: {message}");
    assert!(
        message.contains(r#"claim "checkpoints" is used by 9 pods"#)
            && message.contains("details withheld"),
        "{message}"
    );
    assert!(
        warnings.contains("a NetworkPolicy of this namespace keeps"),
        "{warnings}"
    );
    let everything = format!("{message}{warnings}");
    for secret in ["gp3", "ReadWriteOnce", "default-deny"] {
        assert!(!everything.contains(secret), "{secret} told: {everything}");
    }

    // The apiserver, authenticated by --client-ca, is told the names.
    let dir = tempfile::tempdir().expect("tempdir");
    let apiserver_ca = Ca::generate(1).expect("CA");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, apiserver_ca.pem()).expect("write");
    let verified = TestServer::with(Options {
        cluster: team_a(),
        client_ca: Some(ca_file),
        ..Options::default()
    })
    .await;
    let apiserver = client_as(&verified, Some((&apiserver_ca, "kube-apiserver")));
    let (allowed, message, warnings) = validate(&apiserver, &verified, "apiserver").await;
    assert!(!allowed, "the same verdict: {message}");
    assert!(
        message.contains(r#"claim "checkpoints" (ReadWriteOnce, class gp3) is used by 9 pods"#),
        "{message}"
    );
    assert!(
        warnings.contains("NetworkPolicy default-deny keeps"),
        "{warnings}"
    );
}
