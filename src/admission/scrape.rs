//! `--metrics-addr`: `/metrics` on a listener of its own, plain HTTP, for Prometheus.
//!
//! Entry points: [`bind`], then [`run`] with a shutdown future.
//!
//! Why a listener of its own: the webhook port is the one the apiserver calls, and with
//! `--client-ca` it answers only clients holding a certificate of that CA, which Prometheus
//! does not have; the NetworkPolicy of deploy/ admits the webhook port only from the control
//! plane. A second port lets the NetworkPolicy admit the monitoring namespace to it and to
//! nothing else, and carries nothing but counters (no review, no credential). When it is set,
//! the webhook port no longer serves `/metrics` (server.rs says where it went).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tracing::info;

use super::metrics::{self as m, Metrics};

/// Why the metrics listener could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for /metrics on {addr} (--metrics-addr)")]
pub struct BindError {
    addr: SocketAddr,
    #[source]
    source: std::io::Error,
}

/// Binds `addr` (port 0 picks a free one).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| BindError { addr, source })
}

/// The routes of the metrics listener: `GET /metrics` alone.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move { render(&metrics) }
        }),
    )
}

/// The Prometheus text of `metrics`, with its content type.
pub fn render(metrics: &Metrics) -> Response {
    let mut response = metrics.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(m::CONTENT_TYPE),
    );
    response
}

/// Serves `/metrics` on `listener` until `shutdown` resolves.
pub async fn run(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "serving /metrics over plain HTTP (--metrics-addr)");
    }
    let _ = axum::serve(listener, router(metrics))
        .with_graceful_shutdown(shutdown)
        .await;
}
