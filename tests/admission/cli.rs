//! `gangplank certs` and `gangplank serve` as commands: files, caBundle, the ephemeral
//! certificate of a zero-config run, graceful exit on SIGTERM.

use std::process::Command;
use std::time::Duration;

use base64::Engine as _;

use crate::support::{create, example, gangplank, Spawned};

#[test]
fn certs_writes_a_tls_secret_layout_and_prints_the_ca_bundle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = gangplank()
        .args(["certs", "--out"])
        .arg(dir.path())
        .args([
            "--dns",
            "gangplank-webhook.gangplank.svc,gangplank-webhook.gangplank.svc.cluster.local",
        ])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ca = std::fs::read_to_string(dir.path().join("ca.crt")).expect("ca.crt");
    let bundle = String::from_utf8(out.stdout).expect("utf-8");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(bundle.trim())
        .expect("caBundle is base64");
    assert_eq!(decoded, ca.as_bytes());
    let cert = std::fs::read(dir.path().join("tls.crt")).expect("tls.crt");
    let key = std::fs::read(dir.path().join("tls.key")).expect("tls.key");
    gangplank::admission::tls::certified_key(&cert, &key).expect("the key fits the certificate");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("tls.key"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "tls.key is private: {mode:o}");
    }

    // Existing files are kept unless --force.
    let again = gangplank()
        .args(["certs", "--dns", "x", "--out"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ca.crt")).expect("ca"),
        ca
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_a_certificate_generates_one_says_where_its_ca_is_and_exits_cleanly_on_sigterm(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_path = dir.path().join("local-ca.crt");
    let ca_arg = ca_path.display().to_string();
    let mut child = Spawned::serve(&["--ephemeral-ca", &ca_arg], &[]);
    let addr = child.addr.clone();
    let said_ephemeral = child.early.iter().any(|line| {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON log line");
        v["fields"]["message"].as_str().is_some_and(|m| {
            m.contains("ephemeral self-signed") && m.contains(&ca_path.display().to_string())
        })
    });
    assert!(
        said_ephemeral,
        "serve says it uses an ephemeral certificate and where its CA is"
    );

    let ca_pem = std::fs::read_to_string(&ca_path).expect("CA written");
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA")])
        .build()
        .expect("client");
    let r = client
        .post(format!("https://{addr}/mutate"))
        .body(serde_json::to_vec(&create("cli-1", &example("pytorchjob-gpu.yaml"))).expect("json"))
        .send()
        .await
        .expect("answered over HTTPS with the printed CA");
    assert_eq!(r.status(), 200);
    let body: serde_json::Value =
        serde_json::from_slice(&r.bytes().await.expect("body")).expect("JSON");
    assert_eq!(body["response"]["uid"], "cli-1");

    // One JSON log line per decision, with the request's identity.
    let decision = loop {
        let line = child
            .log
            .recv_timeout(Duration::from_secs(10))
            .expect("decision logged");
        let v: serde_json::Value = serde_json::from_str(&line).expect("JSON log line");
        if v["fields"]["message"] == "admission decision" {
            break v;
        }
    };
    assert_eq!(decision["fields"]["decision"], "patched", "{decision}");
    assert_eq!(decision["span"]["uid"], "cli-1", "{decision}");
    assert_eq!(
        decision["span"]["kind"], "kubeflow.org/v1/PyTorchJob",
        "{decision}"
    );
    assert_eq!(decision["span"]["namespace"], "vision", "{decision}");
    assert_eq!(
        decision["span"]["object_name"], "resnet50-imagenet",
        "{decision}"
    );
    assert!(
        decision["fields"]["policies"]
            .as_str()
            .is_some_and(|p| p.contains("gang_scheduling")),
        "{decision}"
    );

    let pid = child.child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "serve did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}");
}

#[test]
fn serve_refuses_to_start_on_a_broken_policy_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("broken.rego"),
        "package gangplank.policies.broken\nthis is not rego\n",
    )
    .expect("write");
    let out = gangplank()
        .args(["serve", "--addr", "127.0.0.1:0", "--policies"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot load policies"), "{stderr}");
}

/// Issue 41 item 3: with the cluster-wide pull-secret reads of deploy/image-pinning and no
/// `--client-ca`, anyone who reaches the port could make the server read any namespace's
/// pull secrets. The server does not start, and says both ways out; before, it started.
#[test]
fn serve_refuses_cluster_wide_pull_secrets_without_a_client_ca_naming_both_ways_out() {
    let out = gangplank()
        .args(["serve", "--addr", "127.0.0.1:0", "--pull-secrets=cluster"])
        .env_remove("GANGPLANK_CLIENT_CA")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--pull-secrets=cluster without --client-ca")
            && stderr.contains("set --client-ca")
            && stderr.contains("deploy/image-pinning-namespaced"),
        "{stderr}"
    );
}

/// `gangplank bench` with `args`; its stdout, once it has exited successfully.
fn bench(args: &[&str]) -> String {
    let out = gangplank().arg("bench").args(args).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn bench_spawns_a_server_and_reports_every_level_without_errors() {
    let stdout = bench(&["--concurrency", "1,3", "--duration", "1s", "--warmup", "0s"]);
    assert!(stdout.contains("reviews/s"), "{stdout}");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains("reviews/s"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    for row in rows {
        assert!(
            row.get(1)
                .and_then(|r| r.parse::<f64>().ok())
                .is_some_and(|r| r > 0.0),
            "{row:?}"
        );
        assert_eq!(row.get(5), Some(&"0"), "no errors: {row:?}");
        assert!(
            row.get(6)
                .and_then(|r| r.parse::<f64>().ok())
                .is_some_and(|mib| mib > 1.0),
            "server RSS read: {row:?}"
        );
    }
}

#[test]
fn bench_paces_reports_per_interval_and_holds_idle_connections() {
    let stdout = bench(&[
        "--concurrency",
        "2",
        "--duration",
        "2s",
        "--warmup",
        "0s",
        "--rate",
        "100",
        "--report-every",
        "1s",
        "--idle-connections",
        "20",
    ]);
    assert!(
        stdout.contains("# 20 idle TLS connections held open (0 could not be opened)"),
        "{stdout}"
    );
    assert!(stdout.contains("paced to 100 reviews/s"), "{stdout}");
    // One line per interval: "#  <end>s  <reviews/s>  <p50>  <p99>  <max>  <errors>  <RSS>".
    let intervals: Vec<Vec<&str>> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.first().is_some_and(|t| t.ends_with('s') && t.len() > 1))
        .collect();
    assert_eq!(intervals.len(), 2, "{stdout}");
    for f in &intervals {
        assert_eq!(f.get(5), Some(&"0"), "no errors: {f:?}");
    }
    assert!(stdout.contains("# idle connections: 20 held"), "{stdout}");
}
