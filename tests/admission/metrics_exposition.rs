//! `gangplank serve`'s `/metrics` as Prometheus scrapes it (a process of its own,
//! `--metrics-addr`): every family it renders is in src/metrics_catalog.rs with the type and
//! labels listed there (the catalog deploy/monitoring's rules and dashboard are checked
//! against, and the metrics reference is generated from), `gangplank_build_info` names the
//! build `gangplank version` names, and `gangplank_policy_set_info` follows reloads with the
//! hash `gangplank version --policies` prints.

use std::path::Path;
use std::time::Duration;

use gangplank::metrics_catalog::{check_exposition, WEBHOOK};
use serde_json::Value;

use crate::support::{copy_policies, gangplank, wait_until, Spawned};

/// `gangplank version -o json [--policies dir]`.
fn version(policies: Option<&Path>) -> Value {
    let mut cmd = gangplank();
    cmd.args(["version", "-o", "json"])
        .env_remove("GANGPLANK_POLICIES");
    if let Some(dir) = policies {
        cmd.arg("--policies").arg(dir);
    }
    let out = cmd.output().expect("gangplank version runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The address the server logged for `--metrics-addr`.
fn metrics_addr(server: &Spawned) -> String {
    let said = |line: &String| -> Option<String> {
        let v: Value = serde_json::from_str(line).ok()?;
        let message = v["fields"]["message"].as_str()?;
        message
            .contains("--metrics-addr")
            .then(|| v["fields"]["addr"].as_str().map(str::to_string))?
    };
    if let Some(addr) = server.early.iter().find_map(said) {
        return addr;
    }
    loop {
        let line = server
            .log
            .recv_timeout(Duration::from_secs(30))
            .expect("serve logs its metrics address");
        if let Some(addr) = said(&line) {
            return addr;
        }
    }
}

async fn scrape(addr: &str) -> String {
    reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("body")
}

/// Whether `text` has this exact sample line (a HELP text may contain the same words).
fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

fn hash_line(hash: &str) -> String {
    format!("gangplank_policy_set_info{{hash=\"{hash}\"}} 1")
}

#[tokio::test]
async fn metrics_are_the_catalogs_and_name_the_build_and_the_serving_policy_set() {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_policies(dir.path());
    let policies = dir.path().to_str().expect("UTF-8 path");
    let server = Spawned::serve(
        &[
            "--policies",
            policies,
            "--metrics-addr",
            "127.0.0.1:0",
            "--reload-interval",
            "100ms",
        ],
        &[],
    );
    let addr = metrics_addr(&server);
    let text = scrape(&addr).await;
    assert_eq!(
        check_exposition(&text, WEBHOOK),
        Vec::<String>::new(),
        "{text}"
    );

    let v = version(Some(dir.path()));
    let build = format!(
        "gangplank_build_info{{version=\"{}\",revision=\"{}\"}} 1",
        v["version"].as_str().expect("version"),
        v["revision"].as_str().expect("revision")
    );
    assert!(has_line(&text, &build), "{build} missing from\n{text}");
    let first = v["policySetHash"].as_str().expect("hash").to_string();
    assert!(has_line(&text, &hash_line(&first)), "{text}");
    assert!(
        has_line(&text, "gangplank_policy_reload_failing 0"),
        "{text}"
    );

    // An edit: the new set's hash replaces the old one, as `version` computes it.
    let policy = dir.path().join("images.rego");
    let original = std::fs::read_to_string(&policy).expect("images.rego");
    std::fs::write(&policy, format!("{original}\n# edited\n")).expect("edit");
    let second = version(Some(dir.path()))["policySetHash"]
        .as_str()
        .expect("hash")
        .to_string();
    assert_ne!(first, second);
    wait_until(
        "the edited set's hash is exported",
        Duration::from_secs(30),
        || async { has_line(&scrape(&addr).await, &hash_line(&second)) },
    )
    .await;
    let text = scrape(&addr).await;
    assert!(
        !text.contains(&first),
        "the replaced set's hash is still exported:\n{text}"
    );

    // A set that does not compile: the gauge says so, the serving hash stays.
    std::fs::write(
        &policy,
        "package gangplank.policies.images\nthis is not rego {\n",
    )
    .expect("break");
    wait_until(
        "the refused reload is exported",
        Duration::from_secs(30),
        || async { has_line(&scrape(&addr).await, "gangplank_policy_reload_failing 1") },
    )
    .await;
    let text = scrape(&addr).await;
    assert!(has_line(&text, &hash_line(&second)), "{text}");
    assert!(
        has_line(
            &text,
            "gangplank_policy_reloads_total{result=\"failure\"} 1"
        ),
        "{text}"
    );
    assert_eq!(
        check_exposition(&text, WEBHOOK),
        Vec::<String>::new(),
        "{text}"
    );
}
