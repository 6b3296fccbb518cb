//! Which policies one request is excused from, and why: params.yaml's per-policy
//! exemptions and the exceptions of `exceptions/`, checked at one instant.
//!
//! Entry point: [`PolicySet::excuses`]. An excused policy does not mutate the job; its
//! findings are still evaluated and reported, marked [`Exempted`], and refuse nothing.
//!
//! # Guarantees
//! - An exception that has expired, or an exemption or exception that cannot be checked
//!   (namespace labels unknown), excuses nothing; it leaves a [`Note`] that the verdict shows
//!   when the policy it would have excused finds something.
//! - The instant is passed in: callers use the wall clock, tests any instant they like.

use serde::Serialize;
use time::OffsetDateTime;

use super::exceptions::Check as ExceptionCheck;
use super::exemption::{Check, Subject};
use super::set::PolicySet;

/// Why a finding refuses nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exempted {
    /// `params.yaml excludedNamespaces (team-*)`, or `exception legacy-tags`.
    pub by: String,
    /// The exception's name, when an exception excused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exception: Option<String>,
    /// When the exception stops applying (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// The exception's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Exempted {
    /// `exempted by exception legacy-tags until 2027-01-01T00:00:00Z`.
    pub fn describe(&self) -> String {
        match &self.until {
            Some(until) => format!("exempted by {} until {until}", self.by),
            None => format!("exempted by {}", self.by),
        }
    }
}

/// Something the verdict must say when the policy it concerns finds something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The policy (index in the set); `None`: every policy.
    pub policy: Option<usize>,
    pub message: String,
    /// Set for an expired exception: its name (the log line names it).
    pub expired: Option<String>,
}

/// One request's excuses.
#[derive(Debug, Clone, Default)]
pub struct Excuses {
    /// By policy index; empty: none excused.
    excused: Vec<Option<Exempted>>,
    pub notes: Vec<Note>,
}

impl Excuses {
    /// Why policy `index` is excused, if it is.
    pub fn of(&self, index: usize) -> Option<&Exempted> {
        self.excused.get(index).and_then(Option::as_ref)
    }

    pub fn any(&self) -> bool {
        self.excused.iter().any(Option::is_some)
    }
}

impl PolicySet {
    /// The subject exemptions and exceptions are checked against: the job `object` in
    /// `namespace`, with the namespace's labels when the cluster inventory holds them.
    pub fn subject(&self, namespace: &str, object: &serde_json::Value) -> Subject {
        let labels = self
            .cluster
            .current()
            .and_then(|doc| doc.namespace_labels(namespace));
        Subject::of(namespace, object).with_namespace_labels(labels)
    }

    /// Why no policy applies to `subject` (params.yaml's top-level exemption), if so; and
    /// why that could not be checked, if it could not.
    pub fn global_exemption(&self, subject: &Subject) -> Result<Option<String>, String> {
        match self.exemption.check(subject) {
            Check::Exempt(why) => Ok(Some(why)),
            Check::Unchecked(why) => Err(why),
            Check::NotExempt => Ok(None),
        }
    }

    /// Which enabled policies `subject` is excused from at `now`, and the notes (see the
    /// module doc). Per-policy exemptions come before exceptions: a permanent exemption is
    /// the better answer to cite.
    pub fn excuses(&self, subject: &Subject, now: OffsetDateTime) -> Excuses {
        let mut out = Excuses::default();
        if let Err(why) = self.global_exemption(subject) {
            out.notes.push(Note {
                policy: None,
                message: format!(
                    "params.yaml's top-level exemption could not be checked ({why}), so every policy applies"
                ),
                expired: None,
            });
        }
        if self.policies.iter().all(|p| p.exemption.is_empty()) && self.exceptions.is_empty() {
            return out;
        }
        out.excused = self
            .policies
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if !p.enabled {
                    return None;
                }
                match p.exemption.check(subject) {
                    Check::Exempt(why) => {
                        return Some(Exempted {
                            by: format!("params.yaml {why}"),
                            exception: None,
                            until: None,
                            reason: None,
                        })
                    }
                    Check::Unchecked(why) => out.notes.push(Note {
                        policy: Some(i),
                        message: format!(
                            "the exemption of {} could not be checked ({why}), so it applies",
                            p.name
                        ),
                        expired: None,
                    }),
                    Check::NotExempt => {}
                }
                self.exception_for(i, subject, now, &mut out.notes)
            })
            .collect();
        out
    }

    /// The first exception that excuses policy `index` for `subject` at `now`; notes for
    /// the expired and the uncheckable ones met on the way.
    fn exception_for(
        &self,
        index: usize,
        subject: &Subject,
        now: OffsetDateTime,
        notes: &mut Vec<Note>,
    ) -> Option<Exempted> {
        let policy = &self.policies.get(index)?.name;
        for e in &self.exceptions {
            let where_ = || format!("exception {} ({})", e.name, e.path.display());
            match e.check(policy, subject, now) {
                ExceptionCheck::Applies => {
                    return Some(Exempted {
                        by: format!("exception {}", e.name),
                        exception: Some(e.name.clone()),
                        until: Some(e.expires_text()),
                        reason: Some(e.reason.clone()),
                    })
                }
                ExceptionCheck::Expired => notes.push(Note {
                    policy: Some(index),
                    message: format!(
                        "{} expired at {}, so {policy} applies again; renew or delete it",
                        where_(),
                        e.expires_text()
                    ),
                    expired: Some(e.name.clone()),
                }),
                ExceptionCheck::Unchecked(why) => notes.push(Note {
                    policy: Some(index),
                    message: format!(
                        "{} could not be checked ({why}), so {policy} applies",
                        where_()
                    ),
                    expired: None,
                }),
                ExceptionCheck::NoMatch => {}
            }
        }
        None
    }
}
