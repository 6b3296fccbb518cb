//! Policy hot reload: the policy set requests use, and the task that replaces it.
//!
//! Entry points: [`PolicyStore::load`], [`PolicyStore::current`] (per request) and [`watch`].
//!
//! # Guarantees
//! - A request sees one whole set: it takes an `Arc` to the set current when it starts and
//!   keeps it to the end, even if a reload swaps in another meanwhile.
//! - A directory that fails to load never replaces the serving set. The failure is logged,
//!   counted (`gangplank_policy_reloads_total{result="failure"}`) and shown on `/readyz`
//!   until a later edit loads.
//! - Compiling happens on a blocking thread, never on the request path.
//!
//! # Assumptions
//! Changes are detected by content: the files the loader reads (top-level `*.rego`,
//! `lib/**/*.rego`, `params.yaml`, `exceptions/*.yaml`) are hashed on every poll. A
//! ConfigMap volume updates them through an atomic `..data` symlink swap that modification
//! times and file watches on the paths can miss; reading through the paths sees it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use tracing::{error, info};

use super::metrics::{Metrics, ServingSet};
use crate::cluster::ClusterHandle;
use crate::policy::load::{rego_files, PARAMS_FILE};
use crate::policy::{LoadError, LoadOptions, PolicySet};
use crate::trainer::RuntimeCatalog;

/// The serving policy set of one directory.
#[derive(Debug)]
pub struct PolicyStore {
    dir: PathBuf,
    current: ArcSwapOption<PolicySet>,
    state: Mutex<State>,
    /// The cluster inventory every set of this store reads as `data.cluster`.
    cluster: ClusterHandle,
    /// The Trainer runtimes every set of this store renders TrainJobs with.
    runtimes: RuntimeCatalog,
    /// The flags every set of this store is loaded with (`--default-action`).
    options: LoadOptions,
}

#[derive(Debug, Default)]
struct State {
    /// Fingerprint of the directory content last tried.
    seen: u64,
    /// How many sets have been swapped in (1 after the initial load).
    generation: u64,
    loaded_at: Option<SystemTime>,
    /// Why the newest content was refused, while the previous set keeps serving.
    refused: Option<String>,
}

