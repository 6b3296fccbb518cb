//! Optional mutual TLS (`--client-ca`, issue 32 item 2) and `/metrics` off the webhook port
//! (`--metrics-addr`, item 7), over real HTTPS.
//!
//! With a client CA, the admission routes and `/metrics` answer only a client whose
//! certificate that CA signed (403 otherwise; a certificate of another CA fails the
//! handshake), while `/healthz` and `/readyz` answer anyone, as the kubelet's probes present
//! no certificate. Before, any client that reached the port was judged.

use std::path::Path;
use std::time::Duration;

use gangplank::admission::certs::Ca;
use gangplank::admission::client_identity::RequiredIdentity;

use crate::support::{create, example, wait_until, Options, TestServer};

/// A client trusting the server's CA, presenting a certificate of `client_ca` if given.
fn client(server: &TestServer, client_ca: Option<&Ca>) -> reqwest::Client {
    client_as(server, client_ca.map(|ca| (ca, "system:apiserver")))
}

/// A client trusting the server's CA, presenting a certificate `(CA, CN and DNS SAN)`.
pub fn client_as(server: &TestServer, identity: Option<(&Ca, &str)>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(server.ca.pem().as_bytes()).expect("CA");
    let mut builder = reqwest::Client::builder()
        .tls_certs_only([ca])
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30));
    if let Some((client_ca, name)) = identity {
        let leaf = client_ca.issue_client(name, 1).expect("client certificate");
        let pem = format!("{}{}", leaf.cert_pem, leaf.key_pem);
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"));
    }
    builder.build().expect("client")
}

async fn server_requiring(ca_file: &Path) -> TestServer {
    TestServer::with(Options {
        client_ca: Some(ca_file.to_path_buf()),
        ..Options::default()
    })
    .await
}

/// `GET path`: status and text, or the transport error.
async fn get(client: &reqwest::Client, url: String) -> Result<(u16, String), String> {
    let r = client.get(url).send().await.map_err(|e| format!("{e:?}"))?;
    let status = r.status().as_u16();
    Ok((status, r.text().await.map_err(|e| format!("{e:?}"))?))
}

fn review(uid: &str) -> Vec<u8> {
    serde_json::to_vec(&create(uid, &example("pytorchjob-gpu.yaml"))).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_only_its_clients_are_judged_and_probes_answer_anyone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let apiserver_ca = Ca::generate(1).expect("CA");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, apiserver_ca.pem()).expect("write");
    let server = server_requiring(&ca_file).await;

    let apiserver = client(&server, Some(&apiserver_ca));
    let (status, answer) =
        TestServer::post_with(&apiserver, server.url("/mutate"), review("with-cert"))
            .await
            .expect("answered");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["uid"], "with-cert");
    let (status, text) = get(&apiserver, server.url("/metrics"))
        .await
        .expect("metrics");
    assert_eq!(status, 200);
    assert!(
        text.contains("gangplank_admission_requests_total"),
        "{text}"
    );

    // No certificate: the probes answer, the rest is refused and says why.
    let anyone = client(&server, None);
    for path in ["/healthz", "/readyz"] {
        let (status, text) = get(&anyone, server.url(path)).await.expect("probe");
        assert_eq!(status, 200, "{path}: {text}");
    }
    for path in ["/mutate", "/validate"] {
        let r = anyone
            .post(server.url(path))
            .body(review("no-cert"))
            .send()
            .await
            .expect("answered");
        assert_eq!(r.status(), 403, "{path}");
        let text = r.text().await.expect("text");
        assert!(
            text.contains(&format!(
                "{path} requires a client certificate signed by gangplank's --client-ca"
            )),
            "{text}"
        );
    }
    let (status, text) = get(&anyone, server.url("/metrics"))
        .await
        .expect("answered");
    assert_eq!(status, 403, "{text}");

    // A certificate of another CA does not pass the handshake.
    let stranger = client(&server, Some(&Ca::generate(1).expect("CA")));
    let refused = TestServer::post_with(&stranger, server.url("/mutate"), review("other-ca")).await;
    assert!(refused.is_err(), "refused in the handshake: {refused:?}");
}

