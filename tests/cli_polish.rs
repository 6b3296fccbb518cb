//! The CLI's shell integration and machine output, through the real binary: completion
//! scripts, man pages, the kubectl plugin name (`kubectl-gangplank`) and `gangplank test -o
//! json`.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

const GANGPLANK: &str = env!("CARGO_BIN_EXE_gangplank");

/// `program ARGS...` with no `GANGPLANK_*` variable of the caller's environment.
fn run(program: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("GANGPLANK_")) {
        cmd.env_remove(key);
    }
    cmd.output().expect("the binary runs")
}

fn gangplank(args: &[&str]) -> Output {
    run(Path::new(GANGPLANK), args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn bash_completions_offer_every_subcommand() {
    let out = gangplank(&["completions", "bash"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let script = text(&out.stdout);
    assert!(script.contains("complete -F _gangplank"), "{script}");
    for sub in ["check", "test", "serve", "audit", "completions", "man"] {
        assert!(
            script.contains(&format!("gangplank__subcmd__{sub}")),
            "no completion for {sub}"
        );
    }
    assert!(script.contains("--policies"), "flags are completed too");
}

#[test]
fn every_shell_gets_a_script_and_an_unknown_one_is_refused() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = gangplank(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("gangplank"), "{shell}");
    }
    let out = gangplank(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("possible values: bash"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_man_page_is_roff_with_a_title_header() {
    let out = gangplank(&["man"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(page.contains(".TH gangplank 1"), "{page}");
    assert!(page.contains(".SH NAME"), "{page}");
    assert!(
        page.contains("gangplank\\-check(1)"),
        "subcommands are named as pages: {page}"
    );
}

#[test]
fn man_out_dir_writes_one_page_per_subcommand() {
    let dir = TempDir::new().expect("tempdir");
    let man1 = dir.path().join("man1");
    let out = gangplank(&["man", "--out-dir", man1.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for name in [
        "gangplank",
        "gangplank-check",
        "gangplank-test",
        "gangplank-serve",
    ] {
        let page = std::fs::read_to_string(man1.join(format!("{name}.1")))
            .unwrap_or_else(|e| panic!("{name}.1: {e}"));
        assert!(page.contains(&format!(".TH {name} 1")), "{name}: {page}");
    }
    let check = std::fs::read_to_string(man1.join("gangplank-check.1")).expect("check page");
    assert!(check.contains("\\-\\-policies"), "the page lists the flags");
    assert!(
        !man1.join("gangplank-help.1").exists(),
        "clap's help subcommand gets no page"
    );
}

#[test]
fn man_out_dir_that_cannot_be_created_is_a_clear_error() {
    let dir = TempDir::new().expect("tempdir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").expect("file");
    let under_file = file.join("man1");
    let out = gangplank(&["man", "--out-dir", under_file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: man: "), "{stderr}");
    assert!(
        stderr.contains("a-file/man1"),
        "names the directory: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The binary under the plugin's name, as a symlink on a PATH of its own.
fn plugin() -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new().expect("tempdir");
    let link = dir.path().join("kubectl-gangplank");
    std::os::unix::fs::symlink(GANGPLANK, &link).expect("symlink");
    (dir, link)
}

#[test]
fn as_kubectl_gangplank_it_runs_the_same_and_its_help_says_kubectl_gangplank() {
    let (_dir, link) = plugin();
    let help = run(&link, &["--help"]);
    assert!(help.status.success());
    let help = text(&help.stdout);
    assert!(
        help.contains("Usage: kubectl gangplank [OPTIONS] <COMMAND>"),
        "{help}"
    );
    let check_help = text(&run(&link, &["check", "--help"]).stdout);
    assert!(
        check_help.contains("Usage: kubectl gangplank check [OPTIONS] <PATHS>..."),
        "{check_help}"
    );
    // The same command as gangplank: a real check of a bundled example, same exit code.
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/rejected/two-masters.yaml"
    );
    let policies = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");
    let args = ["check", "--policies", policies, example];
    let as_plugin = run(&link, &args);
    let as_gangplank = gangplank(&args);
    assert_eq!(
        as_plugin.status.code(),
        Some(1),
        "{}",
        text(&as_plugin.stdout)
    );
    assert_eq!(as_plugin.status.code(), as_gangplank.status.code());
    assert_eq!(as_plugin.stdout, as_gangplank.stdout);
    // A mistake is reported in kubectl's words.
    let wrong = run(&link, &["chek"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        text(&wrong.stderr).contains("Usage: kubectl gangplank"),
        "{}",
        text(&wrong.stderr)
    );
}

#[test]
fn gangplank_itself_keeps_its_own_name() {
    let help = text(&gangplank(&["--help"]).stdout);
    assert!(
        help.contains("Usage: gangplank [OPTIONS] <COMMAND>"),
        "{help}"
    );
}

const POLICY: &str = r#"package gangplank.policies.short_names

import rego.v1

meta := {"title": "Short names", "description": "Names of at most 10 characters.", "action": "deny"}

violation contains {"path": "/metadata/name", "msg": "the name is longer than 10 characters"} if {
	count(input.object.metadata.name) > 10
}
"#;

/// Two cases that pass and one that fails (it expects a long name to be allowed), on an
/// inline XGBoostJob.
const CASES: &str = r#"cases:
- note: a long name is refused
  object: &long
    apiVersion: kubeflow.org/v1
    kind: XGBoostJob
    metadata: {name: a-name-of-eighteen, namespace: team-a}
    spec: {xgbReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: xgboost, image: example/xgb:2}]}}}}}
  expect: {allowed: false, violations: [{policy: short_names, message: longer than 10}]}
- note: a short name is allowed
  object:
    apiVersion: kubeflow.org/v1
    kind: XGBoostJob
    metadata: {name: xgb, namespace: team-a}
    spec: {xgbReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: xgboost, image: example/xgb:2}]}}}}}
  expect: {allowed: true}
