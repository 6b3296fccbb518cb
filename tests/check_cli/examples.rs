//! The shipped examples: the good ones are allowed, each rejected one is denied at its field.

use crate::support::*;

#[test]
fn allows_every_good_example() {
    let files = good_examples();
    assert!(
        files.len() >= 9,
        "expected the good examples, found {files:?}"
    );
    let args: Vec<&str> = files.iter().filter_map(|p| p.to_str()).collect();
    let run = check(&args, None);
    assert_exit(&run, 0);
    assert!(!run.stdout.contains("DENIED"), "{}", run.output());
    assert_stdout_has(&run, &["ALLOWED", "SKIPPED"]);
}

#[test]
fn reports_each_document_of_a_multi_document_file() {
    let run = check(&[&example("sweep-multi-document.yaml")], None);
    assert_exit(&run, 0);
    assert_stdout_has(
        &run,
        &["sweep-multi-document.yaml#1", "sweep-multi-document.yaml#2"],
    );
}

#[test]
fn skips_a_configmap_untouched() {
    let run = check(&[&example("configmap.yaml")], None);
    assert_exit(&run, 0);
    assert_stdout_has(&run, &["SKIPPED", "not a training job (v1/ConfigMap)"]);
    assert!(!run.stdout.contains("patch:"), "{}", run.output());
}

#[test]
fn rejects_pytorchjob_with_two_masters() {
    assert_example_denied_at(
        "rejected/two-masters.yaml",
        "/spec/pytorchReplicaSpecs/Master/replicas",
    );
}

#[test]
fn rejects_image_without_digest() {
    assert_example_denied_at(
        "rejected/unpinned-image.yaml",
        "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0",
    );
}

#[test]
fn rejects_multi_pod_job_on_default_scheduler() {
    assert_example_denied_at(
        "rejected/default-scheduler.yaml",
        "/spec/pytorchReplicaSpecs/Worker/template/spec/schedulerName",
    );
}

#[test]
fn rejects_mpijob_with_zero_workers() {
    assert_example_denied_at(
        "rejected/zero-workers.yaml",
        "/spec/mpiReplicaSpecs/Worker/replicas",
    );
}

#[test]
fn rejects_job_name_that_makes_pod_names_too_long() {
    assert_example_denied_at("rejected/long-name.yaml", "/metadata/name");
}

#[test]
fn every_rejected_example_says_why_and_is_denied() {
    let dir = example("rejected");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/rejected/ should exist") {
        let path = entry.expect("readable directory entry").path();
        let text = std::fs::read_to_string(&path).expect("a readable example");
        assert!(
            text.starts_with("# REJECTED: "),
            "{} should open with a `# REJECTED: <why>` comment",
            path.display()
        );
        let run = check(&[path.to_str().expect("UTF-8 path")], None);
        assert_exit(&run, 1);
        count += 1;
    }
    assert!(count >= 5, "expected the rejected examples in {dir}");
}

/// Every document under examples/ with its verdict and the policies it violates: a new
/// example must be added here, and a verdict that changes fails by name.
const VERDICTS: &[(&str, &str, &[&str])] = &[
    ("configmap.yaml#1", "SKIPPED", &[]),
    ("jaxjob.yaml#1", "ALLOWED", &[]),
    ("mpijob-v1-horovod.yaml#1", "ALLOWED", &[]),
    ("mpijob-v2beta1.yaml#1", "ALLOWED", &[]),
    ("paddlejob.yaml#1", "ALLOWED", &[]),
    ("pytorchjob-elastic.yaml#1", "ALLOWED", &[]),
    ("pytorchjob-gpu.yaml#1", "ALLOWED", &[]),
    (
        "rejected/default-scheduler.yaml#1",
        "DENIED",
        &["gang_scheduling"],
    ),
    ("rejected/long-name.yaml#1", "DENIED", &["names"]),
    (
        "rejected/trainjob-no-gang.yaml#1",
        "ALLOWED",
        &["trainer_gang"],
    ),
    (
        "rejected/trainjob-no-gang.yaml#2",
        "DENIED",
        &["trainer_gang"],
    ),
    ("rejected/two-masters.yaml#1", "DENIED", &["coordinator"]),
    ("rejected/unpinned-image.yaml#1", "DENIED", &["images"]),
    ("rejected/zero-workers.yaml#1", "DENIED", &["coordinator"]),
    ("sweep-multi-document.yaml#1", "ALLOWED", &[]),
    ("sweep-multi-document.yaml#2", "ALLOWED", &[]),
    ("tfjob-parameter-server.yaml#1", "ALLOWED", &[]),
    ("trainjob-volcano.yaml#1", "ALLOWED", &[]),
    ("trainjob-volcano.yaml#2", "ALLOWED", &[]),
    ("xgboostjob.yaml#1", "ALLOWED", &[]),
];

#[test]
fn each_example_document_gets_its_verdict_and_only_its_violations() {
    let run = check(&[&example(""), "-o", "json"], None);
    assert_exit(&run, 1);
    let report = parse_json(&run);
    let items = report.as_array().expect("the JSON report is a list");
    let mut seen = Vec::new();
    for item in items {
        let source = item["source"].as_str().unwrap_or_default();
        let rel = source.rsplit_once("examples/").map_or(source, |(_, r)| r);
        let decision = &item["decision"];
        let violations = decision["violations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let verdict = if decision["skipped"].is_string() {
            "SKIPPED"
        } else if violations.iter().any(|v| v["action"] == "deny") {
            "DENIED"
        } else {
            "ALLOWED"
        };
        let mut policies: Vec<&str> = violations
            .iter()
            .filter_map(|v| v["policy"].as_str())
            .collect();
        policies.dedup();
        let Some((_, want, want_policies)) = VERDICTS.iter().find(|(f, _, _)| *f == rel) else {
            panic!("{rel}: {verdict} {policies:?}, but it is not in VERDICTS; add it");
        };
        assert_eq!(
            (verdict, policies.as_slice()),
            (*want, *want_policies),
            "{rel}"
        );
        seen.push(rel.to_string());
    }
    for (file, _, _) in VERDICTS {
        assert!(
            seen.iter().any(|s| s == file),
            "{file} is in VERDICTS but was not checked"
        );
    }
}

fn assert_example_denied_at(file: &str, path: &str) {
    assert_denied_at(&check(&[&example(file)], None), path);
}
