//! Memory cannot be exhausted from outside (issue 32): the real `gangplank serve` process is
//! posted 48 valid AdmissionReviews of 15 MiB at once (a PyTorchJob with one large
//! annotation), over HTTP/1.1 with Content-Length, chunked HTTP/1.1 and HTTP/2 without a
//! length. Its peak resident set (`VmHWM`) must stay under the memory limit of
//! deploy/deployment.yaml (a bound, not a timing: it is the promise), and every request must
//! be answered with an AdmissionReview carrying its uid: judged, or refused with 429 for want
//! of room (408 if the machine is too busy to read it in time). Before, the bodies were read
//! before the budget was taken: 431–638 MiB.
//!
//! The larger run (96 clients, repeated) is `benches/hostile_bodies.sh`; figures in
//! RELIABILITY.md 7.5.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use serde_json::{json, Value};

use crate::support::{create, example, not_sent, repo, Spawned};

/// Each review's size, about: under the 16 MiB body limit, as the reviewer's attack.
const REVIEW_BYTES: usize = 15 * 1024 * 1024;

/// How the clients send (HTTP/1.1 with Content-Length, as the apiserver does, is most).
#[derive(Debug, Clone, Copy)]
enum Transport {
    Http1Length,
    Http1Chunked,
    Http2,
}

const CLIENTS: [(Transport, usize); 3] = [
    (Transport::Http1Length, 32),
    (Transport::Http1Chunked, 8),
    (Transport::Http2, 8),
];

/// The container memory limit of deploy/deployment.yaml, in KiB.
fn deployment_memory_limit_kib() -> u64 {
    let text = std::fs::read_to_string(repo().join("deploy/deployment.yaml")).expect("deploy");
    let deployment: Value = yaml_serde::from_str(&text).expect("deployment YAML");
    let limit = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        ["memory"]
        .as_str()
        .expect("a memory limit")
        .to_string();
    let mib: u64 = limit
        .strip_suffix("Mi")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("memory limit {limit:?} in Mi"));
    mib * 1024
}

/// A review of the GPU example with an annotation filling it to [`REVIEW_BYTES`], split
/// where its uid goes: (before, after). Every client's body is `before + uid + after`, the
/// 15 MiB shared, not copied per client.
fn review_parts() -> (Bytes, Bytes) {
    const MARK: &str = "UID-GOES-HERE";
    let mut job = example("pytorchjob-gpu.yaml");
    job["metadata"]["annotations"] = json!({"example.com/blob": "x".repeat(REVIEW_BYTES)});
    let text = serde_json::to_string(&create(MARK, &job)).expect("serializes");
    let (before, after) = text.split_once(MARK).expect("the uid is in the review");
    (
        Bytes::copy_from_slice(before.as_bytes()),
        Bytes::copy_from_slice(after.as_bytes()),
    )
}

fn client(ca: &[u8], http1: bool) -> reqwest::Client {
    let builder = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca).expect("CA")])
        // A deadline for the test, never a measure of the server.
        .timeout(Duration::from_secs(120));
    let builder = if http1 { builder.http1_only() } else { builder };
    builder.build().expect("client")
}

/// Posts one review; Ok(judged) when answered with an AdmissionReview of its uid, judged or
/// refused before it was judged (429: no room; 408: not received in time, as on a machine too
/// busy to read every body within 5 s), else what was wrong.
async fn post(
    client: reqwest::Client,
    url: String,
    transport: Transport,
    uid: String,
    (before, after): (Bytes, Bytes),
) -> Result<bool, String> {
    // A stream refused before the server's SETTINGS reached the client is sent again, as
    // Go's HTTP/2 client does: the server did not process it.
    for _ in 0..10 {
        match send(&client, &url, transport, &uid, (&before, &after)).await {
            Err(e) if not_sent(&e) => continue,
            sent => return answer(sent, transport, &uid).await,
        }
    }
    Err(format!("{uid} ({transport:?}): not sent in 10 tries"))
}

