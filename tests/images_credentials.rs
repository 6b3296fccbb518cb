//! Registry credentials go only where they belong (issue 32, item 2, image side): a
//! credential for registry A is never sent to registry B, not for B's images, not across a
//! redirect from A to B, not to a token realm off A's host that `authHosts` does not list;
//! and a refusal reads the same whether credentials were found or not.
//!
//! The registries are recording servers on 127.0.0.1 (`support::registry::Recorder`).

mod support;

use std::time::Duration;

use axum::http::Request;
use gangplank::images::{Keychain, Pinner, Settings};
use support::held_registry::DIGEST;
use support::registry::{
    answer, image_findings, image_of, job_with_images, policies_with, review_pinned, Recorder,
};

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn credentials(host: &str) -> Keychain {
    let doc = serde_json::json!({"auths": {host: {"username": "robot", "password": "s3cret"}}});
    Keychain::from_docker_config(doc.to_string().as_bytes(), "test").expect("keychain")
}

/// A manifest answer with [`DIGEST`].
fn manifest() -> axum::response::Response {
    answer(
        200,
        &[
            ("content-type", MANIFEST.to_string()),
            ("docker-content-digest", DIGEST.to_string()),
        ],
        "",
    )
}

fn has_authorization(request: &Request<axum::body::Body>) -> bool {
    request.headers().contains_key("authorization")
}

/// Resolution on for `hosts`, all over plain HTTP.
fn allowing(hosts: &[&str]) -> Settings {
    let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    Settings {
        enabled: true,
        allowed_registries: hosts.clone(),
        plain_http_registries: hosts,
        ..Settings::default()
    }
}

async fn decide(settings: Settings, pinner: &Pinner, image: &str) -> gangplank::review::Decision {
    let set = policies_with(settings);
    let review = review_pinned(&set, pinner, job_with_images(image, image));
    // A hang guard, not a timing threshold: the 2 s budget ends every lookup before it.
    tokio::time::timeout(Duration::from_secs(60), review)
        .await
        .expect("an answer")
}

#[tokio::test]
async fn a_credential_for_one_registry_is_never_sent_to_another_not_even_across_a_redirect() {
    let b = Recorder::start(|_| manifest()).await;
    let b_host = b.host.clone();
    // A wants Basic credentials, then sends its manifests to B (an allowed registry).
    let a = Recorder::start(move |request| {
        if !has_authorization(request) {
            return answer(
                401,
                &[("www-authenticate", r#"Basic realm="a""#.into())],
                "",
            );
        }
        let location = format!("http://{b_host}{}", request.uri().path());
        answer(307, &[("location", location)], "")
    })
    .await;
    let settings = allowing(&[&a.host, &b.host]);
    let pinner = Pinner {
        credentials: credentials(&a.host),
        ..Pinner::default()
    };

    let on_a = format!("{}/ml/train:v1", a.host);
    let decision = decide(settings.clone(), &pinner, &on_a).await;
    assert_eq!(
        image_of(&decision, "Master"),
        format!("{on_a}@{DIGEST}"),
        "{:?}",
        image_findings(&decision)
    );
    assert!(
        a.seen().iter().any(|s| s.authorization.is_some()),
        "A got its credentials: {:?}",
        a.seen()
    );

    let on_b = format!("{}/ml/eval:v1", b.host);
    let decision = decide(settings, &pinner, &on_b).await;
    assert_eq!(image_of(&decision, "Master"), format!("{on_b}@{DIGEST}"));

    let seen = b.seen();
    assert!(seen.len() >= 2, "B was asked for both images: {seen:?}");
    assert!(
        seen.iter().all(|s| s.authorization.is_none()),
        "A's credentials reached B: {seen:?}"
    );
}

#[tokio::test]
async fn a_token_realm_gets_the_registrys_credentials_only_when_auth_hosts_lists_it() {
    let realm = Recorder::start(|_| {
        answer(
            200,
            &[("content-type", "application/json".into())],
            r#"{"token":"granted","expires_in":31536000}"#,
        )
    })
    .await;
    let challenge = format!(r#"Bearer realm="http://{}/token",service="r""#, realm.host);
    let registry = Recorder::start(move |request| {
        match request.headers().get("authorization").map(|v| v.to_str()) {
            Some(Ok("Bearer granted")) => manifest(),
            _ => answer(401, &[("www-authenticate", challenge.clone())], ""),
        }
    })
    .await;
    let pinner = Pinner {
        credentials: credentials(&registry.host),
        ..Pinner::default()
    };
    let image = format!("{}/ml/train:v1", registry.host);

    // Not listed: refused before the realm is asked, naming the param.
    let unlisted = Settings {
        plain_http_registries: vec![registry.host.clone(), realm.host.clone()],
        ..allowing(&[&registry.host])
    };
    let decision = decide(unlisted.clone(), &pinner, &image).await;
    let findings = image_findings(&decision).join("\n");
    assert!(
        findings.contains(&format!(
            "names a token realm on {}, which is neither the registry's own host nor listed for it in imageResolution.authHosts (add `{}: [{}]` there",
            realm.host, registry.host, realm.host
        )),
        "{findings}"
    );
    assert_eq!(realm.hits(), 0, "{:?}", realm.seen());

    // Listed: the realm gets the registry's credentials and its token pins the image. (A
    // new resolver: the first one remembers the refusal for negativeCacheTtl.)
    let listed = Settings {
        auth_hosts: [(registry.host.clone(), vec![realm.host.clone()])].into(),
        ..unlisted
    };
    let pinner = Pinner {
        credentials: credentials(&registry.host),
        ..Pinner::default()
    };
    let decision = decide(listed, &pinner, &image).await;
    assert_eq!(
        image_of(&decision, "Master"),
        format!("{image}@{DIGEST}"),
        "{:?}",
        image_findings(&decision)
    );
    let basic = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "robot:s3cret")
    );
    assert_eq!(
        realm
            .seen()
            .iter()
            .map(|s| s.authorization.clone())
            .collect::<Vec<_>>(),
        vec![Some(basic)]
    );
}

#[tokio::test]
async fn a_refusal_reads_the_same_with_wrong_credentials_and_with_none() {
    // Refuses everyone: with credentials (wrong ones) or without.
    let registry = Recorder::start(|_| {
        answer(
            401,
            &[("www-authenticate", r#"Basic realm="r""#.into())],
            r#"{"errors":[{"code":"UNAUTHORIZED","message":"bad password for robot"}]}"#,
        )
    })
    .await;
    let image = format!("{}/ml/train:v1", registry.host);
    let settings = allowing(&[&registry.host]);
    let with = Pinner {
        credentials: credentials(&registry.host),
        ..Pinner::default()
    };
    let refused_with = image_findings(&decide(settings.clone(), &with, &image).await);
    let refused_without = image_findings(&decide(settings, &Pinner::default(), &image).await);
    assert_eq!(refused_with, refused_without);
    let message = refused_with.join("\n");
    assert!(
        message.contains("refused the lookup as unauthorized")
            && !message.contains("robot")
            && !message.contains("none were found"),
        "{message}"
    );
    // The credentials were sent (to the registry itself), so the two cases did differ.
    assert!(registry.seen().iter().any(|s| s.authorization.is_some()));
}
