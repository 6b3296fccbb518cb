//! The admission webhooks over HTTPS: what the kube-apiserver calls on `kubectl apply`.
//!
//! - [`server`]: routes, the TLS accept loop, graceful shutdown ([`server::Server`]).
//! - [`limits`]: what the server holds at most, sized together; [`refusal`]: reviews refused
//!   before they are judged.
//! - [`handler`]: `/mutate` and `/validate`: decode, evaluate (bounded), encode.
//! - [`review`]: AdmissionReview v1 in and out.
//! - [`body`], [`budget`]: bodies read within the size limit and the memory budget.
//! - [`tokens`]: JSON values counted as a body arrives, to refuse a dense one unparsed.
//! - [`uid`]: `request.uid` of a review that is not parsed whole (over the body limit).
//! - [`verdict`]: a decision as `/validate` answers it, warnings within Kubernetes' limits.
//! - [`reload`]: the serving policy set and its hot reload.
//! - [`tls`]: the serving certificate and its hot reload.
//! - [`client_auth`]: optional mutual TLS (`--client-ca`) and its reload.
//! - [`client_identity`]: the subject or SAN a client certificate must carry
//!   (`--client-ca-subject`, `--client-san`).
//! - [`drain`]: shutting down without losing a request (Connection: close, GOAWAY).
//! - [`scrape`]: `/metrics` on a plain-HTTP listener of its own (`--metrics-addr`).
//! - [`connections`]: open connections, bounded by evicting the least recently active.
//! - [`certs`]: a CA and serving certificates (`gangplank certs`, ephemeral `serve`).
//! - [`metrics`]: Prometheus metrics.

pub mod body;
pub mod budget;
pub mod certs;
pub mod client_auth;
pub mod client_identity;
pub mod connections;
pub mod drain;
pub mod handler;
pub mod handoff;
pub mod limits;
pub mod metrics;
pub mod poll;
mod probes;
mod refusal;
pub mod reload;
pub mod review;
pub mod scrape;
pub mod server;
pub mod tls;
pub mod tokens;
pub mod uid;
pub mod verdict;

pub use metrics::Metrics;
pub use reload::PolicyStore;
pub use server::{Config, Server};
pub use tls::{CertFiles, ServingCert};

pub use crate::error_chain;
