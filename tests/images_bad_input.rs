//! Bad input to digest pinning: malformed references, and registries that answer HTML, loop
//! redirects, send a 50 MB manifest or a digest header that does not match the body. Each
//! gives a clear message naming the image, and an answer (never a hung request).
//!
//! The misbehaving registries are small axum servers on 127.0.0.1: no real registry
//! misbehaves on demand.

mod support;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode};
use gangplank::images::{Pinner, Settings};
use support::registry::{
    image_findings, image_of, job_with_images, policies_with, review_pinned, settings_for_host,
};

/// Serves `answer` for every request on 127.0.0.1; returns `host:port`.
async fn fake_registry(answer: fn(Request<Body>) -> Response<Body>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let host = listener.local_addr().expect("addr").to_string();
    let app =
        axum::Router::new().fallback(move |request: Request<Body>| async move { answer(request) });
    tokio::spawn(async move { axum::serve(listener, app).await });
    host
}

/// The `images` findings for a job running `image`, resolved against `host` over plain HTTP.
async fn findings_for(host: &str, image: &str) -> String {
    let set = policies_with(settings_for_host(host));
    let pinner = Pinner::default();
    let review = review_pinned(&set, &pinner, job_with_images(image, image));
    // A hang guard, not a timing threshold: the 2 s budget ends every lookup before it.
    let decision = tokio::time::timeout(Duration::from_secs(60), review)
        .await
        .expect("an answer");
    assert_eq!(image_of(&decision, "Master"), image, "left as written");
    assert!(!decision.allowed(), "denied in the default failure mode");
    image_findings(&decision).join("\n")
}

const MANIFEST_JSON: &str = "application/vnd.oci.image.manifest.v1+json";

#[tokio::test]
async fn malformed_references_get_a_message_per_image_saying_what_is_wrong() {
    let set = policies_with(Settings {
        enabled: true,
        allowed_registries: vec!["registry.example.com".into()],
        ..Settings::default()
    });
    let long = format!("registry.example.com/{}:v1", "a".repeat(4096));
    let cases = [
        ("UPPER/case", "path component \"UPPER\" is not lowercase"),
        (
            "registry.example.com/ml/train:",
            "tag \"\" must be 1 to 128 letters",
        ),
        (
            long.as_str(),
            "the name is 4117 characters long with its registry; at most 255 are allowed",
        ),
    ];
    for (image, expected) in cases {
        let decision = review_pinned(&set, &Pinner::default(), job_with_images(image, image)).await;
        let findings = image_findings(&decision).join("\n");
        assert!(
            findings.contains(&format!(
                "image {image:?} is not a valid reference: {expected}"
            )),
            "{image}: {findings}"
        );
        assert!(!decision.allowed());
    }
    // A malformed digest is never looked up: the images policy names the form to use.
    let decision = review_pinned(
        &set,
        &Pinner::default(),
        job_with_images("a@sha256:short", "a@sha256:short"),
    )
    .await;
    let findings = image_findings(&decision).join("\n");
    assert!(
        findings.contains("has a malformed digest: it must end in @sha256:"),
        "{findings}"
    );
    assert!(!findings.contains("failed to resolve"), "{findings}");
}

#[tokio::test]
async fn a_registry_answering_html_is_not_taken_for_a_manifest() {
    let host = fake_registry(|_| {
        Response::builder()
            .header("content-type", "text/html; charset=utf-8")
            .body(Body::from("<html><body>Please log in</body></html>"))
            .unwrap_or_default()
    })
    .await;
    let image = format!("{host}/ml/train:v1");
    let findings = findings_for(&host, &image).await;
    assert!(
        findings.contains(&format!("failed to resolve digest for {image}: registry {host} sent an unusable answer: a text/html page instead of a manifest")),
        "{findings}"
    );
}

#[tokio::test]
async fn a_login_page_behind_an_error_status_is_summarised_not_quoted() {
    let host = fake_registry(|_| {
        Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .header("content-type", "text/html")
            .body(Body::from(format!("<html>{}</html>", "x".repeat(100_000))))
            .unwrap_or_default()
    })
    .await;
    let image = format!("{host}/ml/train:v1");
    let findings = findings_for(&host, &image).await;
    assert!(
        findings.contains(&format!("registry {host} answered 502: an HTML page")),
        "{findings}"
    );
}

#[tokio::test]
async fn a_redirect_loop_ends_with_a_message() {
    let host = fake_registry(|request| {
        Response::builder()
            .status(StatusCode::FOUND)
            .header("location", request.uri().to_string())
            .body(Body::empty())
            .unwrap_or_default()
    })
    .await;
    let image = format!("{host}/ml/train:v1");
    let findings = findings_for(&host, &image).await;
    assert!(
        findings.contains(&format!(
            "registry {host} sent an unusable answer: a redirect loop or more than 5 redirects"
        )),
        "{findings}"
    );
}

