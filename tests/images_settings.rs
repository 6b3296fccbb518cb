//! `imageResolution` settings that would let lookups go anywhere are refused the same way
//! everywhere (issue 32, item 4): pinning on needs a non-empty `allowedRegistries`, and
//! `gangplank serve` does not start, `gangplank check --resolve` exits 2, and a policy
//! reload keeps the previous set; and a job with more images than `maxImagesPerReview` is
//! refused (or warned) without a single lookup.

mod support;

use std::process::Command;

use gangplank::admission::{Metrics, PolicyStore};
use gangplank::images::{FailureMode, Pinner, Settings};
use support::registry::{
    answer, image_findings, job_running, policies_dir_with, policies_with, review_pinned,
    settings_for_host, write_policies_dir, Recorder,
};

const NO_ALLOWLIST: &str = "params.yaml imageResolution: enabled is true but allowedRegistries is empty: list the registries whose images the webhook may look up";

fn pinning_without_allowlist() -> Settings {
    Settings {
        enabled: true,
        ..Settings::default()
    }
}

fn job_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("job.json");
    let job = support::registry::job_with_images("ghcr.io/a/b:1", "ghcr.io/a/b:1");
    std::fs::write(&path, job.to_string()).expect("write job");
    path
}

#[test]
fn check_resolve_exits_2_naming_the_empty_allowlist() {
    // The shipped params.yaml: pinning off, no allowlist; --resolve turns pinning on.
    let work = tempfile::tempdir().expect("temp dir");
    let output = Command::new(support::gangplank())
        .arg("check")
        .arg(job_file(work.path()))
        .arg("--policies")
        .arg(support::repo().join("policies"))
        .arg("--resolve")
        .output()
        .expect("run gangplank check");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(NO_ALLOWLIST), "{stderr}");
}

#[test]
fn serve_does_not_start_with_pinning_on_and_no_allowlist() {
    let policies = policies_dir_with(&pinning_without_allowlist());
    let output = Command::new(support::gangplank())
        .args(["serve", "--addr", "127.0.0.1:0", "--policies"])
        .arg(policies.path())
        .output()
        .expect("run gangplank serve");
    let logs = String::from_utf8_lossy(&output.stderr).to_string()
        + &String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{logs}");
    assert!(
        logs.contains("cannot load policies") && logs.contains("allowedRegistries is empty"),
        "{logs}"
    );
}

#[test]
fn a_reload_to_pinning_without_allowlist_is_refused_and_the_previous_set_keeps_serving() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_policies_dir(&settings_for_host("registry.example.com"), dir.path());
    let store = PolicyStore::load(dir.path()).expect("the first set loads");
    let before = store.current().expect("a set");

    write_policies_dir(&pinning_without_allowlist(), dir.path());
    assert_eq!(store.reload_if_changed(&Metrics::new()), Some(false));
    let after = store.current().expect("a set");
    assert!(
        std::sync::Arc::ptr_eq(&before, &after),
        "the old set serves"
    );
    let refused = store.status().refused.unwrap_or_default();
    assert!(refused.contains(NO_ALLOWLIST), "{refused}");
}

#[tokio::test]
async fn a_job_with_more_images_than_max_images_per_review_is_refused_without_a_lookup() {
    let registry = Recorder::start(|_| answer(404, &[], "")).await;
    let images: Vec<String> = (0..3)
        .map(|i| format!("{}/ml/part-{i}:v1", registry.host))
        .collect();
    let limited = Settings {
        max_images_per_review: 2,
        ..settings_for_host(&registry.host)
    };
    for (mode, action, tail) in [
        (FailureMode::Deny, "deny", "raise maxImagesPerReview in params.yaml"),
        (
            FailureMode::Allow,
            "warn",
            "raise maxImagesPerReview in params.yaml; left as written (imageResolution.failureMode: allow)",
        ),
    ] {
        let set = policies_with(Settings {
            failure_mode: mode,
            ..limited.clone()
        });
        let decision = review_pinned(&set, &Pinner::default(), job_running(&images)).await;
        let findings = image_findings(&decision).join("\n");
        assert!(
            findings.contains(&format!("{action} the job has 3 images without a digest, more than imageResolution.maxImagesPerReview (2) lets one review look up, so none was looked up: pin some by digest yourself, or {tail}")),
            "{findings}"
        );
    }
    assert_eq!(registry.hits(), 0, "{:?}", registry.seen());
}
