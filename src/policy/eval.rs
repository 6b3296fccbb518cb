//! Evaluating a policy set on one input: mutation intents and violations.
//!
//! Each call evaluates every applicable policy's output rules on one input: each rule is an
//! entry point of the bytecode program when the set compiled for the VM, else a rule of a
//! clone of the prepared interpreter (cheap: shared, copy-on-write state).

use regorus::Value as RegoValue;
use serde::Serialize;
use serde_json::Value;

use super::error::EvalError;
use super::excuse::{Excuses, Exempted};
use super::intent::Intent;
use super::params::Action;
use super::set::{from_rego, Group, Output, PolicySet, RuleRef};
use super::vm::{RunError, VmProgram};

/// One finding of one policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub policy: String,
    pub action: Action,
    /// JSON pointer to the offending field, or "" for the whole object.
    pub path: String,
    pub msg: String,
    /// Set when an exemption or an exception excuses it: then it refuses nothing, whatever
    /// its action (see [`super::excuse`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exempted: Option<Exempted>,
}

impl Violation {
    /// A finding of `policy` that nothing excuses.
    pub fn new(policy: &str, action: Action, path: String, msg: String) -> Violation {
        Violation {
            policy: policy.to_string(),
            action,
            path,
            msg,
            exempted: None,
        }
    }

    /// `[policy] path: message`, the form used in denials and warnings.
    pub fn render(&self) -> String {
        if self.path.is_empty() {
            format!("[{}] {}", self.policy, self.msg)
        } else {
            format!("[{}] {}: {}", self.policy, self.path, self.msg)
        }
    }

    /// `[policy] exempted by exception X until DATE: path: message`, the form of exempted
    /// findings: who excused it comes first, so a warning cut to one line still says so.
    pub fn render_exempted(&self) -> String {
        match &self.exempted {
            Some(e) => {
                let located = self.render();
                let rest = located
                    .strip_prefix(&format!("[{}] ", self.policy))
                    .unwrap_or(&located);
                format!("[{}] {}: {rest}", self.policy, e.describe())
            }
            None => self.render(),
        }
    }

    /// Whether it counts: not exempted, with action `action`.
    pub fn effective(&self, action: Action) -> bool {
        self.exempted.is_none() && self.action == action
    }
}

impl PolicySet {
    /// Mutation intents of every policy the request is not excused from, in application
    /// order: policies by name, each policy's intents in Rego's (sorted, deterministic) set
    /// order.
    pub fn mutation_intents(
        &self,
        input: &RegoValue,
        excuses: &Excuses,
    ) -> Result<Vec<Intent>, EvalError> {
        let mut intents = Vec::new();
        let applies = |policy: usize| excuses.of(policy).is_none();
        for (rule, out) in self.eval_outputs(Group::Mutation, input, &applies)? {
            let policy = self.policy_name(rule);
            for item in as_list(policy, "mutation", &out)? {
                intents.push(Intent::parse(policy, item)?);
            }
        }
        Ok(intents)
    }

    /// Violations (with each policy's action) and warnings of every enabled policy,
    /// ordered by policy, then path, then message; those of policies the request is excused
    /// from are marked so (and refuse nothing).
    pub fn violations(
        &self,
        input: &RegoValue,
        excuses: &Excuses,
    ) -> Result<Vec<Violation>, EvalError> {
        let mut found = Vec::new();
        for (rule, out) in self.eval_outputs(Group::Verdicts, input, &|_| true)? {
            let policy = self.policy_name(rule);
            let action = match rule.output {
                Output::Warning => Action::Warn,
                _ => self
                    .policies
                    .get(rule.policy)
                    .map_or(Action::Deny, |p| p.action),
            };
            for item in as_list(policy, rule.output.rule(), &out)? {
                let mut v = violation(policy, action, item);
                v.exempted = excuses.of(rule.policy).cloned();
                found.push(v);
            }
        }
        sort_violations(&mut found);
        found.dedup();
        Ok(found)
    }

    fn policy_name(&self, rule: &RuleRef) -> &str {
        self.policies
            .get(rule.policy)
            .map_or("", |p| p.name.as_str())
    }

    /// Evaluates the outputs of `group` of every policy for which `applies` (given its
    /// index) holds and that can apply to this request (see [`super::applicability`]); the
    /// others are not evaluated at all. When every policy applies, as for most requests,
    /// the VM runs the group as one gathered execution that passes over the skipped rules.
    fn eval_outputs(
        &self,
        group: Group,
        input: &RegoValue,
        applies: &dyn Fn(usize) -> bool,
    ) -> Result<Vec<(&RuleRef, Value)>, EvalError> {
        let cluster = self.cluster_view(input);
        let skipped = self.skipped_rules(input, cluster.as_ref());
        let rules: Vec<&RuleRef> = group.rules(&self.rules).collect();
        let applies = |r: &&RuleRef| applies(r.policy);
        if let Ok(program) = &self.vm {
            if rules.iter().all(applies) {
                return self.eval_group(program, group, &rules, input, cluster, &skipped);
            }
        }
        let rules: Vec<&RuleRef> = rules.into_iter().filter(applies).collect();
        let rules = unskipped(&rules, &skipped);
        self.eval_rules_on(&rules, input, cluster, self.vm.is_err())
    }

    /// The indices of the rules the index skips for this request.
    fn skipped_rules(&self, input: &RegoValue, cluster: Option<&RegoValue>) -> Vec<usize> {
        if !self.index || self.policies.iter().all(|p| p.applies_when.is_none()) {
            return Vec::new();
        }
        let skipped: Vec<usize> = self.policy_skips(input, cluster).map(|(i, _)| i).collect();
        self.rules
            .iter()
            .filter(|r| skipped.contains(&r.policy))
            .map(|r| r.index)
            .collect()
    }

