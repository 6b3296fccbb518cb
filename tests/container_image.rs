//! The container image (Dockerfile) as far as it can be checked without a Docker daemon:
//! multi-stage, a distroless runtime, the non-root user deploy/ runs as, a locked build, and
//! a binary that needs no library the runtime image lacks. `.ci/run` builds the image itself
//! when a daemon is reachable and says so when none is.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn read(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// Instructions as (keyword, arguments), continuation lines joined, comments dropped.
fn instructions(dockerfile: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in dockerfile.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                let (keyword, args) = current.split_once(' ').unwrap_or((&current, ""));
                out.push((keyword.to_uppercase(), args.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

/// The instructions of the last stage (the image that ships).
fn final_stage(all: &[(String, String)]) -> &[(String, String)] {
    let start = all.iter().rposition(|(k, _)| k == "FROM").unwrap_or(0);
    &all[start..]
}

fn dockerfile() -> Vec<(String, String)> {
    instructions(&read("Dockerfile"))
}

#[test]
fn the_image_is_built_in_one_stage_and_shipped_from_a_distroless_one() {
    let all = dockerfile();
    let froms: Vec<&str> = all
        .iter()
        .filter(|(k, _)| k == "FROM")
        .map(|(_, a)| a.as_str())
        .collect();
    assert_eq!(froms.len(), 2, "build stage and runtime stage: {froms:?}");
    assert!(
        froms[0].ends_with(" AS build"),
        "the first stage is named build: {}",
        froms[0]
    );
    let runtime = final_stage(&all);
    assert!(
        runtime[0].1.starts_with("gcr.io/distroless/"),
        "the runtime has no shell or package manager: {}",
        runtime[0].1
    );
    assert!(
        runtime
            .iter()
            .any(|(k, a)| k == "COPY" && a.starts_with("--from=build ")),
        "the runtime takes the binary from the build stage"
    );
    for (keyword, args) in &all {
        assert!(
            !(keyword == "ADD" && args.contains("://")),
            "no remote ADD (unverified download): {args}"
        );
    }
    for image in froms {
        let reference = image.split_whitespace().next().unwrap_or_default();
        let (named, digest) = reference.split_once('@').unwrap_or((reference, ""));
        assert!(
            named.contains(':') && !named.ends_with(":latest"),
            "base image {reference} has an explicit tag, not latest"
        );
        let hex = digest.strip_prefix("sha256:").unwrap_or_default();
        assert!(
            hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "base image {reference} is pinned by a sha256 digest, so a rebuild takes the reviewed bytes"
        );
    }
}

#[test]
fn the_build_uses_the_locked_dependency_versions() {
    let build: Vec<String> = dockerfile()
        .into_iter()
        .filter(|(k, a)| k == "RUN" && a.contains("cargo build"))
        .map(|(_, a)| a)
        .collect();
    assert_eq!(build.len(), 1, "{build:?}");
    assert!(build[0].contains("--locked"), "{}", build[0]);
    assert!(build[0].contains("--release"), "{}", build[0]);
    let ignore = read(".dockerignore");
    for entry in ["target/", ".git/"] {
        assert!(
            ignore.lines().any(|l| l.trim() == entry),
            ".dockerignore keeps {entry} out of the build context"
        );
    }
}

#[test]
fn the_image_runs_as_the_numeric_non_root_user_of_every_deployment() {
    let all = dockerfile();
    let user = final_stage(&all)
        .iter()
        .rev()
        .find(|(k, _)| k == "USER")
        .map(|(_, a)| a.clone())
        .unwrap_or_else(|| panic!("the runtime stage sets USER"));
    let (uid, gid) = user.split_once(':').unwrap_or((&user, ""));
    let uid: i64 = uid
        .parse()
        .unwrap_or_else(|_| panic!("USER is numeric: {user}"));
    assert_ne!(uid, 0, "not root");
    for manifest in [
        "deploy/deployment.yaml",
        "deploy/controller/deployment.yaml",
    ] {
        let doc: Value =
            yaml_serde::from_str(&read(manifest)).unwrap_or_else(|e| panic!("{manifest}: {e}"));
        let context = doc
            .pointer("/spec/template/spec/securityContext")
            .unwrap_or_else(|| panic!("{manifest} has a pod securityContext"));
        assert_eq!(
            context.get("runAsUser").and_then(Value::as_i64),
            Some(uid),
            "{manifest}: runAsUser matches the image's USER"
        );
        if !gid.is_empty() {
            assert_eq!(
                context
                    .get("runAsGroup")
                    .and_then(Value::as_i64)
                    .map(|g| g.to_string()),
                Some(gid.to_string()),
                "{manifest}: runAsGroup matches the image's USER group"
            );
        }
        let image = doc
            .pointer("/spec/template/spec/containers/0/image")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(image.starts_with("gangplank:"), "{manifest}: {image}");
    }
    let entrypoint = final_stage(&all)
        .iter()
        .find(|(k, _)| k == "ENTRYPOINT")
        .map(|(_, a)| a.clone())
        .unwrap_or_default();
    let exec: Vec<String> = serde_json::from_str(&entrypoint)
        .unwrap_or_else(|e| panic!("ENTRYPOINT in exec (JSON) form, no shell: {entrypoint}: {e}"));
    assert_eq!(exec, ["/usr/local/bin/gangplank"]);
}

/// Shared libraries distroless `cc-debian12` ships (glibc and libgcc_s); anything else the
/// binary needs would make the image fail at start-up.
const DISTROLESS_CC: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
];

#[test]
fn the_binary_needs_no_library_beyond_what_the_runtime_image_has() {
    let binary = env!("CARGO_BIN_EXE_gangplank");
    let output = match Command::new("readelf").arg("-d").arg(binary).output() {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!(
            "readelf -d {binary}: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            println!("skipped: readelf is not installed ({e}), so the NEEDED list is not read");
            return;
        }
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let needed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(!needed.is_empty(), "a glibc binary needs libc: {text}");
    for lib in &needed {
        assert!(
            DISTROLESS_CC.contains(lib),
            "{lib} is not in distroless cc; the image would not start (NEEDED: {needed:?})"
        );
    }
}
