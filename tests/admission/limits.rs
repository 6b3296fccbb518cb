//! Limits under hostile input: JSON nested past the parser's limit, a policy that would run
//! away, and clients that open connections and send nothing (slowloris). Each is refused
//! or outlived, and other requests are still served.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::support::{client_for, create, example, Options, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_nested_past_the_json_limit_gets_400_and_the_server_lives_on() {
    let server = TestServer::start().await;
    let depth = 100_000;
    let review = create("deep", &example("configmap.yaml"));
    let text = serde_json::to_string(&review).expect("serializes");
    // The nesting goes into the object, where a real review could carry it.
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let body = text.replacen("\"data\":", &format!("\"deep\":{nested},\"data\":"), 1);
    assert_ne!(body, text, "the configmap example has data");
    for path in ["/mutate", "/validate"] {
        let r = server
            .client
            .post(server.url(path))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .expect("answered");
        let status = r.status().as_u16();
        let text = r.text().await.expect("body");
        assert_eq!(status, 400, "{path}: {text}");
        assert!(text.contains("recursion limit exceeded"), "{text}");
    }
    let ok = server
        .admit("/mutate", &create("after", &example("pytorchjob-gpu.yaml")))
        .await;
    assert_eq!(ok["allowed"], true);
}

/// A policy that loops over three million numbers for jobs named "spin-*": the engine's
/// own bound (instructions and time, src/policy/vm.rs) must stop it, long before the
/// webhook's deadline (set far away here so that it is not what fires).
const RUNAWAY: &str = r#"package gangplank.policies.runaway

import rego.v1

meta := {"title": "runaway", "description": "test policy", "action": "deny"}

violation contains {"path": "/metadata/name", "msg": "never"} if {
	startswith(input.object.metadata.name, "spin-")
	count([x | some x in numbers.range(1, 3000000); x < 0]) > 0
}
"#;

/// A server with the shipped policies and [`RUNAWAY`], whose webhook deadline (10 minutes)
/// leaves the engine's bound to fire; a job that sets the runaway rule off; the policy dir.
async fn runaway_server() -> (TestServer, Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::support::copy_policies(dir.path());
    std::fs::write(dir.path().join("runaway.rego"), RUNAWAY).expect("write policy");
    let server = TestServer::with(Options {
        policies: dir.path().to_path_buf(),
        eval_timeout: Duration::from_secs(600),
        ..Options::default()
    })
    .await;
    let mut job = example("pytorchjob-gpu.yaml");
    job["metadata"]["name"] = json!("spin-forever");
    (server, job, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runaway_policy_is_stopped_by_the_engine_bound_and_the_request_refused() {
    let (server, job, _dir) = runaway_server().await;
    let response = server.admit("/validate", &create("spin", &job)).await;
    assert_eq!(response["allowed"], false, "fail closed: {response}");
    assert_eq!(response["status"]["code"], 500, "{response}");
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("policy evaluation failed") && message.contains("runaway"),
        "{message}"
    );
    assert!(
        message.contains("limit") || message.contains("exceeded"),
        "the message says a limit stopped it: {message}"
    );
    println!("refused with: {message}");
    let fine = server
        .admit(
            "/validate",
            &create("fine", &example("pytorchjob-gpu.yaml")),
        )
        .await;
    assert_eq!(fine["allowed"], true, "{fine}");
}

/// `/mutate` runs the mutation policies only: the apiserver calls `/validate` next with the
/// patched object, and that review carries every violation. So a validation policy that
/// would run away does not stop the patch (nor cost its time twice); `/validate` refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_answers_the_patch_without_running_the_validation_policies() {
    let (server, job, _dir) = runaway_server().await;
    let started = std::time::Instant::now();
    let mutated = server.admit("/mutate", &create("spin", &job)).await;
    assert_eq!(mutated["allowed"], true, "{mutated}");
    assert!(
        mutated["patch"].is_string(),
        "the patch is answered: {mutated}"
    );
    println!("/mutate answered in {:?}", started.elapsed());
    let validated = server.admit("/validate", &create("spin", &job)).await;
    assert_eq!(validated["allowed"], false, "{validated}");
    let message = validated["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("runaway"), "{message}");
}

/// Whether the server closes `conn` within a minute (whatever it sends first is read and
/// dropped).
async fn closed_by_server(conn: &mut (impl tokio::io::AsyncRead + Unpin)) -> bool {
    let read_to_end = async {
        let mut buf = [0u8; 64];
        while let Ok(n) = conn.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read_to_end)
        .await
        .is_ok()
}

/// Half the idle connections finish the TLS handshake (HTTP/2 and HTTP/1.1) and send
/// nothing more; the other half never start it. `RELIABILITY.md` has the 10,000-connection
/// run (`gangplank bench --idle-connections`); this test keeps CI quick.
const IDLE: usize = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_stop_others_being_served() {
    let server = TestServer::start().await;
    let mut held = Vec::new();
    let mut tls_held = Vec::new();
    for i in 0..IDLE {
        let tcp = TcpStream::connect(server.addr).await.expect("connects");
        if i % 2 == 0 {
            held.push(tcp);
            continue;
        }
        let alpn: &[u8] = if i % 4 == 1 { b"h2" } else { b"http/1.1" };
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("name");
        let tls = crate::support::tls_client(&server, alpn)
            .connect(name, tcp)
            .await
            .expect("handshake");
        tls_held.push(tls);
    }
    for i in 0..5 {
        let job = example("pytorchjob-gpu.yaml");
        let response: Value = server
            .admit("/validate", &create(&format!("busy-{i}"), &job))
            .await;
        assert!(response["allowed"].is_boolean(), "{response}");
    }
    // A connection that never starts its handshake is closed by the server, not held.
    let mut first = held.swap_remove(0);
    assert!(
        closed_by_server(&mut first).await,
        "the server closes a connection that never starts its handshake"
    );
    drop((held, tls_held));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_bound_a_new_client_is_served_and_the_quietest_idle_one_closed() {
    let max = 40;
    let server = TestServer::with(Options {
        max_connections: max,
        ..Options::default()
    })
    .await;
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let mut idle = Vec::new();
    for _ in 0..max {
        let tcp = TcpStream::connect(server.addr).await.expect("connects");
        let tls = crate::support::tls_client(&server, b"h2")
            .connect(name.clone(), tcp)
            .await
            .expect("handshake");
        idle.push(tls);
    }
    // Every place is held by an idle connection; a new client still gets its answer.
    let fresh = client_for(&server.ca);
    let response = fresh
        .post(server.url("/validate"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&create("fresh", &example("pytorchjob-gpu.yaml"))).expect("JSON"))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 200);
    let review: Value =
        serde_json::from_slice(&response.bytes().await.expect("body")).expect("JSON");
    assert!(review["response"]["allowed"].is_boolean(), "{review}");
    // The quietest idle connection was the one closed to make room: the first one opened.
    let mut first = idle.swap_remove(0);
    let closed = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buf = [0u8; 64];
        while let Ok(n) = first.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the least recently active connection is closed"
    );
}
