//! Many reviews at once: every one answered, each with its own verdict.

use serde_json::Value;

use crate::support::{apply, create, example, Options, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_reviews_are_all_answered_correctly() {
    // Evaluation takes milliseconds in a debug build: 1,000 reviews through two slots take
    // longer than the default 2 s deadline, which would (correctly) refuse the late ones.
    let server = std::sync::Arc::new(
        TestServer::with(Options {
            eval_timeout: std::time::Duration::from_secs(120),
            ..Options::default()
        })
        .await,
    );
    let good = example("pytorchjob-gpu.yaml");
    let two_masters = example("rejected/two-masters.yaml");
    let stored_good = apply(&good, &server.admit("/mutate", &create("g", &good)).await);
    let stored_bad = apply(
        &two_masters,
        &server.admit("/mutate", &create("b", &two_masters)).await,
    );
    let configmap = example("configmap.yaml");
    // (path, object, allowed, patched)
    let cases: Vec<(&str, Value, bool, bool)> = vec![
        ("/mutate", good, true, true),
        ("/validate", stored_good, true, false),
        ("/validate", stored_bad, false, false),
        ("/mutate", configmap, true, false),
    ];
    // One HTTP/1.1 client (a connection per concurrent request) and one HTTP/2 client
    // (streams multiplexed on one connection), as apiservers use either.
    let http1 = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(server.ca.pem().as_bytes()).expect("CA")])
        .http1_only()
        .build()
        .expect("client");
    let http2 = server.client.clone();
    let mut tasks = Vec::new();
    for i in 0..1000usize {
        let (path, object, allowed, patched) = cases[i % cases.len()].clone();
        let client = if i % 2 == 0 {
            http1.clone()
        } else {
            http2.clone()
        };
        let url = server.url(path);
        let uid = format!("load-{i}");
        let body = serde_json::to_vec(&create(&uid, &object)).expect("serializes");
        tasks.push(tokio::spawn(async move {
            let (_, v) = TestServer::post_with(&client, url, body)
                .await
                .map_err(|e| format!("{uid}: {e}"))?;
            let response = &v["response"];
            if response["uid"] != uid.as_str()
                || response["allowed"] != allowed
                || response.get("patch").is_some() != patched
            {
                return Err(format!("{uid} {path}: unexpected {response}"));
            }
            Ok(())
        }));
    }
    let mut failures = Vec::new();
    for t in tasks {
        if let Err(e) = t.await.expect("task") {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 1000 wrong, e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
    // Graceful shutdown returns once the connections are drained.
    let server = std::sync::Arc::into_inner(server).expect("no other owner");
    server.stop().await;
}
