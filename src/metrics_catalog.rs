//! Every metric the two servers export: name, type, labels and help, in one table.
//!
//! Entry points: [`WEBHOOK`] (`gangplank serve`'s `/metrics`), [`CONTROLLER`] (`gangplank
//! controller`'s `/metrics`) and [`markdown`], which renders docs/src/reference/metrics.md.
//!
//! The registries take each metric's name and help from here
//! ([`crate::admission::metrics::Metrics::new`], [`crate::controller::metrics::ControllerMetrics::new`]),
//! and tests check that each rendered `/metrics` declares exactly the families its table
//! lists with the types and labels listed, so this table, the endpoints, the reference page
//! and the names deploy/monitoring's rules and dashboard query cannot drift apart.

use std::fmt::Write as _;

/// The Prometheus type a family is declared with (`# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
}

impl MetricType {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
        }
    }

    /// The sample names a scrape of a family of this type holds.
    pub fn sample_names(self, family: &str) -> Vec<String> {
        let suffixes: &[&str] = match self {
            MetricType::Counter => &["_total"],
            MetricType::Gauge => &[""],
            MetricType::Histogram => &["_bucket", "_sum", "_count"],
        };
        suffixes.iter().map(|s| format!("{family}{s}")).collect()
    }
}

/// One metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricDoc {
    /// Family name as in `# TYPE` (a counter's samples add `_total`).
    pub name: &'static str,
    pub kind: MetricType,
    /// Label names of its series (a histogram's `le` not included).
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn doc(
    name: &'static str,
    kind: MetricType,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDoc {
    MetricDoc {
        name,
        kind,
        labels,
        help,
    }
}

use MetricType::{Counter, Gauge, Histogram};

/// Exported by both servers; the revision is `unknown` in a build made without
/// `GANGPLANK_REVISION` ([`crate::build_info`]).
pub const BUILD_INFO: MetricDoc = doc(
    "gangplank_build_info",
    Gauge,
    &["version", "revision"],
    "Always 1; its labels name the running build: crate version and source revision",
);

pub const ADMISSION_REQUESTS: MetricDoc = doc(
    "gangplank_admission_requests",
    Counter,
    &["endpoint", "kind", "decision"],
    "Admission reviews answered, by endpoint, job kind (\"other\" for non-training kinds) and decision",
);
pub const ADMISSION_DURATION: MetricDoc = doc(
    "gangplank_admission_request_duration_seconds",
    Histogram,
    &["endpoint"],
    "Time from a complete request body to the response, by endpoint",
);
pub const POLICY_VIOLATIONS: MetricDoc = doc(
    "gangplank_policy_violations",
    Counter,
    &["policy", "action"],
    "Violations found by validation, by policy and effective action",
);
pub const EVALUATION_FAILURES: MetricDoc = doc(
    "gangplank_admission_evaluation_failures",
    Counter,
    &["reason"],
    "Reviews refused because no verdict was reached (fail closed), by reason",
);
pub const POLICY_RELOADS: MetricDoc = doc(
    "gangplank_policy_reloads",
    Counter,
    &["result"],
    "Policy directory reloads, by result (success, failure)",
);
pub const POLICY_RELOAD_FAILING: MetricDoc = doc(
    "gangplank_policy_reload_failing",
    Gauge,
    &[],
    "1 while the newest content of the policy directory failed to load and the previous set keeps serving (/readyz says why), 0 once a load succeeds",
);
pub const POLICY_SET_INFO: MetricDoc = doc(
    "gangplank_policy_set_info",
    Gauge,
    &["hash"],
    "Always 1; its label is the sha256 of the policy set that serves (files and params.yaml by path and content), the same as `gangplank version --policies`; only the serving set's series is present",
);
pub const POLICY_SET_LOADED: MetricDoc = doc(
    "gangplank_policy_set_loaded_timestamp_seconds",
    Gauge,
    &[],
    "Unix time at which the serving policy set was loaded (at start or by the latest successful reload)",
);
pub const TLS_RELOADS: MetricDoc = doc(
    "gangplank_tls_reloads",
    Counter,
    &["result"],
    "Serving certificate reloads, by result (success, failure)",
);
pub const CLIENT_AUTH_REFUSALS: MetricDoc = doc(
    "gangplank_client_auth_refusals",
    Counter,
    &["reason"],
    "Requests to /mutate, /validate or /metrics refused with 403 under `--client-ca`, by reason: `no_certificate` (none presented), `identity` (signed by the CA but without the subject or SAN `--client-ca-subject`/`--client-san` require)",
);
pub const POLICIES_LOADED: MetricDoc = doc(
    "gangplank_policies_loaded",
    Gauge,
    &[],
    "Policies in the set that is serving (0 before the first load)",
);
pub const ADMISSION_IN_FLIGHT: MetricDoc = doc(
    "gangplank_admission_in_flight",
    Gauge,
    &[],
    "Admission reviews being evaluated or waiting for an evaluation slot",
);
pub const IMAGE_LOOKUPS: MetricDoc = doc(
    "gangplank_image_lookups",
    Counter,
    &["outcome"],
    "Images of reviews looked up for digest pinning (from the cache or a registry), by outcome (pinned, or why not)",
);
pub const INVENTORY_PROBLEMS: MetricDoc = doc(
    "gangplank_cluster_inventory_problems",
    Gauge,
    &[],
    "Objects of the latest cluster inventory (Nodes, claims, NetworkPolicies, Namespaces...) that could not be read and are left out of it",
);
pub const INVENTORY_FAILING_WATCHES: MetricDoc = doc(
    "gangplank_cluster_inventory_failing_watches",
    Gauge,
    &[],
    "Watches of the cluster inventory (--cluster-inventory) failing now; while any fails, the last good view keeps serving, marked stale",
);
pub const CACHE_ENTRIES: MetricDoc = doc(
    "gangplank_cache_entries",
    Gauge,
    &["cache"],
    "What the server's caches hold, by cache: the cluster inventory's nodes, node_classes, nodes_left_out (past --inventory-max-mib), claims, network_policies, namespaces; the image resolver's image_digests (imageResolution.cacheSize) and registry_tokens",
);
pub const CACHE_BYTES: MetricDoc = doc(
    "gangplank_cache_bytes",
    Gauge,
    &["cache"],
    "Estimated bytes the caches hold: the cluster inventory's nodes and objects (bounded together by --inventory-max-mib), the image resolver's registry_tokens (at most 2 MiB)",
);
pub const INVENTORY_PUBLISHES: MetricDoc = doc(
    "gangplank_cluster_inventory_publishes",
    Counter,
    &["cache"],
    "New views of the cluster published to the policies, by part (summary: Nodes, queues, StorageClasses; objects: claims, NetworkPolicies, Namespaces); watch events that change nothing the policies read publish none",
);
pub const VALIDATE_HANDOFFS: MetricDoc = doc(
    "gangplank_validate_handoffs",
    Counter,
    &["outcome"],
    "Reviews of /validate by whether /mutate had produced the object (hit: the mutation policies were skipped) or not (miss: a full review)",
);

pub const RECONCILES: MetricDoc = doc(
    "gangplank_controller_reconciles",
    Counter,
    &["kind"],
    "Reconciles run, by kind",
);
pub const RECONCILE_ERRORS: MetricDoc = doc(
    "gangplank_controller_reconcile_errors",
    Counter,
    &["kind", "stage"],
    "Reconciles that failed, by kind and stage (retried with backoff)",
);
pub const RECONCILE_DURATION: MetricDoc = doc(
    "gangplank_controller_reconcile_duration_seconds",
    Histogram,
    &["kind"],
    "Time of one reconcile, by kind",
);
pub const JOB_TRANSITIONS: MetricDoc = doc(
    "gangplank_controller_job_transitions",
    Counter,
    &["kind", "transition"],
    "Jobs entering a condition (created, running, restarting, succeeded, failed, suspended), by kind",
);
pub const WATCHDOG_FIRINGS: MetricDoc = doc(
    "gangplank_controller_watchdog_firings",
    Counter,
    &["kind"],
    "Jobs whose gang stayed Pending past the start deadline, by kind",
);
pub const RECONCILES_IN_FLIGHT: MetricDoc = doc(
    "gangplank_controller_reconciles_in_flight",
    Gauge,
    &[],
    "Reconciles running now (queue depth being worked)",
);
pub const LEADER: MetricDoc = doc(
    "gangplank_controller_leader",
    Gauge,
    &[],
    "1 while this replica holds the leader Lease",
);
pub const UNMANAGED_JOBS: MetricDoc = doc(
    "gangplank_controller_unmanaged_jobs",
    Gauge,
    &["job_namespace"],
    "Jobs the controller does not reconcile because their namespace does not match --namespace-selector, by the jobs' namespace (a namespace without such jobs has no series)",
);

/// `gangplank serve`'s `/metrics`, in the order it renders them.
pub const WEBHOOK: &[MetricDoc] = &[
    BUILD_INFO,
    ADMISSION_REQUESTS,
    ADMISSION_DURATION,
    POLICY_VIOLATIONS,
    EVALUATION_FAILURES,
    POLICY_RELOADS,
    POLICY_RELOAD_FAILING,
    POLICY_SET_INFO,
    POLICY_SET_LOADED,
    TLS_RELOADS,
    CLIENT_AUTH_REFUSALS,
    POLICIES_LOADED,
    ADMISSION_IN_FLIGHT,
    IMAGE_LOOKUPS,
    INVENTORY_PROBLEMS,
    INVENTORY_FAILING_WATCHES,
    CACHE_ENTRIES,
    CACHE_BYTES,
    INVENTORY_PUBLISHES,
    VALIDATE_HANDOFFS,
];

/// `gangplank controller`'s `/metrics` (`--controller-metrics-addr`), in render order.
pub const CONTROLLER: &[MetricDoc] = &[
    BUILD_INFO,
    RECONCILES,
    RECONCILE_ERRORS,
    RECONCILE_DURATION,
    JOB_TRANSITIONS,
    WATCHDOG_FIRINGS,
    RECONCILES_IN_FLIGHT,
    LEADER,
    UNMANAGED_JOBS,
];

/// The metrics reference page (docs/src/reference/metrics.md).
pub fn markdown() -> String {
    let mut out = String::from(
        "# Metrics reference\n\n\
         <!-- Generated from src/metrics_catalog.rs: do not edit. Regenerate with\n     \
         UPDATE_DOCS=1 cargo test --test metrics_reference -->\n\n\
         Both servers serve `/metrics` in the OpenMetrics text format on a plain-HTTP port of \
         their own: `gangplank serve --metrics-addr` (port 9090 in deploy/) and \
         `gangplank controller --controller-metrics-addr` (port 9090 in deploy/controller). \
         A counter's samples end in `_total`; a histogram's in `_bucket`, `_sum` and `_count`. \
         [Monitoring](../monitoring.md) says how to scrape them and what the alerts mean.\n",
    );
    for (title, table) in [
        ("Webhook server (`gangplank serve`)", WEBHOOK),
        ("Controller (`gangplank controller`)", CONTROLLER),
    ] {
        let _ = write!(
            out,
            "\n## {title}\n\n| Metric | Type | Labels | Description |\n|---|---|---|---|\n"
        );
        for m in table {
            let labels = if m.labels.is_empty() {
                "—".to_string()
            } else {
                m.labels
                    .iter()
                    .map(|l| format!("`{l}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {labels} | {} |",
                m.kind.sample_names(m.name).join("`<br>`"),
                m.kind.as_str(),
                m.help.replace('|', "\\|"),
            );
        }
    }
    out
}

/// Checks a rendered `/metrics` against `table`: every `# TYPE` line names a family of the
/// table with its type, and every sample's labels are the family's (plus `le` on histogram
/// buckets). The problems, empty when it matches.
///
/// A family with no series yet is not rendered at all (prometheus-client leaves it out), so
/// this checks that the text is part of the catalog; [`missing_families`] the converse.
pub fn check_exposition(text: &str, table: &[MetricDoc]) -> Vec<String> {
    let mut problems = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let (name, kind) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            match table.iter().find(|m| m.name == name) {
                Some(m) if m.kind.as_str() == kind => {}
                Some(m) => problems.push(format!(
                    "{name} is a {kind}, the catalog says {}",
                    m.kind.as_str()
                )),
                None => problems.push(format!("{name} ({kind}) is not in the catalog")),
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            problems.extend(check_sample(line, table));
        }
    }
    problems
}

/// Families of `table` that `text` does not declare (`# TYPE`).
pub fn missing_families<'a>(text: &str, table: &'a [MetricDoc]) -> Vec<&'a str> {
    table
        .iter()
        .filter(|m| {
            let declared = format!("# TYPE {} {}", m.name, m.kind.as_str());
            !text.lines().any(|l| l == declared)
        })
        .map(|m| m.name)
        .collect()
}

