//! `gangplank test --coverage`: the shipped suites evaluate every rule of the shipped policies,
//! and the report names a rule no test reaches (a fixture policy directory).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");

/// `gangplank test ARGS...` with no `GANGPLANK_*` variable of the caller's environment.
fn gangplank_test(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gangplank"));
    cmd.arg("test").args(args);
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("GANGPLANK_")) {
        cmd.env_remove(key);
    }
    cmd.output().expect("gangplank runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("the coverage report was written");
    serde_json::from_str(&text).expect("the coverage report is JSON")
}

/// Every rule definition of the report as `file: name (line N)`, with what `pick` says of it.
fn rules_where(report: &Value, pick: impl Fn(&Value) -> Option<String>) -> Vec<String> {
    let files = report["files"].as_array().expect("files");
    files
        .iter()
        .flat_map(|f| {
            let path = f["path"].as_str().unwrap_or_default().to_string();
            let rules = f["rules"].as_array().cloned().unwrap_or_default();
            let pick = &pick;
            rules.into_iter().filter_map(move |r| {
                pick(&r).map(|what| format!("{path}: {} (line {}){what}", r["name"], r["line"]))
            })
        })
        .collect()
}

#[test]
fn shipped_suites_evaluate_every_rule_of_the_shipped_policies() {
    let dir = TempDir::new().expect("tempdir");
    let json = dir.path().join("coverage.json");
    let out = gangplank_test(&[POLICIES, "--coverage-json", json.to_str().expect("utf-8")]);
    let text = stdout(&out);
    assert!(out.status.success(), "the shipped suites fail:\n{text}");
    let report = read_json(&json);
    let paths: Vec<&str> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert!(paths.contains(&"capacity.rego"), "{paths:?}");
    assert!(
        paths.iter().any(|p| p.starts_with("lib/")),
        "lib/ is shipped code and counts: {paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.starts_with("tests/")),
        "test modules are not counted: {paths:?}"
    );
    let unreached = rules_where(&report, |r| {
        (r["reached"] == Value::Bool(false)).then(String::new)
    });
    assert!(
        unreached.is_empty(),
        "no test of policies/tests/ evaluates these rules; add a case that exercises each:\n{}",
        unreached.join("\n")
    );
    let partial = rules_where(&report, |r| {
        (r["covered"] == Value::Bool(false))
            .then(|| format!(": lines {} not evaluated", r["not_covered_lines"]))
    });
    assert!(
        partial.is_empty(),
        "no test of policies/tests/ evaluates these lines (a condition never met, a message never built); add a case that does:\n{}",
        partial.join("\n")
    );
    assert_eq!(report["covered"], report["counted"], "{text}");
    assert!(
        text.contains("rule definitions reached"),
        "the table ends with the rule count:\n{text}"
    );
}

const DEMO_POLICY: &str = r#"package gangplank.policies.demo

import rego.v1

meta := {"title": "Demo", "description": "Short names, few replicas.", "action": "deny"}

violation contains {"path": "/metadata/name", "msg": "the name is longer than 10 characters"} if {
	count(input.object.metadata.name) > 10
}

violation contains {"path": "/spec", "msg": msg} if {
	some r in input.job.replicas
	r.replicas > 4
	msg := too_many(r)
}

too_many(r) := sprintf("%s has %d replicas, at most 4", [r.type, r.replicas])
"#;

const DEMO_CASES: &str = r#"fixtures:
  job:
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata: {name: a-very-long-name, namespace: default}
    spec:
      pytorchReplicaSpecs:
        Master:
          replicas: 1
          template: {spec: {containers: [{name: pytorch, image: example/train:1}]}}
cases:
- note: a long name is refused
  object: {fixture: job}
  expect:
    allowed: false
    violations: [{policy: demo, message: longer than 10}]
- note: a short name is allowed
  object: {fixture: job, merge: {metadata: {name: short}}}
  expect: {allowed: true}
"#;