    /// Runs `rules`, compiled as `group`, in one VM execution, passing over those in
    /// `skipped` (their output is undefined): on the program of the request's class when
    /// there is one (see [`super::classes`]), else on `program` behind its skip guards. A
    /// failure is attributed to its rule by running the rules one by one, unless a limit
    /// stopped the run: that message already names the policy file and line it was in, and
    /// running the culprit again would only double the time the request waits.
    fn eval_group<'a>(
        &self,
        program: &VmProgram,
        group: Group,
        rules: &[&'a RuleRef],
        input: &RegoValue,
        cluster: Option<RegoValue>,
        skipped: &[usize],
    ) -> Result<Vec<(&'a RuleRef, Value)>, EvalError> {
        // The class's own program gathers only the rules it runs; without one (the cache is
        // full, or it did not compile) the set's program passes over the skipped rules.
        let class = match skipped {
            [] => None,
            _ => self.classes.program(&self.engine, &self.rules, skipped),
        };
        let (program, gathered, skip) = match &class {
            Some(class) => (class.as_ref(), unskipped(rules, skipped), None),
            None => (program, rules.to_vec(), skip_set(skipped)),
        };
        let mut vm = program
            .vm(input, cluster.as_ref(), skip)
            .map_err(vm_failed)?;
        match vm.run_group(group.index(), gathered.len()) {
            Ok(values) => Ok(gathered
                .iter()
                .zip(&values)
                .filter(|(rule, _)| !skipped.contains(&rule.index))
                .map(|(rule, v)| (*rule, from_rego(v)))
                .collect()),
            Err(RunError {
                message,
                stopped_in: Some((rule, line)),
            }) => Err(EvalError::Rego {
                rule: stopped_in(&rule, line),
                message,
            }),
            Err(_) => self.eval_rules_on(&unskipped(rules, skipped), input, cluster, false),
        }
    }

    /// Evaluates rules on one input and its view of the cluster (see
    /// [`PolicySet::cluster_view`]): on one VM, or on one clone of the prepared interpreter
    /// when `interpreter` is set.
    pub(super) fn eval_rules_on<'a>(
        &self,
        rules: &[&'a RuleRef],
        input: &RegoValue,
        cluster: Option<RegoValue>,
        interpreter: bool,
    ) -> Result<Vec<(&'a RuleRef, Value)>, EvalError> {
        let failed = |rule: &RuleRef, message: String| EvalError::Rego {
            rule: rule.path.clone(),
            message,
        };
        let mut out = Vec::with_capacity(rules.len());
        match (&self.vm, interpreter) {
            (Ok(program), false) => {
                let mut vm = program
                    .vm(input, cluster.as_ref(), None)
                    .map_err(vm_failed)?;
                for rule in rules {
                    let v = vm.run(&rule.path).map_err(|e| failed(rule, e.message))?;
                    out.push((*rule, from_rego(&v)));
                }
            }
            _ => {
                let mut engine = self.engine.clone();
                if let Some(cluster) = cluster {
                    let data = RegoValue::from(std::collections::BTreeMap::from([(
                        RegoValue::from("cluster"),
                        cluster,
                    )]));
                    engine.add_data(data).map_err(|e| EvalError::Rego {
                        rule: "data.cluster".into(),
                        message: e.to_string(),
                    })?;
                }
                engine.set_input(input.clone());
                self.start_coverage(&mut engine);
                let evaluated = rules.iter().try_for_each(|rule| {
                    let v = engine
                        .eval_rule(rule.path.clone())
                        .map_err(|e| failed(rule, e.to_string()))?;
                    out.push((*rule, from_rego(&v)));
                    Ok(())
                });
                // A failing evaluation still reached lines (a case may expect the error).
                self.finish_coverage(&engine);
                evaluated?;
            }
        }
        Ok(out)
    }
}

/// `data.gangplank_skip` for the guarded program: the skipped rule indices, if any.
fn skip_set(skipped: &[usize]) -> Option<RegoValue> {
    (!skipped.is_empty()).then(|| {
        RegoValue::from(
            skipped
                .iter()
                .map(|i| RegoValue::from(*i as u64))
                .collect::<std::collections::BTreeSet<_>>(),
        )
    })
}

/// `rules` less those whose index is in `skipped`.
fn unskipped<'a>(rules: &[&'a RuleRef], skipped: &[usize]) -> Vec<&'a RuleRef> {
    rules
        .iter()
        .copied()
        .filter(|r| !skipped.contains(&r.index))
        .collect()
}

fn vm_failed(message: String) -> EvalError {
    EvalError::Rego {
        rule: "<vm>".into(),
        message,
    }
}

/// "policy cross (data.gangplank.policies.cross.violation, line 12)" for a rule of a
/// policy; a library function is named as it is.
fn stopped_in(rule: &str, line: usize) -> String {
    let prefix = format!("data.{}.", super::set::POLICY_PACKAGE);
    match rule
        .strip_prefix(&prefix)
        .and_then(|rest| rest.split('.').next())
    {
        Some(policy) => format!("policy {policy} ({rule}, line {line})"),
        None => format!("{rule} (line {line})"),
    }
}

/// The order violations are reported in: by policy, then path, then message.
pub fn sort_violations(violations: &mut [Violation]) {
    violations.sort_by(|a, b| (&a.policy, &a.path, &a.msg).cmp(&(&b.policy, &b.path, &b.msg)));
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
    Violation::new(policy, action, path, msg)
}
