//! End to end: a job author who can only run `kubectl apply --dry-run=server` cannot make
//! the webhook (`gangplank serve`, configured as deploy/ does, behind a real kube-apiserver)
//! fetch an internal endpoint through a registry that redirects there (issue 32, item 4).
//!
//! The registry and the endpoint (standing for a cloud metadata service) are recording
//! servers in this process; `kubectl` runs off the test's runtime, which serves them.
//! Needs the test binaries (`tests/support/assets.rs`); without them the test is ignored
//! with the reason.

mod support;

use support::registry::{answer, settings_for_host, write_policies_dir, Recorder};
use support::{jobs, ControlPlane, Crds, Webhooks};

e2e_suite!(
    "e2e_images_egress",
    [a_server_side_dry_run_cannot_make_the_webhook_fetch_an_internal_endpoint]
);

async fn a_server_side_dry_run_cannot_make_the_webhook_fetch_an_internal_endpoint() {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    let metadata = Recorder::start(|_| {
        answer(
            200,
            &[("content-type", "application/json".to_string())],
            r#"{"AccessKeyId":"ASIA-SECRET-KEY"}"#,
        )
    })
    .await;
    let target = format!(
        "http://{}/latest/meta-data/iam/security-credentials/node",
        metadata.host
    );
    let registry = Recorder::start(move |_| answer(307, &[("location", target.clone())], "")).await;
    // Pinning on, allowed to call the registry only.
    let policies = control_plane.file("egress-policies");
    write_policies_dir(&settings_for_host(&registry.host), &policies);
    let _webhooks = Webhooks::install(control_plane, policies).await;
    let namespace = control_plane.namespace("egress").await;

    let image = format!("{}/ml/train:v1", registry.host);
    let mut job = jobs::pytorch_job("probe", 1);
    for replica in ["Master", "Worker"] {
        job["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]["containers"][0]["image"] =
            image.clone().into();
    }
    let applied = tokio::task::spawn_blocking(move || {
        control_plane.kubectl_apply(Some(&namespace), &job, &["--dry-run=server", "-o", "yaml"])
    })
    .await
    .expect("kubectl ran");

    assert_eq!(
        metadata.hits(),
        0,
        "the internal endpoint was asked: {:?}; kubectl: {applied:?}",
        metadata.seen()
    );
    // With -o yaml, an admitted job would show the digest it was pinned to.
    let message = applied.expect_err("refused");
    assert!(registry.hits() >= 1, "the registry was asked");
    assert!(
        message.contains(&format!(
            "failed to resolve digest for {image}: registry {} redirected to {}, which is in neither imageResolution.allowedRegistries nor imageResolution.redirectHosts",
            registry.host, metadata.host
        )),
        "{message}"
    );
    assert!(!message.contains("ASIA"), "{message}");
}
