//! The admission webhooks over HTTPS: what the kube-apiserver calls on `kubectl apply`.
//!
//! - [`server`]: routes, the TLS accept loop, graceful shutdown ([`server::Server`]).
//! - [`handler`]: `/mutate` and `/validate`: decode, evaluate (bounded), encode.
//! - [`review`]: AdmissionReview v1 in and out.
//! - [`uid`]: `request.uid` of a review that is not parsed whole (over the body limit).
//! - [`verdict`]: a decision as `/validate` answers it, warnings within Kubernetes' limits.
//! - [`reload`]: the serving policy set and its hot reload.
//! - [`tls`]: the serving certificate and its hot reload.
//! - [`connections`]: open connections, bounded by evicting the least recently active.
//! - [`certs`]: a CA and serving certificates (`gangplank certs`, ephemeral `serve`).
//! - [`metrics`]: Prometheus metrics.

pub mod body;
pub mod certs;
pub mod connections;
pub mod handler;
pub mod handoff;
pub mod metrics;
pub mod poll;
pub mod reload;
pub mod review;
pub mod server;
pub mod tls;
pub mod uid;
pub mod verdict;

pub use metrics::Metrics;
pub use reload::PolicyStore;
pub use server::{Config, Server};
pub use tls::{CertFiles, ServingCert};

pub use crate::error_chain;
