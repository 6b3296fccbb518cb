//! Audit-first and exceptions over real HTTPS: what the apiserver gets back when params.yaml
//! sets `defaultAction: audit`, when an exception excuses a job, and when an exception file
//! is broken by an edit (the last good set keeps serving, /readyz says which file and field).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::reload::start;
use crate::support::{apply, copy_policies, create, example, wait_until, TestServer};

/// Refuses every job whose name starts with "blocked-"; fails at request time (a mutation
/// of an unknown op) for every job whose name starts with "boom-", so it still loads.
const BLOCKER: &str = r#"package gangplank.policies.blocker

import rego.v1

meta := {"title": "blocker", "description": "test policy", "action": "deny"}

violation contains {"path": "/metadata/name", "msg": "names starting with blocked- are refused"} if {
	startswith(input.object.metadata.name, "blocked-")
}

mutation contains {"op": "shred", "path": "/spec", "value": 1} if {
	startswith(input.object.metadata.name, "boom-")
}
"#;

/// Excuses blocker for jobs named blocked-* in the example's namespace.
const EXCEPTION: &str = "name: ml-7\npolicies: [blocker]\nmatch:\n  namespaces: [vision]\n  names: [blocked-*]\nreason: launcher rewrite\nexpires: 2999-12-31\n";

/// How long a reload may take: a generous deadline, since compiling the shipped set shares
/// two CPUs with whatever else runs; the waits end as soon as the condition holds.
const RELOAD_DEADLINE: Duration = Duration::from_secs(30);

fn job(name: &str) -> Value {
    let mut job = example("pytorchjob-gpu.yaml");
    job["metadata"]["name"] = name.into();
    job
}

async fn validate(server: &TestServer, job: &Value) -> Value {
    let stored = apply(job, &server.admit("/mutate", &create("m", job)).await);
    server.admit("/validate", &create("v", &stored)).await
}

fn warnings(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The shipped policies, the blocker, and `params` appended to params.yaml.
fn policies(params: &str, exception: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_policies(dir.path());
    std::fs::write(dir.path().join("blocker.rego"), BLOCKER).expect("write policy");
    let path = dir.path().join("params.yaml");
    let mut text = std::fs::read_to_string(&path).expect("params.yaml");
    text.push_str(params);
    std::fs::write(&path, text).expect("write params.yaml");
    if let Some(exception) = exception {
        write_exception(dir.path(), exception);
    }
    dir
}

fn write_exception(dir: &Path, text: &str) {
    let dir = dir.join("exceptions");
    std::fs::create_dir_all(&dir).expect("mkdir exceptions");
    std::fs::write(dir.join("ml-7.yaml"), text).expect("write exception");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_first_admits_a_finding_and_records_it_in_the_audit_annotations() {
    let dir = policies("\ndefaultAction: audit\n", None);
    let server = start(dir.path()).await;
    let response = validate(&server, &job("blocked-resnet")).await;
    assert_eq!(response["allowed"], true, "{response}");
    let annotation = response["auditAnnotations"]["blocker"]
        .as_str()
        .unwrap_or_default();
    assert!(
        annotation.contains("[blocker] /metadata/name: names starting with blocked- are refused"),
        "{response}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_first_admits_a_job_the_policies_fail_on_with_a_warning_and_deny_refuses_it() {
    let audit = policies("\ndefaultAction: audit\n", None);
    let server = start(audit.path()).await;
    let response = server
        .admit("/mutate", &create("m", &job("boom-resnet")))
        .await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(
        response.get("patch").is_none(),
        "nothing patched: {response}"
    );
    assert!(
        warnings(&response)
            .iter()
            .any(|w| w.contains("not checked (evaluation failed)") && w.contains("audit-first")),
        "{response}"
    );
    drop(server);
    let deny = policies("", None);
    let server = start(deny.path()).await;
    let response = server
        .admit("/mutate", &create("m", &job("boom-resnet")))
        .await;
    assert_eq!(response["allowed"], false, "fails closed: {response}");
    assert_eq!(response["status"]["code"], 500, "{response}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_admits_with_a_warning_that_names_it_and_its_expiry() {
    let dir = policies("", Some(EXCEPTION));
    let server = start(dir.path()).await;
    let response = validate(&server, &job("blocked-resnet")).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(
        warnings(&response)
            .iter()
            .any(|w| w
                .starts_with("[blocker] exempted by exception ml-7 until 3000-01-01T00:00:00Z: ")),
        "{response}"
    );
    let other = validate(&server, &job("blocked-bert")).await;
    assert_eq!(other["allowed"], true, "blocked-* matches it too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_exception_file_keeps_the_last_good_set_and_readyz_names_the_file_and_field() {
    let dir = policies("", Some(EXCEPTION));
    let server = start(dir.path()).await;
    assert_eq!(
        validate(&server, &job("blocked-resnet")).await["allowed"],
        true
    );

    let no_expiry = EXCEPTION.replace("expires: 2999-12-31\n", "");
    write_exception(dir.path(), &no_expiry);
    wait_until("the reload is refused", RELOAD_DEADLINE, || async {
        server.metrics.policy_reloads_with(false) == 1
    })
    .await;
    let (status, text) = server.get_text("/readyz").await;
    assert_eq!(
        status, 200,
        "a refused edit does not make the server unready: {text}"
    );
    let ready: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(ready["policies"]["generation"], 1, "still the first set");
    let refused = ready["policies"]["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("exceptions/ml-7.yaml: expires: required"),
        "{refused}"
    );
    // The last good set, exception included, keeps serving.
    assert_eq!(
        validate(&server, &job("blocked-resnet")).await["allowed"],
        true
    );

    // An exception naming a policy the set does not have is refused the same way.
    write_exception(dir.path(), &EXCEPTION.replace("[blocker]", "[blockr]"));
    wait_until("the second reload is refused", RELOAD_DEADLINE, || async {
        server.metrics.policy_reloads_with(false) == 2
    })
    .await;

    // Deleting the file is a good edit: the exception is gone and the blocker refuses.
    std::fs::remove_file(dir.path().join("exceptions/ml-7.yaml")).expect("remove");
    wait_until("the blocker refuses again", RELOAD_DEADLINE, || async {
        validate(&server, &job("blocked-resnet")).await["allowed"] == false
    })
    .await;
}
