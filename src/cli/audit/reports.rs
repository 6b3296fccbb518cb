//! `gangplank audit --write-reports`: a live audit's findings written back as PolicyReports
//! ([`crate::audit::publish`]), each write printed as it is done, then a summary.
//!
//! Exit codes: 0 when the reports now match the audit, whatever the jobs' verdicts (the
//! verdicts are in the reports; a CronJob that failed on every denied job would alert on
//! the cluster's jobs, not on itself); 2 when the reports could not be listed, a write
//! failed, or a kind of jobs could not be listed (its reports were left as they were).

use crate::audit::publish::{self, Action};
use crate::audit::{report, Audit};
use crate::exit;
use crate::policy::PolicySet;

/// Lists gangplank's reports, decides and writes; the exit code.
pub async fn write(
    client: &kube::Client,
    audit: &Audit,
    set: &PolicySet,
    namespace: Option<&str>,
    page: u32,
) -> u8 {
    super::print_notes(audit);
    for e in &audit.unreadable {
        eprintln!("unreadable: {}: {}", e.source, e.message);
    }
    let existing = match publish::list_own(client, namespace, page).await {
        Ok(existing) => existing,
        Err(message) => {
            eprintln!("error: {message}; no PolicyReport written");
            return exit::UNREADABLE;
        }
    };
    let desired = report::job_reports(audit, set, super::now());
    let with_findings = desired.len();
    let complete = audit.unreadable.is_empty();
    let plan = publish::plan(desired, &existing, complete);
    let outcome = publish::publish(client, plan, print_write).await;
    for failure in &outcome.failures {
        eprintln!("error: {failure}");
    }
    if outcome.kept > 0 {
        eprintln!(
            "note: {} stale PolicyReport(s) kept: not every kind of job could be listed \
             (unreadable above), so their jobs may still exist; a complete run deletes them",
            outcome.kept
        );
    }
    println!(
        "PolicyReports: {} created, {} updated, {} deleted, {} unchanged; {} jobs audited, {} \
         with findings",
        outcome.created,
        outcome.updated,
        outcome.deleted,
        outcome.unchanged,
        audit.jobs.len(),
        with_findings
    );
    let failed = outcome.failed_namespaces();
    if !failed.is_empty() {
        let list: Vec<&str> = failed.into_iter().collect();
        println!(
            "FAILED: {} write(s) not done, in namespace(s) {}",
            outcome.not_written,
            list.join(", ")
        );
    }
    if outcome.failures.is_empty() && complete {
        exit::OK
    } else {
        exit::UNREADABLE
    }
}

/// `created  team-a/gangplank-<uid>  PyTorchJob bert (1 fail, 2 warn)`.
fn print_write(verb: &str, action: &Action) {
    let line = match action {
        Action::Create(r) | Action::Replace(r) => {
            let s = |pointer: &str| r.pointer(pointer).and_then(|v| v.as_str()).unwrap_or("-");
            let n = |outcome: &str| {
                r.pointer(&format!("/summary/{outcome}"))
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0)
            };
            format!(
                "{verb:<8} {}/{}  {} {} ({} fail, {} warn, {} error, {} skip)",
                s("/metadata/namespace"),
                s("/metadata/name"),
                s("/scope/kind"),
                s("/scope/name"),
                n("fail"),
                n("warn"),
                n("error"),
                n("skip"),
            )
        }
        Action::Delete {
            namespace, name, ..
        } => format!("{verb:<8} {namespace}/{name}"),
    };
    println!("{line}");
}
