//! Protection: oversized bodies, malformed JSON, reviews that are not v1 or lack a request,
//! a malformed request, and evaluation past its deadline. Never a crash or a hang.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{create, example, Options, TestServer};

async fn post_raw(server: &TestServer, path: &str, body: Vec<u8>) -> (u16, String) {
    let r = server
        .client
        .post(server.url(path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("answered");
    (r.status().as_u16(), r.text().await.expect("body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_3_mib_are_refused_with_413() {
    let server = TestServer::start().await;
    // A valid review whose object carries 3 MiB of annotation.
    let mut job = example("pytorchjob-gpu.yaml");
    job["metadata"]["annotations"] = json!({"padding": "x".repeat(3 * 1024 * 1024)});
    let body = serde_json::to_vec(&create("big", &job)).expect("serializes");
    for path in ["/mutate", "/validate"] {
        let (status, text) = post_raw(&server, path, body.clone()).await;
        assert_eq!(status, 413, "{path}: {text}");
        assert!(text.contains("exceeds 3145728 bytes"), "{text}");
    }
    // The server is still answering.
    let ok = server
        .admit("/mutate", &create("after", &example("pytorchjob-gpu.yaml")))
        .await;
    assert_eq!(ok["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_just_under_the_limit_is_answered() {
    let server = TestServer::start().await;
    let mut job = example("configmap.yaml");
    job["data"] = json!({"blob": "x".repeat(3 * 1024 * 1024 - 4096)});
    let response = server.admit("/validate", &create("near-limit", &job)).await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_gets_400_with_a_message() {
    let server = TestServer::start().await;
    for body in [&b"{\"apiVersion\": "[..], b"", b"\xff\xfe", b"[1, 2"] {
        for path in ["/mutate", "/validate"] {
            let (status, text) = post_raw(&server, path, body.to_vec()).await;
            assert_eq!(status, 400, "{path} {body:?}: {text}");
            assert!(text.contains("not valid JSON"), "{text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_without_request_gets_400_with_a_message() {
    let server = TestServer::start().await;
    let cases: [(Value, &str); 4] = [
        (
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "no request",
        ),
        (
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": null}),
            "no request",
        ),
        (
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}}),
            "no uid",
        ),
        (
            json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "x"}}),
            "admission.k8s.io/v1beta1",
        ),
    ];
    for (review, needle) in cases {
        let (status, body) = server.post("/validate", &review).await;
        assert_eq!(status, 400, "{review}: {body}");
        assert!(
            body.as_str().is_some_and(|t| t.contains(needle)),
            "{body} lacks {needle}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_cannot_be_evaluated_is_refused_as_invalid_with_its_uid() {
    let server = TestServer::start().await;
    let mut review = create("bad-op", &example("pytorchjob-gpu.yaml"));
    review["request"]["operation"] = json!("PATCH");
    let response = server.admit("/mutate", &review).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    assert!(response["status"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("PATCH")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evaluation_past_its_deadline_is_refused_not_allowed() {
    let server = TestServer::with(Options {
        eval_timeout: Duration::ZERO,
        ..Options::default()
    })
    .await;
    for path in ["/mutate", "/validate"] {
        let response = server
            .admit(path, &create("slow", &example("pytorchjob-gpu.yaml")))
            .await;
        assert_eq!(response["allowed"], false, "{path}: fail closed");
        assert_eq!(response["status"]["code"], 504);
        assert!(response["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("did not finish within 0 ms")));
    }
    // Skipped kinds need no evaluation and are still admitted.
    let response = server
        .admit("/validate", &create("cm", &example("configmap.yaml")))
        .await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_paths_take_only_post() {
    let server = TestServer::start().await;
    let (status, _) = server.get_text("/mutate").await;
    assert_eq!(status, 405);
    let (status, _) = server.get_text("/nope").await;
    assert_eq!(status, 404);
}

/// A policy whose mutation output is malformed, but only for jobs named "explode-*", so
/// that it loads (the load-time smoke test passes) and fails at request time.
const EXPLODING: &str = r#"package gangplank.policies.exploding

import rego.v1

meta := {"title": "exploding", "description": "test policy", "action": "deny"}

mutation contains {"op": "shred", "path": "/spec", "value": 1} if {
	startswith(input.object.metadata.name, "explode-")
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_fault_at_request_time_refuses_the_request_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::support::copy_policies(dir.path());
    std::fs::write(dir.path().join("exploding.rego"), EXPLODING).expect("write policy");
    let server = TestServer::with(Options {
        policies: dir.path().to_path_buf(),
        ..Options::default()
    })
    .await;
    let mut job = example("pytorchjob-gpu.yaml");
    job["metadata"]["name"] = json!("explode-now");
    let response = server.admit("/mutate", &create("boom", &job)).await;
    assert_eq!(response["allowed"], false, "fail closed: {response}");
    assert_eq!(response["status"]["code"], 500);
    let message = response["status"]["message"].as_str().expect("message");
    assert!(
        message.contains("policy evaluation failed") && message.contains("exploding"),
        "{message}"
    );
    // Other jobs are unaffected.
    let fine = server
        .admit("/mutate", &create("fine", &example("pytorchjob-gpu.yaml")))
        .await;
    assert_eq!(fine["allowed"], true);
}

/// The apiserver speaks HTTP/2 to webhooks. An oversized body must get its 413 there too,
/// not a stream reset while the client is still sending (what curl showed: no status, exit
/// 92). curl is the client that saw it; without curl the test says so and checks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_gets_413_over_http2_as_over_http1() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no curl on PATH (the HTTP/2 client that showed the reset)");
        return;
    }
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, server.ca.pem()).expect("CA file");
    let body = dir.path().join("body.json");
    std::fs::write(&body, vec![b'a'; 4 * 1024 * 1024]).expect("4 MiB body");
    for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let url = server.url("/validate");
        let ca = ca.clone();
        let body = format!("@{}", body.display());
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new("curl")
                .args(["-sS", flag, "--cacert"])
                .arg(&ca)
                .args(["-X", "POST", "-H", "content-type: application/json"])
                .args([
                    "--data-binary",
                    &body,
                    "-w",
                    "\n%{http_code} %{http_version}",
                    &url,
                ])
                .output()
        })
        .await
        .expect("curl ran")
        .expect("curl started");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{flag}: curl {}: {stderr}",
            out.status
        );
        assert!(
            stdout.ends_with(&format!("413 {version}")),
            "{flag}: {stdout}"
        );
        assert!(stdout.contains("exceeds 3145728 bytes"), "{flag}: {stdout}");
    }
}