/// One sample line: its family is in `table` and its label names are the family's.
fn check_sample(line: &str, table: &[MetricDoc]) -> Option<String> {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let sample = line.get(..name_end).unwrap_or(line);
    let Some(m) = table
        .iter()
        .find(|m| m.kind.sample_names(m.name).iter().any(|s| s == sample))
    else {
        return Some(format!("sample {sample} belongs to no catalog family"));
    };
    let labels = label_names(line.get(name_end..).unwrap_or(""));
    let expected = m
        .labels
        .iter()
        .copied()
        .chain(sample.ends_with("_bucket").then_some("le"));
    let mut expected: Vec<&str> = expected.collect();
    let mut found = labels.clone();
    expected.sort_unstable();
    found.sort_unstable();
    (expected != found).then(|| {
        format!(
            "{sample} has labels {labels:?}, the catalog says {:?}",
            m.labels
        )
    })
}

/// Label names of `{a="x",b="y"} 1`: the text before each `="`.
fn label_names(rest: &str) -> Vec<&str> {
    let Some(body) = rest.strip_prefix('{').and_then(|r| r.split_once('}')) else {
        return Vec::new();
    };
    body.0
        .split("\",")
        .filter_map(|pair| {
            pair.split_once("=\"")
                .map(|(k, _)| k.trim_start_matches(','))
        })
        .collect()
}

