//! Prometheus metrics of the lifecycle controller.
//!
//! Entry point: [`ControllerMetrics::new`], built once and shared by every kind's loop. Label
//! values come from closed sets only: kinds from the kind table, outcomes and failure stages
//! from fixed `&'static str`s; never job names or error text. The one exception, the
//! `job_namespace` of `gangplank_controller_unmanaged_jobs`, names namespaces the cluster's
//! administrators made, and only those holding jobs the controller leaves alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics_catalog::{self as catalog, register};

/// Reconcile duration buckets in seconds: a reconcile is a few API calls (milliseconds);
/// the tail covers a slow or throttled apiserver.
const RECONCILE_BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabels {
    kind: &'static str,
    /// created, running, restarting, succeeded, failed, suspended.
    transition: &'static str,
}

/// A namespace name: from the cluster's own (admin-made) namespaces, not from job names or
/// error text; a series exists only while the namespace has unmanaged jobs. Not `namespace`:
/// Prometheus gives that to the scraped pod's own, and would rename this one.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceLabel {
    job_namespace: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: &'static str,
    /// Where the reconcile failed: snapshot, observe, apply, status.
    stage: &'static str,
}

pub struct ControllerMetrics {
    registry: Registry,
    reconciles: Family<KindLabel, Counter>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    reconcile_seconds: Family<KindLabel, Histogram>,
    transitions: Family<TransitionLabels, Counter>,
    watchdog_firings: Family<KindLabel, Counter>,
    in_flight: Gauge,
    leader: Gauge,
    unmanaged_jobs: Family<NamespaceLabel, Gauge>,
    /// The namespaces `unmanaged_jobs` has a series for, so that a recount can drop those
    /// with none left.
    unmanaged_series: Mutex<BTreeSet<String>>,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ControllerMetrics {
    pub fn new() -> ControllerMetrics {
        let mut registry = Registry::default();
        catalog::register_build_info(&mut registry);
        let r = &mut registry;
        let reconciles = register(r, &catalog::RECONCILES, Family::default());
        let reconcile_errors = register(r, &catalog::RECONCILE_ERRORS, Family::default());
        let reconcile_seconds = register(
            r,
            &catalog::RECONCILE_DURATION,
            Family::<KindLabel, Histogram>::new_with_constructor(|| {
                Histogram::new(RECONCILE_BUCKETS)
            }),
        );
        let transitions = register(r, &catalog::JOB_TRANSITIONS, Family::default());
        let watchdog_firings = register(r, &catalog::WATCHDOG_FIRINGS, Family::default());
        let in_flight = register(r, &catalog::RECONCILES_IN_FLIGHT, Gauge::default());
        let leader = register(r, &catalog::LEADER, Gauge::default());
        let unmanaged_jobs = register(r, &catalog::UNMANAGED_JOBS, Family::default());
        ControllerMetrics {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_seconds,
            transitions,
            watchdog_firings,
            in_flight,
            leader,
            unmanaged_jobs,
            unmanaged_series: Mutex::default(),
        }
    }

    pub fn reconciled(&self, kind: &'static str, seconds: f64) {
        self.reconciles.get_or_create(&KindLabel { kind }).inc();
        self.reconcile_seconds
            .get_or_create(&KindLabel { kind })
            .observe(seconds);
    }

    pub fn error(&self, kind: &'static str, stage: &'static str) {
        self.reconcile_errors
            .get_or_create(&ErrorLabels { kind, stage })
            .inc();
    }

    pub fn transition(&self, kind: &'static str, transition: &'static str) {
        self.transitions
            .get_or_create(&TransitionLabels { kind, transition })
            .inc();
    }

    pub fn watchdog_fired(&self, kind: &'static str) {
        self.watchdog_firings
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    /// The jobs per namespace that `--namespace-selector` leaves unreconciled, all of them:
    /// namespaces not named lose their series.
    pub fn set_unmanaged_jobs(&self, counts: &BTreeMap<String, i64>) {
        let mut series = self
            .unmanaged_series
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for gone in series.iter().filter(|ns| !counts.contains_key(*ns)) {
            self.unmanaged_jobs.remove(&NamespaceLabel {
                job_namespace: gone.clone(),
            });
        }
        for (namespace, jobs) in counts {
            self.unmanaged_jobs
                .get_or_create(&NamespaceLabel {
                    job_namespace: namespace.clone(),
                })
                .set(*jobs);
        }
        *series = counts.keys().cloned().collect();
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts a reconcile in flight until the guard drops.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    /// How many times jobs of `kind` entered `transition` (for tests).
    pub fn transitions_of(&self, kind: &'static str, transition: &'static str) -> u64 {
        self.transitions
            .get_or_create(&TransitionLabels { kind, transition })
            .get()
    }

    /// OpenMetrics text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}
