//! Protection: oversized bodies (and large ones that must pass), malformed JSON, reviews that
//! are not v1 or lack a request, a malformed request (an object that is not one, or not of
//! the kind the request names), and evaluation past its deadline. Never a crash, a hang, or
//! an admission without a verdict.

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

/// A server whose body limit is 1 MiB, and the limit.
async fn server_with_a_1_mib_limit() -> (TestServer, usize) {
    let limit = 1024 * 1024;
    let server = TestServer::with(Options {
        max_body_bytes: limit,
        ..Options::default()
    })
    .await;
    (server, limit)
}

/// A valid job whose object carries 2 MiB of annotation: over the 1 MiB limit.
fn job_of_2_mib() -> Value {
    let mut job = example("pytorchjob-gpu.yaml");
    job["metadata"]["annotations"] = json!({"padding": "x".repeat(2 * 1024 * 1024)});
    job
}

/// Until the limit went to 16 MiB, an oversized review got a bare 413, which kubectl showed
/// as "failed calling webhook". Now it is refused by an AdmissionReview naming its uid, how
/// far it is over and the flag that sets the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_over_the_limit_is_refused_by_a_review_naming_the_excess_and_the_flag() {
    let (server, limit) = server_with_a_1_mib_limit().await;
    let review = create("big", &job_of_2_mib());
    let body = serde_json::to_vec(&review).expect("serializes");
    let over = body.len() - limit;
    for path in ["/mutate", "/validate"] {
        let (status, text) = post_raw(&server, path, body.clone()).await;
        assert_eq!(status, 200, "{path}: {text}");
        let answer: Value = serde_json::from_str(&text).expect("an AdmissionReview");
        let response = &answer["response"];
        assert_eq!(response["uid"], "big", "{path}: the request's uid");
        assert_eq!(response["allowed"], false, "{path}");
        assert_eq!(response["status"]["code"], 413);
        assert_eq!(response["status"]["reason"], "RequestEntityTooLarge");
        let message = response["status"]["message"].as_str().expect("message");
        assert!(
            message.contains(&format!(
                "the AdmissionReview is {over} bytes over gangplank's limit of {limit} bytes"
            )) && message.contains("--max-body-bytes"),
            "{message}"
        );
    }
    // The server is still answering.
    let ok = server
        .admit("/mutate", &create("after", &example("pytorchjob-gpu.yaml")))
        .await;
    assert_eq!(ok["allowed"], true);
}

