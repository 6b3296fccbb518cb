//! `gangplank audit --write-reports`: the PolicyReports in the cluster brought in line with
//! one audit, in one pass: reports created for jobs with new findings, replaced where the
//! findings changed, left alone where they did not, and deleted where the job no longer has
//! findings or no longer exists.
//!
//! Entry points: [`publish`] (list, decide, write) and [`plan`] (the decision alone: pure,
//! so it is tested without a cluster).
//!
//! # Guarantees
//! - Only reports labelled `app.kubernetes.io/managed-by: gangplank` ([`report::MANAGED_BY`])
//!   are listed, replaced or deleted. A report of another tool is never touched, even one
//!   with a name gangplank would use (creating over it fails, and that is reported).
//! - Get/create/replace with `resourceVersion`, not server-side apply: the run lists its
//!   reports anyway (to find the stale ones), so it holds each one's `resourceVersion`, and a
//!   replace or delete carrying it fails with a conflict instead of overwriting a report that
//!   changed since the list (a second run started by hand beside the CronJob). A report is
//!   wholly gangplank's, so there are no other managers' fields that apply would keep; and
//!   the rights it needs stay list, create, update and delete (no get, no patch).
//! - A report whose findings are unchanged is not written (the timestamps of its results
//!   say when they were found), so a run over a quiet cluster writes nothing.
//! - Stale reports are deleted only when every kind was listed: a kind that could not be
//!   listed (RBAC, an error) would make all its jobs' reports look stale.
//!
//! # Errors
//! Listing the reports fails the whole run before anything is written (the CRD not
//! installed, no right to list). A write that fails is counted against its namespace; a
//! refusal of the request as such (RBAC, an unreachable server) skips the rest of that
//! namespace, while a conflict on one report does not. The other namespaces go on.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions,
};
use serde_json::Value;

use super::live;
use super::report::{MANAGED_BY, SOURCE};

/// The field manager of every write: the reports' managedFields name the audit.
pub const FIELD_MANAGER: &str = "gangplank-audit";

/// `policyreports.wgpolicyk8s.io/v1alpha2`, the version Kyverno, Kubewarden and Policy
/// Reporter read.
pub fn resource() -> ApiResource {
    ApiResource {
        group: "wgpolicyk8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "wgpolicyk8s.io/v1alpha2".into(),
        kind: "PolicyReport".into(),
        plural: "policyreports".into(),
    }
}

/// One write the run decided on.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Create(Value),
    /// The report as it should be, with the `resourceVersion` of the one listed.
    Replace(Value),
    Delete {
        namespace: String,
        name: String,
        resource_version: String,
    },
}

impl Action {
    fn namespace(&self) -> &str {
        match self {
            Action::Create(r) | Action::Replace(r) => text(r, "/metadata/namespace"),
            Action::Delete { namespace, .. } => namespace,
        }
    }

    fn name(&self) -> &str {
        match self {
            Action::Create(r) | Action::Replace(r) => text(r, "/metadata/name"),
            Action::Delete { name, .. } => name,
        }
    }
}

/// What [`plan`] decided: the writes, and what needs none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub unchanged: usize,
    /// Stale reports left in place because the listing of jobs was incomplete.
    pub kept: usize,
}

/// The writes that turn `existing` (gangplank's reports as listed) into `desired` (as
/// [`super::report::job_reports`] builds them). Stale reports are deleted only when
/// `delete_stale`. Ordered by namespace, then name.
pub fn plan(desired: Vec<Value>, existing: &[Value], delete_stale: bool) -> Plan {
    let key = |r: &Value| {
        (
            text(r, "/metadata/namespace").to_string(),
            text(r, "/metadata/name").to_string(),
        )
    };
    let listed: BTreeMap<(String, String), &Value> = existing.iter().map(|r| (key(r), r)).collect();
    let wanted: BTreeSet<(String, String)> = desired.iter().map(key).collect();
    let mut out = Plan::default();
    for mut report in desired {
        match listed.get(&key(&report)) {
            None => out.actions.push(Action::Create(report)),
            Some(old) if same_findings(old, &report) => out.unchanged += 1,
            Some(old) => {
                let version = Value::from(text(old, "/metadata/resourceVersion"));
                if let Some(meta) = report.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("resourceVersion".into(), version);
                }
                out.actions.push(Action::Replace(report));
            }
        }
    }
    for ((namespace, name), old) in listed.iter().filter(|(k, _)| !wanted.contains(*k)) {
        if delete_stale {
            out.actions.push(Action::Delete {
                namespace: namespace.clone(),
                name: name.clone(),
                resource_version: text(old, "/metadata/resourceVersion").to_string(),
            });
        } else {
            out.kept += 1;
        }
    }
    out.actions
        .sort_by(|a, b| (a.namespace(), a.name()).cmp(&(b.namespace(), b.name())));
    out
}

