//! Certificate rotation: new handshakes get the new pair, requests under load never fail,
//! and a bad new pair is refused while the old one keeps serving.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gangplank::admission::certs::{Bundle, Ca};
use gangplank::admission::{CertFiles, ServingCert};
use serde_json::Value;

use crate::support::{client_for, create, der, example, names, wait_until, Options, TestServer};

/// Lays out certificates as a Secret volume does: `..<ts>/` holds them, `..data` points
/// there, and tls.crt / tls.key are symlinks through `..data`.
#[cfg(unix)]
fn secret_volume(root: &Path, version: &str, bundle: &Bundle) {
    let dir = root.join(version);
    bundle.write_to(&dir).expect("write certs");
    let tmp = root.join("..data_tmp");
    std::os::unix::fs::symlink(version, &tmp).expect("..data_tmp");
    std::fs::rename(&tmp, root.join("..data")).expect("atomic swap of ..data");
    for name in ["tls.crt", "tls.key", "ca.crt"] {
        let link = root.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(name), &link).expect("link");
        }
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_under_concurrent_load_fails_no_request_and_new_handshakes_get_the_new_cert() {
    let root = tempfile::tempdir().expect("tempdir");
    let ca = Ca::generate(1).expect("CA");
    let first = ca.issue(&names(), 1).expect("first leaf");
    let second = ca.issue(&names(), 1).expect("second leaf");
    secret_volume(root.path(), "..2026_01_01_a", &first);
    let files = CertFiles {
        cert: root.path().join("tls.crt"),
        key: root.path().join("tls.key"),
    };
    let cert = Arc::new(ServingCert::from_files(files.clone()).expect("loads"));
    let server =
        Arc::new(TestServer::serve(Options::default(), root, ca, first.clone(), files, cert).await);
    assert_eq!(server.served_leaf().await, der(&first.cert_pem));

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let review = create("rot", &example("pytorchjob-gpu.yaml"));
    let mut workers = Vec::new();
    for worker in 0..8 {
        let (server, stop, answered, failures, review) = (
            server.clone(),
            stop.clone(),
            answered.clone(),
            failures.clone(),
            review.clone(),
        );
        workers.push(tokio::spawn(async move {
            // Half the workers keep one connection alive across the rotation; the other
            // half open a new connection (a new handshake) for every request.
            let keep_alive = client_for(&server.ca);
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let client = if worker % 2 == 0 {
                    keep_alive.clone()
                } else {
                    client_for(&server.ca)
                };
                let result = client
                    .post(server.url("/mutate"))
                    .json_body(&review)
                    .send()
                    .await;
                match result {
                    Ok(r) if r.status() == 200 => match r.json_value().await {
                        Some(body) if body["response"]["allowed"] == true => {
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                        other => failures
                            .lock()
                            .expect("lock")
                            .push(format!("worker {worker} #{i}: {other:?}")),
                    },
                    Ok(r) => failures
                        .lock()
                        .expect("lock")
                        .push(format!("worker {worker} #{i}: HTTP {}", r.status())),
                    Err(e) => failures
                        .lock()
                        .expect("lock")
                        .push(format!("worker {worker} #{i}: {e:?}")),
                }
                i += 1;
            }
        }));
    }

    wait_until("load is running", Duration::from_secs(30), || async {
        answered.load(Ordering::SeqCst) >= 40
    })
    .await;
    secret_volume(server_root(&server), "..2026_01_01_b", &second);
    wait_until(
        "new handshakes present the new certificate",
        Duration::from_secs(10),
        || async { server.served_leaf().await == der(&second.cert_pem) },
    )
    .await;
    let at_rotation = answered.load(Ordering::SeqCst);
    wait_until(
        "load continues after the rotation",
        Duration::from_secs(30),
        || async { answered.load(Ordering::SeqCst) >= at_rotation + 40 },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.expect("worker");
    }
    let failures = failures.lock().expect("lock");
    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert_eq!(server.metrics.tls_reloads_with(true), 1);
    assert_eq!(
        server.metrics.tls_reloads_with(false),
        0,
        "an atomic swap is never half-read"
    );
}

/// The directory holding the server's certificate files.
fn server_root(server: &TestServer) -> &Path {
    server.cert_files.cert.parent().expect("cert dir")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_new_pair_is_refused_and_the_old_one_keeps_serving() {
    let server = TestServer::start().await;
    let original = der(&server.first.cert_pem);
    let stranger = Bundle::generate(&names(), 1).expect("unrelated pair");

    // A key that belongs to another certificate. (A poll may also catch the file
    // half-written, which is refused the same way: count at least one refusal.)
    std::fs::write(&server.cert_files.key, &stranger.key_pem).expect("write key");
    wait_until("the pair is refused", Duration::from_secs(5), || async {
        server.metrics.tls_reloads_with(false) >= 1
    })
    .await;
    let (status, text) = server.get_text("/readyz").await;
    assert_eq!(status, 200, "{text}");
    let ready: Value = serde_json::from_str(&text).expect("JSON");
    assert!(
        ready["tls"]["refused"]
            .as_str()
            .is_some_and(|r| r.contains("does not fit the certificate")),
        "{ready}"
    );
    assert_eq!(server.served_leaf().await, original);
    let response = server
        .admit(
            "/mutate",
            &create("after-bad-key", &example("pytorchjob-gpu.yaml")),
        )
        .await;
    assert_eq!(response["allowed"], true);

    // Garbage in the certificate file: refused as well.
    let refusals = server.metrics.tls_reloads_with(false);
    std::fs::write(&server.cert_files.cert, "not a certificate").expect("write cert");
    wait_until("the garbage is refused", Duration::from_secs(5), || async {
        server.metrics.tls_reloads_with(false) > refusals
    })
    .await;
    assert_eq!(server.served_leaf().await, original);

    // Restoring a good pair (a new one from the same CA) is accepted and clears the report.
    let next = server.ca.issue(&names(), 1).expect("next leaf");
    std::fs::write(&server.cert_files.key, &next.key_pem).expect("write key");
    std::fs::write(&server.cert_files.cert, &next.cert_pem).expect("write cert");
    wait_until("the good pair serves", Duration::from_secs(5), || async {
        server.served_leaf().await == der(&next.cert_pem)
    })
    .await;
    let (_, text) = server.get_text("/readyz").await;
    let ready: Value = serde_json::from_str(&text).expect("JSON");
    assert!(ready["tls"].get("refused").is_none(), "{ready}");
}

/// Small conveniences over reqwest without its `json` feature.
trait JsonBody {
    fn json_body(self, v: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, v: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(serde_json::to_vec(v).expect("serializes"))
    }
}

trait JsonValue {
    async fn json_value(self) -> Option<Value>;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> Option<Value> {
        serde_json::from_slice(&self.bytes().await.ok()?).ok()
    }
}
