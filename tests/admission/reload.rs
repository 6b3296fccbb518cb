//! Policy hot reload: an edit is served within a bounded wait; a broken edit keeps the
//! previous set serving and shows on /readyz, in metrics and logs; ConfigMap-style symlink
//! swaps are seen.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::{apply, copy_policies, create, example, wait_until, Options, TestServer};

/// A policy that refuses every job whose name starts with "blocked-".
const BLOCKER: &str = r#"package gangplank.policies.blocker

import rego.v1

meta := {"title": "blocker", "description": "test policy", "action": "deny"}

violation contains {"path": "/metadata/name", "msg": "names starting with blocked- are refused"} if {
	startswith(input.object.metadata.name, "blocked-")
}
"#;

fn blocked_job() -> Value {
    let mut job = example("pytorchjob-gpu.yaml");
    job["metadata"]["name"] = "blocked-resnet".into();
    job
}

async fn validate(server: &TestServer, job: &Value) -> Value {
    let stored = apply(job, &server.admit("/mutate", &create("m", job)).await);
    server.admit("/validate", &create("v", &stored)).await
}

async fn readyz(server: &TestServer) -> Value {
    let (status, text) = server.get_text("/readyz").await;
    assert_eq!(
        status, 200,
        "a refused edit does not make the server unready: {text}"
    );
    serde_json::from_str(&text).expect("JSON")
}

fn policies_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_policies(dir.path());
    dir
}

/// A server on `dir` (shared with the other reload-driven suites).
pub async fn start(dir: &Path) -> TestServer {
    TestServer::with(Options {
        policies: dir.to_path_buf(),
        ..Options::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_policy_is_served_shortly_after_it_is_written() {
    let dir = policies_dir();
    let server = start(dir.path()).await;
    assert_eq!(validate(&server, &blocked_job()).await["allowed"], true);

    std::fs::write(dir.path().join("blocker.rego"), BLOCKER).expect("write policy");
    // Polled every 100 ms here (500 ms by default), plus the compile time.
    let took = wait_until("the new policy denies", Duration::from_secs(5), || async {
        validate(&server, &blocked_job()).await["allowed"] == false
    })
    .await;
    eprintln!("new policy served after {took:?}");
    let denied = validate(&server, &blocked_job()).await;
    assert!(denied["status"]["message"].as_str().is_some_and(
        |m| m.contains("[blocker] /metadata/name: names starting with blocked- are refused")
    ));
    assert_eq!(server.metrics.policy_reloads_with(true), 1);
    assert_eq!(readyz(&server).await["policies"]["generation"], 2);

    // Removing it is an edit too.
    std::fs::remove_file(dir.path().join("blocker.rego")).expect("remove");
    wait_until("the policy is gone", Duration::from_secs(5), || async {
        validate(&server, &blocked_job()).await["allowed"] == true
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_edit_keeps_the_previous_set_and_readyz_says_why() {
    let dir = policies_dir();
    std::fs::write(dir.path().join("blocker.rego"), BLOCKER).expect("write policy");
    let server = start(dir.path()).await;
    assert_eq!(validate(&server, &blocked_job()).await["allowed"], false);

    let broken = BLOCKER.replace("startswith(", "startswith((");
    std::fs::write(dir.path().join("blocker.rego"), broken).expect("write broken policy");
    wait_until("the reload is refused", Duration::from_secs(5), || async {
        server.metrics.policy_reloads_with(false) == 1
    })
    .await;
    let ready = readyz(&server).await;
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["policies"]["generation"], 1, "still the first set");
    let refused = ready["policies"]["refused"]
        .as_str()
        .expect("refusal reported");
    assert!(refused.contains("blocker"), "{refused}");
    assert!(
        refused.contains("blocker.rego:"),
        "names file:line: {refused}"
    );

    // The previous set keeps serving: the blocker still denies, other jobs pass.
    assert_eq!(validate(&server, &blocked_job()).await["allowed"], false);
    assert_eq!(
        validate(&server, &example("pytorchjob-gpu.yaml")).await["allowed"],
        true
    );
    let (_, metrics) = server.get_text("/metrics").await;
    assert!(metrics.contains(r#"gangplank_policy_reloads_total{result="failure"} 1"#));

    // A later fix loads and clears the report.
    std::fs::write(
        dir.path().join("blocker.rego"),
        BLOCKER.replace("blocked-", "stopped-"),
    )
    .expect("write fixed policy");
    wait_until("the fix is served", Duration::from_secs(5), || async {
        validate(&server, &blocked_job()).await["allowed"] == true
    })
    .await;
    let ready = readyz(&server).await;
    assert!(ready["policies"].get("refused").is_none(), "{ready}");
    assert_eq!(ready["policies"]["generation"], 2);
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_volume_symlink_swap_is_picked_up() {
    use std::os::unix::fs::symlink;
    // The kubelet's layout: ..<timestamp>/ holds the files, ..data points at it, and each
    // visible file is a symlink through ..data. An update writes a new ..<timestamp>/ and
    // renames a new ..data symlink over the old one.
    let root = tempfile::tempdir().expect("tempdir");
    let v1 = root.path().join("..2026_01_01_v1");
    copy_policies(&v1);
    symlink("..2026_01_01_v1", root.path().join("..data")).expect("..data");
    for entry in std::fs::read_dir(&v1).expect("read") {
        let name = entry.expect("entry").file_name();
        symlink(Path::new("..data").join(&name), root.path().join(&name)).expect("link");
    }
    let server = start(root.path()).await;
    assert_eq!(validate(&server, &blocked_job()).await["allowed"], true);

    let v2 = root.path().join("..2026_01_01_v2");
    copy_policies(&v2);
    std::fs::write(v2.join("blocker.rego"), BLOCKER).expect("write");
    // The kubelet's order: swap ..data, then link the new key.
    symlink("..2026_01_01_v2", root.path().join("..data_tmp")).expect("..data_tmp");
    std::fs::rename(root.path().join("..data_tmp"), root.path().join("..data")).expect("swap");
    symlink(
        Path::new("..data").join("blocker.rego"),
        root.path().join("blocker.rego"),
    )
    .expect("link new key");

    wait_until(
        "the swapped-in policy denies",
        Duration::from_secs(5),
        || async { validate(&server, &blocked_job()).await["allowed"] == false },
    )
    .await;
}
