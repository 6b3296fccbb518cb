//! The routes driven in-process (no socket, no TLS) with a review in tests/data/admission/
//! written in the full shape the kube-apiserver sends (requestKind, requestResource,
//! userInfo.extra, options, managedFields), including fields gangplank does not read.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use gangplank::admission::certs::Bundle;
use gangplank::admission::handler::Limits;
use gangplank::admission::server::{router, Shared};
use gangplank::admission::{Config, Metrics, PolicyStore, ServingCert};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use crate::support::{apply, repo};

fn shared() -> Arc<Shared> {
    let bundle = Bundle::generate(&["localhost".to_string()], 1).expect("certs");
    let cert = Arc::new(
        ServingCert::from_pem(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes()).expect("cert"),
    );
    let store = Arc::new(PolicyStore::load(&repo().join("policies")).expect("policies"));
    let config = Config {
        addr: "127.0.0.1:0".parse().expect("addr"),
        limits: Limits {
            eval_timeout: Duration::from_secs(10),
            max_evaluations: 1,
            max_values: gangplank::admission::server::DEFAULT_MAX_REVIEW_VALUES,
        },
        max_body_bytes: gangplank::admission::server::DEFAULT_MAX_BODY_BYTES,
        reload_interval: Duration::from_secs(1),
        shutdown_delay: Duration::ZERO,
        max_connections: gangplank::admission::server::DEFAULT_MAX_CONNECTIONS,
        review_bytes_in_flight: gangplank::admission::server::DEFAULT_REVIEW_BYTES_IN_FLIGHT,
        review_budget_wait: gangplank::admission::server::DEFAULT_REVIEW_BUDGET_WAIT,
        images: Default::default(),
        client_ca: None,
        metrics_addr: None,
    };
    Shared::new(&config, store, cert, Arc::new(Metrics::new()))
}

fn payload(name: &str) -> Vec<u8> {
    std::fs::read(repo().join("tests/data/admission").join(name)).expect("test payload")
}

async fn post(shared: Arc<Shared>, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("request");
    let response = router(shared).oneshot(request).await.expect("answered");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, serde_json::from_slice(&bytes).expect("JSON"))
}

#[tokio::test]
async fn a_full_apiserver_review_is_mutated_then_validated_in_process() {
    let shared = shared();
    let body = payload("pytorchjob-create.json");
    let review: Value = serde_json::from_slice(&body).expect("JSON");
    let (status, mutated) = post(shared.clone(), "/mutate", body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        mutated["response"]["uid"],
        "0df28fbd-5f5f-11e8-bc74-36e6bb280816"
    );
    assert_eq!(mutated["response"]["allowed"], true);
    let object = &review["request"]["object"];
    let stored = apply(object, &mutated["response"]);
    assert_eq!(
        stored["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["schedulerName"],
        "volcano"
    );
    // Fields gangplank does not manage survive untouched.
    assert_eq!(
        stored["metadata"]["managedFields"],
        object["metadata"]["managedFields"]
    );
    assert_eq!(
        stored["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
            ["args"],
        object["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
            ["args"]
    );

    let mut second = review.clone();
    second["request"]["object"] = stored;
    let (status, validated) = post(
        shared,
        "/validate",
        serde_json::to_vec(&second).expect("JSON"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(validated["response"]["allowed"], true, "{validated}");
}
