//! How `gangplank audit` shows its results: a table for people, JSON for tools, and
//! `wgpolicyk8s.io/v1alpha2` PolicyReports for Policy Reporter and the like.
//!
//! Entry points: [`write_table`], [`to_json`], [`policy_reports`] (one per namespace, for
//! `kubectl apply`) and [`job_reports`] (one per job with findings, for
//! `audit --write-reports`). The shapes are
//! documented in docs/src/auditing.md; the JSON is a contract, so fields are
//! only ever added.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::{json, Map, Value};

use super::{Audit, AuditedJob, Verdict};
use crate::policy::{Action, PolicySet, Violation};

/// `source` of every PolicyReport result: the engine Policy Reporter groups results by.
pub const SOURCE: &str = "gangplank";
/// One report per namespace, under this name, so a later run's `kubectl apply` replaces it.
pub const REPORT_NAME: &str = "gangplank-audit";
/// The label, with the value [`SOURCE`], on every report gangplank writes: how
/// `audit --write-reports` tells its own reports from other tools' (it lists, replaces and
/// deletes only reports that carry it).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// One row per violation (and per skipped or failed job); jobs without violations are
/// counted per namespace below the table; unreadable sources follow.
pub fn write_table(w: &mut impl Write, audit: &Audit) -> io::Result<()> {
    let mut rows =
        vec![["NAMESPACE", "KIND", "NAME", "VERDICT", "POLICY", "MESSAGE"].map(String::from)];
    for job in &audit.jobs {
        rows.extend(job_rows(job));
    }
    if rows.len() > 1 {
        write_rows(w, &rows)?;
        writeln!(w)?;
    }
    let passed = passed_per_namespace(audit);
    if !passed.is_empty() {
        let list: Vec<String> = passed.iter().map(|(ns, n)| format!("{ns} {n}")).collect();
        writeln!(w, "jobs without violations: {}", list.join(", "))?;
    }
    for e in &audit.unreadable {
        writeln!(w, "UNREADABLE {}: {}", e.source, e.message)?;
    }
    let s = audit.summary();
    // Said only when some are: most clusters have no exemptions or exceptions.
    let exempted = match s.exempted {
        0 => String::new(),
        n => format!("{n} exempted, "),
    };
    writeln!(
        w,
        "{} jobs audited: {} denied, {} with warnings, {} audit-only, {exempted}{} without violations, {} skipped, {} policy errors; {} unreadable",
        s.jobs, s.denied, s.warned, s.audited, s.passed, s.skipped, s.errors, s.unreadable
    )
}

fn job_rows(job: &AuditedJob) -> Vec<[String; 6]> {
    let row = |verdict: &str, policy: &str, message: String| {
        [
            job.namespace.clone(),
            job.kind.clone(),
            job.name.clone(),
            verdict.to_string(),
            policy.to_string(),
            message,
        ]
    };
    match &job.verdict {
        Verdict::Skipped(reason) => vec![row("skip", "-", reason.clone())],
        Verdict::Error(e) => vec![row("error", "-", e.clone())],
        Verdict::Judged(violations) => violations
            .iter()
            .map(|v| match &v.exempted {
                Some(e) => row(
                    "exempt",
                    &v.policy,
                    format!("{} ({})", located(v), e.describe()),
                ),
                None => row(v.action.as_str(), &v.policy, located(v)),
            })
            .collect(),
    }
}

/// `path: message`, or the message alone for whole-object findings.
fn located(v: &Violation) -> String {
    if v.path.is_empty() {
        v.msg.clone()
    } else {
        format!("{}: {}", v.path, v.msg)
    }
}

