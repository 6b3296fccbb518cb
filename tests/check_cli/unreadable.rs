//! Input that cannot be read: exit 2 and a message naming the document, never a panic.
//! Objects gangplank does not know are not errors: they are skipped.

use tempfile::TempDir;

use crate::support::*;

#[test]
fn rejects_malformed_yaml_with_file_and_line() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n bad: indent\n";
    let run = check_text("bad.yaml", text, &[]);
    assert_exit(&run, 2);
    assert_stdout_has(
        &run,
        &[
            "bad.yaml#1",
            "bad.yaml#2",
            "UNREADABLE",
            "invalid YAML at line 9",
        ],
    );
}

#[test]
fn rejects_malformed_json_with_file_and_line() {
    let text = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {\"name\": \"a\",}\n}\n";
    let run = check_text("bad.json", text, &[]);
    assert_exit(&run, 2);
    assert_stdout_has(&run, &["bad.json#1", "invalid JSON at line 4"]);
}

#[test]
fn rejects_a_document_that_is_a_list() {
    let run = check_text("list.yaml", "- apiVersion: v1\n- kind: ConfigMap\n", &[]);
    assert_exit(&run, 2);
    assert_stdout_has(&run, &["list.yaml#1", "not a Kubernetes object", "list"]);
}

#[test]
fn rejects_a_document_that_is_a_scalar() {
    let run = check_text("scalar.yaml", "just some text\n", &[]);
    assert_exit(&run, 2);
    assert_stdout_has(
        &run,
        &["scalar.yaml#1", "not a Kubernetes object", "string"],
    );
}

#[test]
fn rejects_objects_without_api_version_or_kind() {
    for text in [
        "kind: PyTorchJob\nmetadata: {name: a}\n",
        "apiVersion: kubeflow.org/v1\nmetadata: {name: a}\n",
    ] {
        let run = check_text("untyped.yaml", text, &[]);
        assert_exit(&run, 2);
        assert_stdout_has(
            &run,
            &["untyped.yaml#1", "apiVersion and kind are required"],
        );
    }
}

#[test]
fn refuses_a_5_mb_document_naming_the_byte_limit() {
    let blob = "x".repeat(5 * 1024 * 1024);
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n  blob: {blob}\n"
    );
    let run = check_text("big.yaml", text, &[]);
    assert_exit(&run, 2);
    assert_stdout_has(&run, &["big.yaml#1", "over the 3145728 byte limit"]);
}

#[test]
fn rejects_a_file_that_is_not_utf8() {
    let run = check_text(
        "latin1.yaml",
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n",
        &[],
    );
    assert_exit(&run, 2);
    assert_stdout_has(&run, &["latin1.yaml", "not UTF-8"]);
}

#[test]
fn rejects_a_missing_file() {
    let dir = TempDir::new().expect("a temporary directory");
    let missing = dir.path().join("no-such-job.yaml");
    let run = check(&[missing.to_str().expect("UTF-8 path")], None);
    assert_exit(&run, 2);
    assert_stdout_has(&run, &["no-such-job.yaml", "cannot read"]);
}

#[test]
fn refuses_deeply_nested_yaml_without_overflowing_the_stack() {
    let depth = 1000;
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\ndata: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let run = check_text("deep.yaml", text, &[]);
    assert_exit(&run, 2);
    assert_stdout_has(&run, &["deep.yaml#1", "nests deeper than 128 levels"]);
}

#[test]
fn one_unreadable_document_does_not_hide_the_others() {
    let job = std::fs::read_to_string(example("jaxjob.yaml")).expect("example");
    let run = check_text("mixed.yaml", format!("{job}---\nkind: [\n"), &[]);
    assert_exit(&run, 2);
    assert_stdout_has(
        &run,
        &["mixed.yaml#1", "ALLOWED", "mixed.yaml#2", "UNREADABLE"],
    );
}

#[test]
fn skips_unknown_kinds_and_api_versions() {
    let text = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\napiVersion: kubeflow.org/v1beta1\nkind: PyTorchJob\nmetadata: {name: old}\n";
    let run = check_text("unknown.yaml", text, &[]);
    assert_exit(&run, 0);
    assert_stdout_has(
        &run,
        &[
            "unknown.yaml#1",
            "unknown.yaml#2",
            "SKIPPED",
            "example.com/v1/Widget",
            "kubeflow.org/v1beta1/PyTorchJob",
        ],
    );
}

/// A snapshot item that cannot be read (a Node with a malformed allocatable, a claim whose
/// access modes are not a list, a NetworkPolicy with a bad selector) is a note on stderr and
/// left out: the job is still decided on the rest, never exit 2.
#[test]
fn unreadable_snapshot_items_are_noted_and_left_out() {
    let dir = TempDir::new().expect("a temporary directory");
    let snapshot = dir.path().join("cluster.yaml");
    std::fs::write(
        &snapshot,
        r#"apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: broken}, status: {allocatable: 5}}
- {apiVersion: v1, kind: Node, metadata: {name: gpu-0}, status: {allocatable: {cpu: "96", memory: 1000Gi, pods: "110", nvidia.com/gpu: "8"}}}
- {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: odd, namespace: default}, spec: {accessModes: ReadWriteOnce}}
- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: odd, namespace: default}, spec: {podSelector: {matchLabels: [a]}}}
"#,
    )
    .expect("write snapshot");
    let snapshot = snapshot.to_str().expect("UTF-8 path").to_string();
    let run = check(
        &["--cluster", &snapshot, &example("pytorchjob-gpu.yaml")],
        None,
    );
    assert_ne!(run.code, 2, "{}", run.stderr);
    for needle in [
        "note: --cluster: ",
        "item 0 (Node) cannot be read",
        "PersistentVolumeClaim default/odd: /spec/accessModes is not a list of access modes; ignored",
        "NetworkPolicy default/odd: spec.podSelector matchLabels is not an object; ignored",
    ] {
        assert!(run.stderr.contains(needle), "{needle:?} in {}", run.stderr);
    }
}
