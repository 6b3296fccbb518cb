//! Prometheus metrics of the lifecycle controller.
//!
//! Entry point: [`ControllerMetrics::new`], built once and shared by every kind's loop. Label
//! values come from closed sets only: kinds from the kind table, outcomes and failure stages
//! from fixed `&'static str`s; never job names or error text.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

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
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ControllerMetrics {
    pub fn new() -> ControllerMetrics {
        let mut registry = Registry::with_prefix("gangplank_controller");
        let reconciles = Family::<KindLabel, Counter>::default();
        let reconcile_errors = Family::<ErrorLabels, Counter>::default();
        let reconcile_seconds = Family::<KindLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(RECONCILE_BUCKETS)
        });
        let transitions = Family::<TransitionLabels, Counter>::default();
        let watchdog_firings = Family::<KindLabel, Counter>::default();
        let in_flight = Gauge::default();
        let leader = Gauge::default();
        registry.register("reconciles", "Reconciles run, by kind", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by kind and stage (retried with backoff)",
            reconcile_errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time of one reconcile, by kind",
            reconcile_seconds.clone(),
        );
        registry.register(
            "job_transitions",
            "Jobs entering a condition (created, running, restarting, succeeded, failed, suspended), by kind",
            transitions.clone(),
        );
        registry.register(
            "watchdog_firings",
            "Jobs whose gang stayed Pending past the start deadline, by kind",
            watchdog_firings.clone(),
        );
        registry.register(
            "reconciles_in_flight",
            "Reconciles running now (queue depth being worked)",
            in_flight.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            leader.clone(),
        );
        ControllerMetrics {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_seconds,
            transitions,
            watchdog_firings,
            in_flight,
            leader,
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
