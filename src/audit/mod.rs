//! `gangplank audit`: the training jobs that already exist, judged by today's policies.
//!
//! Entry points: [`judge`] (one stored job → an [`AuditedJob`]), [`Audit`] (every job of a
//! run, with what could not be read), [`snapshot::read`] and [`live::collect`] (where the
//! jobs come from), [`report`] (table, JSON, PolicyReports) and [`publish`] (the
//! PolicyReports written back to the cluster: `audit --write-reports`).
//!
//! # Guarantees
//! - Each job is judged as a CREATE of its current object: "would this job be admitted if it
//!   were submitted today". Mutation runs first, as the webhooks would, so defaults the
//!   webhooks would add never count against a job created without them.
//! - Every violation of the current object is reported. On UPDATE, violations the stored
//!   object already had are excused ([`crate::review::existing`]); a CREATE has no stored
//!   object, so nothing is excused here.
//! - One job that cannot be evaluated, or one file that cannot be read, never hides the
//!   others: it is reported, and the run exits [`crate::exit::UNREADABLE`].

// Jobs and snapshot files come from outside: a panic would lose the whole audit.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod live;
pub mod publish;
pub mod report;
pub mod snapshot;

use serde::Serialize;
use serde_json::Value;

use crate::exit;
use crate::policy::{Action, PolicySet, Violation};
use crate::review::{self, DocumentError, Input};

/// What the policies made of one job.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Evaluated; the violations (possibly none), ordered by policy, path, message.
    Judged(Vec<Violation>),
    /// No policy looks at it (its namespace is excluded from every policy), and why.
    Skipped(String),
    /// The policies failed on it (the webhook would refuse it for that reason).
    Error(String),
}

/// One stored training job and its verdict.
#[derive(Debug, Clone)]
pub struct AuditedJob {
    pub namespace: String,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// `metadata.uid`; empty when the snapshot carries none.
    pub uid: String,
    /// Where it was read: `cluster`, or `dump/jobs.yaml#1/items/3`.
    pub source: String,
    pub verdict: Verdict,
}

impl AuditedJob {
    /// `denied`, `warned`, `audited`, `exempted`, `passed`, `skipped` or `error`: the
    /// worst finding; `exempted` when every finding is excused by an exemption or an
    /// exception.
    pub fn label(&self) -> &'static str {
        match &self.verdict {
            Verdict::Skipped(_) => "skipped",
            Verdict::Error(_) => "error",
            Verdict::Judged(v) => {
                let counted = v.iter().filter(|v| v.exempted.is_none());
                match counted.map(|v| v.action).min() {
                    Some(Action::Deny) => "denied",
                    Some(Action::Warn) => "warned",
                    Some(Action::Audit) => "audited",
                    None if !v.is_empty() => "exempted",
                    None => "passed",
                }
            }
        }
    }

    pub fn violations(&self) -> &[Violation] {
        match &self.verdict {
            Verdict::Judged(v) => v,
            _ => &[],
        }
    }
}

/// Judges `object`, a stored job of a kind gangplank knows, as if it were created now.
/// `managedFields` is dropped first: often the largest part of a stored object, it is
/// bookkeeping of the apiserver that no policy reads.
pub fn judge(set: &PolicySet, mut object: Value, source: String) -> AuditedJob {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    let text = |v: &Value, pointer: &str| {
        v.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let input = Input::create(object, "default");
    let verdict = match review::review(set, &input) {
        Ok(decision) => match decision.skipped {
            Some(reason) => Verdict::Skipped(reason),
            None => Verdict::Judged(decision.violations),
        },
        Err(e) => Verdict::Error(e.to_string()),
    };
    AuditedJob {
        api_version: text(&input.object, "/apiVersion"),
        kind: text(&input.object, "/kind"),
        uid: text(&input.object, "/metadata/uid"),
        namespace: input.namespace,
        name: input.name,
        source,
        verdict,
    }
}

/// Everything one run found.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    /// `cluster`, or the snapshot path.
    pub source: String,
    /// Where `data.cluster` came from (`cluster`, a snapshot file), if the policies had one.
    pub inventory: Option<String>,
    /// Things the reader should know that are not failures: kinds whose CRD is not
    /// installed, objects that are not training jobs.
    pub notes: Vec<String>,
    /// Sorted by namespace, kind, name.
    pub jobs: Vec<AuditedJob>,
    /// Files, documents or listings that could not be read.
    pub unreadable: Vec<DocumentError>,
    /// Objects of the source that are not training jobs.
    pub ignored: usize,
}

