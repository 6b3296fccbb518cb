//! Audit-first and exemptions through `gangplank check`: `--default-action`
//! (GANGPLANK_DEFAULT_ACTION), params.yaml `defaultAction` and per-policy promotion,
//! namespace and object exemptions, and time-limited exceptions in `exceptions/`, on a copy
//! of the shipped policies. The job is examples/rejected/two-masters.yaml (namespace `nlp`),
//! which only the `coordinator` policy refuses.

use std::path::Path;

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::support::*;

const TWO_MASTERS: &str = "rejected/two-masters.yaml";
const MASTERS: &str = "/spec/pytorchReplicaSpecs/Master/replicas";

/// A copy of the shipped policies whose params.yaml has `extra` merged over it (top-level
/// keys replaced, `policies` entries added), with `exceptions` as `exceptions/<name>`.
fn policies_with(extra: Value, exceptions: &[(&str, &str)]) -> TempDir {
    let dir = TempDir::new().expect("a temporary directory");
    copy_tree(Path::new(POLICIES), dir.path());
    let params_path = dir.path().join("params.yaml");
    let text = std::fs::read_to_string(&params_path).expect("params.yaml");
    let mut params: Value = yaml_serde::from_str(&text).expect("params.yaml parses");
    for (key, value) in extra.as_object().expect("an object").clone() {
        match (key.as_str(), value) {
            ("policies", Value::Object(entries)) => {
                let policies = params["policies"].as_object_mut().expect("policies");
                policies.extend(entries);
            }
            (_, value) => params[key] = value,
        }
    }
    std::fs::write(&params_path, params.to_string()).expect("write params.yaml");
    if !exceptions.is_empty() {
        let dir = dir.path().join("exceptions");
        std::fs::create_dir_all(&dir).expect("mkdir exceptions");
        for (name, text) in exceptions {
            std::fs::write(dir.join(name), text).expect("write exception");
        }
    }
    dir
}

/// Policies, params.yaml and lib/: what the server loads (tests/ left out).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read policies") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("a name").to_owned();
        if path.is_dir() {
            if name != "tests" {
                copy_tree(&path, &to.join(&name));
            }
        } else {
            std::fs::copy(&path, to.join(&name)).expect("copy");
        }
    }
}

fn check_in(dir: &TempDir, args: &[&str], env: &[(&str, &str)]) -> Run {
    let policies = dir.path().to_str().expect("UTF-8 path");
    let example = example(TWO_MASTERS);
    let args: Vec<&str> = args.iter().copied().chain([example.as_str()]).collect();
    check_policies(policies, &args, None, env)
}

/// The one finding of `coordinator` in `-o json` output.
fn coordinator_finding(run: &Run) -> Value {
    let out = parse_json(run);
    let found: Vec<&Value> = out[0]["decision"]["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter(|v| v["policy"] == "coordinator")
        .collect();
    assert_eq!(found.len(), 1, "{}", run.output());
    found[0].clone()
}

fn exception(name: &str, namespaces: &str, expires: &str) -> String {
    format!(
        "name: {name}\npolicies: [coordinator]\nmatch:\n  namespaces: [{namespaces}]\nreason: two masters while the launcher is rewritten (ML-42)\nexpires: {expires}\n"
    )
}

#[test]
fn default_action_audit_reports_every_finding_and_refuses_none() {
    let denied = check(&[&example(TWO_MASTERS)], None);
    assert_denied_at(&denied, MASTERS);
    let job = example(TWO_MASTERS);
    for (args, env) in [
        (vec!["--default-action", "audit", job.as_str()], vec![]),
        (
            vec![job.as_str()],
            vec![("GANGPLANK_DEFAULT_ACTION", "audit")],
        ),
    ] {
        let run = check_with_env(&args, None, &env);
        assert_exit(&run, 0);
        assert_stdout_has(&run, &["ALLOWED"]);
        assert!(
            run.stdout
                .lines()
                .any(|l| l.trim_start().starts_with("audit [coordinator]") && l.contains(MASTERS)),
            "the finding is reported at audit level\n{}",
            run.output()
        );
    }
}

#[test]
fn a_policy_promoted_in_params_yaml_denies_whatever_the_default_action() {
    let dir = policies_with(
        json!({"defaultAction": "audit", "policies": {"coordinator": {"action": "deny"}}}),
        &[],
    );
    assert_denied_at(&check_in(&dir, &[], &[]), MASTERS);
    assert_denied_at(&check_in(&dir, &["--default-action", "warn"], &[]), MASTERS);
    // Not promoted: params.yaml's defaultAction applies, and the flag goes above it.
    let audit = policies_with(json!({"defaultAction": "audit"}), &[]);
    let run = check_in(&audit, &["-o", "json"], &[]);
    assert_exit(&run, 0);
    assert_eq!(coordinator_finding(&run)["action"], "audit");
    let run = check_in(&audit, &["-o", "json", "--default-action", "deny"], &[]);
    assert_exit(&run, 1);
    assert_eq!(coordinator_finding(&run)["action"], "deny");
}

#[test]
fn a_bad_default_action_is_refused_by_name() {
    let run = check(&["--default-action", "block", &example(TWO_MASTERS)], None);
    assert_exit(&run, 2);
    assert!(
        run.stderr.contains("\"block\" is not deny, warn or audit"),
        "{}",
        run.output()
    );
}

#[test]
fn a_namespace_pattern_exempts_a_policy_and_the_finding_is_reported_as_exempted() {
    let dir = policies_with(
        json!({"policies": {"coordinator": {"excludedNamespaces": ["nl*"]}}}),
        &[],
    );
    let run = check_in(&dir, &[], &[]);
    assert_exit(&run, 0);
    assert_stdout_has(
        &run,
        &[
            "ALLOWED",
            "exempt [coordinator] exempted by params.yaml excludedNamespaces (nl*): /spec/pytorchReplicaSpecs/Master/replicas",
        ],
    );
    let json = check_in(&dir, &["-o", "json"], &[]);
    let finding = coordinator_finding(&json);
    assert_eq!(finding["action"], "deny", "the policy's action is kept");
    assert_eq!(
        finding["exempted"]["by"],
        "params.yaml excludedNamespaces (nl*)"
    );
}

#[test]
fn a_global_object_selector_skips_every_policy_and_says_which_exemption() {
    let dir = policies_with(
        json!({"excludedObjectSelector": {"matchExpressions": [{"key": "gangplank.dev/exempt", "operator": "DoesNotExist"}]}}),
        &[],
    );
    let run = check_in(&dir, &[], &[]);
    assert_exit(&run, 0);
    assert_stdout_has(
        &run,
        &["SKIPPED: excluded from every policy by params.yaml excludedObjectSelector"],
    );
}

#[test]
fn a_namespace_selector_without_namespace_labels_does_not_exempt_and_the_verdict_says_so() {
    let dir = policies_with(
        json!({"policies": {"coordinator": {"excludedNamespaceSelector": {"matchLabels": {"team": "nlp"}}}}}),
        &[],
    );
    let run = check_in(&dir, &[], &[]);
    assert_denied_at(&run, MASTERS);
    assert_stdout_has(
        &run,
        &[
            "the exemption of coordinator could not be checked",
            "the labels of namespace nlp are unknown",
        ],
    );
    // With the namespace's labels known (a cluster snapshot), it exempts.
    let snapshot = dir.path().join("cluster.yaml");
    let namespace = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nlp", "labels": {"team": "nlp"}}},
    ]});
    std::fs::write(&snapshot, namespace.to_string()).expect("write snapshot");
    let run = check_in(&dir, &["--cluster", snapshot.to_str().expect("UTF-8")], &[]);
    assert_exit(&run, 0);
    assert_stdout_has(
        &run,
        &["exempted by params.yaml excludedNamespaceSelector (the labels of namespace nlp)"],
    );
}