/// Registers `metric` under the name and help of `doc`; returns it, for its owner to update.
pub fn register<M: prometheus_client::registry::Metric + Clone>(
    registry: &mut prometheus_client::registry::Registry,
    doc: &MetricDoc,
    metric: M,
) -> M {
    registry.register(doc.name, doc.help, metric.clone());
    metric
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    revision: &'static str,
}

/// Registers [`BUILD_INFO`] with this binary's one series set to 1.
pub fn register_build_info(registry: &mut prometheus_client::registry::Registry) {
    use prometheus_client::metrics::{family::Family, gauge::Gauge};
    let build = crate::build_info::BuildInfo::current();
    let family = Family::<BuildLabels, Gauge>::default();
    family
        .get_or_create(&BuildLabels {
            version: build.version,
            revision: build.revision,
        })
        .set(1);
    register(registry, &BUILD_INFO, family);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::metrics::{Decision, Endpoint, Failure, Metrics, ServingSet};
    use crate::controller::metrics::ControllerMetrics;

    #[test]
    fn the_webhook_servers_metrics_are_the_catalogs_with_every_family_in_use() {
        let m = Metrics::new();
        assert_eq!(check_exposition(&m.render(), WEBHOOK), Vec::<String>::new());
        // One series in every family, so that every label set is checked too.
        m.request(Endpoint::Validate, "PyTorchJob", Decision::Denied, 0.001);
        m.violation("images", crate::policy::Action::Deny);
        m.failure(Failure::Timeout);
        m.policy_reload(false);
        m.set_serving(ServingSet {
            policies: 3,
            hash: "abc",
            loaded_at: 1,
        });
        m.set_inventory_failing_watches(1);
        m.inventory_published("summary");
        m.set_image_caches([1, 1, 1]);
        let _guard = m.in_flight();
        let text = m.render();
        assert_eq!(check_exposition(&text, WEBHOOK), Vec::<String>::new());
        assert_eq!(missing_families(&text, WEBHOOK), Vec::<&str>::new());
    }

    #[test]
    fn the_controllers_metrics_are_the_catalogs_with_every_family_in_use() {
        let m = ControllerMetrics::new();
        assert_eq!(
            check_exposition(&m.render(), CONTROLLER),
            Vec::<String>::new()
        );
        m.reconciled("PyTorchJob", 0.01);
        m.error("PyTorchJob", "apply");
        m.transition("PyTorchJob", "running");
        m.watchdog_fired("PyTorchJob");
        m.set_leader(true);
        m.set_unmanaged_jobs(&[("scratch".to_string(), 2)].into());
        let _guard = m.in_flight();
        let text = m.render();
        assert_eq!(check_exposition(&text, CONTROLLER), Vec::<String>::new());
        assert_eq!(missing_families(&text, CONTROLLER), Vec::<&str>::new());
    }

    #[test]
    fn a_family_missing_from_the_catalog_or_with_other_labels_is_reported() {
        let text = "# TYPE gangplank_new gauge\ngangplank_new 1\n\
                    # TYPE gangplank_controller_leader gauge\ngangplank_controller_leader{x=\"1\"} 1\n";
        let problems = check_exposition(text, CONTROLLER);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("gangplank_new (gauge) is not in the catalog")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("gangplank_controller_leader has labels [\"x\"]")),
            "{problems:?}"
        );
        assert!(missing_families(text, CONTROLLER).contains(&"gangplank_controller_reconciles"));
    }

    #[test]
    fn build_info_names_this_build() {
        let b = crate::build_info::BuildInfo::current();
        let line = format!(
            "gangplank_build_info{{version=\"{}\",revision=\"{}\"}} 1",
            b.version, b.revision
        );
        assert!(Metrics::new().render().contains(&line));
        assert!(ControllerMetrics::new().render().contains(&line));
    }

    #[test]
    fn a_new_serving_set_replaces_the_hash_series() {
        let m = Metrics::new();
        for hash in ["first", "second"] {
            m.set_serving(ServingSet {
                policies: 1,
                hash,
                loaded_at: 7,
            });
        }
        let text = m.render();
        assert!(
            text.contains("gangplank_policy_set_info{hash=\"second\"} 1"),
            "{text}"
        );
        assert!(!text.contains("hash=\"first\""), "{text}");
        assert!(
            text.contains("gangplank_policy_set_loaded_timestamp_seconds 7"),
            "{text}"
        );
    }
}