/// Columns padded to their widest cell; the last column is not padded.
fn write_rows(w: &mut impl Write, rows: &[[String; 6]]) -> io::Result<()> {
    let mut widths = [0usize; 6];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

fn passed_per_namespace(audit: &Audit) -> BTreeMap<&str, usize> {
    let mut passed = BTreeMap::new();
    for job in audit.jobs.iter().filter(|j| j.label() == "passed") {
        *passed.entry(job.namespace.as_str()).or_default() += 1;
    }
    passed
}

/// The `-o json` document (docs/src/auditing.md).
pub fn to_json(audit: &Audit) -> Value {
    let jobs: Vec<Value> = audit.jobs.iter().map(job_json).collect();
    let unreadable: Vec<Value> = audit
        .unreadable
        .iter()
        .map(|e| json!({"source": e.source, "error": e.message}))
        .collect();
    json!({
        "source": audit.source,
        "inventory": audit.inventory,
        "notes": audit.notes,
        "summary": audit.summary(),
        "jobs": jobs,
        "unreadable": unreadable,
    })
}

fn job_json(job: &AuditedJob) -> Value {
    let violations: Vec<Value> = job
        .violations()
        .iter()
        .map(|v| {
            let mut found =
                json!({"policy": v.policy, "action": v.action, "path": v.path, "message": v.msg});
            if let (Some(e), Some(fields)) = (&v.exempted, found.as_object_mut()) {
                fields.insert("exempted".into(), json!(e));
            }
            found
        })
        .collect();
    let reason = match &job.verdict {
        Verdict::Skipped(reason) | Verdict::Error(reason) => Value::from(reason.as_str()),
        Verdict::Judged(_) => Value::Null,
    };
    json!({
        "namespace": job.namespace,
        "apiVersion": job.api_version,
        "kind": job.kind,
        "name": job.name,
        "uid": job.uid,
        "source": job.source,
        "verdict": job.label(),
        "violations": violations,
        "reason": reason,
    })
}

/// One `wgpolicyk8s.io/v1alpha2` PolicyReport per namespace that has jobs, as Kyverno and
/// Kubewarden write them. Per job: a `fail` result per deny violation, a `warn` result per
/// warn or audit violation (`properties.action` tells which), an `error` result when the
/// policies failed on it, a `skip` result when no policy applies in its namespace, and a
/// `pass` result per validating policy that applies there and found nothing. `now` is the
/// results' timestamp, in seconds since the epoch.
pub fn policy_reports(audit: &Audit, set: &PolicySet, now: i64) -> Vec<Value> {
    let mut by_namespace: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for job in &audit.jobs {
        let results = by_namespace.entry(job.namespace.as_str()).or_default();
        results.extend(job_results(job, set, now));
    }
    by_namespace
        .into_iter()
        .map(|(namespace, results)| report(REPORT_NAME, namespace, results))
        .collect()
}

/// One PolicyReport per job with a finding (a `fail`, `warn`, `error` or `skip` result),
/// with the results [`policy_reports`] gives that job, `scope` naming the job, and the name
/// `gangplank-<uid>`, as Kyverno names its per-resource reports: a report stays bounded by
/// one job's results however many jobs a namespace holds (a namespace-wide report of
/// thousands of jobs would pass etcd's 1.5 MiB object limit), and a job deleted and created
/// again under its name gets a new report while the old one is stale. A job without findings
/// has no report. Jobs without a uid (a snapshot's) have none either: only a live cluster's
/// jobs are written back.
pub fn job_reports(audit: &Audit, set: &PolicySet, now: i64) -> Vec<Value> {
    audit
        .jobs
        .iter()
        .filter(|job| !job.uid.is_empty())
        .filter_map(|job| {
            let results = job_results(job, set, now);
            if results.iter().all(|r| r["result"] == "pass") {
                return None;
            }
            let name = format!("{SOURCE}-{}", job.uid);
            let mut report = report(&name, &job.namespace, results);
            let scope = json!({
                "apiVersion": job.api_version,
                "kind": job.kind,
                "name": job.name,
                "namespace": job.namespace,
                "uid": job.uid,
            });
            if let Some(fields) = report.as_object_mut() {
                fields.insert("scope".into(), scope);
            }
            Some(report)
        })
        .collect()
}

fn report(name: &str, namespace: &str, results: Vec<Value>) -> Value {
    let mut summary = Map::new();
    for outcome in ["pass", "fail", "warn", "error", "skip"] {
        let n = results.iter().filter(|r| r["result"] == outcome).count();
        summary.insert(outcome.into(), Value::from(n));
    }
    json!({
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {MANAGED_BY: SOURCE},
        },
        "summary": summary,
        "results": results,
    })
}

fn job_results(job: &AuditedJob, set: &PolicySet, now: i64) -> Vec<Value> {
    let mut resource = json!({
        "apiVersion": job.api_version,
        "kind": job.kind,
        "name": job.name,
        "namespace": job.namespace,
    });
    if let Some(fields) = resource.as_object_mut().filter(|_| !job.uid.is_empty()) {
        fields.insert("uid".into(), Value::from(job.uid.as_str()));
    }
    let result = |policy: &str, outcome: &str, message: &str, properties: Value| {
        json!({
            "source": SOURCE,
            "policy": policy,
            "rule": policy,
            "result": outcome,
            "scored": true,
            "message": message,
            "timestamp": {"seconds": now, "nanos": 0},
            "resources": [resource],
            "properties": properties,
        })
    };
    let violations = match &job.verdict {
        Verdict::Skipped(reason) => return vec![result(SOURCE, "skip", reason, json!({}))],
        Verdict::Error(e) => return vec![result(SOURCE, "error", e, json!({}))],
        Verdict::Judged(violations) => violations,
    };
    let mut out: Vec<Value> = violations
        .iter()
        .map(|v| {
            // An excused finding is a `skip`, as Kyverno reports a PolicyException's.
            let outcome = match (&v.exempted, v.action) {
                (Some(_), _) => "skip",
                (None, Action::Deny) => "fail",
                (None, _) => "warn",
            };
            let mut properties = json!({"action": v.action.as_str(), "path": v.path});
            if let (Some(e), Some(p)) = (&v.exempted, properties.as_object_mut()) {
                p.insert("exempted".into(), Value::from(e.describe()));
                if let Some(name) = &e.exception {
                    p.insert("exception".into(), Value::from(name.as_str()));
                }
            }
            result(&v.policy, outcome, &located(v), properties)
        })
        .collect();
    let validating = set
        .policies()
        .iter()
        .filter(|p| (p.has_violation || p.has_warning) && p.applies_to(&job.namespace));
    for policy in validating {
        if !violations.iter().any(|v| v.policy == policy.name) {
            out.push(result(&policy.name, "pass", "no violation", json!({})));
        }
    }
    // By policy, as Policy Reporter lists them; the sort is stable, so a policy's
    // violations keep their order (path, then message).
    out.sort_by(|a, b| a["policy"].as_str().cmp(&b["policy"].as_str()));
    out
}
