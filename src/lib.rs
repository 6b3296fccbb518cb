//! gangplank: admission policies and lifecycle control for Kubeflow distributed training jobs.
//!
//! - [`audit`]: existing jobs judged by the current policies (`gangplank audit`).
//! - [`admission`]: the HTTPS webhook server (`gangplank serve`), TLS and policy hot reload.
//! - [`controller`]: the lifecycle controller's pure planning core (`plan`: job + cluster → actions, status).
//! - [`crd`]: Rust types and generated CRDs of the training kinds the controller runs (`gangplank crds`).
//! - [`images`]: image digest pinning against OCI registries (tag → digest, auth, cache).
//! - [`job`]: the kind table and JobView, one normalized view over every training kind.
//! - [`metrics_catalog`]: every metric both `/metrics` endpoints export (the metrics reference).
//! - [`policy`]: the Rego policy set (regorus), parameters, mutation intents, decisions.
//! - [`review`]: admission requests in (manifests or AdmissionReviews), decisions out.
//! - [`release`]: the container image as an OCI layout, built without a daemon, and its push.
//! - [`suite`]: policy test suites (Rego `test_*` rules and YAML case files).
//! - [`cli`]: the `gangplank` subcommands.
//!
//! Below them all: [`build_info`] (this binary's version and revision), [`duration`] (`500ms`,
//! `2s`, `1m` in flags and params.yaml), [`exit`] (the exit codes), [`pointer`](mod@pointer)
//! (JSON pointers).

pub mod admission;
pub mod audit;
pub mod build_info;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod crd;
pub mod duration;
pub mod exit;
pub mod images;
pub mod job;
pub mod metrics_catalog;
pub mod placement;
pub mod pointer;
pub mod policy;
pub mod release;
pub mod review;
pub mod suite;
pub mod trainer;

/// Turns off backtrace capture for library errors unless the user asked for it explicitly.
///
/// regorus creates `anyhow` errors on its hot path (for undefined values) and drops them;
/// with `RUST_BACKTRACE=1` exported, each one captures a backtrace, which costs about a fifth
/// of the CPU of an admission request. Panics still print backtraces (`RUST_BACKTRACE`);
/// only `RUST_LIB_BACKTRACE`, which takes precedence for library errors, is set. Call it
/// first thing in `main`, before any thread starts.
pub fn no_library_backtraces() {
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
}

/// An error and its sources, `a: b: c`: one line for a message or a log field.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}