/// The same label, scope, summary and results, timestamps aside.
fn same_findings(old: &Value, new: &Value) -> bool {
    let findings = |r: &Value| {
        let mut results = r.get("results").cloned().unwrap_or_default();
        for result in results.as_array_mut().into_iter().flatten() {
            if let Some(fields) = result.as_object_mut() {
                fields.remove("timestamp");
            }
        }
        (
            r.pointer(&format!(
                "/metadata/labels/{}",
                MANAGED_BY.replace('/', "~1")
            ))
            .cloned(),
            r.get("scope").cloned(),
            r.get("summary").cloned(),
            results,
        )
    };
    findings(old) == findings(new)
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Gangplank's reports in `namespace` (or every namespace), `page` per request.
///
/// # Errors
/// The CRD not installed, no right to list, or the server gone: nothing can be decided.
pub async fn list_own(
    client: &kube::Client,
    namespace: Option<&str>,
    page: u32,
) -> Result<Vec<Value>, String> {
    let resource = resource();
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let selector = ListParams::default().labels(&format!("{MANAGED_BY}={SOURCE}"));
    match live::list_all_with(&api, selector, page).await {
        Ok(items) => Ok(items
            .into_iter()
            .filter_map(|item| serde_json::to_value(item).ok())
            .collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(
            "the PolicyReport CRD (policyreports.wgpolicyk8s.io, v1alpha2) is not installed: \
             install it (Kyverno, Kubewarden and Policy Reporter ship it; docs/src/audit.md)"
                .into(),
        ),
        Err(e) => Err(format!(
            "cannot list PolicyReports labelled {MANAGED_BY}={SOURCE}: {}",
            crate::error_chain(&e)
        )),
    }
}

/// What one [`publish`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    pub unchanged: usize,
    /// Stale reports not deleted because the listing of jobs was incomplete.
    pub kept: usize,
    /// Writes that failed or were skipped after a failure in their namespace.
    pub not_written: usize,
    /// `namespace: what failed`, one per failure.
    pub failures: Vec<String>,
}

impl Outcome {
    /// The namespaces where something failed, sorted.
    pub fn failed_namespaces(&self) -> BTreeSet<&str> {
        self.failures
            .iter()
            .filter_map(|f| f.split_once(':').map(|(ns, _)| ns))
            .collect()
    }
}

/// Carries out `plan`, namespace by namespace; `progress` is told of each write done.
pub async fn publish(
    client: &kube::Client,
    plan: Plan,
    mut progress: impl FnMut(&str, &Action),
) -> Outcome {
    let mut outcome = Outcome {
        unchanged: plan.unchanged,
        kept: plan.kept,
        ..Outcome::default()
    };
    let mut by_namespace: BTreeMap<String, Vec<Action>> = BTreeMap::new();
    for action in plan.actions {
        by_namespace
            .entry(action.namespace().to_string())
            .or_default()
            .push(action);
    }
    for (namespace, actions) in by_namespace {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource());
        let total = actions.len();
        for (done, action) in actions.into_iter().enumerate() {
            match write(&api, &action).await {
                Ok(verb) => {
                    match verb {
                        "created" => outcome.created += 1,
                        "updated" => outcome.updated += 1,
                        _ => outcome.deleted += 1,
                    }
                    progress(verb, &action);
                }
                Err((message, per_object)) => {
                    outcome.failures.push(format!("{namespace}: {message}"));
                    if per_object {
                        outcome.not_written += 1;
                        continue;
                    }
                    outcome.not_written += total - done;
                    break;
                }
            }
        }
    }
    outcome
}

/// One write; `Ok(verb)`, or the error and whether it concerns this report alone.
async fn write(api: &Api<DynamicObject>, action: &Action) -> Result<&'static str, (String, bool)> {
    let params = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let name = action.name().to_string();
    let result = match action {
        Action::Create(report) => match object(report) {
            Ok(object) => api.create(&params, &object).await.map(|_| "created"),
            Err(message) => return Err((message, true)),
        },
        Action::Replace(report) => match object(report) {
            Ok(object) => api
                .replace(&name, &params, &object)
                .await
                .map(|_| "updated"),
            Err(message) => return Err((message, true)),
        },
        Action::Delete {
            resource_version, ..
        } => {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(resource_version.clone()),
                    uid: None,
                }),
                ..DeleteParams::default()
            };
            api.delete(&name, &params).await.map(|_| "deleted")
        }
    };
    result.map_err(|e| failure(action, &name, &e))
}

