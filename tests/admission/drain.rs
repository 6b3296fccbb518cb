//! Shutting down without losing a request (issue 32, item 7): once the shutdown delay
//! starts, HTTP/1.1 answers carry `Connection: close` and HTTP/2 connections get GOAWAY, so
//! clients reconnect (to another replica) before the listener closes; none meets an EOF in
//! the middle of a request.
//!
//! Before, the connections were told nothing until the delay ended and were then closed under
//! their clients: under load 2 of 8,327 reviews sent at +5.00 s met a TLS EOF.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;

use crate::support::{create, example, not_sent, tls_client, wait_until, Options, TestServer};

/// Longest the test waits for anything; a deadline, never a measure of the server.
const GUARD: Duration = Duration::from_secs(30);

/// A TLS connection to `server` offering `alpn` only.
async fn connect(
    server: &TestServer,
    alpn: &[u8],
) -> TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connects");
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let tls = tls_client(server, alpn)
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    TokioIo::new(tls)
}

/// The answer to a request sent on a test connection: its `Connection` header and the uid of
/// its review.
async fn send<F>(send_request: F) -> (Option<String>, Value)
where
    F: std::future::Future<Output = hyper::Result<hyper::Response<hyper::body::Incoming>>>,
{
    answered(send_request.await.expect("answered")).await
}

fn review_request(uid: &str) -> hyper::Request<Full<Bytes>> {
    let body = serde_json::to_vec(&create(uid, &example("pytorchjob-gpu.yaml"))).expect("json");
    hyper::Request::post("/mutate")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("request")
}

/// The answer's `Connection` header and the uid of its review.
async fn answered(response: hyper::Response<hyper::body::Incoming>) -> (Option<String>, Value) {
    let connection = response
        .headers()
        .get("connection")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let review: Value = serde_json::from_slice(&body).expect("an AdmissionReview");
    (connection, review["response"]["uid"].clone())
}

async fn draining_server() -> TestServer {
    // Longer than the test's guard: whatever the test sees, it sees during the delay. The
    // test does not wait for it; the server ends with the test's runtime.
    TestServer::with(Options {
        shutdown_delay: Duration::from_secs(120),
        ..Options::default()
    })
    .await
}

async fn wait_not_ready(server: &TestServer) {
    wait_until("readyz fails", GUARD, || async {
        server.get_text("/readyz").await.0 == 503
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_draining_an_http1_answer_says_connection_close_and_the_connection_then_closes() {
    let mut server = draining_server().await;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(connect(&server, b"http/1.1").await)
            .await
            .expect("HTTP/1.1 handshake");
    let conn = tokio::spawn(conn);
    let (connection, uid) = send(sender.send_request(review_request("before"))).await;
    assert_eq!(uid, "before");
    assert_ne!(
        connection.as_deref(),
        Some("close"),
        "kept alive while serving"
    );

    server.begin_shutdown();
    wait_not_ready(&server).await;
    // The same kept-alive connection: answered, and told to go. hyper's client refuses a
    // request ("connection was not ready") until its dispatcher has taken the previous
    // answer's end; `ready` waits for that, and fails if the server had closed the connection.
    sender
        .ready()
        .await
        .expect("the kept-alive connection is still open while draining");
    let (connection, uid) = send(sender.send_request(review_request("draining"))).await;
    assert_eq!(uid, "draining");
    assert_eq!(connection.as_deref(), Some("close"));
    tokio::time::timeout(GUARD, conn)
        .await
        .expect("the server closes the connection after that answer")
        .expect("connection task")
        .expect("a clean close");
    // The listener still accepts during the delay: a new connection is answered.
    let (status, _) = server
        .post(
            "/mutate",
            &create("reconnected", &example("pytorchjob-gpu.yaml")),
        )
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_draining_an_http2_connection_gets_goaway_and_closes_while_the_listener_still_accepts()
{
    let mut server = draining_server().await;
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), connect(&server, b"h2").await)
            .await
            .expect("HTTP/2 handshake");
    let conn = tokio::spawn(conn);
    let (_, uid) = send(sender.send_request(review_request("before"))).await;
    assert_eq!(uid, "before");

    server.begin_shutdown();
    // GOAWAY with no stream in flight: the connection ends, long before the delay ends.
    tokio::time::timeout(GUARD, conn)
        .await
        .expect("the server ends the HTTP/2 connection once draining")
        .expect("connection task")
        .expect("a clean close (GOAWAY)");
    assert_eq!(server.get_text("/readyz").await.0, 503, "draining");
    let (status, _) = server
        .post(
            "/mutate",
            &create("reconnected", &example("pytorchjob-gpu.yaml")),
        )
        .await;
    assert_eq!(status, 200, "the listener still accepts");
}

/// One client that sends reviews one after another, on kept-alive connections, until the
/// server is gone: `Ok(answered)` or the first failure of a request the server had begun to
/// process ([`not_sent`] failures end the loop: the listener is closed, or closing).
async fn keep_sending(client: reqwest::Client, url: String, name: &str) -> Result<usize, String> {
    let mut answered = 0;
    for i in 0.. {
        let uid = format!("{name}-{i}");
        let body =
            serde_json::to_vec(&create(&uid, &example("pytorchjob-gpu.yaml"))).expect("json");
        let sent = client
            .post(url.clone())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) if not_sent(&e) => return Ok(answered),
            Err(e) => return Err(format!("{uid}: sent and not answered: {e:?}")),
        };
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| format!("{uid}: answer cut: {e:?}"))?;
        let review: Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("{uid}: {status}: {e}"))?;
        if status != 200 || review["response"]["uid"] != uid.as_str() {
            return Err(format!("{uid}: {status} {review}"));
        }
        answered += 1;
    }
    Ok(answered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_sending_through_the_shutdown_get_every_request_answered_or_a_refused_connection() {
    let mut server = TestServer::with(Options {
        shutdown_delay: Duration::from_secs(2),
        ..Options::default()
    })
    .await;
    let ca = reqwest::Certificate::from_pem(server.ca.pem().as_bytes()).expect("CA");
    let http1 = reqwest::Client::builder()
        .tls_certs_only([ca.clone()])
        .http1_only()
        .build()
        .expect("client");
    let http2 = server.client.clone();
    let url = server.url("/mutate");
    let clients: Vec<_> = [
        ("h1-a", &http1),
        ("h1-b", &http1),
        ("h2-a", &http2),
        ("h2-b", &http2),
    ]
    .into_iter()
    .map(|(name, client)| {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move { keep_sending(client, url, name).await })
    })
    .collect();
    wait_until("some reviews answered", GUARD, || async {
        server.metrics.requests_with(
            gangplank::admission::metrics::Endpoint::Mutate,
            "PyTorchJob",
            gangplank::admission::metrics::Decision::Patched,
        ) >= 20
    })
    .await;
    server.begin_shutdown();
    let mut answered = 0;
    for client in clients {
        let outcome = tokio::time::timeout(Duration::from_secs(60), client)
            .await
            .expect("the client stops once the listener is closed")
            .expect("client task");
        answered += outcome.unwrap_or_else(|e| panic!("a request was lost in the shutdown: {e}"));
    }
    assert!(answered >= 20, "{answered} answered");
    server.stop().await;
}
