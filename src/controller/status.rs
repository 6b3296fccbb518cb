//! The job's status as upstream writes it: conditions with upstream's bookkeeping rules,
//! `replicaStatuses`, and the start and completion times.
//!
//! Entry point: [`JobStatus::set_condition`], upstream's `UpdateJobConditions`:
//! - adding Running removes Restarting, adding Restarting removes Running;
//! - adding Succeeded or Failed turns an existing Running condition False;
//! - once Failed is True, no condition changes at all;
//! - an unchanged condition keeps its times; a changed one moves to the end of the list (so
//!   `conditions[-1]`, the printer column `State`, is the latest), keeping
//!   `lastTransitionTime` when only reason or message changed.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use super::Timestamp;

/// `status` of a v1 training job (upstream `JobStatus`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub replica_statuses: BTreeMap<String, ReplicaStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<Time>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: ConditionType,
    /// `True` or `False`.
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ConditionType {
    Created,
    Running,
    Restarting,
    Succeeded,
    Suspended,
    Failed,
    /// A type another controller wrote; written back unchanged.
    Other(String),
}

impl From<String> for ConditionType {
    fn from(s: String) -> Self {
        match s.as_str() {
            "Created" => ConditionType::Created,
            "Running" => ConditionType::Running,
            "Restarting" => ConditionType::Restarting,
            "Succeeded" => ConditionType::Succeeded,
            "Suspended" => ConditionType::Suspended,
            "Failed" => ConditionType::Failed,
            _ => ConditionType::Other(s),
        }
    }
}

impl From<ConditionType> for String {
    fn from(t: ConditionType) -> String {
        match t {
            ConditionType::Created => "Created".into(),
            ConditionType::Running => "Running".into(),
            ConditionType::Restarting => "Restarting".into(),
            ConditionType::Succeeded => "Succeeded".into(),
            ConditionType::Suspended => "Suspended".into(),
            ConditionType::Failed => "Failed".into(),
            ConditionType::Other(s) => s,
        }
    }
}

/// Counts of one replica type's pods (upstream `ReplicaStatus`; zero counts are omitted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub active: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub succeeded: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: i32,
    /// Label selector string of the type's pods; PyTorch, Paddle and JAX only (it backs their
    /// scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl JobStatus {
    pub fn condition(&self, t: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == t)
    }

    /// Whether condition `t` is present with status True.
    pub fn is(&self, t: ConditionType) -> bool {
        self.condition(t).is_some_and(|c| c.status == "True")
    }

    pub fn finished(&self) -> bool {
        self.is(ConditionType::Succeeded) || self.is(ConditionType::Failed)
    }

    /// Sets condition `t` the way upstream's `UpdateJobConditions` does (see the module doc);
    /// returns whether anything changed.
    pub fn set_condition(
        &mut self,
        t: ConditionType,
        status: bool,
        reason: String,
        message: String,
        now: Timestamp,
    ) -> bool {
        if self.is(ConditionType::Failed) {
            return false;
        }
        let status = if status { "True" } else { "False" }.to_string();
        let mut transition = Some(Time(now));
        if let Some(old) = self.condition(t.clone()) {
            if old.status == status && old.reason == reason && old.message == message {
                return false;
            }
            if old.status == status {
                transition.clone_from(&old.last_transition_time);
            }
        }
        self.conditions.retain(|c| !replaced_by(&c.type_, &t));
        if matches!(t, ConditionType::Succeeded | ConditionType::Failed) {
            for c in self.conditions.iter_mut() {
                if c.type_ == ConditionType::Running {
                    c.status = "False".to_string();
                }
            }
        }
        self.conditions.push(Condition {
            type_: t,
            status,
            reason,
            message,
            last_update_time: Some(Time(now)),
            last_transition_time: transition,
        });
        true
    }

    /// Sets completionTime unless it is already set.
    pub fn complete_at(&mut self, now: Timestamp) {
        self.completion_time.get_or_insert(Time(now));
    }
}

/// Whether setting condition `new` removes an existing condition of type `old`.
fn replaced_by(old: &ConditionType, new: &ConditionType) -> bool {
    use ConditionType::{Restarting, Running};
    old == new || matches!((old, new), (Running, Restarting) | (Restarting, Running))
}

/// Upstream's reason strings: the kind followed by what happened (`PyTorchJobRunning`).
pub fn reason(kind: &str, what: &str) -> String {
    format!("{kind}{what}")
}

#[cfg(test)]
mod tests;
