//! Per-policy evaluation cost, for policy authors: `gangplank check --profile`.
//!
//! Each policy output rule is compiled into its own program and run alone, so the figures
//! add up to roughly what a request pays and show which policy to make cheaper.

use std::time::{Duration, Instant};

use regorus::Value as RegoValue;

use super::set::PolicySet;
use super::vm::VmProgram;

/// The cost of one output rule of one policy.
#[derive(Debug, Clone)]
pub struct RuleCost {
    /// `gang_scheduling.mutation`
    pub rule: String,
    /// Median of the runs, or why the rule could not be measured.
    pub median: Result<Duration, String>,
}

impl PolicySet {
    /// Runs every output rule of every enabled policy `runs` times on `input` (on the
    /// backend the set uses) and returns the median cost of each.
    pub fn profile(&self, input: &RegoValue, runs: usize) -> Vec<RuleCost> {
        let mut out = Vec::new();
        for p in self.policies.iter().filter(|p| p.enabled) {
            let rules = [
                ("mutation", p.has_mutation),
                ("violation", p.has_violation),
                ("warning", p.has_warning),
            ];
            for (rule, declared) in rules {
                if declared {
                    let path = format!("data.gangplank.policies.{}.{rule}", p.name);
                    out.push(RuleCost {
                        rule: format!("{}.{rule}", p.name),
                        median: self.time_rule(&path, input, runs),
                    });
                }
            }
        }
        out
    }

    fn time_rule(&self, path: &str, input: &RegoValue, runs: usize) -> Result<Duration, String> {
        let mut samples = Vec::with_capacity(runs);
        if self.vm.is_ok() {
            let vm = VmProgram::compile_rules(&mut self.engine(), &[path])?;
            for _ in 0..runs {
                let start = Instant::now();
                vm.eval(path, input)?;
                samples.push(start.elapsed());
            }
        } else {
            for _ in 0..runs {
                let start = Instant::now();
                let mut engine = self.engine();
                engine.set_input(input.clone());
                engine
                    .eval_rule(path.to_string())
                    .map_err(|e| e.to_string())?;
                samples.push(start.elapsed());
            }
        }
        samples.sort();
        samples
            .get(samples.len() / 2)
            .copied()
            .ok_or_else(|| "no runs".to_string())
    }
}
