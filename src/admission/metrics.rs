//! Prometheus metrics of the admission server, rendered on `GET /metrics`.
//!
//! Entry point: [`Metrics::new`], built once in `serve` and passed to the handlers and the
//! reload tasks (no globals, so tests read counters of their own server). Every label value
//! comes from a closed set: endpoints, decisions and results are enums, kinds come from the
//! kind table, policy names from the loaded policy set; never from error strings or object
//! names, which would make the series count unbounded.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics_catalog::{self as catalog, register};
use crate::policy::Action;

/// `Content-Type` of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Request latency buckets in seconds. A review costs well under a millisecond, the webhook
/// times out at 5 s (timeoutSeconds), and evaluation is cut at 2 s by default: ten buckets
/// from 100 µs to 2.5 s cover both the fast path and the timeout path.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 2.5,
];

/// Which webhook answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Mutate,
    Validate,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Mutate => "mutate",
            Endpoint::Validate => "validate",
        }
    }
}

/// What a request ended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Allowed unchanged (or with warnings).
    Allowed,
    /// Allowed with a patch.
    Patched,
    /// Refused by a deny violation.
    Denied,
    /// Not a training job, DELETE, or an excluded namespace: no policy ran.
    Skipped,
    /// The body was not an AdmissionReview v1 (HTTP 400, or an invalid-request response).
    Invalid,
    /// Refused because no verdict could be reached in time (fail closed).
    Failed,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Patched => "patched",
            Decision::Denied => "denied",
            Decision::Skipped => "skipped",
            Decision::Invalid => "invalid",
            Decision::Failed => "failed",
        }
    }
}