/// 50 MB of JSON-typed bytes, streamed: reading stops at the 4 MiB manifest limit.
fn huge_manifest(request: Request<Body>, declare_length: bool) -> Response<Body> {
    const SIZE: usize = 50 * 1024 * 1024;
    let builder = Response::builder().header("content-type", MANIFEST_JSON);
    if request.method() == Method::HEAD {
        return builder.body(Body::empty()).unwrap_or_default();
    }
    let chunks = futures::stream::iter(
        (0..SIZE / 65536).map(|_| Ok::<_, std::io::Error>(vec![b' '; 65536])),
    );
    let builder = if declare_length {
        builder.header("content-length", SIZE)
    } else {
        builder
    };
    builder.body(Body::from_stream(chunks)).unwrap_or_default()
}

#[tokio::test]
async fn a_50_mb_manifest_is_refused_without_reading_it_all() {
    for fake in [
        (|r| huge_manifest(r, true)) as fn(Request<Body>) -> Response<Body>,
        |r| huge_manifest(r, false),
    ] {
        let host = fake_registry(fake).await;
        let image = format!("{host}/ml/train:v1");
        let findings = findings_for(&host, &image).await;
        assert!(
            findings.contains(&format!("registry {host} sent an unusable answer: the manifest is larger than 4194304 bytes")),
            "{findings}"
        );
    }
}

#[tokio::test]
async fn a_digest_header_that_does_not_match_the_body_is_an_error_not_a_digest() {
    let host = fake_registry(|request| {
        let builder = Response::builder().header("content-type", MANIFEST_JSON);
        if request.method() == Method::HEAD {
            // No digest on HEAD: the resolver must GET and hash.
            return builder.body(Body::empty()).unwrap_or_default();
        }
        builder
            .header(
                "docker-content-digest",
                format!("sha256:{}", "0".repeat(64)),
            )
            .body(Body::from(r#"{"schemaVersion":2}"#))
            .unwrap_or_default()
    })
    .await;
    let image = format!("{host}/ml/train:v1");
    let findings = findings_for(&host, &image).await;
    let body_digest = gangplank::images::digest::sha256(br#"{"schemaVersion":2}"#);
    assert!(
        findings.contains(&format!("Docker-Content-Digest sha256:{} does not match the sha256 of the manifest, {body_digest}", "0".repeat(64))),
        "{findings}"
    );
}

#[tokio::test]
async fn without_a_digest_header_the_digest_is_the_sha256_of_the_body() {
    let host = fake_registry(|_| {
        Response::builder()
            .header("content-type", MANIFEST_JSON)
            .body(Body::from(r#"{"schemaVersion":2}"#))
            .unwrap_or_default()
    })
    .await;
    let image = format!("{host}/ml/train:v1");
    let set = policies_with(settings_for_host(&host));
    let decision = review_pinned(&set, &Pinner::default(), job_with_images(&image, &image)).await;
    let digest = gangplank::images::digest::sha256(br#"{"schemaVersion":2}"#);
    assert_eq!(image_of(&decision, "Master"), format!("{image}@{digest}"));
}

#[tokio::test]
async fn a_registry_that_refuses_head_is_asked_with_get() {
    let host = fake_registry(|request| {
        if request.method() == Method::HEAD {
            return Response::builder()
                .status(StatusCode::METHOD_NOT_ALLOWED)
                .body(Body::empty())
                .unwrap_or_default();
        }
        Response::builder()
            .header("content-type", MANIFEST_JSON)
            .body(Body::from(r#"{"schemaVersion":2}"#))
            .unwrap_or_default()
    })
    .await;
    let image = format!("{host}/ml/train:v1");
    let set = policies_with(settings_for_host(&host));
    let decision = review_pinned(&set, &Pinner::default(), job_with_images(&image, &image)).await;
    let digest = gangplank::images::digest::sha256(br#"{"schemaVersion":2}"#);
    assert_eq!(image_of(&decision, "Master"), format!("{image}@{digest}"));
}

#[tokio::test]
async fn registries_outside_the_allowed_list_are_never_called() {
    let host = fake_registry(|_| panic!("called a registry that is not allowed")).await;
    let set = policies_with(Settings {
        enabled: true,
        allowed_registries: vec!["registry.example.com".into()],
        plain_http_registries: vec![host.clone()],
        ..Settings::default()
    });
    let image = format!("{host}/ml/train:v1");
    let decision = review_pinned(&set, &Pinner::default(), job_with_images(&image, &image)).await;
    let findings = image_findings(&decision).join("\n");
    assert!(
        findings.contains(&format!(
            "registry {host} is not in imageResolution.allowedRegistries"
        )),
        "{findings}"
    );
}
