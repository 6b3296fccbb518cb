//! Output formats (`-o yaml`, `-o json`), stdin, and AdmissionReview input.

use serde_json::{json, Value};

use crate::support::*;

#[test]
fn yaml_output_is_the_mutated_objects_as_multi_document_yaml() {
    let run = check(
        &[
            "-o",
            "yaml",
            &example("pytorchjob-gpu.yaml"),
            &example("configmap.yaml"),
        ],
        None,
    );
    assert_exit(&run, 0);
    let docs = parse_yaml_docs(&run.stdout);
    assert_eq!(docs.len(), 2, "{}", run.output());
    let job = &docs[0];
    for replica in ["Master", "Worker"] {
        let ptr = format!("/spec/pytorchReplicaSpecs/{replica}/template/spec/schedulerName");
        assert_eq!(
            job.pointer(&ptr),
            Some(&json!("volcano")),
            "{ptr}\n{}",
            run.output()
        );
    }
    assert_eq!(
        job.pointer("/spec/runPolicy/schedulingPolicy/minAvailable"),
        Some(&json!(9)),
        "1 Master + 8 Workers make a gang of 9"
    );
    assert_eq!(docs[1].get("kind"), Some(&json!("ConfigMap")));
    assert!(
        run.stderr.contains("ALLOWED"),
        "the report goes to stderr\n{}",
        run.output()
    );
}

#[test]
fn json_output_is_one_json_report_for_every_document() {
    let run = check(
        &[
            "-o",
            "json",
            &example("sweep-multi-document.yaml"),
            &example("configmap.yaml"),
        ],
        None,
    );
    assert_exit(&run, 0);
    let report = parse_json(&run);
    let items = report.as_array().expect("the JSON report is a list");
    assert_eq!(items.len(), 3, "{}", run.output());
    assert!(
        items.iter().all(|i| i["result"] == "decided"),
        "{}",
        run.output()
    );
    assert_eq!(items[0]["decision"]["mutated"]["kind"], "PyTorchJob");
    assert!(
        items[2]["decision"]["skipped"].is_string(),
        "{}",
        run.output()
    );
}

#[test]
fn reads_a_manifest_from_stdin() {
    let job = std::fs::read(example("jaxjob.yaml")).expect("examples/jaxjob.yaml");
    let run = check(&["-"], Some(&job));
    assert_exit(&run, 0);
    assert_stdout_has(
        &run,
        &["<stdin>#1", "JAXJob nlp/t5x-base-pretrain", "ALLOWED"],
    );
}

#[test]
fn expands_a_kind_list_into_its_items() {
    let job = std::fs::read_to_string(example("xgboostjob.yaml")).expect("example");
    let job: Value = yaml_serde::from_str(&job).expect("the example is YAML");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [job, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]});
    let run = check_text("list.json", list.to_string(), &[]);
    assert_exit(&run, 0);
    assert_stdout_has(
        &run,
        &[
            "list.json#1/items/0",
            "XGBoostJob analytics/churn-xgboost",
            "list.json#1/items/1",
            "SKIPPED",
        ],
    );
}

fn admission_review(operation: &str) -> Value {
    let text = std::fs::read_to_string(example("pytorchjob-elastic.yaml")).expect("example");
    let job: Value = yaml_serde::from_str(&text).expect("the example is YAML");
    let object = if operation == "DELETE" {
        Value::Null
    } else {
        job.clone()
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3b3e4a5c-2f6e-4c51-9d0e-6a4e0f1b7c21",
            "kind": {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"},
            "resource": {"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"},
            "name": "gpt2-finetune-elastic",
            "namespace": "nlp",
            "operation": operation,
            "userInfo": {"username": "alice@example.com"},
            "object": object,
            "oldObject": job,
        }
    })
}

#[test]
fn checks_an_admission_review_update() {
    let run = check_text("review.json", admission_review("UPDATE").to_string(), &[]);
    assert_exit(&run, 0);
    assert_stdout_has(
        &run,
        &[
            "PyTorchJob nlp/gpt2-finetune-elastic",
            "ALLOWED",
            "schedulerName",
        ],
    );
}

#[test]
fn skips_an_admission_review_delete() {
    let run = check_text("review.json", admission_review("DELETE").to_string(), &[]);
    assert_exit(&run, 0);
    assert_stdout_has(&run, &["SKIPPED", "DELETE"]);
}

/// `--profile N`: every output rule of every enabled policy with its median, the sum of the
/// rules alone, and the whole review as a request runs it; the verdict output is unchanged.
#[test]
fn profile_lists_every_rule_the_total_and_the_whole_review() {
    let job = example("pytorchjob-gpu.yaml");
    let run = check(&["--profile", "3", &job], None);
    assert_eq!(run.code, 0, "{}", run.output());
    let header = run
        .stderr
        .lines()
        .find(|l| l.starts_with("profile "))
        .unwrap_or_else(|| panic!("no profile header: {}", run.stderr));
    assert!(
        header.contains("median of 3 runs per rule; total "),
        "{header}"
    );
    for rule in [
        "containers.violation",
        "gang_scheduling.mutation",
        "rendezvous_env.violation",
        "run_policy.warning",
    ] {
        assert!(
            run.stderr.lines().any(|l| l.trim_end().ends_with(rule)),
            "{rule} missing: {}",
            run.stderr
        );
    }
    assert!(
        run.stderr
            .lines()
            .any(|l| l.contains("whole review as a request runs it")),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("ALLOWED"), "{}", run.stdout);
}
