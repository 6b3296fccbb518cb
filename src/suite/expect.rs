//! Comparing a decision with a case's expectations. Every mismatch is reported, each with
//! what was expected and what came out, so one run shows everything that is wrong.

use regex::Regex;
use serde_json::Value;

use super::case::{Expect, ViolationMatch};
use crate::policy::{EvalError, Violation};
use crate::review::Decision;

/// Mismatches between `result` and `expect`; empty means the case passed.
pub fn compare(expect: &Expect, result: &Result<Decision, EvalError>) -> Vec<String> {
    let d = match (result, &expect.error) {
        (Err(e), Some(pattern)) => return matches_regex(pattern, &e.to_string(), "error"),
        (Err(e), None) => return vec![format!("evaluation failed: {e}")],
        (Ok(_), Some(pattern)) => {
            return vec![format!(
                "expected an evaluation error matching /{pattern}/, got a decision"
            )]
        }
        (Ok(d), None) => d,
    };
    let mut out = Vec::new();
    if let Some(allowed) = expect.allowed {
        if d.allowed() != allowed {
            out.push(format!(
                "expected allowed: {allowed}, got {}{}",
                d.allowed(),
                listing(&d.violations)
            ));
        }
    }
    if let Some(skipped) = expect.skipped {
        if d.skipped.is_some() != skipped {
            out.push(format!("expected skipped: {skipped}, got {:?}", d.skipped));
        }
    }
    out.extend(violation_mismatches(expect, &d.violations));
    for pattern in &expect.warnings {
        let warnings = d.warnings();
        if !warnings.iter().any(|w| regex_matches(pattern, w)) {
            out.push(format!(
                "expected a warning matching /{pattern}/, got {warnings:?}"
            ));
        }
    }
    out.extend(object_mismatches(expect, d));
    out
}

fn violation_mismatches(expect: &Expect, found: &[Violation]) -> Vec<String> {
    let mut out = Vec::new();
    for m in &expect.violations {
        if !found.iter().any(|v| violation_matches(m, v)) {
            let wanted = serde_json::to_string(m).unwrap_or_default();
            out.push(format!(
                "expected a violation matching {wanted}{}",
                listing(found)
            ));
        }
    }
    // Exempted findings refuse nothing and are matched only by name: `exclusive` and
    // `noViolationsFrom` speak of the findings that count.
    let counted = || found.iter().filter(|v| v.exempted.is_none());
    if expect.exclusive {
        for v in counted().filter(|v| !expect.violations.iter().any(|m| violation_matches(m, v))) {
            out.push(format!("unexpected violation: {} {}", v.action, v.render()));
        }
    }
    for policy in &expect.no_violations_from {
        for v in counted().filter(|v| v.policy == *policy) {
            out.push(format!(
                "expected no violations from {policy}, got: {} {}",
                v.action,
                v.render()
            ));
        }
    }
    out
}

fn violation_matches(m: &ViolationMatch, v: &Violation) -> bool {
    m.policy.as_ref().is_none_or(|p| *p == v.policy)
        && m.path.as_ref().is_none_or(|p| *p == v.path)
        && m.action.as_ref().is_none_or(|a| a == v.action.as_str())
        && m.message.as_ref().is_none_or(|r| regex_matches(r, &v.msg))
}

fn object_mismatches(expect: &Expect, d: &Decision) -> Vec<String> {
    let mut out = Vec::new();
    for (pointer, want) in &expect.patched {
        match d.mutated.pointer(pointer) {
            Some(got) if got == want => {}
            Some(got) => out.push(format!("at {pointer}: expected {want}, got {got}")),
            None => out.push(format!(
                "at {pointer}: expected {want}, but the field is absent"
            )),
        }
    }
    for pointer in &expect.absent {
        if let Some(got) = d.mutated.pointer(pointer) {
            out.push(format!("at {pointer}: expected no field, got {got}"));
        }
    }
    let actual_patch = serde_json::to_value(&d.patch).unwrap_or(Value::Null);
    if let Some(want) = &expect.patch {
        if *want != actual_patch {
            out.push(format!(
                "patch differs\n{}",
                diff_lines(&pretty(want), &pretty(&actual_patch))
            ));
        }
    }
    if let Some(unchanged) = expect.unchanged {
        if d.patch.0.is_empty() != unchanged {
            out.push(format!(
                "expected unchanged: {unchanged}, got patch {actual_patch}"
            ));
        }
    }
    out
}

fn listing(found: &[Violation]) -> String {
    if found.is_empty() {
        return "; there were no violations".into();
    }
    let lines: Vec<String> = found
        .iter()
        .map(|v| format!("  {} {}", v.action, v.render()))
        .collect();
    format!("; violations were:\n{}", lines.join("\n"))
}

fn matches_regex(pattern: &str, text: &str, what: &str) -> Vec<String> {
    if regex_matches(pattern, text) {
        Vec::new()
    } else {
        vec![format!(
            "expected {what} matching /{pattern}/, got {text:?}"
        )]
    }
}

/// An invalid regex never matches, and the mismatch message shows the pattern.
fn regex_matches(pattern: &str, text: &str) -> bool {
    Regex::new(pattern).is_ok_and(|r| r.is_match(text))
}

pub(super) fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A minimal line diff: lines only in `want` get `-`, lines only in `got` get `+`.
pub fn diff_lines(want: &str, got: &str) -> String {
    let want: Vec<&str> = want.lines().collect();
    let got: Vec<&str> = got.lines().collect();
    let mut out = vec!["--- expected".to_string(), "+++ actual".to_string()];
    let (mut i, mut j) = (0, 0);
    while i < want.len() || j < got.len() {
        match (want.get(i), got.get(j)) {
            (Some(a), Some(b)) if a == b => {
                out.push(format!("  {a}"));
                i += 1;
                j += 1;
            }
            (Some(a), _) if !got[j..].contains(a) => {
                out.push(format!("- {a}"));
                i += 1;
            }
            (_, Some(b)) => {
                out.push(format!("+ {b}"));
                j += 1;
            }
            (Some(a), None) => {
                out.push(format!("- {a}"));
                i += 1;
            }
            (None, None) => break,
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_marks_changed_lines() {
        let d = diff_lines("a\nb\nc", "a\nx\nc");
        assert!(
            d.contains("- b") && d.contains("+ x") && d.contains("  c"),
            "{d}"
        );
    }

    #[test]
    fn an_invalid_regex_never_matches() {
        assert!(!regex_matches("(", "("));
    }
}
