//! Training jobs whose structure is wrong: a verdict that names the field, never a crash.

use crate::support::*;

/// The `structure` policy turns what the JobView could not read into a denial whose
/// pointer is exactly `path` (rendered `[policy] path: message`).
fn assert_structure_problem(yaml: &str, path: &str) {
    assert_denied_at(&check_text("job.yaml", yaml, &[]), &format!(" {path}: "));
}

const JOB_HEAD: &str =
    "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: broken, namespace: ml}\n";
const POD: &str = "template: {spec: {containers: [{name: pytorch, image: \"registry.example.com/ml/pytorch:2.4.0@sha256:897f10e5f6f63d68a5e340c9ce4546f4720b48ee657e891e18c2b7515b5566c5\"}]}}";

#[test]
fn denies_a_job_without_spec() {
    assert_structure_problem(JOB_HEAD, "/spec");
}

#[test]
fn denies_replicas_written_as_a_string() {
    let job = format!("{JOB_HEAD}spec:\n  pytorchReplicaSpecs:\n    Master: {{replicas: \"1\", {POD}}}\n    Worker: {{replicas: \"2\", {POD}}}\n");
    assert_structure_problem(&job, "/spec/pytorchReplicaSpecs/Worker/replicas");
}

#[test]
fn denies_replica_keys_that_differ_only_in_case() {
    let job = format!("{JOB_HEAD}spec:\n  pytorchReplicaSpecs:\n    Master: {{replicas: 1, {POD}}}\n    Worker: {{replicas: 2, {POD}}}\n    worker: {{replicas: 2, {POD}}}\n");
    assert_structure_problem(&job, "/spec/pytorchReplicaSpecs/worker");
}

#[test]
fn denies_a_null_replica_spec() {
    let job = format!("{JOB_HEAD}spec:\n  pytorchReplicaSpecs:\n    Master: null\n    Worker: {{replicas: 2, {POD}}}\n");
    assert_structure_problem(&job, "/spec/pytorchReplicaSpecs/Master");
}
