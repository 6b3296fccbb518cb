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
    /// Median of the runs, or why the rule could not be measured.
    pub median: Result<Duration, String>,
}

impl PolicySet {
    /// Runs every output rule of every enabled policy `runs` times on `input`, alone and on
    /// the backend the set uses, and returns the median cost of each.
    pub fn profile(&self, input: &RegoValue, runs: usize) -> Vec<RuleCost> {
        self.rules
            .iter()
            .map(|rule| RuleCost {
                rule: format!(
                    "{}.{}",
                    self.policies
                        .get(rule.policy)
                        .map_or("", |p| p.name.as_str()),
                    rule.output.rule()
                ),
                median: self.time_rule(rule, input, runs),
            })
            .collect()
    }

    fn time_rule(
        &self,
        rule: &RuleRef,
        input: &RegoValue,
        runs: usize,
    ) -> Result<Duration, String> {
        let mut samples = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = Instant::now();
            self.eval_rules_on(&[rule], input, self.vm.is_err())
                .map_err(|e| e.to_string())?;
            samples.push(start.elapsed());
        }
        samples.sort();
        samples
            .get(samples.len() / 2)
            .copied()
            .ok_or_else(|| "no runs".to_string())
    }
}