/// The apiserver writes `request.uid` first, but a hand-written review may put it after the
/// object. Over the limit the body is not kept, and was searched for the uid only in its first
/// 64 KiB: the answer could not name the request, and the apiserver would reject it. Now the
/// uid is found wherever it is in what is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_over_the_limit_whose_uid_comes_after_a_large_object_is_refused_with_its_uid() {
    let (server, limit) = server_with_a_1_mib_limit().await;
    let mut job = job_of_2_mib();
    // An owner reference's uid inside the object, before the request's: not the one.
    job["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "not-this"}]);
    let mut review = create("late-uid", &job);
    let request = review["request"].as_object_mut().expect("request");
    let uid = request.shift_remove("uid").expect("uid");
    request.insert("uid".to_string(), uid);
    let body = serde_json::to_vec(&review).expect("serializes");
    let at = body
        .windows(br#""uid":"late-uid""#.len())
        .position(|w| w == br#""uid":"late-uid""#)
        .expect("the uid in the body");
    assert!(
        at > limit,
        "the uid comes after the limit (at byte {at}), past anything kept"
    );
    for path in ["/mutate", "/validate"] {
        let (status, text) = post_raw(&server, path, body.clone()).await;
        assert_eq!(status, 200, "{path}: {text}");
        let answer: Value = serde_json::from_str(&text).expect("an AdmissionReview");
        let response = &answer["response"];
        assert_eq!(response["uid"], "late-uid", "{path}: the request's uid");
        assert_eq!(response["allowed"], false, "{path}");
        assert_eq!(response["status"]["code"], 413);
        let message = response["status"]["message"].as_str().expect("message");
        assert!(!message.contains("no request.uid"), "{message}");
    }
    let ok = server
        .admit("/mutate", &create("after", &example("pytorchjob-gpu.yaml")))
        .await;
    assert_eq!(ok["allowed"], true);
}

/// What the apiserver sends for a 1.4 MB job (20,000 env entries) applied with kubectl: a
/// 4 MB review, judged like any other under the default limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4_mb_review_of_a_job_with_20000_env_entries_is_judged() {
    let server = TestServer::start().await;
    let job = crate::support::as_applied(&crate::support::job_with_env(20_000));
    let review = create("env-20000", &job);
    let size = serde_json::to_vec(&review).expect("serializes").len();
    assert!(
        (3_500_000..6_000_000).contains(&size),
        "a review of about 4 MB, got {size} bytes"
    );
    let mutated = server.admit("/mutate", &review).await;
    assert_eq!(mutated["allowed"], true, "{}", mutated["status"]);
    // Read whole and judged: the structure policy's bound on env entries per container is
    // what refuses it, with the policy's message, not the body limit.
    let stored = crate::support::apply(&job, &mutated);
    let validated = server
        .admit("/validate", &create("env-20000-v", &stored))
        .await;
    assert_eq!(validated["allowed"], false);
    assert_eq!(validated["status"]["code"], 403, "{}", validated["status"]);
    let message = validated["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("[structure] ") && message.contains("has 20000 env entries"),
        "{message}"
    );
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

/// An object that is a list or a string has no kind: taken for "not a training job", it
/// used to pass unjudged on both endpoints although the request named a PyTorchJob.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_that_is_not_a_json_object_is_refused_not_admitted() {
    let server = TestServer::start().await;
    let job = example("pytorchjob-gpu.yaml");
    let cases = [
        ("object", json!([job.clone()]), "a JSON array"),
        ("object", json!("kind: PyTorchJob"), "a JSON string"),
        ("object", json!(42), "a JSON number"),
        ("oldObject", json!(false), "a JSON boolean"),
    ];
    for (field, value, what) in cases {
        let mut review = crate::support::review("not-object", "UPDATE", &job, Some(&job), false);
        review["request"][field] = value;
        for path in ["/mutate", "/validate"] {
            let response = server.admit(path, &review).await;
            assert_eq!(
                response["allowed"], false,
                "{path} {field} {what}: {response}"
            );
            assert_eq!(response["status"]["code"], 400);
            let message = response["status"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(&format!("request.{field} is {what}, not an object"))
                    && message.contains("cannot be judged"),
                "{path}: {message}"
            );
        }
    }
}

/// `request.kind` names a PyTorchJob while the object says otherwise (or nothing): judged by
/// the object's kind it would pass as a ConfigMap, unchecked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_whose_kind_differs_from_the_requested_training_kind_is_refused() {
    let server = TestServer::start().await;
    let job = example("pytorchjob-gpu.yaml");
    let mut configmap = job.clone();
    configmap["apiVersion"] = json!("v1");
    configmap["kind"] = json!("ConfigMap");
    let mut kindless = job.clone();
    if let Some(o) = kindless.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
    }
    for object in [configmap, kindless] {
        let mut review = create("kind-mismatch", &job);
        review["request"]["object"] = object;
        for path in ["/mutate", "/validate"] {
            let response = server.admit(path, &review).await;
            assert_eq!(response["allowed"], false, "{path}: {response}");
            assert_eq!(response["status"]["code"], 400);
            let message = response["status"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("request.kind is kubeflow.org/v1 PyTorchJob but request.object"),
                "{path}: {message}"
            );
        }
    }
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

/// The apiserver speaks HTTP/2 to webhooks. An oversized body must get its answer there too
/// (an AdmissionReview refusing it; a 413 before the limit went to 16 MiB), not a stream
/// reset while the client is still sending (what curl showed: no status, exit 92). curl is the client that saw it; without curl the test says so and checks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_is_answered_over_http2_as_over_http1() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no curl on PATH (the HTTP/2 client that showed the reset)");
        return;
    }
    let server = TestServer::with(Options {
        max_body_bytes: 3 * 1024 * 1024,
        ..Options::default()
    })
    .await;
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
            stdout.ends_with(&format!("200 {version}")),
            "{flag}: {stdout}"
        );
        // No uid in a body of 'a's: the answer says so, and refuses.
        assert!(
            stdout.contains("1048576 bytes over gangplank's limit of 3145728 bytes")
                && stdout.contains("no request.uid in the 4194304 bytes read")
                && stdout.contains(r#""allowed":false"#),
            "{flag}: {stdout}"
        );
    }
}