/// What `/readyz` reports about policies.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PolicyStatus {
    pub dir: String,
    pub loaded: bool,
    pub policies: usize,
    pub generation: u64,
    /// The policy-set hash of the serving set ([`crate::policy::set_hash`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Seconds since the Unix epoch when the serving set was loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loaded_at: Option<u64>,
    /// Why the newest content of the directory was refused (with file:line:col when it is
    /// a compile error); the previous set keeps serving.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl PolicyStore {
    /// Loads `dir` once. Errors leave nothing behind; the caller decides whether to start.
    pub fn load(dir: &Path) -> Result<PolicyStore, LoadError> {
        PolicyStore::load_with_cluster(dir, ClusterHandle::default())
    }

    /// Loads `dir` once; this set and every reloaded one read `data.cluster` from `cluster`.
    pub fn load_with_cluster(dir: &Path, cluster: ClusterHandle) -> Result<PolicyStore, LoadError> {
        PolicyStore::load_configured(dir, cluster, LoadOptions::default())
    }

    /// [`PolicyStore::load_with_cluster`], this set and every reloaded one loaded with
    /// `options`.
    pub fn load_configured(
        dir: &Path,
        cluster: ClusterHandle,
        options: LoadOptions,
    ) -> Result<PolicyStore, LoadError> {
        let seen = fingerprint(dir);
        let runtimes = RuntimeCatalog::default();
        let set = PolicySet::load_with(dir, options)?
            .with_cluster(cluster.clone())
            .with_runtimes(runtimes.clone());
        Ok(PolicyStore {
            options,
            cluster,
            runtimes,
            dir: dir.to_path_buf(),
            current: ArcSwapOption::from_pointee(set),
            state: Mutex::new(State {
                seen,
                generation: 1,
                loaded_at: Some(SystemTime::now()),
                refused: None,
            }),
        })
    }

    /// The runtime catalog of every set of this store (`serve` keeps it current).
    pub fn runtimes(&self) -> &RuntimeCatalog {
        &self.runtimes
    }

    /// A store with a set already compiled (tests, benchmarks).
    pub fn with_set(dir: &Path, set: PolicySet) -> PolicyStore {
        PolicyStore {
            options: set.sources().options,
            cluster: set.cluster().clone(),
            runtimes: set.runtimes().clone(),
            dir: dir.to_path_buf(),
            current: ArcSwapOption::from_pointee(set),
            state: Mutex::new(State {
                seen: fingerprint(dir),
                generation: 1,
                loaded_at: Some(SystemTime::now()),
                refused: None,
            }),
        }
    }

    /// The set a new request should use; `None` before any set loaded.
    pub fn current(&self) -> Option<Arc<PolicySet>> {
        self.current.load_full()
    }

    pub fn status(&self) -> PolicyStatus {
        let current = self.current.load();
        let policies = current.as_ref().map_or(0, |s| s.policies().len());
        let hash = current.as_ref().map(|s| s.sources().hash.clone());
        let (generation, loaded_at, refused) = self
            .state
            .lock()
            .map(|s| (s.generation, s.loaded_at, s.refused.clone()))
            .unwrap_or_default();
        PolicyStatus {
            dir: self.dir.display().to_string(),
            loaded: self.current.load().is_some(),
            policies,
            generation,
            hash,
            loaded_at: loaded_at.map(unix_seconds),
            refused,
        }
    }

    /// Tells `metrics` which set serves: its size, hash and load time (`serve` calls it
    /// once at start; each successful reload says it again).
    pub fn export_serving(&self, metrics: &Metrics) {
        let status = self.status();
        if let (Some(hash), Some(loaded_at)) = (status.hash.as_deref(), status.loaded_at) {
            metrics.set_serving(ServingSet {
                policies: status.policies,
                hash,
                loaded_at,
            });
        }
    }

    /// Reloads the directory if its content changed since the last attempt. Returns
    /// `Some(true)` when a new set was swapped in, `Some(false)` when the new content was
    /// refused, `None` when nothing changed. Blocking: reads and compiles.
    pub fn reload_if_changed(&self, metrics: &Metrics) -> Option<bool> {
        let seen = fingerprint(&self.dir);
        {
            let mut state = self.state.lock().ok()?;
            if state.seen == seen {
                return None;
            }
            state.seen = seen;
        }
        let started = std::time::Instant::now();
        let loaded = PolicySet::load_with(&self.dir, self.options).map(|s| {
            s.with_cluster(self.cluster.clone())
                .with_runtimes(self.runtimes.clone())
        });
        let mut state = self.state.lock().ok()?;
        match loaded {
            Ok(set) => {
                let n = set.policies().len();
                // Bookkeeping first, then the swap: whoever is judged by the new set also
                // sees its generation and reload count (readyz waits on the lock held here).
                let now = SystemTime::now();
                state.generation += 1;
                state.loaded_at = Some(now);
                state.refused = None;
                metrics.policy_reload(true);
                metrics.set_serving(ServingSet {
                    policies: n,
                    hash: &set.sources().hash,
                    loaded_at: unix_seconds(now),
                });
                self.current.store(Some(Arc::new(set)));
                info!(dir = %self.dir.display(), policies = n, generation = state.generation,
                    compile_ms = started.elapsed().as_millis() as u64, "policies reloaded");
                Some(true)
            }
            Err(e) => {
                let message = super::error_chain(&e);
                metrics.policy_reload(false);
                error!(dir = %self.dir.display(), error = %message,
                    "policy reload failed; the previous set keeps serving");
                state.refused = Some(message);
                Some(false)
            }
        }
    }
}

fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A hash of every file the loader reads, with their names. Unreadable entries hash their
/// error kind, so that a directory going missing counts as a change (and fails to load).
fn fingerprint(dir: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    let mut files = rego_files(dir, false).unwrap_or_default();
    let lib = dir.join("lib");
    if lib.is_dir() {
        match rego_files(&lib, true) {
            Ok(more) => files.extend(more),
            Err(e) => e.to_string().hash(&mut h),
        }
    }
    files.push(dir.join(PARAMS_FILE));
    match crate::policy::exceptions::paths(dir) {
        Ok(more) => files.extend(more),
        Err(e) => e.to_string().hash(&mut h),
    }
    dir.is_dir().hash(&mut h);
    for path in files {
        path.hash(&mut h);
        match std::fs::read(&path) {
            Ok(bytes) => bytes.hash(&mut h),
            Err(e) => format!("{:?}", e.kind()).hash(&mut h),
        }
    }
    h.finish()
}

/// Polls the policy directory every `interval` until `shutdown` resolves.
pub async fn watch(
    store: Arc<PolicyStore>,
    metrics: Arc<Metrics>,
    interval: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    super::poll::every(interval, shutdown, move || {
        store.reload_if_changed(&metrics);
    })
    .await;
}
