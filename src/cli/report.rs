//! How `gangplank check` shows its results: text for people, JSON for tools, YAML of the
//! mutated objects for `kubectl apply`.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use crate::exit;
use crate::policy::EvalError;
use crate::review::{Decision, Document, DocumentError};

/// The result for one document.
#[derive(Debug, Serialize)]
#[serde(tag = "result", rename_all = "lowercase")]
pub enum Outcome {
    Decided {
        source: String,
        object: String,
        decision: Decision,
        /// Images still without a digest: not looked up (offline), or their lookup failed.
        #[serde(skip_serializing_if = "Unresolved::is_empty")]
        unresolved: Unresolved,
    },
    /// The policies failed on this object (the webhook would refuse it).
    Failed {
        source: String,
        object: String,
        error: String,
    },
    /// The document could not be read.
    Unreadable { source: String, error: String },
}

impl Outcome {
    pub fn decided(
        doc: Document,
        decision: Result<Decision, EvalError>,
        unresolved: Unresolved,
    ) -> Outcome {
        let object = describe(doc.input.subject(), &doc.input.namespace);
        match decision {
            Ok(decision) => Outcome::Decided {
                source: doc.source,
                object,
                decision,
                unresolved,
            },
            Err(e) => Outcome::Failed {
                source: doc.source,
                object,
                error: e.to_string(),
            },
        }
    }

    pub fn unreadable(e: DocumentError) -> Outcome {
        Outcome::Unreadable {
            source: e.source,
            error: e.message,
        }
    }
}

/// Images of a job left without a digest, and whether anyone tried.
#[derive(Debug, Default, Serialize)]
pub struct Unresolved {
    pub images: Vec<String>,
    /// True with `--resolve`: the lookups failed (the findings say why). False: offline,
    /// nothing was looked up.
    pub looked_up: bool,
}

impl Unresolved {
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
    }
}

/// `PyTorchJob team-a/resnet`.
fn describe(obj: &Value, namespace: &str) -> String {
    let field = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    let meta = |k: &str| {
        obj.get("metadata")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let name = Some(meta("name"))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| meta("generateName"));
    let kind = if crate::job::lookup(field("apiVersion"), field("kind")).is_some() {
        field("kind").to_string()
    } else {
        format!("{}/{}", field("apiVersion"), field("kind"))
    };
    format!("{kind} {namespace}/{name}")
}

pub fn write_text(w: &mut impl Write, outcomes: &[Outcome]) -> io::Result<()> {
    for o in outcomes {
        match o {
            Outcome::Decided {
                source,
                object,
                decision,
                unresolved,
            } => write_decision(w, source, object, decision, unresolved)?,
            Outcome::Failed {
                source,
                object,
                error,
            } => writeln!(w, "{source}  {object}  ERROR: {error}")?,
            Outcome::Unreadable { source, error } => writeln!(w, "{source}  UNREADABLE: {error}")?,
        }
    }
    writeln!(w, "\n{}", summary(outcomes))
}

fn write_decision(
    w: &mut impl Write,
    source: &str,
    object: &str,
    d: &Decision,
    unresolved: &Unresolved,
) -> io::Result<()> {
    if let Some(reason) = &d.skipped {
        return writeln!(w, "{source}  {object}  SKIPPED: {reason}");
    }
    let verdict = if d.allowed() { "ALLOWED" } else { "DENIED" };
    let changes = d.patch.0.len();
    let mutated = if changes > 0 {
        format!(" ({changes} patch operations)")
    } else {
        String::new()
    };
    writeln!(w, "{source}  {object}  {verdict}{mutated}")?;
    for v in &d.violations {
        match &v.exempted {
            // Excused, not dropped: the finding, and who excused it until when.
            Some(_) => writeln!(w, "  exempt {}", v.render_exempted())?,
            None => writeln!(w, "  {:<5} {}", v.action.as_str(), v.render())?,
        }
    }
    if !unresolved.is_empty() {
        let why = if unresolved.looked_up {
            "lookup failed, see the images findings"
        } else {
            "offline; --resolve looks tags up as the webhook would"
        };
        writeln!(
            w,
            "  images left unresolved ({why}): {}",
            unresolved.images.join(", ")
        )?;
    }
    if changes > 0 {
        writeln!(w, "  patch:")?;
        for op in &d.patch.0 {
            writeln!(w, "    {}", serde_json::to_string(op).unwrap_or_default())?;
        }
    }
    Ok(())
}

fn summary(outcomes: &[Outcome]) -> String {
    let (mut allowed, mut mutated, mut denied, mut skipped, mut failed, mut unreadable) =
        (0, 0, 0, 0, 0, 0);
    for o in outcomes {
        match o {
            Outcome::Decided { decision, .. } if decision.skipped.is_some() => skipped += 1,
            Outcome::Decided { decision, .. } if decision.allowed() => {
                allowed += 1;
                mutated += usize::from(!decision.patch.0.is_empty());
            }
            Outcome::Decided { .. } => denied += 1,
            Outcome::Failed { .. } => failed += 1,
            Outcome::Unreadable { .. } => unreadable += 1,
        }
    }
    format!(
        "{} objects: {allowed} allowed ({mutated} mutated), {denied} denied, {skipped} skipped, {failed} policy errors, {unreadable} unreadable",
        outcomes.len()
    )
}

pub fn write_json(w: &mut impl Write, outcomes: &[Outcome]) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, outcomes)?;
    writeln!(w)
}

/// The objects as they would be stored, one YAML document each (skipped objects unchanged;
/// denied and unreadable ones left out, since the apiserver would not store them).
pub fn write_mutated_yaml(w: &mut impl Write, outcomes: &[Outcome]) -> io::Result<()> {
    for o in outcomes {
        if let Outcome::Decided { decision, .. } = o {
            if decision.allowed() {
                let text = yaml_serde::to_string(&decision.mutated).map_err(io::Error::other)?;
                write!(w, "---\n{text}")?;
            }
        }
    }
    Ok(())
}

/// 2 when anything could not be read or evaluated, else 1 when anything was denied, else 0.
pub fn exit_code(outcomes: &[Outcome]) -> u8 {
    let broken = outcomes
        .iter()
        .any(|o| !matches!(o, Outcome::Decided { .. }));
    let denied = outcomes
        .iter()
        .any(|o| matches!(o, Outcome::Decided { decision, .. } if !decision.allowed()));
    if broken {
        exit::UNREADABLE
    } else if denied {
        exit::FAILED
    } else {
        exit::OK
    }
}

pub use crate::error_chain;
