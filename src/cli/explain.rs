//! `gangplank check --explain`: which policies the applicability index skips for a training
//! job, and why.
//!
//! Entry point: [`explain`]. Each stage is explained on the input document it sees (see
//! [`crate::review::skipped`]), and each policy only for the stages it has rules for.

use crate::policy::{PolicyInfo, PolicySet};
use crate::review::skipped::{skipped_at_stages, Stage, Stages};
use crate::review::{decide, Document};

/// The explanation of `doc` as text for stderr: a header with the counts, then one line per
/// policy not evaluated at some stage, with why.
pub fn explain(set: &PolicySet, doc: &Document) -> String {
    let input = set.runtimes().attach(&doc.input);
    let source = &doc.source;
    if let Some(reason) = decide::skip_reason(set, &input) {
        return format!("explain {source}: no policy evaluated: {reason}\n");
    }
    let enabled: Vec<&PolicyInfo> = set.policies().iter().filter(|p| p.enabled).collect();
    if !set.index_enabled() {
        return format!(
            "explain {source}: all {} enabled policies evaluated (the applicability index is off: {}=off)\n",
            enabled.len(),
            crate::policy::applicability::INDEX_ENV,
        );
    }
    let (stages, note) = match skipped_at_stages(set, &input) {
        Ok(stages) => (stages, String::new()),
        Err(e) => {
            let submitted = set.skipped_policies(&input.build_rego_input());
            let stages = Stages {
                mutation: submitted.clone(),
                validation: submitted,
            };
            (
                stages,
                format!(" (mutation failed: {e}; facts of the submitted object)"),
            )
        }
    };
    let mut lines = Vec::new();
    let mut evaluated = 0;
    for p in &enabled {
        if !p.applies_to(&input.namespace) {
            lines.push(format!(
                "  {}: skipped: namespace {} is in its excludedNamespaces (params.yaml)",
                p.name, input.namespace
            ));
            continue;
        }
        let (mutation, validation) =
            stages.of(&p.name, p.has_mutation, p.has_violation || p.has_warning);
        // Evaluated at one stage and skipped at the other: listed, and counted as evaluated.
        let both = [&mutation, &validation];
        if both.contains(&&Stage::Evaluated) || both.iter().all(|s| **s == Stage::Absent) {
            evaluated += 1;
        }
        if let Some(line) = describe(&mutation, &validation) {
            lines.push(format!("  {}: {line}", p.name));
        }
    }
    let skipped = enabled.len() - evaluated;
    let mut text = format!(
        "explain {source}: {evaluated} of {} enabled policies evaluated, {skipped} skipped{note}{}\n",
        enabled.len(),
        if lines.is_empty() { "" } else { ":" },
    );
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The line for a policy with these stages, `None` if it is evaluated at each it has.
fn describe(mutation: &Stage, validation: &Stage) -> Option<String> {
    use Stage::{Absent, Evaluated, Skipped};
    Some(match (mutation, validation) {
        (Skipped(m), Skipped(v)) if m == v => format!("skipped at mutation and validation: {m}"),
        (Skipped(m), Skipped(v)) => {
            format!("skipped at mutation: {m}; skipped at validation: {v}")
        }
        (Skipped(m), Absent) => format!("skipped at mutation: {m}"),
        (Absent, Skipped(v)) => format!("skipped at validation: {v}"),
        (Skipped(m), Evaluated) => format!("skipped at mutation: {m}; evaluated at validation"),
        (Evaluated, Skipped(v)) => format!("evaluated at mutation; skipped at validation: {v}"),
        (Evaluated | Absent, Evaluated | Absent) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::describe;
    use crate::review::skipped::Stage;

    #[test]
    fn a_policy_skipped_at_both_stages_for_one_reason_gets_one_line() {
        let why = Stage::Skipped("cluster does not hold".into());
        assert_eq!(
            describe(&why, &why).as_deref(),
            Some("skipped at mutation and validation: cluster does not hold")
        );
    }

    #[test]
    fn a_policy_evaluated_at_every_stage_it_has_gets_no_line() {
        assert_eq!(describe(&Stage::Absent, &Stage::Evaluated), None);
        assert_eq!(describe(&Stage::Evaluated, &Stage::Evaluated), None);
    }

    #[test]
    fn a_policy_skipped_at_one_stage_only_says_so() {
        let why = Stage::Skipped("gpus does not hold".into());
        assert_eq!(
            describe(&Stage::Evaluated, &why).as_deref(),
            Some("evaluated at mutation; skipped at validation: gpus does not hold")
        );
    }
}
