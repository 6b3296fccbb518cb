//! Digest resolution cannot be aimed inside the cluster (issue 32, item 4): a job author
//! names the image, so the registry, and through its answers (redirects, token realms, error
//! bodies) whatever host it points at. Each test here stands an internal endpoint (a cloud
//! metadata service) beside a registry that points at it, and checks the endpoint is never
//! asked and nothing it says reaches the denial.
//!
//! The registries are small recording servers on 127.0.0.1 (`support::registry::Recorder`):
//! no real registry misbehaves on demand.

mod support;

use std::time::Duration;

use gangplank::images::{Keychain, Pinner, Settings};
use support::registry::{
    answer, image_findings, image_of, job_with_images, policies_with, review_pinned, Recorder,
};

/// What a cloud metadata endpoint answers: the secret the attack is after.
const METADATA: &str =
    r#"{"Code":"Success","AccessKeyId":"ASIA-SECRET-KEY","Token":"secret-session-token"}"#;

/// The internal endpoint: answers anything with [`METADATA`], counting requests.
async fn metadata_endpoint() -> Recorder {
    Recorder::start(|_| {
        answer(
            200,
            &[("content-type", "application/json".to_string())],
            METADATA,
        )
    })
    .await
}

/// Resolution on, allowed to call only `registry`, over plain HTTP.
fn only(registry: &str) -> Settings {
    Settings {
        enabled: true,
        allowed_registries: vec![registry.to_string()],
        plain_http_registries: vec![registry.to_string()],
        ..Settings::default()
    }
}

/// The `images` findings of a job running `image` everywhere, with `settings` and `pinner`.
async fn findings(settings: Settings, pinner: &Pinner, image: &str) -> (bool, String) {
    let set = policies_with(settings);
    let review = review_pinned(&set, pinner, job_with_images(image, image));
    // A hang guard, not a timing threshold: the 2 s budget ends every lookup before it.
    let decision = tokio::time::timeout(Duration::from_secs(60), review)
        .await
        .expect("an answer");
    let pinned = image_of(&decision, "Master") != image;
    (
        pinned || decision.allowed(),
        image_findings(&decision).join("\n"),
    )
}

/// The job was refused, the endpoint never asked (the assertion lists what it was asked), and
/// the findings name each of `names` and nothing the endpoint holds.
fn refused_without_asking(endpoint: &Recorder, admitted: bool, findings: &str, names: &[&str]) {
    assert_eq!(
        endpoint.hits(),
        0,
        "the internal endpoint was asked: {:?}",
        endpoint.seen()
    );
    assert!(!admitted, "{findings}");
    for name in names {
        assert!(findings.contains(name), "{name}: {findings}");
    }
    assert!(!findings.contains("ASIA"), "{findings}");
}

fn credentials(host: &str) -> Keychain {
    let doc = serde_json::json!({"auths": {host: {"username": "robot", "password": "s3cret"}}});
    Keychain::from_docker_config(doc.to_string().as_bytes(), "test").expect("keychain")
}

#[tokio::test]
async fn a_manifest_redirect_to_a_host_outside_the_allowlist_is_never_followed() {
    let metadata = metadata_endpoint().await;
    let target = format!(
        "http://{}/latest/meta-data/iam/security-credentials/node",
        metadata.host
    );
    let registry = Recorder::start(move |_| answer(307, &[("location", target.clone())], "")).await;
    let image = format!("{}/ml/train:v1", registry.host);
    let (admitted, findings) = findings(only(&registry.host), &Pinner::default(), &image).await;
    refused_without_asking(
        &metadata,
        admitted,
        &findings,
        &[
            &format!("redirected to {}", metadata.host),
            "imageResolution.redirectHosts",
        ],
    );
}

#[tokio::test]
async fn a_token_realm_on_an_internal_host_is_never_asked_and_gets_no_credentials() {
    let metadata = metadata_endpoint().await;
    let challenge = format!(
        r#"Bearer realm="http://{}/latest/api/token",service="registry",scope="repository:ml/train:pull""#,
        metadata.host
    );
    let registry =
        Recorder::start(move |_| answer(401, &[("www-authenticate", challenge.clone())], "")).await;
    let image = format!("{}/ml/train:v1", registry.host);
    let pinner = Pinner {
        credentials: credentials(&registry.host),
        ..Pinner::default()
    };
    let (admitted, findings) = findings(only(&registry.host), &pinner, &image).await;
    refused_without_asking(
        &metadata,
        admitted,
        &findings,
        &[
            &format!("token realm on {}", metadata.host),
            "imageResolution.authHosts",
        ],
    );
}

#[tokio::test]
async fn error_bodies_are_never_quoted_in_a_denial_only_the_oci_error_code() {
    let secret = r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"ASIA-SECRET-KEY","detail":"secret-session-token"}]}"#;
    let cases: [(u16, &str, &str, &str); 4] = [
        (
            404,
            "application/json",
            secret,
            "answered 404: MANIFEST_UNKNOWN",
        ),
        (
            500,
            "text/plain",
            "ASIA-SECRET-KEY secret-session-token",
            "answered 500",
        ),
        (
            404,
            "application/json",
            r#"{"errors":[{"code":"ASIA-SECRET-KEY"}]}"#,
            "answered 404: an error code outside the OCI distribution spec",
        ),
        (
            401,
            "application/json",
            secret,
            "refused the lookup as unauthorized",
        ),
    ];
    for (status, content_type, body, expected) in cases {
        let registry = Recorder::start(move |_| {
            answer(
                status,
                &[
                    ("content-type", content_type.to_string()),
                    ("www-authenticate", r#"Basic realm="r""#.to_string()),
                ],
                body,
            )
        })
        .await;
        let image = format!("{}/ml/train:v1", registry.host);
        let (admitted, findings) = findings(only(&registry.host), &Pinner::default(), &image).await;
        assert!(!admitted, "{findings}");
        assert!(findings.contains(expected), "{status} {body}: {findings}");
        assert!(
            !findings.contains("ASIA") && !findings.contains("secret"),
            "{status} {body}: {findings}"
        );
    }
}
