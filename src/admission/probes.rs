//! `/healthz` (the process answers) and the answer of `/readyz` (policies loaded and TLS
//! serving, with the detail of a refused policy edit or certificate).

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "request data must never panic the server"
)]

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::reload::PolicyStatus;
use super::tls::TlsStatus;

pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

#[derive(serde::Serialize)]
struct Readiness {
    ready: bool,
    tls: TlsReadiness,
    policies: PolicyStatus,
}

#[derive(serde::Serialize)]
struct TlsReadiness {
    serving: bool,
    #[serde(flatten)]
    status: TlsStatus,
}

/// Ready when a policy set is loaded and the listener serves TLS. A refused policy edit or
/// certificate does not make the server unready (the previous one serves, and taking every
/// replica out of the Service would stop all admissions); it shows in the detail.
pub(super) fn readiness(serving: bool, policies: PolicyStatus, tls: TlsStatus) -> Response {
    let ready = serving && policies.loaded;
    let body = Readiness {
        ready,
        tls: TlsReadiness {
            serving,
            status: tls,
        },
        policies,
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let json = serde_json::to_vec_pretty(&body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], json).into_response()
}