/// Sends the review once.
async fn send(
    client: &reqwest::Client,
    url: &str,
    transport: Transport,
    uid: &str,
    (before, after): (&Bytes, &Bytes),
) -> reqwest::Result<reqwest::Response> {
    let (before, after) = (before.clone(), after.clone());
    let length = before.len() + uid.len() + after.len();
    // Three frames and no size: a Content-Length only where the test sets one.
    let pieces: Vec<Result<Frame<Bytes>, std::io::Error>> =
        [before, Bytes::from(uid.to_string()), after]
            .into_iter()
            .map(|piece| Ok(Frame::data(piece)))
            .collect();
    let body = StreamBody::new(futures::stream::iter(pieces));
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap(body));
    if let Transport::Http1Length = transport {
        request = request.header("content-length", length.to_string());
    }
    request.send().await
}

/// Ok(judged) when `sent` is answered with an AdmissionReview of `uid`, judged or refused
/// before it was judged (429, 408), else what was wrong.
async fn answer(
    sent: reqwest::Result<reqwest::Response>,
    transport: Transport,
    uid: &str,
) -> Result<bool, String> {
    let response = sent.map_err(|e| format!("{uid} ({transport:?}): no answer: {e:?}"))?;
    let (status, version) = (response.status(), response.version());
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("{uid}: answer cut: {e:?}"))?;
    let review: Value = serde_json::from_slice(&body).map_err(|_| {
        let text = String::from_utf8_lossy(&body);
        format!("{uid} ({transport:?}, {version:?}): {status}, not a review: {text}")
    })?;
    let response = &review["response"];
    if status != 200 || response["uid"] != uid {
        return Err(format!("{uid}: {status}, uid {}", response["uid"]));
    }
    match (&response["allowed"], &response["status"]["code"]) {
        (Value::Bool(true), _) => Ok(true),
        (_, code) if code == 429 || code == 408 => Ok(false),
        _ => Err(format!(
            "{uid}: neither judged nor refused for room: {response}"
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_15_mib_reviews_keep_the_server_under_its_memory_limit_and_each_is_answered_with_its_uid(
) {
    let limit_kib = deployment_memory_limit_kib();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_path = dir.path().join("ca.crt");
    let ca_arg = ca_path.display().to_string();
    // The environment of deploy/deployment.yaml's container.
    let server = Spawned::serve(
        &["--ephemeral-ca", &ca_arg, "--cluster-inventory=false"],
        &[
            ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
            ("MIMALLOC_ALLOW_THP", "0"),
        ],
    );
    let ca = std::fs::read(&ca_path).expect("CA written");
    let url = format!("https://{}/mutate", server.addr);
    let parts = review_parts();
    let (http1, http2) = (client(&ca, true), client(&ca, false));
    let mut tasks = Vec::new();
    for (transport, count) in CLIENTS {
        for i in 0..count {
            let client = match transport {
                Transport::Http2 => http2.clone(),
                _ => http1.clone(),
            };
            let uid = format!("hostile-{transport:?}-{i:03}");
            let job = post(client, url.clone(), transport, uid, parts.clone());
            tasks.push(tokio::spawn(job));
        }
    }
    let (mut judged, mut refused, mut wrong) = (0, 0, Vec::new());
    for task in tasks {
        match task.await.expect("client task") {
            Ok(true) => judged += 1,
            Ok(false) => refused += 1,
            Err(e) => wrong.push(e),
        }
    }
    let peak_kib = server.peak_rss_kib();
    println!(
        "{judged} judged, {refused} refused before judging (429, 408), {} wrong; peak RSS {} MiB of the {} MiB limit",
        wrong.len(),
        peak_kib / 1024,
        limit_kib / 1024
    );
    assert!(
        wrong.is_empty(),
        "{} of 48 not answered with their uid, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(3)]
    );
    assert!(judged > 0, "large reviews are still judged, one at a time");
    assert!(
        peak_kib < limit_kib,
        "peak RSS {peak_kib} KiB is over the Deployment's limit of {limit_kib} KiB"
    );

    // Still serving.
    let small =
        serde_json::to_vec(&create("after", &example("pytorchjob-gpu.yaml"))).expect("serializes");
    let answer = crate::support::TestServer::post_with(&http1, url, small)
        .await
        .expect("answered after the attack");
    assert_eq!(answer.1["response"]["uid"], "after");
}
