//! Per-policy evaluation cost, for policy authors: `gangplank check --profile`.
//!
//! Each policy output rule runs alone, through the same evaluation path as a request (a
//! fresh VM per run), so the figures add up to roughly what a request pays and show which
//! policy to make cheaper.

use std::time::{Duration, Instant};

use regorus::Value as RegoValue;

use super::set::{PolicySet, RuleRef};

/// The cost of one output rule of one policy.
#[derive(Debug, Clone)]
pub struct RuleCost {
    /// `gang_scheduling.mutation`
    pub rule: String,
    pub cost: Cost,
}

/// What one rule costs a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cost {
    /// Median of the runs.
    Median(Duration),
    /// Why the rule could not be measured.
    Failed(String),
    /// Why the applicability index skips its policy for this input: it costs nothing, and
    /// is not run.
    Skipped(String),
}

impl PolicySet {
    /// Runs every output rule of every enabled policy `runs` times on `input`, alone and on
    /// the backend the set uses, and returns the median cost of each. Rules of policies the
    /// index skips for `input` are not run (see [`PolicySet::skipped_policies`]).
    pub fn profile(&self, input: &RegoValue, runs: usize) -> Vec<RuleCost> {
        let skipped = self.skipped_policies(input);
        self.rules
            .iter()
            .map(|rule| {
                let policy = self
                    .policies
                    .get(rule.policy)
                    .map_or("", |p| p.name.as_str());
                let cost = match skipped.iter().find(|(name, _)| name == policy) {
                    Some((_, why)) => Cost::Skipped(why.clone()),
                    None => match self.time_rule(rule, input, runs) {
                        Ok(median) => Cost::Median(median),
                        Err(e) => Cost::Failed(e),
                    },
                };
                RuleCost {
                    rule: format!("{policy}.{}", rule.output.rule()),
                    cost,
                }
            })
            .collect()
    }

    /// Median cost of the whole review of `input` (mutation, then validation of the
    /// result) as a request pays it: each group of rules in one gathered execution, input
    /// converted once. Less than the sum of the rules alone, which each pay for a VM and
    /// the helpers they share.
    pub fn profile_review(
        &self,
        input: &crate::review::Input,
        runs: usize,
    ) -> Result<Duration, String> {
        median(runs, || {
            crate::review::review(self, input)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }

    fn time_rule(
        &self,
        rule: &RuleRef,
        input: &RegoValue,
        runs: usize,
    ) -> Result<Duration, String> {
        median(runs, || {
            // The cluster's view inside the timed part: a request pays for it.
            self.eval_rules_on(&[rule], input, self.cluster_view(input), self.vm.is_err())
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

/// Median wall time of `runs` runs of `f`.
fn median(runs: usize, mut f: impl FnMut() -> Result<(), String>) -> Result<Duration, String> {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
        .get(samples.len() / 2)
        .copied()
        .ok_or_else(|| "no runs".to_string())
}