#[test]
fn an_exception_excuses_until_it_expires_and_says_until_when() {
    let dir = policies_with(
        json!({}),
        &[("ml-42.yaml", &exception("ml-42", "nlp", "2999-12-31"))],
    );
    let run = check_in(&dir, &[], &[]);
    assert_exit(&run, 0);
    assert_stdout_has(
        &run,
        &[
            "ALLOWED",
            "exempt [coordinator] exempted by exception ml-42 until 3000-01-01T00:00:00Z: /spec",
        ],
    );
    let json = check_in(&dir, &["-o", "json"], &[]);
    let exempted = &coordinator_finding(&json)["exempted"];
    assert_eq!(exempted["exception"], "ml-42");
    assert_eq!(exempted["until"], "3000-01-01T00:00:00Z");
    assert_eq!(
        exempted["reason"],
        "two masters while the launcher is rewritten (ML-42)"
    );
}

#[test]
fn an_expired_exception_stops_applying_and_the_verdict_names_it() {
    let expired = exception("ml-41", "n*", "2001-02-03T04:05:06Z");
    let dir = policies_with(json!({}), &[("ml-41.yaml", &expired)]);
    let run = check_in(&dir, &[], &[]);
    assert_denied_at(&run, MASTERS);
    assert_stdout_has(
        &run,
        &[
            "warn  [gangplank] exception ml-41",
            "expired at 2001-02-03T04:05:06Z, so coordinator applies again",
        ],
    );
    assert!(
        run.stderr.contains("ml-41"),
        "a log line names it\n{}",
        run.output()
    );
}

#[test]
fn an_exception_for_another_namespace_changes_nothing() {
    let dir = policies_with(
        json!({}),
        &[("other.yaml", &exception("other", "vision", "2999-12-31"))],
    );
    let run = check_in(&dir, &[], &[]);
    assert_denied_at(&run, MASTERS);
    assert!(!run.stdout.contains("exempt"), "{}", run.output());
}

#[test]
fn bad_exception_files_are_load_errors_naming_the_file_and_field() {
    let no_expiry = "name: x\npolicies: [coordinator]\nmatch: {namespaces: [nlp]}\nreason: r\n";
    let unknown = exception("x", "nlp", "2999-12-31").replace("[coordinator]", "[coordinater]");
    let cases = [
        (no_expiry.to_string(), "x.yaml: expires: required"),
        (unknown, "x.yaml: policies: \"coordinater\" is not a policy"),
        ("name: [x\n".to_string(), "x.yaml: (file): not an exception"),
    ];
    for (text, needle) in cases {
        let dir = policies_with(json!({}), &[("x.yaml", &text)]);
        let run = check_in(&dir, &[], &[]);
        assert_exit(&run, 2);
        assert!(
            run.stderr.contains(needle),
            "lacks {needle:?}\n{}",
            run.output()
        );
    }
}

#[test]
fn an_invalid_selector_in_params_yaml_is_a_load_error_naming_the_key() {
    let bad = json!({"excludedNamespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}});
    let run = check_in(&policies_with(bad, &[]), &[], &[]);
    assert_exit(&run, 2);
    assert!(
        run.stderr.contains(
            "params.yaml: excludedNamespaceSelector: matchExpressions a: operator \"Near\""
        ),
        "{}",
        run.output()
    );
}
