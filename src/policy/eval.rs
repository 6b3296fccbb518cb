//! Evaluating a policy set on one input: mutation intents and violations.
//!
//! Each call evaluates one generated entry rule that returns every policy's output at once,
//! on the bytecode VM when the set compiled for it, else on a clone of the prepared
//! interpreter (cheap: shared, copy-on-write state).

use regorus::Value as RegoValue;
use serde::Serialize;
use serde_json::Value;

use super::error::EvalError;
use super::intent::Intent;
use super::params::Action;
use super::set::{from_rego, PolicySet, MUTATIONS_RULE, VALIDATIONS_RULE};

/// One finding of one policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub policy: String,
    pub action: Action,
    /// JSON pointer to the offending field, or "" for the whole object.
    pub path: String,
    pub msg: String,
}

impl Violation {
    /// `[policy] path: message`, the form used in denials and warnings.
    pub fn render(&self) -> String {
        if self.path.is_empty() {
            format!("[{}] {}", self.policy, self.msg)
        } else {
            format!("[{}] {}: {}", self.policy, self.path, self.msg)
        }
    }
}

impl PolicySet {
    /// Mutation intents of every policy that applies in `namespace`, in application order:
    /// policies by name, each policy's intents in Rego's (sorted, deterministic) set order.
    pub fn mutation_intents(
        &self,
        input: &RegoValue,
        namespace: &str,
    ) -> Result<Vec<Intent>, EvalError> {
        let out = self.eval_entry(MUTATIONS_RULE, input)?;
        let mut intents = Vec::new();
        for (policy, items) in self.applicable(&out, namespace) {
            for item in as_list(policy, "mutation", items)? {
                intents.push(Intent::parse(policy, item)?);
            }
        }
        Ok(intents)
    }

    /// Violations (with each policy's action) and warnings of every policy that applies in
    /// `namespace`, ordered by policy, then path, then message.
    pub fn violations(
        &self,
        input: &RegoValue,
        namespace: &str,
    ) -> Result<Vec<Violation>, EvalError> {
        let out = self.eval_entry(VALIDATIONS_RULE, input)?;
        let mut found = Vec::new();
        for (policy, outputs) in self.applicable(&out, namespace) {
            let action = self.policy(policy).map_or(Action::Deny, |p| p.action);
            for (rule, action) in [("violation", action), ("warning", Action::Warn)] {
                let items = outputs.get(rule).unwrap_or(&Value::Null);
                for item in as_list(policy, rule, items)? {
                    found.push(violation(policy, action, item));
                }
            }
        }
        found.sort_by(|a, b| (&a.policy, &a.path, &a.msg).cmp(&(&b.policy, &b.path, &b.msg)));
        found.dedup();
        Ok(found)
    }

    fn eval_entry(&self, entry: &'static str, input: &RegoValue) -> Result<Value, EvalError> {
        let mut engine = self.engine.clone();
        engine.set_input(input.clone());
        let v = engine
            .eval_rule(entry.to_string())
            .map_err(|e| EvalError::Rego {
                entry,
                message: e.to_string(),
            })?;
        Ok(from_rego(&v))
    }

    /// Entries of an entry-rule result whose policy applies in `namespace`.
    fn applicable<'a>(
        &'a self,
        out: &'a Value,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a Value)> {
        out.as_object()
            .into_iter()
            .flatten()
            .filter_map(move |(name, v)| {
                let applies = self.policy(name).is_some_and(|p| p.applies_to(namespace));
                applies.then_some((name.as_str(), v))
            })
    }
}

fn as_list<'a>(policy: &str, what: &'static str, v: &'a Value) -> Result<&'a [Value], EvalError> {
    match v {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(&[]),
        other => Err(EvalError::BadOutput {
            policy: policy.to_string(),
            what,
            detail: format!("expected a set, got {other}"),
        }),
    }
}

/// A violation is `{"msg": string, "path": string}`; a bare string is accepted as the message.
/// Anything else still counts (a policy that fires must not be lost) with the raw value shown.
fn violation(policy: &str, action: Action, v: &Value) -> Violation {
    let (msg, path) = match v {
        Value::String(s) => (s.clone(), String::new()),
        Value::Object(o) => (
            o.get("msg")
                .and_then(Value::as_str)
                .map_or_else(|| format!("(no msg) {v}"), str::to_string),
            o.get("path")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        ),
        other => (format!("(malformed violation) {other}"), String::new()),
    };
    Violation {
        policy: policy.to_string(),
        action,
        path,
        msg,
    }
}