- note: a long name is allowed, which is wrong
  object: *long
  expect: {allowed: true}
"#;

const REGO_TEST: &str = r#"package gangplank.short_names_test

import rego.v1

test_ten_is_short if {
	count("abcdefghij") <= 10
}
"#;

#[test]
fn test_json_reports_each_suite_and_the_failing_case_as_failed() {
    let dir = TempDir::new().expect("tempdir");
    std::fs::create_dir(dir.path().join("tests")).expect("tests/");
    std::fs::write(dir.path().join("short_names.rego"), POLICY).expect("policy");
    std::fs::write(dir.path().join("tests/short_names.yaml"), CASES).expect("cases");
    std::fs::write(dir.path().join("tests/short_names_test.rego"), REGO_TEST).expect("test");
    let root = dir.path().to_str().expect("utf-8");

    let out = gangplank(&["test", root, "-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "a failed test still exits 1");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON document ({e}):\n{}", text(&out.stdout)));
    assert_eq!(report["tests"], 4, "{report:#}");
    assert_eq!(report["passed"], 3, "{report:#}");
    assert_eq!(report["failed"], 1, "{report:#}");
    let suites = report["suites"].as_array().expect("suites");
    let suite = |name: &str| {
        suites
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no suite {name}: {report:#}"))
    };
    let cases = suite("tests/short_names.yaml");
    assert_eq!(cases["tests"], 3);
    assert_eq!(cases["failed"], 1);
    let failing = cases["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .find(|c| c["name"] == "a long name is allowed, which is wrong")
        .expect("the failing case is reported");
    assert_eq!(failing["status"], "failed");
    assert!(
        failing["message"].as_str().is_some_and(|m| !m.is_empty()),
        "a failure says why: {failing}"
    );
    let passing = &cases["cases"][0];
    assert_eq!(passing["status"], "passed");
    assert!(passing.get("message").is_none(), "{passing}");
    assert_eq!(
        suite("tests/short_names_test.rego")["cases"][0]["status"],
        "passed"
    );

    // Without the failing case: exit 0, every case passed.
    let out = gangplank(&["test", root, "-o", "json", "--filter", "refused"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (report["tests"].as_u64(), report["failed"].as_u64()),
        (Some(1), Some(0))
    );
}
