//! /mutate and /validate answer as the apiserver expects: patches that apply, denials with
//! every violation, warnings, skipped kinds and operations, UPDATE, dryRun.

use gangplank::policy::{Action, PolicySet};
use gangplank::review::{self, Input};
use serde_json::{json, Value};

use crate::support::{apply, copy_policies, create, example, repo, review, Options, TestServer};

fn shipped() -> PolicySet {
    PolicySet::load(&repo().join("policies")).expect("shipped policies load")
}

/// What the library decides for `object` offline (`gangplank check`).
fn decided(object: &Value) -> review::Decision {
    review::review(&shipped(), &Input::create(object.clone(), "default")).expect("decides")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_returns_a_base64_json_patch_that_produces_the_defaulted_job() {
    let server = TestServer::start().await;
    let job = example("pytorchjob-gpu.yaml");
    let response = server.admit("/mutate", &create("m-1", &job)).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("status").is_none(), "{response}");
    let stored = apply(&job, &response);
    assert_ne!(stored, job, "the example gets defaults");
    assert_eq!(
        stored,
        decided(&job).mutated,
        "same result as gangplank check"
    );
    assert_eq!(
        stored["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"],
        "volcano"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_job_is_mutated_then_validated_as_gangplank_check_decides() {
    let server = TestServer::start().await;
    let mut files: Vec<_> = std::fs::read_dir(repo().join("examples"))
        .expect("examples")
        .chain(std::fs::read_dir(repo().join("examples/rejected")).expect("rejected"))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut checked = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        for (i, doc) in text.split("\n---").enumerate() {
            let Ok(job) = yaml_serde::from_str::<Value>(doc) else {
                continue;
            };
            if !job.is_object() {
                continue;
            }
            let uid = format!("{}-{i}", path.display());
            let mutated = server.admit("/mutate", &create(&uid, &job)).await;
            assert_eq!(mutated["allowed"], true, "{uid}: {mutated}");
            let stored = apply(&job, &mutated);
            let expected = decided(&job);
            assert_eq!(stored, expected.mutated, "{uid}: patch");
            let validated = server.admit("/validate", &create(&uid, &stored)).await;
            assert_eq!(
                validated["allowed"],
                expected.allowed(),
                "{uid}: {validated}"
            );
            let message = validated["status"]["message"].as_str().map(str::to_string);
            assert_eq!(message, expected.denial_message(), "{uid}: message");
            checked += 1;
        }
    }
    assert!(checked >= 10, "checked only {checked} documents");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_denies_with_403_and_lists_every_violation_as_policy_path_message() {
    let server = TestServer::start().await;
    // Two faults at once: two Masters, and an unpinned image.
    let mut job = example("rejected/two-masters.yaml");
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.example.com/ml/pytorch:2.4.0");
    let stored = decided(&job).mutated;
    let expected = decided(&stored);
    let denials: Vec<String> = expected
        .with_action(Action::Deny)
        .map(|v| v.render())
        .collect();
    assert!(denials.len() >= 2, "{denials:?}");

    let response = server.admit("/validate", &create("v-1", &stored)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    let message = response["status"]["message"].as_str().expect("message");
    assert_eq!(message.lines().collect::<Vec<_>>(), denials);
    assert!(message.contains("[coordinator] /spec/pytorchReplicaSpecs/Master/replicas: "));
    assert!(message
        .contains("[images] /spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/image: "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_and_audit_policies_admit_with_bounded_warnings_and_audit_annotations() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_policies(dir.path());
    std::fs::write(
        dir.path().join("params.yaml"),
        "policies:\n  coordinator:\n    action: warn\n  names:\n    action: audit\n",
    )
    .expect("params");
    let server = TestServer::with(Options {
        policies: dir.path().to_path_buf(),
        ..Options::default()
    })
    .await;

    let two_masters = decided(&example("rejected/two-masters.yaml")).mutated;
    let response = server
        .admit("/validate", &create("w-1", &two_masters))
        .await;
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = response["warnings"].as_array().expect("warnings");
    assert!(
        warnings.iter().any(|w| w.as_str().is_some_and(
            |w| w.starts_with("[coordinator] /spec/pytorchReplicaSpecs/Master/replicas: ")
        )),
        "{warnings:?}"
    );

    // The coordinator message is longer than a terminal line: cut on the wire, whole in the
    // audit annotation.
    let full = decided(&example("rejected/two-masters.yaml"))
        .violations
        .iter()
        .find(|v| v.policy == "coordinator")
        .map(|v| v.render())
        .expect("a coordinator finding");
    assert!(full.chars().count() > 120, "{full}");
    assert!(
        warnings
            .iter()
            .all(|w| w.as_str().is_some_and(|w| w.chars().count() <= 120)),
        "{warnings:?}"
    );
    assert!(
        warnings
            .last()
            .and_then(Value::as_str)
            .is_some_and(|w| w.contains("full text in the audit log")),
        "{warnings:?}"
    );
    let audit_full = response["auditAnnotations"]["warnings-full"]
        .as_str()
        .expect("warnings-full audit annotation");
    assert!(audit_full.lines().any(|l| l == full), "{audit_full}");

    let long_name = decided(&example("rejected/long-name.yaml")).mutated;
    let response = server.admit("/validate", &create("w-2", &long_name)).await;
    assert_eq!(response["allowed"], true, "{response}");
    let audit = response["auditAnnotations"]["names"]
        .as_str()
        .expect("audit annotation");
    assert!(audit.starts_with("[names] /metadata/name: "), "{audit}");
    assert!(
        response.get("warnings").is_none(),
        "audit is silent: {response}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_training_kinds_are_allowed_untouched_by_both_webhooks() {
    let server = TestServer::start().await;
    let configmap = example("configmap.yaml");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3}});
    for object in [configmap, deployment] {
        for path in ["/mutate", "/validate"] {
            let response = server.admit(path, &create("k-1", &object)).await;
            assert_eq!(response["allowed"], true, "{path}: {response}");
            assert!(response.get("patch").is_none(), "{path}: {response}");
            assert!(response.get("warnings").is_none(), "{path}: {response}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_allowed_untouched_even_for_a_job_that_would_be_denied() {
    let server = TestServer::start().await;
    let job = example("rejected/two-masters.yaml");
    let delete = review("d-1", "DELETE", &Value::Null, Some(&job), false);
    for path in ["/mutate", "/validate"] {
        let response = server.admit(path, &delete).await;
        assert_eq!(response["allowed"], true, "{path}: {response}");
        assert!(response.get("patch").is_none(), "{path}: {response}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_is_checked_against_the_old_object() {
    let server = TestServer::start().await;
    let old = decided(&example("pytorchjob-gpu.yaml")).mutated;
    let mut new = old.clone();
    new["spec"]["runPolicy"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");

    // The same object is fine on CREATE: only the change is refused.
    let created = server.admit("/validate", &create("u-0", &new)).await;
    assert_eq!(created["allowed"], true, "{created}");

    let response = server
        .admit(
            "/validate",
            &review("u-1", "UPDATE", &new, Some(&old), false),
        )
        .await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403);
    let message = response["status"]["message"].as_str().expect("message");
    assert!(
        message.contains("[managed_by] /spec/runPolicy/managedBy: managedBy is immutable"),
        "{message}"
    );

    let unchanged = server
        .admit(
            "/validate",
            &review("u-2", "UPDATE", &old, Some(&old), false),
        )
        .await;
    assert_eq!(unchanged["allowed"], true, "{unchanged}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_requests_get_exactly_the_answer_of_real_ones() {
    let server = TestServer::start().await;
    let good = example("pytorchjob-gpu.yaml");
    let bad = decided(&example("rejected/two-masters.yaml")).mutated;
    for (path, object) in [
        ("/mutate", &good),
        ("/validate", &bad),
        ("/validate", &decided(&good).mutated),
    ] {
        let real = server
            .admit(path, &review("r-1", "CREATE", object, None, false))
            .await;
        let dry = server
            .admit(path, &review("r-1", "CREATE", object, None, true))
            .await;
        assert_eq!(dry, real, "{path}");
    }
}
