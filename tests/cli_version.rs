//! `gangplank version` as a user runs it (the binary cargo built): JSON that parses with every
//! field, and a policy-set hash that follows the content of the directory, not its history.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn version(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gangplank"))
        .arg("version")
        .args(args)
        .env_remove("GANGPLANK_POLICIES")
        .env_remove("GANGPLANK_IMAGE_DIGEST")
        .envs(env.iter().copied())
        .output()
        .expect("gangplank version runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> Value {
    let (ok, stdout, stderr) = version(&[&["-o", "json"], args].concat(), &[]);
    assert!(ok, "{stderr}");
    serde_json::from_str(&stdout).expect("version -o json prints JSON")
}

fn hash_of(dir: &Path) -> String {
    let dir = dir.to_str().expect("UTF-8 path");
    json(&["--policies", dir])["policySetHash"]
        .as_str()
        .expect("a hash")
        .to_string()
}

/// The shipped policies/ copied file by file, in `order`.
fn copy_policies(to: &Path, reverse: bool) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut files: Vec<_> = ["", "lib"]
        .iter()
        .flat_map(|sub| {
            std::fs::read_dir(from.join(sub))
                .expect("policies/")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.is_file())
                .map(move |p| (sub.to_string(), p))
        })
        .collect();
    files.sort();
    if reverse {
        files.reverse();
    }
    for (sub, path) in files {
        let dir = to.join(&sub);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::copy(&path, dir.join(path.file_name().expect("name"))).expect("copy");
    }
}

#[test]
fn json_names_version_revision_digest_and_hash() {
    let v = json(&[]);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert!(v["revision"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
    assert_eq!(v["imageDigest"], Value::Null, "no GANGPLANK_IMAGE_DIGEST");
    assert_eq!(v["policySetHash"], Value::Null, "no --policies");

    let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
    let (ok, stdout, stderr) = version(&["-o", "json"], &[("GANGPLANK_IMAGE_DIGEST", &digest)]);
    assert!(ok, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(v["imageDigest"], digest.as_str());
}

#[test]
fn the_hash_is_64_hex_digits_and_the_text_output_says_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let hash = hash_of(&dir);
    assert!(
        hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{hash}"
    );
    let (ok, stdout, stderr) = version(&["--policies", dir.to_str().expect("path")], &[]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains(&hash), "{stdout}");
}

#[test]
fn the_hash_changes_with_content_and_not_with_copy_order_mtimes_or_location() {
    let a = tempfile::tempdir().expect("temp dir");
    let b = tempfile::tempdir().expect("temp dir");
    copy_policies(a.path(), false);
    copy_policies(b.path(), true);
    let first = hash_of(a.path());
    assert_eq!(
        first,
        hash_of(b.path()),
        "same files written in another order"
    );

    // Touched: the same bytes written again, later.
    let policy = a.path().join("images.rego");
    let text = std::fs::read_to_string(&policy).expect("images.rego");
    std::fs::write(&policy, &text).expect("rewrite");
    assert_eq!(first, hash_of(a.path()), "same bytes, new mtime");

    std::fs::write(&policy, format!("{text}\n# edited\n")).expect("edit");
    let edited = hash_of(a.path());
    assert_ne!(first, edited, "a policy's content changed");

    std::fs::write(&policy, &text).expect("revert");
    assert_eq!(first, hash_of(a.path()), "back to the same content");

    let params = a.path().join("params.yaml");
    let params_text = std::fs::read_to_string(&params).expect("params.yaml");
    std::fs::write(&params, format!("{params_text}\n# edited\n")).expect("edit params");
    assert_ne!(first, hash_of(a.path()), "params.yaml changed");
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    let (ok, _, stderr) = version(&["--policies", "/nonexistent/policies"], &[]);
    assert!(!ok);
    assert!(
        stderr.contains("cannot read policies from /nonexistent/policies"),
        "{stderr}"
    );
    let (ok, _, stderr) = version(&[], &[("GANGPLANK_IMAGE_DIGEST", "latest")]);
    assert!(!ok);
    assert!(stderr.contains("is not an image digest"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