impl Audit {
    pub fn sort(&mut self) {
        self.jobs.sort_by(|a, b| {
            (&a.namespace, &a.kind, &a.name, &a.api_version).cmp(&(
                &b.namespace,
                &b.kind,
                &b.name,
                &b.api_version,
            ))
        });
    }

    /// How many jobs carry each [`AuditedJob::label`].
    pub fn count(&self, label: &str) -> usize {
        self.jobs.iter().filter(|j| j.label() == label).count()
    }

    /// [`exit::UNREADABLE`] when something could not be read or evaluated (the audit is
    /// incomplete), else [`exit::FAILED`] when a job has a deny-level violation, else
    /// [`exit::OK`]: the precedence `gangplank check` uses.
    pub fn exit_code(&self) -> u8 {
        if !self.unreadable.is_empty() || self.count("error") > 0 {
            exit::UNREADABLE
        } else if self.count("denied") > 0 {
            exit::FAILED
        } else {
            exit::OK
        }
    }
}

/// The summary counts of [`report`]'s JSON, in its field names.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Summary {
    pub jobs: usize,
    pub denied: usize,
    pub warned: usize,
    pub audited: usize,
    /// Jobs whose every finding an exemption or an exception excuses.
    pub exempted: usize,
    pub passed: usize,
    pub skipped: usize,
    pub errors: usize,
    pub unreadable: usize,
    pub ignored: usize,
}

impl Audit {
    pub fn summary(&self) -> Summary {
        Summary {
            jobs: self.jobs.len(),
            denied: self.count("denied"),
            warned: self.count("warned"),
            audited: self.count("audited"),
            exempted: self.count("exempted"),
            passed: self.count("passed"),
            skipped: self.count("skipped"),
            errors: self.count("error"),
            unreadable: self.unreadable.len(),
            ignored: self.ignored,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, verdict: Verdict) -> AuditedJob {
        AuditedJob {
            namespace: "ns".into(),
            api_version: "kubeflow.org/v1".into(),
            kind: "PyTorchJob".into(),
            name: name.into(),
            uid: String::new(),
            source: "test".into(),
            verdict,
        }
    }

    fn violation(action: Action) -> Violation {
        Violation::new("p", action, String::new(), "m".into())
    }

    #[test]
    fn a_job_is_labelled_by_its_worst_violation() {
        let judged = |actions: &[Action]| {
            job(
                "j",
                Verdict::Judged(actions.iter().map(|a| violation(*a)).collect()),
            )
            .label()
        };
        assert_eq!(
            judged(&[Action::Audit, Action::Deny, Action::Warn]),
            "denied"
        );
        assert_eq!(judged(&[Action::Audit, Action::Warn]), "warned");
        assert_eq!(judged(&[Action::Audit]), "audited");
        assert_eq!(judged(&[]), "passed");
        assert_eq!(job("j", Verdict::Skipped("x".into())).label(), "skipped");
        assert_eq!(job("j", Verdict::Error("x".into())).label(), "error");
    }

    #[test]
    fn an_incomplete_audit_exits_unreadable_even_with_denials() {
        let denied = job("d", Verdict::Judged(vec![violation(Action::Deny)]));
        let warned = job("w", Verdict::Judged(vec![violation(Action::Warn)]));
        let mut audit = Audit {
            jobs: vec![warned.clone()],
            ..Audit::default()
        };
        assert_eq!(audit.exit_code(), exit::OK);
        audit.jobs.push(denied);
        assert_eq!(audit.exit_code(), exit::FAILED);
        audit.jobs.push(job("e", Verdict::Error("boom".into())));
        assert_eq!(audit.exit_code(), exit::UNREADABLE);
        let unreadable = Audit {
            jobs: vec![warned],
            unreadable: vec![DocumentError {
                source: "f.yaml#1".into(),
                message: "bad".into(),
            }],
            ..Audit::default()
        };
        assert_eq!(unreadable.exit_code(), exit::UNREADABLE);
    }
}
