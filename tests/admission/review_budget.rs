//! The bound on bytes of reviews judged at once (`--review-bytes-in-flight`): past it a review
//! is refused by an AdmissionReview with its uid and code 429, over real HTTPS, and once the
//! load has passed reviews are judged again.
//!
//! Ordering is controlled, not timed. The review that holds the bound is held inside the
//! server by a registry in the test: image pinning runs after a review has taken its share of
//! the budget (server.rs, then handler.rs), so the registry seeing the digest lookup means the
//! budget is held, and it stays held until the test lets the registry answer. The server
//! waits zero for room (`--review-budget-wait 0s`), so the refusal does not wait on a clock.

use std::time::Duration;

use gangplank::admission::metrics::{Decision, Endpoint};
use gangplank::images::Settings;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use crate::held_registry::DIGEST;
use crate::support::{apply, copy_policies, create, example, Options, TestServer};

/// The budget in the test: 64 KiB, which each padded review below fills alone.
const BUDGET: usize = 64 * 1024;

/// Longest the test waits for anything (the registry guard included); a deadline, never a
/// measure of the server.
const GUARD: Duration = Duration::from_secs(30);

/// A registry whose manifest answers wait until `open` turns true (or [`GUARD`] passes), and
/// that reports each request on `arrived` as it comes in. Returns its `host:port`.
async fn held_registry(
    arrived: mpsc::UnboundedSender<String>,
    open: watch::Receiver<bool>,
) -> String {
    crate::held_registry::held_registry(move |path| {
        let (arrived, mut open) = (arrived.clone(), open.clone());
        async move {
            let _ = arrived.send(path);
            let _ = tokio::time::timeout(GUARD, open.wait_for(|open| *open)).await;
        }
    })
    .await
}

/// The shipped policies in `dir`, with digest pinning on against the test's registry.
fn policies_pinning_from(dir: &std::path::Path, host: &str) {
    copy_policies(dir);
    let path = dir.join("params.yaml");
    let text = std::fs::read_to_string(&path).expect("read params.yaml");
    let mut params =
        gangplank::policy::ParamsFile::parse(&text, "params.yaml").expect("params.yaml parses");
    params.image_resolution = Some(Settings {
        enabled: true,
        allowed_registries: vec![host.to_string()],
        plain_http_registries: vec![host.to_string()],
        // Longer than the guard: the test opens the registry, not the resolver's clock.
        budget: Duration::from_secs(60),
        ..Settings::default()
    });
    let text = yaml_serde::to_string(&params).expect("params YAML");
    std::fs::write(&path, text).expect("write params.yaml");
}

/// A CREATE review of `job` with `BUDGET` bytes of annotation: it takes the whole budget.
fn large(uid: &str, mut job: Value) -> Value {
    job["metadata"]["annotations"] = json!({"padding": "x".repeat(BUDGET)});
    create(uid, &job)
}

/// The GPU example with its containers running `image`, a tag (the example's are pinned, and
/// pinned images are not looked up).
fn job_running(image: &str) -> Value {
    let mut job = example("pytorchjob-gpu.yaml");
    for replica in ["Master", "Worker"] {
        let containers =
            &mut job["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]["containers"];
        for container in containers.as_array_mut().into_iter().flatten() {
            container["image"] = json!(image);
        }
    }
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_that_finds_the_budget_full_is_refused_with_429_and_its_uid_and_later_ones_are_judged(
) {
    let (arrived_tx, mut arrived) = mpsc::unbounded_channel();
    let (open, open_rx) = watch::channel(false);
    let host = held_registry(arrived_tx, open_rx).await;
    let dir = tempfile::tempdir().expect("tempdir");
    policies_pinning_from(dir.path(), &host);
    let server = TestServer::with(Options {
        policies: dir.path().to_path_buf(),
        review_bytes_in_flight: BUDGET,
        review_budget_wait: Duration::ZERO,
        ..Options::default()
    })
    .await;

    // The first review takes the whole budget and waits on the registry.
    let image = format!("{host}/ml/train:v1");
    let held = large("held", job_running(&image));
    let held_answer = {
        let (client, url, body) = (
            server.client.clone(),
            server.url("/mutate"),
            serde_json::to_vec(&held).expect("serializes"),
        );
        tokio::spawn(async move {
            TestServer::post_with(&client, url, body)
                .await
                .expect("answered with an AdmissionReview")
        })
    };
    let path = tokio::time::timeout(GUARD, arrived.recv())
        .await
        .expect("the held review reaches the registry")
        .expect("registry running");
    assert_eq!(path, "/v2/ml/train/manifests/v1");

    // While it is judged, another large review finds no room and is refused at once.
    let refused = large("refused", example("pytorchjob-gpu.yaml"));
    let (status, answer) = server.post("/mutate", &refused).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    let response = &answer["response"];
    assert_eq!(response["uid"], "refused", "the request's uid: {response}");
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 429, "{response}");
    assert_eq!(response["status"]["reason"], "TooManyRequests");
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "gangplank is judging other large reviews (64 KiB at once at most) and this one ("
        ) && message.contains("found no room within 0 s, so it is refused; retry"),
        "{message}"
    );
    assert_eq!(
        server
            .metrics
            .requests_with(Endpoint::Mutate, "other", Decision::Failed),
        1,
        "counted as failed"
    );

    // The registry answers: the held review is judged (its image pinned), and the budget is
    // free again for the next large review.
    open.send_replace(true);
    let (status, held_answer) = tokio::time::timeout(GUARD, held_answer)
        .await
        .expect("the held review is answered")
        .expect("client task");
    assert_eq!(status, 200, "{held_answer}");
    let response = &held_answer["response"];
    assert_eq!(response["uid"], "held");
    assert_eq!(response["allowed"], true, "{response}");
    let pinned = apply(&held["request"]["object"], response);
    assert_eq!(
        pinned["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
            ["image"],
        json!(format!("{image}@{DIGEST}")),
        "pinned by the registry's answer"
    );
    let after = server
        .admit("/mutate", &large("after", example("pytorchjob-gpu.yaml")))
        .await;
    assert_eq!(after["allowed"], true, "{after}");
}
