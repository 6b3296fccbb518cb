//! Limits on hostile input files: alias expansion (billion laughs), nesting in block and
//! flow style and in JSON, the number of documents in one file. Each is refused with exit 2
//! and a message naming the document and the limit, never a hang, a crash or an
//! out-of-memory.

use crate::support::*;

/// Nine levels of ten aliases each: 10^9 strings if expanded.
fn billion_laughs() -> String {
    let mut text =
        String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\na0: &a0 [\"lol\"]\n");
    for level in 1..=9 {
        let prev = level - 1;
        let refs = vec![format!("*a{prev}"); 10].join(", ");
        text.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
    }
    text
}

#[test]
fn refuses_a_billion_laughs_document_without_expanding_it() {
    let run = check_text("laughs.yaml", billion_laughs(), &[]);
    assert_exit(&run, 2);
    assert_stdout_has(
        &run,
        &["laughs.yaml#1", "UNREADABLE", "repetition limit exceeded"],
    );
}

#[test]
fn refuses_yaml_nested_deeply_in_block_style() {
    // 1,000 levels: deeper than the parser's limit, within the 3 MiB document limit.
    let depth = 1_000;
    let mut text = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata:\n");
    for level in 0..depth {
        text.push_str(&" ".repeat(level + 1));
        text.push_str("a:\n");
    }
    let run = check_text("block.yaml", text, &[]);
    assert_exit(&run, 2);
    assert_stdout_has(
        &run,
        &["block.yaml#1", "UNREADABLE", "recursion limit exceeded"],
    );
}

#[test]
fn refuses_json_nested_past_the_parser_limit() {
    let depth = 100_000;
    let text = format!(
        "{{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"data\": {}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let run = check_text("deep.json", text, &[]);
    assert_exit(&run, 2);
    assert_stdout_has(&run, &["deep.json#1", "recursion limit exceeded"]);
}

#[test]
fn refuses_a_file_with_more_documents_than_the_limit_and_says_how_many() {
    let max = gangplank::review::documents::MAX_DOCUMENTS_PER_FILE;
    let doc = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n";
    let run = check_text("many.yaml", doc.repeat(max + 1), &[]);
    assert_exit(&run, 2);
    assert_stdout_has(
        &run,
        &[
            "many.yaml",
            &format!("{} documents", max + 1),
            &format!("at most {max}"),
        ],
    );
}

#[test]
fn reads_a_file_with_as_many_documents_as_the_limit() {
    let max = gangplank::review::documents::MAX_DOCUMENTS_PER_FILE;
    let doc = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n";
    let run = check_text("many.yaml", doc.repeat(max), &[]);
    assert_exit(&run, 0);
}

#[test]
fn denies_a_job_with_more_containers_than_are_read_naming_the_field() {
    use gangplank::job::view::MAX_CONTAINERS;
    let containers: String = (0..=MAX_CONTAINERS)
        .map(|i| {
            format!(
                "            - {{name: c{i}, image: \"registry.example.com/x@sha256:{}\"}}\n",
                "0".repeat(64)
            )
        })
        .collect();
    let job = format!(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {{name: wide, namespace: ml}}\nspec:\n  pytorchReplicaSpecs:\n    Master:\n      replicas: 1\n      template:\n        spec:\n          containers:\n{containers}"
    );
    let run = check_text("wide.yaml", job, &[]);
    assert_exit(&run, 1);
    assert_denied_at(
        &run,
        "/spec/pytorchReplicaSpecs/Master/template/spec/containers",
    );
    assert_stdout_has(&run, &[&format!("has {} containers", MAX_CONTAINERS + 1)]);
}
