//! A registry stand-in whose answers the test holds back, for digest-pinning tests that
//! control the order of events instead of sleeping: each request is handed to the test's
//! `hold`, and answered with an OCI manifest of [`DIGEST`] once `hold`'s future completes.

use std::future::Future;

use axum::body::Body;
use axum::http::{Request, Response};

/// The digest every answer carries.
pub const DIGEST: &str = "sha256:4a1e4c9c1f32b7d2a53f6d2ad0b1f0c0d12ab1a9d1e2c3b4a5f60718293a4b5c";

/// Serves on 127.0.0.1 until the test's runtime ends; returns its `host:port`. `hold` gets
/// each request's path.
pub async fn held_registry<F, Fut>(hold: F) -> String
where
    F: Fn(String) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let host = listener.local_addr().expect("addr").to_string();
    let app = axum::Router::new().fallback(move |request: Request<Body>| {
        let held = hold(request.uri().path().to_string());
        async move {
            held.await;
            Response::builder()
                .header("content-type", "application/vnd.oci.image.manifest.v1+json")
                .header("docker-content-digest", DIGEST)
                .body(Body::empty())
                .unwrap_or_default()
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    host
}