fn object(report: &Value) -> Result<DynamicObject, String> {
    serde_json::from_value(report.clone()).map_err(|e| {
        format!(
            "cannot build PolicyReport {}: {e}",
            text(report, "/metadata/name")
        )
    })
}

/// The message for a failed write, and whether only this report is concerned.
fn failure(action: &Action, name: &str, e: &kube::Error) -> (String, bool) {
    let verb = match action {
        Action::Create(_) => "create",
        Action::Replace(_) => "replace",
        Action::Delete { .. } => "delete",
    };
    let code = match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    };
    let why = match (action, code) {
        (Action::Create(_), Some(409)) => {
            " (a PolicyReport of that name exists without the label \
             app.kubernetes.io/managed-by=gangplank: another tool's, left alone)"
        }
        (_, Some(409)) => " (changed since it was listed; the next run writes it)",
        (_, Some(404)) => " (deleted since it was listed)",
        _ => "",
    };
    let message = format!(
        "cannot {verb} PolicyReport {name}: {}{why}",
        crate::error_chain(e)
    );
    (message, matches!(code, Some(404 | 409 | 422)))
}

// Tests: a panic is a failure that names the case.
#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(ns: &str, name: &str, result: &str, seconds: i64) -> Value {
        json!({
            "apiVersion": "wgpolicyk8s.io/v1alpha2",
            "kind": "PolicyReport",
            "metadata": {"name": name, "namespace": ns, "labels": {MANAGED_BY: SOURCE}},
            "scope": {"kind": "PyTorchJob", "name": "job"},
            "summary": {"fail": 1},
            "results": [{"policy": "coordinator", "result": result,
                "timestamp": {"seconds": seconds, "nanos": 0}}],
        })
    }

    fn listed(mut report: Value, version: &str) -> Value {
        report["metadata"]["resourceVersion"] = json!(version);
        report
    }

    #[test]
    fn creates_what_is_new_and_leaves_findings_that_only_aged() {
        let existing = [listed(report("a", "gangplank-1", "fail", 100), "7")];
        let desired = vec![
            report("a", "gangplank-1", "fail", 200),
            report("b", "gangplank-2", "fail", 200),
        ];
        let plan = plan(desired.clone(), &existing, true);
        assert_eq!(plan.actions, vec![Action::Create(desired[1].clone())]);
        assert_eq!(plan.unchanged, 1);
    }

    #[test]
    fn replaces_changed_findings_with_the_listed_resource_version() {
        let existing = [listed(report("a", "gangplank-1", "fail", 100), "7")];
        let plan = plan(
            vec![report("a", "gangplank-1", "warn", 200)],
            &existing,
            true,
        );
        let [Action::Replace(new)] = plan.actions.as_slice() else {
            panic!("{plan:?}")
        };
        assert_eq!(new["metadata"]["resourceVersion"], "7");
        assert_eq!(new["results"][0]["result"], "warn");
    }

    #[test]
    fn deletes_stale_reports_only_when_the_jobs_were_all_listed() {
        let existing = [
            listed(report("a", "gangplank-1", "fail", 100), "7"),
            listed(report("b", "gangplank-2", "fail", 100), "8"),
        ];
        let desired = vec![report("a", "gangplank-1", "fail", 100)];
        let complete = plan(desired.clone(), &existing, true);
        assert_eq!(
            complete.actions,
            vec![Action::Delete {
                namespace: "b".into(),
                name: "gangplank-2".into(),
                resource_version: "8".into()
            }]
        );
        let incomplete = plan(desired, &existing, false);
        assert!(incomplete.actions.is_empty(), "{incomplete:?}");
        assert_eq!(incomplete.kept, 1);
    }

    #[test]
    fn names_the_namespaces_that_failed_once_each() {
        let outcome = Outcome {
            failures: vec!["b: x".into(), "a: y".into(), "b: z".into()],
            ..Outcome::default()
        };
        assert_eq!(
            outcome.failed_namespaces().into_iter().collect::<Vec<_>>(),
            ["a", "b"]
        );
    }
}
