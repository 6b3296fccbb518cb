//! `gangplank check` on UPDATE AdmissionReviews carrying `oldObject`: what a scale-down, a
//! label edit on an old job and a finalizer removal on a deleted job get (the policy cases of
//! `policies/tests/updates.yaml` cover the same ground through `gangplank test`).

use gangplank::policy::PolicySet;
use gangplank::review::{self, Input};
use serde_json::{json, Value};

use crate::support::*;

/// The job as stored after gangplank admitted examples/pytorchjob-gpu.yaml (1 Master + 8
/// Workers): minAvailable 9, recorded as derived.
fn stored() -> Value {
    let text = std::fs::read_to_string(example("pytorchjob-gpu.yaml")).expect("example");
    let job: Value = yaml_serde::from_str(&text).expect("example parses");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let set = PolicySet::load(&dir).expect("policies load");
    review::review(&set, &Input::create(job, "default"))
        .expect("decides")
        .mutated
}

fn update(old: &Value, new: &Value) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "UPDATE", "namespace": "vision",
            "name": old["metadata"]["name"], "object": new, "oldObject": old},
    })
    .to_string()
}

#[test]
fn a_worker_scale_down_recomputes_the_minavailable_gangplank_wrote() {
    let old = stored();
    assert_eq!(
        old["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"],
        9
    );
    let mut new = old.clone();
    new["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(4);
    let run = check_text("scale-down.json", update(&old, &new), &["-o", "json"]);
    assert_exit(&run, 0);
    let report = parse_json(&run);
    let patch = report[0]["decision"]["patch"].to_string();
    assert!(
        patch.contains(r#""path":"/spec/runPolicy/schedulingPolicy/minAvailable","value":5"#),
        "{patch}\n{}",
        run.output()
    );
}

#[test]
fn a_finalizer_removal_on_a_deleted_job_is_not_checked() {
    let mut old = stored();
    old["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    old["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    // A policy tightened since: this template now violates gang_scheduling.
    old["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] =
        json!("default-scheduler");
    let mut new = old.clone();
    new["metadata"]["finalizers"] = json!([]);
    let run = check_text("finalizer.json", update(&old, &new), &[]);
    assert_exit(&run, 0);
    assert_stdout_has(&run, &["SKIPPED", "being deleted"]);
}

#[test]
fn a_spec_change_on_a_deleted_job_is_checked_like_any_update() {
    let mut old = stored();
    old["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    old["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    let mut new = old.clone();
    new["metadata"]["finalizers"] = json!([]);
    // The deletion in progress is no licence to take the job off its gang scheduler.
    new["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] =
        json!("default-scheduler");
    let run = check_text("rewrite.json", update(&old, &new), &[]);
    assert_exit(&run, 1);
    assert_stdout_has(&run, &["DENIED", "gang_scheduling"]);
}

#[test]
fn an_old_violation_left_untouched_by_a_label_edit_only_warns() {
    let mut old = stored();
    old["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] =
        json!("default-scheduler");
    let mut new = old.clone();
    new["metadata"]["labels"]["owner"] = json!("alice");
    let run = check_text("label.json", update(&old, &new), &[]);
    assert_exit(&run, 0);
    assert_stdout_has(&run, &["ALLOWED", "already so before this update"]);
}

/// The controller's own release stamp written into a pod template (a date to come would hold
/// the gang watchdog off): removed, on CREATE and UPDATE alike, with exactly one patch
/// operation and a warning that says so.
#[test]
fn a_release_stamp_in_a_pod_template_is_removed_on_create_and_update_saying_so() {
    let old = stored();
    let mut forged = old.clone();
    forged["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] =
        json!({"gangplank.dev/released-at": "2999-01-01T00:00:00Z"});
    let create = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE", "namespace": "vision",
            "name": old["metadata"]["name"], "object": forged},
    })
    .to_string();
    let expected = json!([{"op": "remove",
        "path": "/spec/pytorchReplicaSpecs/Worker/template/metadata/annotations/gangplank.dev~1released-at"}]);
    for (name, review) in [
        ("create.json", create),
        ("update.json", update(&old, &forged)),
    ] {
        let run = check_text(name, &review, &["-o", "json"]);
        assert_exit(&run, 0);
        let decision = &parse_json(&run)[0]["decision"];
        assert_eq!(decision["patch"], expected, "{name}\n{}", run.output());
        let told = decision["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| {
                v["policy"] == "annotations"
                    && v["action"] == "warn"
                    && v["msg"]
                        .as_str()
                        .is_some_and(|m| m.contains("not the Worker template's"))
            });
        assert!(told, "{name}: {decision:#}");
        let text = check_text(name, &review, &[]);
        assert_stdout_has(
            &text,
            &[
                "warn  [annotations]",
                "removed: gangplank.dev/released-at is the controller's own stamp",
                r#"{"op":"remove","path":"/spec/pytorchReplicaSpecs/Worker/template/metadata/annotations/gangplank.dev~1released-at"}"#,
            ],
        );
    }
}
