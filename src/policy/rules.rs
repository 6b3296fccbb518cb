//! A policy set's output rules (`mutation`, `violation`, `warning` of each policy) and the
//! groups a request evaluates together: the vocabulary the set, its evaluation and its
//! class programs share.

/// The outputs a policy can declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Mutation,
    Violation,
    Warning,
}

impl Output {
    pub fn rule(self) -> &'static str {
        match self {
            Output::Mutation => "mutation",
            Output::Violation => "violation",
            Output::Warning => "warning",
        }
    }
}

/// The outputs a request evaluates together: what `mutate` needs, and what `validate`
/// needs. The VM runs each group as one gathered execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Mutation,
    Verdicts,
}

impl Group {
    pub const ALL: [Group; 2] = [Group::Mutation, Group::Verdicts];

    pub fn outputs(self) -> &'static [Output] {
        match self {
            Group::Mutation => &[Output::Mutation],
            Group::Verdicts => &[Output::Violation, Output::Warning],
        }
    }

    /// The rules of `rules` whose output belongs to this group, in order.
    pub fn rules(self, rules: &[RuleRef]) -> impl Iterator<Item = &RuleRef> {
        rules
            .iter()
            .filter(move |r| self.outputs().contains(&r.output))
    }

    /// Its number among the program's gathered entry points.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One output rule of one policy, e.g. `data.gangplank.policies.images.violation`.
#[derive(Debug, Clone)]
pub struct RuleRef {
    /// Its own index among the set's rules.
    pub index: usize,
    /// Index into the set's policies.
    pub policy: usize,
    pub output: Output,
    pub path: String,
}
