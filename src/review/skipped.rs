//! Which policies the applicability index skips at each stage of a [`review`], and why:
//! what `gangplank check --explain` shows and what the corpus tests count.
//!
//! Entry point: [`skipped_at_stages`]. Mutation policies see the submitted object (less the
//! derived defaults gangplank wrote earlier), validation policies the mutated one, and a
//! fact can differ between the two (a mutation may add a toleration, say), so each stage is
//! read from the input document it sees, as [`review`] builds it.
//!
//! [`review`]: super::review

use super::decide;
use super::input::Input;
use crate::policy::{EvalError, PolicySet};

/// Skipped policies by stage, each with why, as [`PolicySet::skipped_policies`] lists them.
/// A policy appears at a stage whether or not it has rules there: see [`Stages::of`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stages {
    pub mutation: Vec<(String, String)>,
    pub validation: Vec<(String, String)>,
}

/// Whether a policy runs at one stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    Evaluated,
    Skipped(String),
    /// The policy has no rule for this stage.
    Absent,
}

impl Stages {
    /// Policy `name`'s mutation and validation stages, given which rules it has.
    pub fn of(&self, name: &str, has_mutation: bool, has_verdicts: bool) -> (Stage, Stage) {
        let stage = |skipped: &[(String, String)], has: bool| {
            if !has {
                return Stage::Absent;
            }
            match skipped.iter().find(|(n, _)| n == name) {
                Some((_, why)) => Stage::Skipped(why.clone()),
                None => Stage::Evaluated,
            }
        };
        (
            stage(&self.mutation, has_mutation),
            stage(&self.validation, has_verdicts),
        )
    }
}

/// The policies the index skips when `input` is reviewed: mutates it (the mutation policies
/// the index lets through are evaluated) to find the object validation sees. Fails when the
/// mutation does. With the index off, both lists are empty.
pub fn skipped_at_stages(set: &PolicySet, input: &Input) -> Result<Stages, EvalError> {
    let input = set.runtimes().attach(input);
    let mut mutation = decide::mutate(set, &input)?;
    let seen = set.skipped_policies(mutation.seen_rego_input());
    let mutated = set.skipped_policies(&mutation.take_rego_input(&input));
    Ok(Stages {
        mutation: seen,
        validation: mutated,
    })
}
