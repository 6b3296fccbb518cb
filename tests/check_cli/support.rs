//! Running the built binary and asserting on what it printed.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;
use tempfile::TempDir;

pub const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");
pub const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");

#[path = "../support/run.rs"]
mod run;
pub use run::Run;

/// Runs `gangplank check --policies <repo policies> ARGS...`, feeding `stdin` if given.
/// Every run must end with an exit code (no signal) and without a panic.
pub fn check(args: &[&str], stdin: Option<&[u8]>) -> Run {
    check_with_env(args, stdin, &[])
}

/// [`check`] with these `GANGPLANK_*` variables set (every other one is removed).
pub fn check_with_env(args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Run {
    check_policies(POLICIES, args, stdin, env)
}

/// `gangplank check --policies <policies> ARGS...`, as [`check_with_env`].
pub fn check_policies(
    policies: &str,
    args: &[&str],
    stdin: Option<&[u8]>,
    env: &[(&str, &str)],
) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gangplank"));
    cmd.args(["check", "--policies", policies]).args(args);
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("GANGPLANK_")) {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().copied());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the gangplank binary should start");
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes).expect("writing gangplank's stdin");
    }
    let out = child.wait_with_output().expect("gangplank should finish");
    Run::finished(out)
}

/// `check PATH` on a file written to a fresh temporary directory.
pub fn check_text(name: &str, contents: impl AsRef<[u8]>, extra: &[&str]) -> Run {
    let dir = TempDir::new().expect("a temporary directory");
    let path = dir.path().join(name);
    std::fs::write(&path, contents).expect("writing the temporary manifest");
    let path = path
        .to_str()
        .expect("temporary paths are UTF-8")
        .to_string();
    let args: Vec<&str> = extra.iter().copied().chain([path.as_str()]).collect();
    check(&args, None)
}

pub fn example(rel: &str) -> String {
    format!("{EXAMPLES}/{rel}")
}

/// The top-level files of `examples/`: the jobs that must pass (rejected/ is a subdirectory).
pub fn good_examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(EXAMPLES)
        .expect("examples/ should exist")
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.is_file() && is_manifest(p))
        .collect();
    files.sort();
    files
}

pub fn assert_exit(run: &Run, code: i32) {
    assert_eq!(run.code, code, "{}", run.output());
}

pub fn assert_stdout_has(run: &Run, needles: &[&str]) {
    for needle in needles {
        assert!(
            run.stdout.contains(needle),
            "stdout lacks {needle:?}\n{}",
            run.output()
        );
    }
}

/// A denial: exit 1, and a `deny` line that names `path`.
pub fn assert_denied_at(run: &Run, path: &str) {
    assert_exit(run, 1);
    assert_stdout_has(run, &["DENIED"]);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("deny") && l.contains(path)),
        "no deny line names {path}\n{}",
        run.output()
    );
}

pub fn parse_json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("-o json output is not JSON ({e})\n{}", run.output()))
}

pub fn parse_yaml_docs(text: &str) -> Vec<Value> {
    text.split("\n---")
        .map(|d| d.trim_start_matches("---"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| {
            yaml_serde::from_str(d)
                .unwrap_or_else(|e| panic!("-o yaml document does not parse ({e}):\n{d}"))
        })
        .collect()
}

/// YAML or JSON, as `gangplank check` picks files in a directory (examples/ may also hold
/// Cargo example programs).
fn is_manifest(path: &std::path::Path) -> bool {
    path.extension()
        .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
}