/// Why evaluation produced no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    /// The evaluation deadline passed (waiting for a slot included).
    Timeout,
    /// A policy failed at run time (EvalError).
    Evaluation,
    /// No policy set is loaded.
    NoPolicies,
    /// The evaluation task died (a panic inside the engine).
    Crashed,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Timeout => "timeout",
            Failure::Evaluation => "evaluation",
            Failure::NoPolicies => "no_policies",
            Failure::Crashed => "crashed",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    kind: &'static str,
    decision: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ViolationLabels {
    /// A policy name from the loaded set (a file name), not request data.
    policy: String,
    action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// The `reason` labels of `gangplank_client_auth_refusals_total`: no certificate, or one
/// without the required identity.
pub const CLIENT_AUTH_REFUSAL_REASONS: [&str; 2] = ["no_certificate", "identity"];

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily<EndpointLabels>,
    violations: Family<ViolationLabels, Counter>,
    failures: Family<ReasonLabels, Counter>,
    policy_reloads: Family<ResultLabels, Counter>,
    tls_reloads: Family<ResultLabels, Counter>,
    client_auth_refusals: Family<ReasonLabels, Counter>,
    policies_loaded: Gauge,
    reload_failing: Gauge,
    policy_set: Family<HashLabel, Gauge>,
    policy_set_loaded: Gauge,
    in_flight: Gauge,
    image_lookups: Family<OutcomeLabels, Counter>,
    inventory_problems: Gauge,
    inventory_failing_watches: Gauge,
    inventory_cache: Family<CacheLabels, Gauge>,
    inventory_bytes: Family<CacheLabels, Gauge>,
    inventory_publishes: Family<CacheLabels, Counter>,
    handoffs: Family<OutcomeLabels, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HashLabel {
    /// The policy-set hash: one value per loaded set, and only the serving one is kept.
    hash: String,
}

/// The set that serves now, as `/metrics` describes it.
#[derive(Debug, Clone, Copy)]
pub struct ServingSet<'a> {
    pub policies: usize,
    /// The policy-set hash ([`crate::policy::set_hash`]).
    pub hash: &'a str,
    /// Seconds since the Unix epoch when it was loaded.
    pub loaded_at: u64,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    cache: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        catalog::register_build_info(&mut registry);
        let requests = register(
            &mut registry,
            &catalog::ADMISSION_REQUESTS,
            Family::<RequestLabels, Counter>::default(),
        );
        let latency: HistogramFamily<EndpointLabels> = register(
            &mut registry,
            &catalog::ADMISSION_DURATION,
            Family::new_with_constructor(latency_histogram),
        );
        let violations = register(
            &mut registry,
            &catalog::POLICY_VIOLATIONS,
            Family::<ViolationLabels, Counter>::default(),
        );
        let failures = register(
            &mut registry,
            &catalog::EVALUATION_FAILURES,
            Family::<ReasonLabels, Counter>::default(),
        );
        let policy_reloads = register(
            &mut registry,
            &catalog::POLICY_RELOADS,
            Family::<ResultLabels, Counter>::default(),
        );
        let reload_failing = register(
            &mut registry,
            &catalog::POLICY_RELOAD_FAILING,
            Gauge::default(),
        );
        let policy_set = register(
            &mut registry,
            &catalog::POLICY_SET_INFO,
            Family::<HashLabel, Gauge>::default(),
        );
        let policy_set_loaded =
            register(&mut registry, &catalog::POLICY_SET_LOADED, Gauge::default());
        let tls_reloads = register(
            &mut registry,
            &catalog::TLS_RELOADS,
            Family::<ResultLabels, Counter>::default(),
        );
        let client_auth_refusals = register(
            &mut registry,
            &catalog::CLIENT_AUTH_REFUSALS,
            Family::<ReasonLabels, Counter>::default(),
        );
        for reason in CLIENT_AUTH_REFUSAL_REASONS {
            drop(client_auth_refusals.get_or_create(&ReasonLabels { reason }));
        }
        let policies_loaded = register(&mut registry, &catalog::POLICIES_LOADED, Gauge::default());
        let in_flight = register(
            &mut registry,
            &catalog::ADMISSION_IN_FLIGHT,
            Gauge::default(),
        );
        let image_lookups = register(
            &mut registry,
            &catalog::IMAGE_LOOKUPS,
            Family::<OutcomeLabels, Counter>::default(),
        );
        let inventory_problems = register(
            &mut registry,
            &catalog::INVENTORY_PROBLEMS,
            Gauge::default(),
        );
        let inventory_failing_watches = register(
            &mut registry,
            &catalog::INVENTORY_FAILING_WATCHES,
            Gauge::default(),
        );
        let inventory_cache = register(
            &mut registry,
            &catalog::CACHE_ENTRIES,
            Family::<CacheLabels, Gauge>::default(),
        );
        let inventory_bytes = register(
            &mut registry,
            &catalog::CACHE_BYTES,
            Family::<CacheLabels, Gauge>::default(),
        );
        let inventory_publishes = register(
            &mut registry,
            &catalog::INVENTORY_PUBLISHES,
            Family::<CacheLabels, Counter>::default(),
        );
        let handoffs = register(
            &mut registry,
            &catalog::VALIDATE_HANDOFFS,
            Family::<OutcomeLabels, Counter>::default(),
        );
        for outcome in ["hit", "miss"] {
            drop(handoffs.get_or_create(&OutcomeLabels { outcome }));
        }
        // Series of closed label sets exist from the start, so that rate() and increase()
        // see the first failure rather than a series appearing.
        for ok in [true, false] {
            drop(policy_reloads.get_or_create(&result_label(ok)));
            drop(tls_reloads.get_or_create(&result_label(ok)));
        }
        for reason in [
            Failure::Timeout,
            Failure::Evaluation,
            Failure::NoPolicies,
            Failure::Crashed,
        ] {
            drop(failures.get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            }));
        }
        for outcome in crate::images::ResolveError::OUTCOME_LABELS {
            drop(image_lookups.get_or_create(&OutcomeLabels { outcome }));
        }
        Metrics {
            image_lookups,
            registry,
            requests,
            latency,
            violations,
            failures,
            policy_reloads,
            tls_reloads,
            client_auth_refusals,
            policies_loaded,
            reload_failing,
            policy_set,
            policy_set_loaded,
            in_flight,
            inventory_problems,
            inventory_failing_watches,
            inventory_cache,
            inventory_bytes,
            inventory_publishes,
            handoffs,
        }
    }

    /// Counts one answered review and its latency.
    pub fn request(
        &self,
        endpoint: Endpoint,
        kind: &'static str,
        decision: Decision,
        seconds: f64,
    ) {
        self.requests
            .get_or_create(&RequestLabels {
                endpoint: endpoint.as_str(),
                kind,
                decision: decision.as_str(),
            })
            .inc();
        self.latency
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.as_str(),
            })
            .observe(seconds);
    }

    pub fn violation(&self, policy: &str, action: Action) {
        self.violations
            .get_or_create(&ViolationLabels {
                policy: policy.to_string(),
                action: action.as_str(),
            })
            .inc();
    }

    pub fn failure(&self, reason: Failure) {
        self.failures
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// Counts one reload of the policy directory; a failure marks the directory refused
    /// until [`Self::set_serving`] reports a set loaded from it.
    pub fn policy_reload(&self, ok: bool) {
        self.policy_reloads.get_or_create(&result_label(ok)).inc();
        if !ok {
            self.reload_failing.set(1);
        }
    }

    /// The set that serves now (at start, and after each successful reload): its size, its
    /// hash as the one `gangplank_policy_set_info` series, and when it was loaded.
    pub fn set_serving(&self, set: ServingSet<'_>) {
        self.set_policies_loaded(set.policies);
        self.reload_failing.set(0);
        // Only the serving set's hash: a replica reports one set, whatever it served before.
        self.policy_set.clear();
        self.policy_set
            .get_or_create(&HashLabel {
                hash: set.hash.to_string(),
            })
            .set(1);
        self.policy_set_loaded
            .set(i64::try_from(set.loaded_at).unwrap_or(i64::MAX));
    }

    /// Sets how many watches of the cluster inventory are failing now.
    pub fn set_inventory_failing_watches(&self, n: usize) {
        self.inventory_failing_watches
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Sets how many objects the latest cluster inventory left out as unreadable.
    pub fn set_inventory_problems(&self, n: usize) {
        self.inventory_problems
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// What the Node index holds.
    pub fn set_inventory_nodes(&self, sizes: &crate::cluster::nodes::IndexSizes) {
        self.set_cache("nodes", sizes.nodes);
        self.set_cache("node_classes", sizes.classes);
        self.set_cache("nodes_left_out", sizes.left_out);
        self.set_cache_bytes("nodes", sizes.bytes);
    }

    /// What the namespaced caches hold.
    pub fn set_inventory_objects(&self, sizes: &crate::cluster::objects::ObjectSizes) {
        self.set_cache("claims", sizes.claims);
        self.set_cache("network_policies", sizes.network_policies);
        self.set_cache("namespaces", sizes.namespaces);
        self.set_cache_bytes("objects", sizes.bytes);
    }

    /// What the image digest resolver's caches hold: `[digests, tokens, token bytes]`.
    pub fn set_image_caches(&self, [digests, tokens, token_bytes]: [usize; 3]) {
        self.set_cache("image_digests", digests);
        self.set_cache("registry_tokens", tokens);
        self.set_cache_bytes("registry_tokens", token_bytes);
    }

    /// A new view of `part` (`summary` or `objects`) was published.
    pub fn inventory_published(&self, part: &'static str) {
        self.inventory_publishes
            .get_or_create(&CacheLabels { cache: part })
            .inc();
    }

    fn set_cache(&self, cache: &'static str, n: usize) {
        let labels = CacheLabels { cache };
        self.inventory_cache
            .get_or_create(&labels)
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    fn set_cache_bytes(&self, cache: &'static str, n: usize) {
        let labels = CacheLabels { cache };
        self.inventory_bytes
            .get_or_create(&labels)
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Size of the set that serves.
    fn set_policies_loaded(&self, n: usize) {
        self.policies_loaded
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts one image lookup; `outcome` is `pinned` or a [`crate::images::ResolveError`]
    /// metric label.
    pub fn image_lookup(&self, outcome: &'static str) {
        self.image_lookups
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Counts one `/validate` review by whether `/mutate` handed its object over.
    pub fn handoff(&self, hit: bool) {
        let outcome = if hit { "hit" } else { "miss" };
        self.handoffs
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// `/validate` reviews counted with `hit` (see [`Self::handoff`]).
    pub fn handoffs_with(&self, hit: bool) -> u64 {
        let outcome = if hit { "hit" } else { "miss" };
        self.handoffs
            .get_or_create(&OutcomeLabels { outcome })
            .get()
    }

    pub fn tls_reload(&self, ok: bool) {
        self.tls_reloads.get_or_create(&result_label(ok)).inc();
    }

    /// Counts a request refused under `--client-ca`; `reason` is one of
    /// [`CLIENT_AUTH_REFUSAL_REASONS`].
    pub fn client_auth_refusal(&self, reason: &'static str) {
        self.client_auth_refusals
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    pub fn client_auth_refusals_with(&self, reason: &'static str) -> u64 {
        self.client_auth_refusals
            .get_or_create(&ReasonLabels { reason })
            .get()
    }

    /// Tracks a review in flight until the guard drops.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    /// The Prometheus (OpenMetrics) text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Reviews counted with these labels: for tests and the benchmark's sanity check.
    pub fn requests_with(&self, endpoint: Endpoint, kind: &'static str, decision: Decision) -> u64 {
        self.requests
            .get_or_create(&RequestLabels {
                endpoint: endpoint.as_str(),
                kind,
                decision: decision.as_str(),
            })
            .get()
    }

    pub fn policy_reloads_with(&self, ok: bool) -> u64 {
        self.policy_reloads.get_or_create(&result_label(ok)).get()
    }

    pub fn tls_reloads_with(&self, ok: bool) -> u64 {
        self.tls_reloads.get_or_create(&result_label(ok)).get()
    }
}

fn result_label(ok: bool) -> ResultLabels {
    ResultLabels {
        result: if ok { "success" } else { "failure" },
    }
}

/// Decrements the in-flight gauge when dropped, whatever path the request took.
pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_by_endpoint_kind_and_decision() {
        let m = Metrics::new();
        m.request(Endpoint::Validate, "PyTorchJob", Decision::Denied, 0.0003);
        m.request(Endpoint::Validate, "PyTorchJob", Decision::Denied, 0.0004);
        assert_eq!(
            m.requests_with(Endpoint::Validate, "PyTorchJob", Decision::Denied),
            2
        );
        assert_eq!(
            m.requests_with(Endpoint::Mutate, "PyTorchJob", Decision::Denied),
            0
        );
    }

    #[test]
    fn renders_sub_millisecond_buckets_and_every_family() {
        let m = Metrics::new();
        m.request(Endpoint::Mutate, "TFJob", Decision::Patched, 0.0002);
        m.violation("images", Action::Deny);
        m.policy_reload(false);
        m.tls_reload(true);
        m.failure(Failure::Timeout);
        m.image_lookup("pinned");
        let text = m.render();
        for needle in [
            "gangplank_admission_requests_total{endpoint=\"mutate\",kind=\"TFJob\",decision=\"patched\"} 1",
            "gangplank_admission_request_duration_seconds_bucket{le=\"0.00025\",endpoint=\"mutate\"} 1",
            "gangplank_policy_violations_total{policy=\"images\",action=\"deny\"} 1",
            "gangplank_policy_reloads_total{result=\"failure\"} 1",
            "gangplank_tls_reloads_total{result=\"success\"} 1",
            "gangplank_admission_evaluation_failures_total{reason=\"timeout\"} 1",
            "gangplank_policies_loaded 0",
            "gangplank_image_lookups_total{outcome=\"pinned\"} 1",
            "gangplank_image_lookups_total{outcome=\"timeout\"} 0",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
