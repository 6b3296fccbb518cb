//! One real test control plane for the end-to-end suites: etcd + kube-apiserver (+ kubectl)
//! from `KUBEBUILDER_ASSETS`, the upstream CRDs, and gangplank's webhooks as deploy/ installs
//! them.
//!
//! Entry points:
//! - [`assets::require`]: the test binaries, or `None` after printing why the suite skips;
//! - [`ControlPlane::shared`]: etcd + kube-apiserver started once per test binary, torn down
//!   when the binary exits (even after a panic or an abort); [`ControlPlane::client`] hands out
//!   a `kube::Client`, [`ControlPlane::namespace`] a fresh namespace per test;
//! - [`Webhooks::install`]: `gangplank serve` plus the webhook configurations of
//!   `deploy/webhooks.yaml`, rendered by `kubectl kustomize` and pointed at it.
//!
//! Each test binary uses a part of this module; the rest is dead code (or an unused
//! re-export) there.
#![allow(dead_code, unused_imports, unused_macros)]

pub mod assets;
pub mod control_plane;
pub mod controller;
pub mod coscheduling;
pub mod differential;
pub mod harness;
pub mod held_registry;
pub mod install;
pub mod jobs;
pub mod kueue;
pub mod kueue_shapes;
pub mod nodes;
pub mod policies;
pub mod process;
pub mod python_image;
pub mod rbac;
pub mod realistic;
pub mod realnode;
pub mod realnode_jobs;
pub mod registry;
pub mod run;
pub mod scheduler;
pub mod shapes;
pub mod trainer;
pub mod volcano;
pub mod webhooks;

pub use control_plane::{ControlPlane, Crds, Scheduling};
pub use webhooks::Webhooks;

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared/corpus`, or `GANGPLANK_CORPUS`.
pub fn corpus() -> PathBuf {
    std::env::var_os("GANGPLANK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/corpus"))
}

/// The requirement of a suite that runs upstream's examples (see `harness`): the corpus.
pub fn corpus_requirement() -> Result<(), String> {
    let examples = corpus().join("upstream-examples");
    if examples.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "the upstream example corpus is not at {} (set GANGPLANK_CORPUS to a copy of \
             shared/corpus)",
            examples.display()
        ))
    }
}

/// A skip notice, written past libtest's output capture so that a skipped suite is seen.
pub fn skip(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

/// The gangplank binary cargo built for this test run.
pub fn gangplank() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_gangplank"))
}

/// Runs `make()`'s future to completion on a thread of its own with its own runtime.
///
/// For set-up that outlives the test that triggers it (the shared control plane, the
/// webhook server): callers may be inside a runtime (an async test) or not, and a client
/// bound to a test's runtime would die with it.
pub fn on_own_runtime<T, F, Fut>(make: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(make())
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Polls `probe` until it is Ok, panicking after `limit` with the probe's last error.
pub async fn wait_for<T, F, Fut>(what: &str, limit: std::time::Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = std::time::Instant::now() + limit;
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(last) if std::time::Instant::now() >= deadline => {
                panic!("timed out after {limit:?}: {what}; last: {last}")
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
}