const DEMO_REGO_TEST: &str = r#"package gangplank.demo_test

import rego.v1

import data.gangplank.policies.demo

test_too_many_names_the_type if {
	demo.too_many({"type": "Worker", "replicas": 5}) == "Worker has 5 replicas, at most 4"
}
"#;

/// A policy directory with the demo policy, its cases and (with `rego_test`) a Rego test
/// that calls `too_many`, which no case reaches.
fn demo_dir(extra_case: &str) -> TempDir {
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir(dir.path().join("tests")).expect("tests/");
    std::fs::write(dir.path().join("demo.rego"), DEMO_POLICY).expect("policy");
    std::fs::write(
        dir.path().join("tests/demo.yaml"),
        format!("{DEMO_CASES}{extra_case}"),
    )
    .expect("cases");
    std::fs::write(dir.path().join("tests/demo_test.rego"), DEMO_REGO_TEST).expect("rego test");
    dir
}

#[test]
fn coverage_names_the_rule_no_test_reaches_and_the_lines_no_test_evaluates() {
    let dir = demo_dir("");
    let json = dir.path().join("coverage.json");
    let root = dir.path().to_str().expect("utf-8");
    // Only the YAML cases: none has more than 4 replicas.
    let out = gangplank_test(&[
        root,
        "--filter",
        "demo.yaml",
        "--coverage-json",
        json.to_str().expect("utf-8"),
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("2 tests: 2 passed"), "{text}");
    assert!(
        text.contains("coverage (interpreter, 2 tests)"),
        "the table follows the results:\n{text}"
    );
    assert!(
        text.contains("too_many (line 17): NOT REACHED"),
        "the table names the rule no test reaches:\n{text}"
    );
    assert!(
        text.contains("violation (line 11): lines 11, 14 not covered"),
        "and the lines of a rule no test made fire:\n{text}"
    );
    let report = read_json(&json);
    assert_eq!(report["tests"], 2);
    let files = report["files"].as_array().expect("files");
    assert_eq!(
        files.len(),
        1,
        "only the policy counts, not its test module"
    );
    let rules = files[0]["rules"].as_array().expect("rules");
    let by_line = |line: u64| {
        rules
            .iter()
            .find(|r| r["line"] == line)
            .unwrap_or_else(|| panic!("no rule at line {line}: {rules:?}"))
    };
    assert_eq!(by_line(5)["name"], "meta");
    assert_eq!(
        by_line(5)["covered"],
        true,
        "compiling the set evaluates meta"
    );
    assert_eq!(by_line(7)["covered"], true, "the long name case fires it");
    assert_eq!(by_line(11)["reached"], true);
    assert_eq!(by_line(11)["covered"], false);
    assert_eq!(
        by_line(11)["not_covered_lines"],
        serde_json::json!([11, 14])
    );
    assert_eq!(by_line(17)["name"], "too_many");
    assert_eq!(by_line(17)["reached"], false);
    assert_eq!(by_line(17)["not_covered_lines"], serde_json::json!([17]));

    // Every test: the Rego test reaches too_many.
    let out = gangplank_test(&[root, "--coverage-json", json.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stdout(&out));
    let report = read_json(&json);
    let unreached = rules_where(&report, |r| {
        (r["reached"] == Value::Bool(false)).then(String::new)
    });
    assert!(unreached.is_empty(), "{unreached:?}");
}

#[test]
fn coverage_leaves_the_verdicts_as_they_are() {
    let dir = demo_dir(
        r#"- note: a wrong expectation still fails with coverage on
  object: {fixture: job}
  expect: {allowed: true}
"#,
    );
    let root = dir.path().to_str().expect("utf-8");
    let out = gangplank_test(&[root, "--coverage"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL  tests/demo.yaml: a wrong expectation still fails with coverage on"),
        "{text}"
    );
    assert!(text.contains("4 tests: 3 passed, 1 failed"), "{text}");
    assert!(text.contains("coverage (interpreter, 4 tests)"), "{text}");
}
