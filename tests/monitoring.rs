//! deploy/monitoring as Prometheus and Grafana read it: the alert rules pass `promtool test
//! rules` on synthetic series (tests/data/monitoring/rules_test.yaml), every alert links to a
//! runbook section that exists, and every metric the rules and the dashboard query is one the
//! binaries export (src/metrics_catalog.rs, which tests check each `/metrics` against:
//! the unit tests of the catalog and tests/admission/metrics_exposition.rs with a real server).
//!
//! The promtool test is skipped, saying why, when promtool (Debian's `prometheus` package) is
//! not installed.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use gangplank::metrics_catalog::{MetricDoc, CONTROLLER, WEBHOOK};
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rule_groups() -> Value {
    let rule = yaml(&repo().join("deploy/monitoring/prometheusrule.yaml"));
    assert_eq!(rule["kind"], "PrometheusRule");
    rule["spec"]["groups"].clone()
}

fn rules() -> Vec<Value> {
    rule_groups()
        .as_array()
        .expect("spec.groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").clone())
        .collect()
}

/// Every query of the dashboard, with the panel it belongs to.
fn dashboard_queries() -> Vec<(String, String)> {
    let cm = yaml(&repo().join("deploy/monitoring/dashboard.yaml"));
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = cm["data"]["gangplank.json"]
        .as_str()
        .expect("gangplank.json");
    let dashboard: Value = serde_json::from_str(json).expect("the dashboard is JSON");
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a target's expr");
            out.push((
                panel["title"].as_str().unwrap_or("?").to_string(),
                expr.to_string(),
            ));
        }
    }
    out
}

#[test]
fn the_shipped_rules_pass_promtool_unit_tests_on_synthetic_series() {
    if Command::new("promtool").arg("--version").output().is_err() {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: no promtool on PATH (apt-get install prometheus); the rules were not run"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let groups = serde_json::json!({ "groups": rule_groups() });
    // JSON is YAML: promtool reads the groups exactly as the operator hands them over.
    std::fs::write(dir.path().join("rules.yaml"), groups.to_string()).expect("write rules");
    std::fs::copy(
        repo().join("tests/data/monitoring/rules_test.yaml"),
        dir.path().join("rules_test.yaml"),
    )
    .expect("copy the rule tests");
    for args in [
        &["check", "rules", "rules.yaml"][..],
        &["test", "rules", "rules_test.yaml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn every_alert_is_tested_and_has_a_summary_a_description_and_a_runbook_that_exists() {
    let tests = std::fs::read_to_string(repo().join("tests/data/monitoring/rules_test.yaml"))
        .expect("rules_test.yaml");
    let runbooks = std::fs::read_to_string(repo().join("docs/src/monitoring.md"))
        .expect("docs/src/monitoring.md");
    let anchors: BTreeSet<String> = runbooks
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    let alerts: Vec<Value> = rules();
    assert!(alerts.len() >= 9, "{} alerts", alerts.len());
    for rule in alerts {
        let name = rule["alert"].as_str().expect("only alerting rules");
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                rule["annotations"][key]
                    .as_str()
                    .is_some_and(|v| !v.is_empty()),
                "{name} has no {key}"
            );
        }
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        let anchor = url
            .strip_prefix(
                "https://github.com/gangplank-dev/gangplank/blob/main/docs/src/monitoring.md#",
            )
            .unwrap_or_else(|| {
                panic!("{name}: runbook {url} is not a section of docs/src/monitoring.md")
            });
        assert_eq!(anchor, name.to_lowercase(), "{name}: runbook anchor");
        assert!(
            anchors.contains(anchor),
            "{name}: docs/src/monitoring.md has no `### {name}`"
        );
        assert!(
            tests.contains(&format!("alertname: {name}\n")),
            "{name} has no promtool test in rules_test.yaml"
        );
    }
}

/// `name{labels}` selectors of a PromQL expression: (metric, label names).
fn selectors(expr: &str) -> Vec<(String, Vec<String>)> {
    let re = regex::Regex::new(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}").expect("regex");
    re.captures_iter(expr)
        .map(|c| {
            let labels = c[2]
                .split(',')
                .filter_map(|m| m.split(['=', '!']).next())
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect();
            (c[1].to_string(), labels)
        })
        .collect()
}

/// The problems of one query: every `gangplank_*` name is a sample of the catalog of the job
/// it selects, filtered only on labels it has (or the scrape's job, namespace, pod).
fn check_query(origin: &str, expr: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let found = selectors(expr);
    let bare = regex::Regex::new(r"gangplank_[a-z0-9_]+").expect("regex");
    for m in bare.find_iter(expr) {
        if !found.iter().any(|(name, _)| name == m.as_str()) {
            problems.push(format!("{origin}: {} without a job selector", m.as_str()));
        }
    }
    for (name, labels) in found {
        if name == "up" {
            continue;
        }
        let table: &[MetricDoc] = if expr.contains("job=\"gangplank-controller\"") {
            CONTROLLER
        } else {
            WEBHOOK
        };
        let Some(doc) = table
            .iter()
            .find(|d| d.kind.sample_names(d.name).contains(&name))
        else {
            problems.push(format!(
                "{origin}: {name} is not exported (src/metrics_catalog.rs)"
            ));
            continue;
        };
        for label in labels {
            let scrape = ["job", "namespace", "pod", "le"].contains(&label.as_str());
            if !scrape && !doc.labels.contains(&label.as_str()) {
                problems.push(format!("{origin}: {name} has no label {label}"));
            }
        }
    }
    problems
}

#[test]
fn every_metric_the_rules_and_the_dashboard_query_is_one_the_binaries_export() {
    let mut queries: Vec<(String, String)> = rules()
        .iter()
        .map(|r| {
            let name = r["alert"].as_str().unwrap_or("?");
            (
                format!("alert {name}"),
                r["expr"].as_str().expect("expr").to_string(),
            )
        })
        .collect();
    queries.extend(
        dashboard_queries()
            .into_iter()
            .map(|(t, e)| (format!("panel {t}"), e)),
    );
    assert!(queries.len() > 20, "{} queries", queries.len());
    let problems: Vec<String> = queries
        .iter()
        .flat_map(|(o, e)| check_query(o, e))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_query_of_a_metric_that_does_not_exist_is_caught() {
    let problems = check_query(
        "q",
        r#"rate(gangplank_admission_requestz_total{job="gangplank-webhook"}[5m]) + gangplank_policies_loaded{job="gangplank-webhook",shard="1"} + gangplank_controller_leader"#,
    );
    assert_eq!(problems.len(), 3, "{problems:?}");
}
