//! Digest pinning against a real registry: Debian's `docker-registry` (distribution 2.8) on
//! 127.0.0.1, images pushed over its HTTP API, jobs decided as the webhooks decide them.
//!
//! Every test is reported ignored, after one line saying why, when the registry binary is
//! missing (`tests/support/registry.rs`).

mod support;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use gangplank::images::{FailureMode, Keychain, Pinner, Settings};
use libtest_mimic::{Arguments, Trial};
use support::registry::{
    self, image_findings, image_of, job_with_images, policies_with, review_pinned, Auth, Registry,
    TokenServer, DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST,
};

type Test = fn() -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// `(name, test)` for each async test fn named.
macro_rules! trials {
    ($($test:ident),* $(,)?) => {
        vec![$((stringify!($test), (|| Box::pin($test())) as Test)),*]
    };
}

fn main() {
    let tests: Vec<(&str, Test)> = trials![
        pins_oci_and_docker_manifests_to_the_sha256_of_the_bytes_pushed,
        a_multi_arch_image_pins_its_index_not_a_platform,
        a_moved_tag_is_seen_after_the_cache_ttl_and_not_before,
        an_htpasswd_registry_works_with_a_pull_secret_and_is_refused_clearly_without,
        the_bearer_flow_works_and_reuses_the_token_of_a_scope,
        an_unknown_repository_or_tag_is_denied_naming_the_image_and_the_registrys_answer,
        a_registry_that_is_down_gets_the_configured_failure_mode,
        a_registry_that_never_answers_is_given_up_on_at_the_budget,
        images_already_pinned_are_left_alone,
        check_resolve_pins_like_the_webhook_and_offline_check_lists_unresolved_images,
    ];
    let args = Arguments::from_args();
    let missing = registry::binary().err();
    if let Some(why) = &missing {
        support::skip(&format!("images_registry: every test ignored: {why}"));
    }
    let trials = tests
        .into_iter()
        .map(|(name, test)| {
            Trial::test(name, move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(test());
                Ok(())
            })
            .with_ignored_flag(missing.is_some())
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// Resolution on, allowed to call only `registry`, over plain HTTP.
fn settings_for(registry: &Registry) -> Settings {
    registry::settings_for_host(&registry.host)
}

fn keychain(host: &str, user: &str, password: &str) -> Keychain {
    let doc = serde_json::json!({"auths": {host: {"username": user, "password": password}}});
    Keychain::from_docker_config(doc.to_string().as_bytes(), "test pull secret").expect("keychain")
}

async fn pins_oci_and_docker_manifests_to_the_sha256_of_the_bytes_pushed() {
    let registry = Registry::start(Auth::Open).await;
    let (oci_bytes, _) = registry
        .push_image("ml/train", "v3", OCI_MANIFEST, "oci")
        .await;
    let (docker_bytes, _) = registry
        .push_image("ml/eval", "v1", DOCKER_MANIFEST, "docker")
        .await;
    let set = policies_with(settings_for(&registry));
    let train = registry.image("ml/train", "v3");
    let eval = registry.image("ml/eval", "v1");
    let decision = review_pinned(&set, &Pinner::default(), job_with_images(&train, &eval)).await;
    let oci_digest = registry::sha256(&oci_bytes);
    let docker_digest = registry::sha256(&docker_bytes);
    assert_eq!(
        image_of(&decision, "Master"),
        format!("{train}@{oci_digest}")
    );
    assert_eq!(
        image_of(&decision, "Worker"),
        format!("{eval}@{docker_digest}")
    );
    assert!(
        image_findings(&decision).is_empty(),
        "{:?}",
        image_findings(&decision)
    );
}

async fn a_multi_arch_image_pins_its_index_not_a_platform() {
    let registry = Registry::start(Auth::Open).await;
    let (oci_index, oci_children) = registry.push_multi_arch("ml/oci", "v1", OCI_INDEX).await;
    let (docker_list, docker_children) = registry
        .push_multi_arch("ml/docker", "v1", DOCKER_LIST)
        .await;
    let set = policies_with(settings_for(&registry));
    let oci = registry.image("ml/oci", "v1");
    let docker = registry.image("ml/docker", "v1");
    let decision = review_pinned(&set, &Pinner::default(), job_with_images(&oci, &docker)).await;
    assert_eq!(image_of(&decision, "Master"), format!("{oci}@{oci_index}"));
    assert_eq!(
        image_of(&decision, "Worker"),
        format!("{docker}@{docker_list}")
    );
    assert!(!oci_children.contains(&oci_index) && !docker_children.contains(&docker_list));
}

async fn a_moved_tag_is_seen_after_the_cache_ttl_and_not_before() {
    let registry = Registry::start(Auth::Open).await;
    let (_, first) = registry
        .push_image("ml/train", "latest-run", OCI_MANIFEST, "one")
        .await;
    let ttl = Duration::from_secs(3);
    let set = policies_with(Settings {
        cache_ttl: ttl,
        ..settings_for(&registry)
    });
    let pinner = Pinner::default();
    let image = registry.image("ml/train", "latest-run");
    let job = || job_with_images(&image, &image);
    let looked_up = Instant::now();
    let decision = review_pinned(&set, &pinner, job()).await;
    assert_eq!(image_of(&decision, "Master"), format!("{image}@{first}"));

    let (_, moved) = registry
        .push_image("ml/train", "latest-run", OCI_MANIFEST, "two")
        .await;
    assert_ne!(first, moved);
    let decision = review_pinned(&set, &pinner, job()).await;
    let seen = image_of(&decision, "Master");
    // Only meaningful while the entry is fresh: the assertion is skipped, not failed, on a
    // machine so slow that the TTL ran out during the push.
    if looked_up.elapsed() < ttl {
        assert_eq!(
            seen,
            format!("{image}@{first}"),
            "the cached digest is used until the TTL"
        );
    }
    let expected = format!("{image}@{moved}");
    support::wait_for("the moved tag is seen", Duration::from_secs(30), || async {
        let seen = image_of(&review_pinned(&set, &pinner, job()).await, "Master");
        (seen == expected).then_some(()).ok_or(seen)
    })
    .await;
    assert!(
        looked_up.elapsed() >= ttl,
        "the moved tag was seen before the TTL ran out"
    );
}

async fn an_htpasswd_registry_works_with_a_pull_secret_and_is_refused_clearly_without() {
    let registry = Registry::start(Auth::Htpasswd {
        user: "puller".into(),
        password: "s3cret".into(),
    })
    .await;
    let (bytes, _) = registry
        .push_image("private/train", "v1", OCI_MANIFEST, "private")
        .await;
    let set = policies_with(settings_for(&registry));
    let image = registry.image("private/train", "v1");

    let with_secret = Pinner {
        credentials: keychain(&registry.host, "puller", "s3cret"),
        ..Pinner::default()
    };
    let decision = review_pinned(&set, &with_secret, job_with_images(&image, &image)).await;
    assert_eq!(
        image_of(&decision, "Master"),
        format!("{image}@{}", registry::sha256(&bytes))
    );

    let decision = review_pinned(&set, &Pinner::default(), job_with_images(&image, &image)).await;
    assert!(!decision.allowed());
    let without = image_findings(&decision).join("\n");
    assert!(
        without.contains(&format!("deny failed to resolve digest for {image}: registry {} refused the lookup as unauthorized: give the job's pods an imagePullSecret", registry.host)),
        "{without}"
    );

    // No credential oracle: wrong credentials read exactly as none (the log tells them apart).
    let wrong = Pinner {
        credentials: keychain(&registry.host, "puller", "wrong"),
        ..Pinner::default()
    };
    let decision = review_pinned(&set, &wrong, job_with_images(&image, &image)).await;
    assert_eq!(image_findings(&decision).join("\n"), without);
}

async fn the_bearer_flow_works_and_reuses_the_token_of_a_scope() {
    let tokens = TokenServer::start(Some(("robot".into(), "t0ken".into()))).await;
    let registry = Registry::start(Auth::Token(tokens.clone())).await;
    let (v1, _) = registry
        .push_image("team/app", "v1", OCI_MANIFEST, "v1")
        .await;
    let (v2, _) = registry
        .push_image("team/app", "v2", DOCKER_MANIFEST, "v2")
        .await;
    // The realm is the token server's host, listed for the registry (Docker Hub's is
    // auth.docker.io), over plain HTTP like the registry.
    let realm_host = tokens.addr.to_string();
    let set = policies_with(Settings {
        auth_hosts: [(registry.host.clone(), vec![realm_host.clone()])].into(),
        plain_http_registries: vec![registry.host.clone(), realm_host],
        ..settings_for(&registry)
    });
    let pinner = Pinner {
        credentials: keychain(&registry.host, "robot", "t0ken"),
        ..Pinner::default()
    };
    let (a, b) = (
        registry.image("team/app", "v1"),
        registry.image("team/app", "v2"),
    );
    let decision = review_pinned(&set, &pinner, job_with_images(&a, &a)).await;
    assert_eq!(
        image_of(&decision, "Master"),
        format!("{a}@{}", registry::sha256(&v1)),
        "{:?}",
        image_findings(&decision)
    );
    let issued = tokens.issued.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(issued, 1, "one token for repository:team/app:pull");
    let decision = review_pinned(&set, &pinner, job_with_images(&b, &b)).await;
    assert_eq!(
        image_of(&decision, "Master"),
        format!("{b}@{}", registry::sha256(&v2))
    );
    let issued = tokens.issued.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(issued, 1, "the token of the scope was reused");

    // Without credentials the token server refuses, and the denial says so.
    let decision = review_pinned(&set, &Pinner::default(), job_with_images(&a, &a)).await;
    let findings = image_findings(&decision).join("\n");
    assert!(
        findings.contains("refused the lookup as unauthorized"),
        "{findings}"
    );
}

async fn an_unknown_repository_or_tag_is_denied_naming_the_image_and_the_registrys_answer() {
    let registry = Registry::start(Auth::Open).await;
    registry
        .push_image("ml/train", "v1", OCI_MANIFEST, "x")
        .await;
    let set = policies_with(settings_for(&registry));
    let unknown_tag = registry.image("ml/train", "v9");
    let unknown_repo = registry.image("ml/nope", "v1");
    let decision = review_pinned(
        &set,
        &Pinner::default(),
        job_with_images(&unknown_tag, &unknown_repo),
    )
    .await;
    assert!(!decision.allowed());
    let findings = image_findings(&decision).join("\n");
    assert!(
        findings.contains(&format!("deny failed to resolve digest for {unknown_tag}: registry {} answered 404: MANIFEST_UNKNOWN;", registry.host)),
        "{findings}"
    );
    assert!(
        findings.contains(&format!("failed to resolve digest for {unknown_repo}: registry {} answered 404: MANIFEST_UNKNOWN;", registry.host)),
        "{findings}"
    );
    let denial = decision.denial_message().unwrap_or_default();
    assert!(
        denial.contains("/spec/pytorchReplicaSpecs/Master/template/spec/containers/0/image"),
        "{denial}"
    );
}

async fn a_registry_that_is_down_gets_the_configured_failure_mode() {
    let mut registry = Registry::start(Auth::Open).await;
    let image = registry.image("ml/train", "v1");
    registry.stop();
    let deny = policies_with(settings_for(&registry));
    let decision = review_pinned(&deny, &Pinner::default(), job_with_images(&image, &image)).await;
    let findings = image_findings(&decision).join("\n");
    assert!(!decision.allowed());
    assert!(
        findings.contains(&format!(
            "deny failed to resolve digest for {image}: cannot reach registry {}",
            registry.host
        )),
        "{findings}"
    );

    let allow = policies_with(Settings {
        failure_mode: FailureMode::Allow,
        ..settings_for(&registry)
    });
    let decision = review_pinned(&allow, &Pinner::default(), job_with_images(&image, &image)).await;
    let warnings = decision.warnings().join("\n");
    assert!(
        warnings.contains(&format!("cannot reach registry {}", registry.host)),
        "{warnings}"
    );
    assert!(
        warnings.contains("left as written (imageResolution.failureMode: allow)"),
        "{warnings}"
    );
    assert_eq!(image_of(&decision, "Master"), image, "left as written");
}

async fn a_registry_that_never_answers_is_given_up_on_at_the_budget() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let host = listener.local_addr().expect("addr").to_string();
    let _hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let set = policies_with(Settings {
        budget: Duration::from_millis(300),
        ..registry::settings_for_host(&host)
    });
    let image = format!("{host}/ml/slow:v1");
    let pinner = Pinner::default();
    let review = review_pinned(&set, &pinner, job_with_images(&image, &image));
    // A hang guard, not a timing threshold: the budget ends the lookup long before this.
    let decision = tokio::time::timeout(Duration::from_secs(60), review)
        .await
        .expect("an answer");
    let findings = image_findings(&decision).join("\n");
    assert!(
        findings.contains(&format!(
            "failed to resolve digest for {image}: registry {host} did not answer within 300 ms"
        )),
        "{findings}"
    );
}

async fn images_already_pinned_are_left_alone() {
    let registry = Registry::start(Auth::Open).await;
    registry
        .push_image("ml/train", "v1", OCI_MANIFEST, "x")
        .await;
    let set = policies_with(settings_for(&registry));
    // A digest the registry does not have: were it looked up, it would be refused.
    let pinned = format!(
        "{}@sha256:{}",
        registry.image("ml/train", "v1"),
        "ab".repeat(32)
    );
    let decision = review_pinned(&set, &Pinner::default(), job_with_images(&pinned, &pinned)).await;
    assert_eq!(image_of(&decision, "Master"), pinned);
    assert!(
        image_findings(&decision).is_empty(),
        "{:?}",
        image_findings(&decision)
    );
}

async fn check_resolve_pins_like_the_webhook_and_offline_check_lists_unresolved_images() {
    let registry = Registry::start(Auth::Htpasswd {
        user: "ci".into(),
        password: "pw".into(),
    })
    .await;
    let (bytes, _) = registry
        .push_image("ml/train", "v3", OCI_MANIFEST, "cli")
        .await;
    // Resolution stays off in params.yaml: --resolve turns it on, as documented.
    let policies = registry::policies_dir_with(&Settings {
        enabled: false,
        ..settings_for(&registry)
    });
    let work = tempfile::tempdir().expect("temp dir");
    let image = registry.image("ml/train", "v3");
    let manifest = work.path().join("job.json");
    std::fs::write(&manifest, job_with_images(&image, &image).to_string()).expect("write job");
    let credentials = work.path().join("config.json");
    let doc = serde_json::json!({"auths": {&registry.host: {"auth": "Y2k6cHc="}}});
    std::fs::write(&credentials, doc.to_string()).expect("write credentials");
    let check = |extra: &[&str]| {
        let output = std::process::Command::new(support::gangplank())
            .arg("check")
            .arg(&manifest)
            .arg("--policies")
            .arg(policies.path())
            .args(extra)
            .output()
            .expect("run gangplank check");
        (
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };

    let (offline, stderr) = check(&[]);
    assert!(
        offline.contains(&format!("images left unresolved (offline; --resolve looks tags up as the webhook would): {image}")),
        "{offline}\n{stderr}"
    );

    let credentials_flag = format!("--registry-credentials={}", credentials.display());
    let (pinned, stderr) = check(&["--resolve", &credentials_flag, "-o", "yaml"]);
    let digest = registry::sha256(&bytes);
    assert!(
        pinned.contains(&format!("image: {image}@{digest}")),
        "{pinned}\n{stderr}"
    );

    let (refused, stderr) = check(&["--resolve"]);
    assert!(
        refused.contains("refused the lookup as unauthorized"),
        "{refused}\n{stderr}"
    );
    assert!(
        refused.contains(&format!(
            "images left unresolved (lookup failed, see the images findings): {image}"
        )),
        "{refused}"
    );
}
