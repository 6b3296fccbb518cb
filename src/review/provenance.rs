//! What gangplank defaulted from the job's shape, recorded in the job itself, so that derived
//! defaults follow the job on later updates.
//!
//! Entry point: [`Provenance::read`], then [`Provenance::release`] before mutation,
//! [`Provenance::record`] per applied derived intent and [`Provenance::write`] after.
//!
//! The record is the annotation [`ANNOTATION`] on the job: a JSON object from JSON pointer to
//! the value gangplank wrote there, e.g.
//! `{"/spec/runPolicy/schedulingPolicy/minAvailable": 9}`. It lives in the stored object, so
//! it survives `kubectl apply` (client- and server-side), `replace`, `edit` and merge patches.
//!
//! # Guarantees
//! - A field that still holds the recorded value is gangplank's: it is taken out before the
//!   mutation policies run, so a derived default computes it again from the job as it is now
//!   (Worker 8 → 4: minAvailable 9 → 5), and is dropped if no policy derives it any more.
//! - A field whose value differs from the record is the user's: the entry is dropped and the
//!   value is validated like any other.
//! - A garbled record (not JSON, not an object, bad pointers, fields that no longer exist,
//!   values of another type) is ignored entry by entry with a warning, never an error.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::pointer;
use crate::policy::{Action, Intent, Op, Violation};

/// The annotation holding the record.
pub const ANNOTATION: &str = "gangplank.dev/defaulted";
/// The name warnings about the record are reported under.
pub const POLICY: &str = "provenance";

/// `/metadata/annotations/gangplank.dev~1defaulted`.
pub fn annotation_path() -> String {
    pointer::join("/metadata/annotations", [ANNOTATION])
}

/// The record of one object, and what was wrong with it.
#[derive(Debug, Default)]
pub struct Provenance {
    /// Whether the object carried the annotation (so an empty record removes it).
    present: bool,
    entries: BTreeMap<String, Value>,
    /// Warnings about parts of the record that were ignored.
    pub notes: Vec<Violation>,
}

impl Provenance {
    /// Reads the record of `object`; what cannot be used becomes a note.
    pub fn read(object: &Value) -> Provenance {
        let mut p = Provenance::default();
        let Some(raw) = object.pointer(&annotation_path()) else {
            return p;
        };
        p.present = true;
        let parsed = match raw {
            Value::String(text) => serde_json::from_str::<Value>(text).map_err(|e| e.to_string()),
            other => Err(format!(
                "is a {}, not a string",
                crate::job::problem::type_name(other)
            )),
        };
        match parsed {
            Ok(Value::Object(map)) => {
                for (ptr, value) in map {
                    match pointer::split(&ptr) {
                        Ok(tokens) if !tokens.is_empty() => {
                            p.entries.insert(ptr, value);
                        }
                        _ => p.note(format!(
                            "has {ptr:?}, which is not a JSON pointer to a field"
                        )),
                    }
                }
            }
            Ok(other) => p.note(format!(
                "must be a JSON object of pointer to value, not a {}",
                crate::job::problem::type_name(&other)
            )),
            Err(_) => p.note("is not valid JSON".into()),
        }
        p
    }

    fn note(&mut self, msg: String) {
        self.notes.push(Violation::new(
            POLICY,
            Action::Warn,
            String::new(),
            format!("annotation {ANNOTATION} {msg}; ignored (remove it to clear this)"),
        ));
    }

    /// Takes out of `object` every recorded field that still holds the value gangplank
    /// wrote, so that the mutation policies derive it again; forgets the other entries.
    ///
    /// A record with any entry that cannot be right (a field the job no longer has, a value
    /// of another type) is ignored as a whole and left as it is: the same warning then comes
    /// from `/validate`, which sees the object after `/mutate`.
    pub fn release(&mut self, object: &mut Value) {
        let stale: Vec<&str> = self
            .entries
            .keys()
            .filter(|p| object.pointer(p).is_none())
            .map(String::as_str)
            .collect();
        let retyped: Vec<&str> = self
            .entries
            .iter()
            .filter(|(p, w)| object.pointer(p).is_some_and(|c| !same_type(c, w)))
            .map(|(p, _)| p.as_str())
            .collect();
        let (stale, retyped) = (stale.join(", "), retyped.join(", "));
        if !stale.is_empty() {
            self.note(format!("names fields the job does not have ({stale})"));
        }
        if !retyped.is_empty() {
            self.note(format!(
                "holds values of another type than the job's ({retyped})"
            ));
        }
        if self.garbled() {
            self.entries.clear();
            return;
        }
        for (ptr, written) in std::mem::take(&mut self.entries) {
            // A value that differs was changed by the user since: theirs now, and forgotten.
            if object.pointer(&ptr) == Some(&written) {
                // The pointer resolved just above, so removing it cannot fail.
                let _ = own(Op::Remove, ptr, Value::Null).apply(object);
            }
        }
    }

