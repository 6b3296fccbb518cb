//! `gangplank controller` as a process without a reachable API server: it says which server
//! it cannot reach, keeps retrying, and still stops on SIGTERM (with and without leader
//! election) instead of waiting for reconciles that can never finish.

use std::io::Read;
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
