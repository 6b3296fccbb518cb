//! `gangplank-release render`: dist/'s install files are what deploy/ renders to (the
//! committed tree passes `render --check`), a changed file is caught, a dirty tree is refused,
//! and a missing kubectl is named. Each test works on a copy of deploy/, policies/ and dist/
//! in a temporary directory, never on the real tree. Skipped, saying why, without kubectl.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gangplank::release::{kubectl, render};
use tempfile::TempDir;

const RELEASE: &str = env!("CARGO_BIN_EXE_gangplank-release");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// kubectl, or `None` after saying on stderr why the test is skipped.
fn kubectl_or_skip() -> Option<PathBuf> {
    match kubectl::find() {
        Ok(path) => Some(path),
        Err(e) => {
            // Written to stderr directly: libtest captures eprintln!, and a skip must be seen.
            let _ = writeln!(std::io::stderr(), "skipped: {e}");
            None
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let path = entry.expect("directory entry").path();
        let target = to.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

/// deploy/, policies/ and dist/ of the repository, copied.
fn copy_of_the_tree() -> TempDir {
    let dir = TempDir::new().expect("tempdir");
    for sub in ["deploy", "policies", "dist"] {
        copy_dir(&repo().join(sub), &dir.path().join(sub));
    }
    dir
}

/// The copy with its dist/ files freshly rendered (by the library, not the binary under test),
/// so that a test of how drift is caught does not depend on the committed files being current.
fn rendered_copy(kubectl: &Path) -> TempDir {
    let tree = copy_of_the_tree();
    for variant in &render::VARIANTS {
        let text = render::render(kubectl, tree.path(), variant)
            .unwrap_or_else(|e| panic!("{}: {e}", variant.overlay));
        std::fs::write(tree.path().join(variant.file), text).expect("dist file");
    }
    tree
}

/// `gangplank-release ARGS...` in `dir`, kubectl found where the test found it.
fn release(dir: &Path, args: &[&str]) -> Output {
    Command::new(RELEASE)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("gangplank-release runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_committed_dist_files_are_what_deploy_renders_to() {
    if kubectl_or_skip().is_none() {
        return;
    }
    let tree = copy_of_the_tree();
    let out = release(tree.path(), &["render", "--check"]);
    assert!(
        out.status.success(),
        "dist/ is stale: run `cargo run --bin gangplank-release -- render` on a clean tree \
         and commit:\n{}",
        stderr(&out)
    );
    for variant in &render::VARIANTS {
        assert!(stderr(&out).contains(variant.file), "{}", stderr(&out));
    }
}

#[test]
fn a_changed_dist_file_is_caught_with_the_line_that_differs() {
    let Some(kubectl) = kubectl_or_skip() else {
        return;
    };
    let tree = rendered_copy(&kubectl);
    let file = tree.path().join("dist/install-cert-manager.yaml");
    let text = std::fs::read_to_string(&file).expect("dist file");
    let edited = text.replacen("replicas: 3", "replicas: 1", 1);
    assert_ne!(edited, text, "the webhook Deployment has 3 replicas");
    std::fs::write(&file, edited).expect("edit");

    let out = release(tree.path(), &["render", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let why = stderr(&out);
    assert!(
        why.contains("dist/install-cert-manager.yaml differs:"),
        "names the file: {why}"
    );
    assert!(
        why.contains("committed: \"  replicas: 1\"")
            && why.contains("rendered:  \"  replicas: 3\""),
        "shows the line on both sides: {why}"
    );
    assert!(
        why.contains("gangplank-release -- render"),
        "says how to fix it: {why}"
    );
    assert!(
        why.contains("dist/install.yaml is what"),
        "the other file is still current: {why}"
    );
}

fn git(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn render_refuses_a_dirty_tree_and_on_a_clean_one_writes_what_check_accepts() {
    let Some(kubectl) = kubectl_or_skip() else {
        return;
    };
    let tree = copy_of_the_tree();
    let expected = render::render(&kubectl, tree.path(), &render::VARIANTS[0]).expect("render");
    let dir = tree.path();
    if !(git(dir, &["init", "-q"]) && git(dir, &["add", "."]) && git(dir, &["commit", "-qm", "x"]))
    {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: git cannot make a repository here"
        );
        return;
    }
    let install = dir.join("dist/install.yaml");
    std::fs::write(&install, "# edited by hand\n").expect("edit");

    let out = release(dir, &["render"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("uncommitted changes"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("dist/install.yaml"),
        "lists them: {}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&install).expect("dist file"),
        "# edited by hand\n",
        "nothing was written"
    );

    assert!(git(dir, &["commit", "-qam", "the edit"]));
    let out = release(dir, &["render"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let check = release(dir, &["render", "--check"]);
    assert!(check.status.success(), "{}", stderr(&check));
    assert_eq!(
        std::fs::read_to_string(&install).expect("rendered"),
        expected,
        "the binary writes what the library renders"
    );
}

#[test]
fn without_kubectl_the_error_says_where_it_was_looked_for() {
    let tree = copy_of_the_tree();
    let home = TempDir::new().expect("tempdir");
    let out = Command::new(RELEASE)
        .args(["render", "--check"])
        .current_dir(tree.path())
        .env("PATH", "")
        .env("HOME", home.path())
        .env_remove("KUBEBUILDER_ASSETS")
        .output()
        .expect("gangplank-release runs");
    assert_eq!(out.status.code(), Some(1));
    let why = stderr(&out);
    assert!(why.starts_with("error: no kubectl found"), "{why}");
    assert!(
        why.contains("PATH") && why.contains("KUBEBUILDER_ASSETS"),
        "{why}"
    );
    assert!(!why.contains("panicked"), "{why}");
}

/// An image layout as `gangplank-release image` writes it, reduced to what `pin` reads: the
/// digest file, the index and the manifest with its revision annotation.
fn fake_layout(dir: &Path, digest: &str, revision: &str) {
    let hex = digest.trim_start_matches("sha256:");
    std::fs::create_dir_all(dir.join("blobs/sha256")).expect("layout dirs");
    std::fs::write(dir.join("digest"), format!("{digest}\n")).expect("digest");
    let index = serde_json::json!({"manifests": [{"digest": digest}]});
    std::fs::write(dir.join("index.json"), index.to_string()).expect("index");
    let manifest = serde_json::json!({
        "annotations": {"org.opencontainers.image.revision": revision}
    });
    std::fs::write(dir.join("blobs/sha256").join(hex), manifest.to_string()).expect("manifest");
}

#[test]
fn pin_renders_dist_again_so_the_new_digest_reaches_the_install_files() {
    if kubectl_or_skip().is_none() {
        return;
    }
    let tree = copy_of_the_tree();
    let dir = tree.path();
    // `pin` dates the image by the last commit of its inputs (src/ among them).
    std::fs::create_dir_all(dir.join("src")).expect("src/");
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").expect("src/main.rs");
    if !(git(dir, &["init", "-q"]) && git(dir, &["add", "."]) && git(dir, &["commit", "-qm", "x"]))
    {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: git cannot make a repository here"
        );
        return;
    }
    let revision = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(dir)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .expect("git rev-parse");
    let digest = format!("sha256:{}", "ab".repeat(32));
    let layout = TempDir::new().expect("tempdir");
    fake_layout(layout.path(), &digest, &revision);

    let out = release(
        dir,
        &["pin", "--image-dir", layout.path().to_str().expect("utf-8")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    for variant in &render::VARIANTS {
        let text = std::fs::read_to_string(dir.join(variant.file)).expect("dist file");
        assert_eq!(
            text.matches(&format!("gangplank@{digest}")).count(),
            2,
            "{}: both Deployments name the new digest",
            variant.file
        );
    }
    let check = release(dir, &["render", "--check"]);
    assert!(check.status.success(), "{}", stderr(&check));
}