    /// The fields the record names: [`Provenance::release`] may remove them.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Whether the object carried no record (then [`Self::release`] leaves it as it is).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the record is ignored: then it is neither released nor rewritten.
    fn garbled(&self) -> bool {
        !self.notes.is_empty()
    }

    /// Records that an applied derived intent wrote `value` at `path`.
    pub fn record(&mut self, intent: &Intent) {
        if intent.derived {
            self.entries
                .insert(intent.path.clone(), intent.value.clone());
        }
    }

    /// Writes the record into `object`'s annotations, or removes the annotation when nothing
    /// is recorded. A job whose annotations cannot hold it (`annotations: "oops"`) gets a note.
    pub fn write(&mut self, object: &mut Value) {
        if self.garbled() {
            return;
        }
        let intent = if self.entries.is_empty() {
            if !self.present {
                return;
            }
            own(Op::Remove, annotation_path(), Value::Null)
        } else {
            // A map of strings to JSON values always serializes.
            let text = serde_json::to_string(&self.entries).unwrap_or_default();
            own(Op::Set, annotation_path(), Value::String(text))
        };
        if let Err(e) = intent.apply(object) {
            self.note(format!("cannot be written: {e}"));
        }
    }
}

/// An edit of gangplank's own, applied with the intent machinery (parents created, broken
/// structure reported rather than panicking).
fn own(op: Op, path: String, value: Value) -> Intent {
    Intent {
        policy: POLICY.to_string(),
        op,
        path,
        value,
        derived: false,
        msg: None,
    }
}

fn same_type(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MIN: &str = "/spec/runPolicy/schedulingPolicy/minAvailable";

    fn job(annotation: Option<&str>, min: Value) -> Value {
        let annotations = match annotation {
            Some(a) => json!({ ANNOTATION: a }),
            None => json!({}),
        };
        json!({"metadata": {"name": "j", "annotations": annotations},
            "spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": min}}}})
    }

    #[test]
    fn a_field_still_holding_the_recorded_value_is_released() {
        let mut obj = job(
            Some(r#"{"/spec/runPolicy/schedulingPolicy/minAvailable": 9}"#),
            json!(9),
        );
        let mut p = Provenance::read(&obj);
        p.release(&mut obj);
        assert_eq!(obj.pointer(MIN), None);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    #[test]
    fn a_field_the_user_changed_is_kept_and_forgotten() {
        let mut obj = job(
            Some(r#"{"/spec/runPolicy/schedulingPolicy/minAvailable": 9}"#),
            json!(7),
        );
        let mut p = Provenance::read(&obj);
        p.release(&mut obj);
        p.write(&mut obj);
        assert_eq!(obj.pointer(MIN), Some(&json!(7)));
        assert_eq!(
            obj.pointer(&annotation_path()),
            None,
            "empty record removed"
        );
        assert!(p.notes.is_empty());
    }

    #[test]
    fn garbled_records_are_ignored_with_a_warning() {
        for garbled in [
            "{not json",
            "[1,2]",
            r#"{"no-slash": 1}"#,
            r#"{"/spec/gone": 1}"#,
            r#"{"/spec/runPolicy/schedulingPolicy/minAvailable": "9"}"#,
        ] {
            let mut obj = job(Some(garbled), json!(9));
            let mut p = Provenance::read(&obj);
            p.release(&mut obj);
            assert_eq!(obj.pointer(MIN), Some(&json!(9)), "{garbled}: value kept");
            assert_eq!(p.notes.len(), 1, "{garbled}: {:?}", p.notes);
            assert!(p.notes.iter().all(|n| n.action == Action::Warn));
        }
    }

    #[test]
    fn derived_intents_are_recorded_as_sorted_json() {
        let mut obj = job(None, json!(5));
        let mut p = Provenance::read(&obj);
        p.record(&Intent {
            policy: "g".into(),
            op: Op::Default,
            path: MIN.into(),
            value: json!(5),
            derived: true,
            msg: None,
        });
        p.write(&mut obj);
        assert_eq!(
            obj.pointer(&annotation_path()),
            Some(&json!(
                r#"{"/spec/runPolicy/schedulingPolicy/minAvailable":5}"#
            ))
        );
    }
}
