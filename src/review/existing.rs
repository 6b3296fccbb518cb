//! On UPDATE, judge the change, not the past: a deny violation the stored object already had,
//! on a field the update leaves as it was, is reported as a warning instead of refusing.
//!
//! Entry point: [`excuse_existing`]. Without this, a policy tightened after a job was admitted
//! would refuse every later update of the job: scaling, label edits, and the finalizer
//! removal that lets a deleted job go. Kyverno's `allowExistingViolations` is the model; the
//! per-policy params.yaml key of the same name (default true) turns it off.
//!
//! # Guarantees
//! - Only violations equal in policy, path and message to one of the old object's, whose
//!   field (`spec` for whole-object findings) is equal in the old and the new object, are
//!   excused. A message that changed (it names the new numbers) means the change matters.
//! - The old object is evaluated only when the new one has a deny violation to excuse.

use serde_json::Value;

use super::input::{Input, Operation};
use crate::policy::{Action, EvalError, Excuses, PolicySet, Violation};

/// What an excused violation's message starts with.
pub const EXCUSED: &str =
    "already so before this update, which leaves it as it was, so not refused: ";

/// Downgrades to warnings the deny violations of `object` (the mutated new object) that the
/// stored object already had and the update does not touch.
pub fn excuse_existing(
    set: &PolicySet,
    input: &Input,
    object: &Value,
    violations: &mut [Violation],
    excuses: &Excuses,
) -> Result<(), EvalError> {
    let Some(old) = input.old_object.as_ref() else {
        return Ok(());
    };
    if input.operation != Operation::Update {
        return Ok(());
    }
    let excusable = |v: &Violation| {
        v.effective(Action::Deny)
            && set
                .policy(&v.policy)
                .is_some_and(|p| p.allow_existing_violations)
            && field(old, &v.path) == field(object, &v.path)
    };
    if !violations.iter().any(excusable) {
        return Ok(());
    }
    let before = Input {
        object: old.clone(),
        old_object: None,
        images: input.images.clone(),
        uid: input.uid.clone(),
        operation: input.operation,
        namespace: input.namespace.clone(),
        name: input.name.clone(),
        dry_run: input.dry_run,
        user_info: input.user_info.clone(),
        runtime: input.runtime.clone(),
        caller: input.caller,
    };
    let old_violations = set.violations(&before.build_rego_input(), excuses)?;
    for v in violations.iter_mut() {
        let had = old_violations
            .iter()
            .any(|o| o.policy == v.policy && o.path == v.path && o.msg == v.msg);
        if had && excusable(v) {
            v.action = Action::Warn;
            v.msg = format!("{EXCUSED}{}", v.msg);
        }
    }
    Ok(())
}

/// The value a violation points at; whole-object findings look at `spec`.
fn field<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    if path.is_empty() {
        object.get("spec")
    } else {
        object.pointer(path)
    }
}
