//! `gangplank controller` as a process without a reachable API server: it says which server
//! it cannot reach, keeps retrying, and still stops on SIGTERM (with and without leader
//! election) instead of waiting for reconciles that can never finish. And against a stub
//! API server that answers as one without the Lease namespace, or one that forbids Leases:
//! the controller says what is wrong and how to fix it, and exits (tests/
//! e2e_controller_process.rs does the same against a real kube-apiserver).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A kubeconfig whose server is a closed loopback port.
fn dead_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("port").port();
    drop(listener);
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: dead\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\n\
         users:\n- name: nobody\n  user: {{token: none}}\ncontexts:\n- name: dead\n  context: {{cluster: dead, user: nobody}}\n\
         current-context: dead\n"
    );
    std::fs::write(&path, text).expect("kubeconfig");
    path
}

fn start(kubeconfig: &std::path::Path, leader_elect: bool) -> Child {
    Command::new(env!("CARGO_BIN_EXE_gangplank"))
        .args([
            "controller",
            "--gang-scheduler=",
            &format!("--leader-elect={leader_elect}"),
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("GANGPLANK_LOG_FORMAT", "text")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gangplank controller starts")
}

/// Sends SIGTERM once the controller has said it cannot reach the server; its exit status
/// and log. The 120 s guard only keeps a hung process from hanging the suite.
fn terminate(mut child: Child) -> (std::process::ExitStatus, String) {
    std::thread::sleep(Duration::from_secs(2));
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -TERM {pid}");
    let guard = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut log = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut log);
            }
            return (status, log);
        }
        if Instant::now() > guard {
            let _ = child.kill();
            panic!("gangplank controller ignored SIGTERM for 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sigterm_stops_a_controller_whose_api_server_is_gone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dead_kubeconfig(dir.path());
    for leader_elect in [false, true] {
        let (status, log) = terminate(start(&kubeconfig, leader_elect));
        assert!(
            status.success(),
            "leader_elect={leader_elect}: {status}\n{log}"
        );
        assert!(
            log.contains("127.0.0.1"),
            "names the server it cannot reach:\n{log}"
        );
    }
}

/// A `Status` body as the apiserver writes it.
fn status(code: u16, reason: &str, message: &str) -> String {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    })
    .to_string()
}

/// Answers one HTTP/1.1 request with `answer(method, path)` and closes the connection.
fn serve_one(stream: TcpStream, answer: fn(&str, &str) -> (u16, String)) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (code, body) = answer(method, path);
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A kubeconfig for a stub API server on loopback that answers with `answer`.
fn stub_kubeconfig(
    dir: &std::path::Path,
    answer: fn(&str, &str) -> (u16, String),
) -> std::path::PathBuf {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("port").port();
    // Lives until the test binary ends.
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = serve_one(stream, answer);
        }
    });
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: stub\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\n\
         users:\n- name: nobody\n  user: {{token: none}}\ncontexts:\n- name: stub\n  context: {{cluster: stub, user: nobody}}\n\
         current-context: stub\n"
    );
    std::fs::write(&path, text).expect("kubeconfig");
    path
}

/// An API server without the namespace `gangplank-system`: the Lease is not found, and
/// creating it answers 404 for the namespace.
fn without_lease_namespace(method: &str, path: &str) -> (u16, String) {
    match (method, path) {
        ("GET", "/version") => (
            200,
            r#"{"major":"1","minor":"36","gitVersion":"v1.36.2"}"#.into(),
        ),
        ("POST", p) if p.contains("/namespaces/gangplank-system/leases") => (
            404,
            status(404, "NotFound", "namespaces \"gangplank-system\" not found"),
        ),
        _ => (
            404,
            status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        ),
    }
}

/// An API server whose RBAC grants this identity nothing on Leases.
fn forbidding_leases(method: &str, path: &str) -> (u16, String) {
    match (method, path) {
        ("GET", "/version") => (200, r#"{"major":"1","minor":"36","gitVersion":"v1.36.2"}"#.into()),
        (_, p) if p.contains("/leases") => (
            403,
            status(
                403,
                "Forbidden",
                "leases.coordination.k8s.io \"gangplank-controller\" is forbidden: User \"nobody\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"gangplank-system\"",
            ),
        ),
        _ => (404, status(404, "NotFound", "the server could not find the requested resource")),
    }
}

/// Waits (at most `limit`) for the controller to exit on its own; its status and log.
fn exits_within(mut child: Child, limit: Duration) -> (std::process::ExitStatus, String) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut log = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut log);
            }
            return (status, log);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let mut log = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut log);
            }
            panic!("gangplank controller still running after {limit:?}:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn without_the_lease_namespace_the_controller_exits_naming_it_and_the_fixes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = stub_kubeconfig(dir.path(), without_lease_namespace);
    let (status, log) = exits_within(start(&kubeconfig, true), Duration::from_secs(30));
    assert_eq!(status.code(), Some(2), "{log}");
    for needed in [
        "\"gangplank-system\"",
        "kubectl create namespace gangplank-system",
        "--lease-namespace=",
        "--leader-elect=false",
    ] {
        assert!(log.contains(needed), "names {needed}:\n{log}");
    }
}

#[test]
fn forbidden_leases_make_the_controller_exit_naming_the_rbac_and_the_fixes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = stub_kubeconfig(dir.path(), forbidding_leases);
    // 403 is retried for one lease duration (15 s: RBAC applied beside the Deployment).
    let (status, log) = exits_within(start(&kubeconfig, true), Duration::from_secs(60));
    assert_eq!(status.code(), Some(2), "{log}");
    for needed in [
        "may not get Leases in namespace \"gangplank-system\"",
        "deploy/controller/rbac.yaml",
        "--lease-namespace=",
        "--leader-elect=false",
    ] {
        assert!(log.contains(needed), "names {needed}:\n{log}");
    }
}