/// `--client-ca-subject` (issue 41 item 3): the CA may sign more than the apiserver's
/// certificate (kubeadm's front-proxy client, a company CA); only the one named is judged.
/// Before, any certificate of the CA was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_required_subject_a_certificate_of_the_same_ca_for_another_name_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let apiserver_ca = Ca::generate(1).expect("CA");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, apiserver_ca.pem()).expect("write");
    let server = TestServer::with(Options {
        client_ca: Some(ca_file),
        client_identity: RequiredIdentity::new(vec!["kube-apiserver".into()], vec![]),
        ..Options::default()
    })
    .await;

    let apiserver = client_as(&server, Some((&apiserver_ca, "kube-apiserver")));
    let (status, answer) = TestServer::post_with(&apiserver, server.url("/mutate"), review("ok"))
        .await
        .expect("answered");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["uid"], "ok");

    // Same CA, another name: refused before the body is read, saying what it carries.
    let tenant = client_as(&server, Some((&apiserver_ca, "team-a-ci")));
    for path in ["/mutate", "/validate"] {
        let r = tenant
            .post(server.url(path))
            .body(review("other-name"))
            .send()
            .await
            .expect("answered");
        let status = r.status();
        let text = r.text().await.expect("text");
        assert_eq!(status, 403, "{path}: {text}");
        assert!(
            text.contains("carries the identity --client-ca-subject / --client-san name")
                && text.contains("this connection's carries CN team-a-ci"),
            "{text}"
        );
    }
    let (status, text) = get(&tenant, server.url("/metrics"))
        .await
        .expect("answered");
    assert_eq!(status, 403, "{text}");
    assert_eq!(server.metrics.client_auth_refusals_with("identity"), 3);

    // No certificate at all: refused as before, counted apart.
    let anyone = client(&server, None);
    let r = anyone
        .post(server.url("/mutate"))
        .body(review("none"))
        .send()
        .await
        .expect("answered");
    assert_eq!(r.status(), 403);
    assert_eq!(
        server.metrics.client_auth_refusals_with("no_certificate"),
        1
    );
    assert_eq!(
        server.metrics.requests_with(
            gangplank::admission::metrics::Endpoint::Mutate,
            "PyTorchJob",
            gangplank::admission::metrics::Decision::Patched
        ),
        1,
        "only the apiserver's review was judged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_client_ca_file_is_used_for_new_connections() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (old_ca, new_ca) = (Ca::generate(1).expect("CA"), Ca::generate(1).expect("CA"));
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, old_ca.pem()).expect("write");
    let server = server_requiring(&ca_file).await;
    let new_client = client(&server, Some(&new_ca));
    let refused = TestServer::post_with(&new_client, server.url("/mutate"), review("early")).await;
    assert!(refused.is_err(), "not yet its CA: {refused:?}");

    std::fs::write(&ca_file, new_ca.pem()).expect("write");
    wait_until("the new CA verifies", Duration::from_secs(30), || async {
        let answer = TestServer::post_with(&new_client, server.url("/mutate"), review("later"));
        matches!(answer.await, Ok((200, ref v)) if v["response"]["uid"] == "later")
    })
    .await;
    let old_client = client(&server, Some(&old_ca));
    let refused = TestServer::post_with(&old_client, server.url("/mutate"), review("old")).await;
    assert!(
        refused.is_err(),
        "the old CA no longer verifies: {refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_metrics_address_metrics_are_served_there_and_not_on_the_webhook_port() {
    let server = TestServer::with(Options {
        metrics_addr: Some("127.0.0.1:0".parse().expect("addr")),
        ..Options::default()
    })
    .await;
    server
        .admit(
            "/mutate",
            &create("counted", &example("pytorchjob-gpu.yaml")),
        )
        .await;
    let addr = server.metrics_addr.expect("a metrics listener");
    let plain = reqwest::Client::new();
    let (status, text) = get(&plain, format!("http://{addr}/metrics"))
        .await
        .expect("scraped");
    assert_eq!(status, 200);
    assert!(
        text.contains(r#"gangplank_admission_requests_total{endpoint="mutate",kind="PyTorchJob",decision="patched"} 1"#),
        "{text}"
    );
    let (status, text) = server.get_text("/metrics").await;
    assert_eq!(status, 404);
    assert!(
        text.contains(&format!("served over plain HTTP on {addr}")),
        "{text}"
    );
}
