//! A decision as `/validate` answers it: denial, warnings within Kubernetes' limits, audit
//! annotations.
//!
//! Entry point: [`for_decision`]. Warnings are bounded by [`bound_warnings`]: the apiserver
//! truncates a warning past 256 characters and drops warnings past about 4 KB in total
//! (`k8s.io/apiserver/pkg/warning`), and kubectl prints each on one line, so long ones are
//! shortened here, where the cut is ours to choose. The full text is never lost: it goes into
//! the audit annotation [`FULL_WARNINGS_KEY`] and the decision log line.

#![deny(clippy::indexing_slicing, reason = "request data decides lengths")]

use std::collections::BTreeMap;

use super::review::Verdict;
use crate::policy::{Action, Violation};
use crate::review::Decision;

/// A warning this long fits one terminal line with kubectl's `Warning: ` prefix.
pub const WARNING_CHARS: usize = 120;
/// What the apiserver keeps of one warning; nothing we send is longer.
pub const MAX_WARNING_CHARS: usize = 256;
/// Total of the warnings of one response, in bytes: the apiserver's 4 KiB budget minus room
/// for the closing note.
pub const MAX_WARNINGS_BYTES: usize = 3_900;
/// Audit annotation with every warning in full, one per line, when any was shortened.
pub const FULL_WARNINGS_KEY: &str = "warnings-full";

/// What is added where a warning is cut.
const ELLIPSIS: &str = "...";

/// Deny violations refuse (403, one `[policy] path: message` per line); warn violations
/// become bounded warnings; audit violations become audit annotations keyed by policy.
/// Exempted findings refuse nothing: those an exception excuses are warnings that name it
/// and its expiry ([`Decision::warnings`]); those params.yaml exempts are audit
/// annotations, like audit violations, since the platform team chose them for good.
pub fn for_decision(decision: &Decision) -> Verdict {
    let mut verdict = match decision.denial_message() {
        None => Verdict::allow(),
        Some(message) => Verdict::deny(message),
    };
    let warnings = decision.warnings();
    let bounded = bound_warnings(&warnings);
    if bounded != warnings {
        verdict
            .audit_annotations
            .insert(FULL_WARNINGS_KEY.to_string(), warnings.join("\n"));
    }
    verdict.warnings = bounded;
    let exempted = decision
        .exempted()
        .filter(|v| v.exempted.as_ref().is_some_and(|e| e.exception.is_none()));
    verdict.audit_annotations.extend(audit_annotations(
        decision.with_action(Action::Audit).chain(exempted),
    ));
    verdict
}

fn audit_annotations<'a>(found: impl Iterator<Item = &'a Violation>) -> BTreeMap<String, String> {
    let mut audit: BTreeMap<String, String> = BTreeMap::new();
    for v in found {
        let entry = audit.entry(v.policy.clone()).or_default();
        if !entry.is_empty() {
            entry.push_str("; ");
        }
        entry.push_str(&v.render_exempted());
    }
    audit
}

/// Warnings as sent: each at most [`WARNING_CHARS`] characters (cut with `...`), at most
/// [`MAX_WARNINGS_BYTES`] in total; when anything was cut or left out, a last warning says
/// so and where the full text is.
pub fn bound_warnings(warnings: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut total = 0;
    let mut shortened = 0;
    let mut left_out = 0;
    for w in warnings {
        let short = shorten(w, WARNING_CHARS);
        if total + short.len() > MAX_WARNINGS_BYTES {
            left_out += 1;
            continue;
        }
        if short.len() < w.len() {
            shortened += 1;
        }
        total += short.len();
        out.push(short);
    }
    if shortened + left_out > 0 {
        out.push(format!(
            "[gangplank] {shortened} warning(s) shortened, {left_out} left out: full text in the audit log and `gangplank check`"
        ));
    }
    out
}

/// `text` cut to at most `max` characters (not bytes: warnings are UTF-8 text), ending in
/// `...` when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(ELLIPSIS.len());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(ELLIPSIS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_warnings_pass_unchanged_and_without_a_note() {
        let w = vec!["[p] /a: short".to_string(), "[p] b".to_string()];
        assert_eq!(bound_warnings(&w), w);
    }

    #[test]
    fn long_warnings_are_cut_to_the_line_and_a_note_says_where_the_rest_is() {
        let long = format!("[p] /spec: {}", "é".repeat(400));
        let out = bound_warnings(&[long]);
        let [cut, note] = out.as_slice() else {
            panic!("expected the cut warning and a note, got {out:?}");
        };
        assert_eq!(cut.chars().count(), WARNING_CHARS);
        assert!(cut.ends_with("..."));
        assert!(note.contains("1 warning(s) shortened, 0 left out"));
        assert!(out.iter().all(|w| w.chars().count() <= WARNING_CHARS));
    }

    #[test]
    fn the_total_stays_within_the_apiserver_budget() {
        let many: Vec<String> = (0..500)
            .map(|i| format!("[p] /x/{i}: {}", "w".repeat(300)))
            .collect();
        let out = bound_warnings(&many);
        let total: usize = out.iter().map(String::len).sum();
        assert!(total <= 4096, "{total} bytes");
        assert!(out.iter().all(|w| w.chars().count() <= MAX_WARNING_CHARS));
        let note = out.last().map(String::as_str).unwrap_or_default();
        assert!(note.contains("left out"), "{note}");
    }
}
