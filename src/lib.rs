//! gangplank: admission policies and lifecycle control for Kubeflow distributed training jobs.
//!
//! - [`admission`]: the HTTPS webhook server (`gangplank serve`), TLS and policy hot reload.
//! - [`job`]: the kind table and JobView, one normalized view over every training kind.
//! - [`policy`]: the Rego policy set (regorus), parameters, mutation intents, decisions.
//! - [`review`]: admission requests in (manifests or AdmissionReviews), decisions out.
//! - [`suite`]: policy test suites (Rego `test_*` rules and YAML case files).
//! - [`cli`]: the `gangplank` subcommands.

pub mod admission;
pub mod cli;
pub mod job;
pub mod pointer;
pub mod policy;
pub mod review;
pub mod suite;
