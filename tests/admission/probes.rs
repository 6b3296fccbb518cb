//! /healthz, /readyz and /metrics.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use gangplank::admission::certs::Bundle;
use gangplank::admission::handler::Limits;
use gangplank::admission::server::{router, Shared};
use gangplank::admission::{Config, Metrics, PolicyStore, ServingCert};
use serde_json::Value;
use tower::ServiceExt;

use crate::support::{create, example, repo, wait_until, Options, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_readyz_report_policies_and_tls() {
    let server = TestServer::start().await;
    let (status, text) = server.get_text("/healthz").await;
    assert_eq!((status, text.trim()), (200, "ok"));
    let (status, text) = server.get_text("/readyz").await;
    assert_eq!(status, 200, "{text}");
    let ready: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["tls"]["serving"], true);
    assert_eq!(ready["tls"]["source"], "files");
    assert_eq!(ready["policies"]["loaded"], true);
    assert!(ready["policies"]["policies"]
        .as_u64()
        .is_some_and(|n| n > 5));
    assert!(ready["policies"].get("refused").is_none());
}

#[tokio::test]
async fn readyz_is_not_ready_until_tls_serves() {
    let bundle = Bundle::generate(&["localhost".to_string()], 1).expect("certs");
    let cert = Arc::new(
        ServingCert::from_pem(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes()).expect("cert"),
    );
    let store = Arc::new(PolicyStore::load(&repo().join("policies")).expect("policies"));
    let config = Config {
        addr: "127.0.0.1:0".parse().expect("addr"),
        limits: Limits {
            eval_timeout: Duration::from_secs(2),
            max_evaluations: 1,
            max_values: gangplank::admission::server::DEFAULT_MAX_REVIEW_VALUES,
        },
        max_body_bytes: 1024,
        reload_interval: Duration::from_secs(1),
        shutdown_delay: Duration::ZERO,
        max_connections: gangplank::admission::server::DEFAULT_MAX_CONNECTIONS,
        review_bytes_in_flight: gangplank::admission::server::DEFAULT_REVIEW_BYTES_IN_FLIGHT,
        review_budget_wait: gangplank::admission::server::DEFAULT_REVIEW_BUDGET_WAIT,
        images: Default::default(),
        client_ca: None,
        metrics_addr: None,
    };
    let shared = Shared::new(&config, store, cert, Arc::new(Metrics::new()));
    let readyz = || {
        Request::get("/readyz")
            .body(Body::empty())
            .expect("request")
    };
    let response = router(shared.clone())
        .oneshot(readyz())
        .await
        .expect("answered");
    assert_eq!(response.status(), 503);
    shared.set_serving(true);
    let response = router(shared).oneshot(readyz()).await.expect("answered");
    assert_eq!(response.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_violations_and_latency() {
    let server = TestServer::start().await;
    let good = example("pytorchjob-gpu.yaml");
    let patched = server.admit("/mutate", &create("a", &good)).await;
    assert_eq!(patched["allowed"], true);
    let bad = crate::support::apply(
        &example("rejected/two-masters.yaml"),
        &server
            .admit(
                "/mutate",
                &create("b", &example("rejected/two-masters.yaml")),
            )
            .await,
    );
    let denied = server.admit("/validate", &create("c", &bad)).await;
    assert_eq!(denied["allowed"], false);
    server
        .admit("/validate", &create("d", &example("configmap.yaml")))
        .await;
    let _ = server
        .post("/validate", &serde_json::json!({"kind": "nope"}))
        .await;

    let (status, text) = server.get_text("/metrics").await;
    assert_eq!(status, 200);
    for needle in [
        r#"gangplank_admission_requests_total{endpoint="mutate",kind="PyTorchJob",decision="patched"} 2"#,
        r#"gangplank_admission_requests_total{endpoint="validate",kind="PyTorchJob",decision="denied"} 1"#,
        r#"gangplank_admission_requests_total{endpoint="validate",kind="other",decision="skipped"} 1"#,
        r#"gangplank_admission_requests_total{endpoint="validate",kind="other",decision="invalid"} 1"#,
        r#"gangplank_policy_violations_total{policy="coordinator",action="deny"} 1"#,
        r#"gangplank_admission_request_duration_seconds_bucket{le="0.0005",endpoint="mutate"}"#,
        r#"gangplank_admission_request_duration_seconds_count{endpoint="validate"} 3"#,
        "# TYPE gangplank_policy_reloads counter",
        "# TYPE gangplank_tls_reloads counter",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_shutdown_readyz_fails_at_once_while_reviews_are_still_answered_for_the_delay() {
    let mut server = TestServer::with(Options {
        shutdown_delay: Duration::from_secs(4),
        ..Options::default()
    })
    .await;
    server.begin_shutdown();
    wait_until("readyz fails", Duration::from_secs(2), || async {
        server.get_text("/readyz").await.0 == 503
    })
    .await;
    let response = server
        .admit(
            "/mutate",
            &create("draining", &example("pytorchjob-gpu.yaml")),
        )
        .await;
    assert_eq!(response["allowed"], true);
    server.stop().await;
}

/// Trainer objects: a TrainJob of an API version gangplank does not know is passed with a
/// warning and counted apart; a pod labelled for a native TrainJob gang gets its scheduling
/// group at create and is counted as a Pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trainer_requests_are_counted_by_kind() {
    let server = TestServer::start().await;
    let future = serde_json::json!({
        "apiVersion": "trainer.kubeflow.org/v1beta1", "kind": "TrainJob",
        "metadata": {"name": "next", "namespace": "team"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    });
    let passed = server.admit("/validate", &create("t1", &future)).await;
    assert_eq!(passed["allowed"], true, "{passed}");
    let warning = passed["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.starts_with("[gangplank] trainer.kubeflow.org/v1beta1 TrainJob is an API version gangplank does not know"),
        "{passed}"
    );
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "llm-node-0-0", "namespace": "team", "labels": {"gangplank.dev/pod-group": "llm"}},
        "spec": {"containers": [{"name": "node", "image": "x"}]},
    });
    let joined = server.admit("/mutate", &create("p1", &pod)).await;
    let patched = crate::support::apply(&pod, &joined);
    assert_eq!(
        patched["spec"]["schedulingGroup"],
        serde_json::json!({"podGroupName": "llm"}),
        "{joined}"
    );
    let (_, text) = server.get_text("/metrics").await;
    for needle in [
        r#"gangplank_admission_requests_total{endpoint="validate",kind="trainer-unknown-version",decision="skipped"} 1"#,
        r#"gangplank_admission_requests_total{endpoint="mutate",kind="Pod",decision="patched"} 1"#,
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
}
