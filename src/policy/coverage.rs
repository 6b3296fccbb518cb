//! Line coverage of policy evaluation, as regorus's interpreter records it: what
//! `gangplank test --coverage` reports.
//!
//! Entry points: [`CoverageSink`], attached to a set with `PolicySet::with_coverage`
//! (every interpreter evaluation of that set then adds the lines it evaluated), and
//! [`rules_of`] (each rule definition of a module with the lines coverage counts in it).
//!
//! Coverage is an interpreter feature: the bytecode VM records nothing, so a set with a sink
//! must be evaluated on the interpreter (`PolicySet::interpreter_only`).
//!
//! # Guarantees
//! - The lines counted in a module are those regorus's own report counts: the lines of the
//!   expressions of rule heads (values, set keys), bodies, `every` domains and comprehension
//!   bodies. [`rules_of`] finds them from the source alone, so a module no evaluation ever
//!   entered still shows every one of its lines as not covered.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use regorus::unstable::{Expr, Literal, Parser, Query, Ref, Rule, RuleHead, Source};
use regorus::Engine;

/// The lines of one file: those coverage counts, and those some evaluation reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileLines {
    pub counted: BTreeSet<u32>,
    pub covered: BTreeSet<u32>,
}

/// Where evaluations with coverage on leave what they reached, per file path. Clones share
/// one store, so a sink can be attached to many sets (parameter variants, cluster views)
/// and read once at the end.
#[derive(Debug, Clone, Default)]
pub struct CoverageSink {
    files: Arc<Mutex<BTreeMap<String, FileLines>>>,
    /// Why a report could not be read (regorus failed to build one), if it ever failed.
    failure: Arc<Mutex<Option<String>>>,
}

impl CoverageSink {
    /// Adds what `engine` (evaluated with coverage enabled) reached.
    pub fn record(&self, engine: &Engine) {
        match engine.get_coverage_report() {
            Ok(report) => {
                let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
                for file in report.files {
                    let lines = files.entry(file.path).or_default();
                    lines.counted.extend(file.covered.iter().copied());
                    lines.counted.extend(file.not_covered.iter().copied());
                    lines.covered.extend(file.covered);
                }
            }
            Err(e) => {
                let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
                failure.get_or_insert_with(|| e.to_string());
            }
        }
    }

    /// What every evaluation so far reached, by file path as the engine knows it.
    pub fn files(&self) -> BTreeMap<String, FileLines> {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Why some evaluation's coverage could not be read, if that happened.
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One rule definition (one head and its bodies; an incremental rule such as `violation`
/// has one per definition) and the lines coverage counts in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleLines {
    /// As its head writes it: `violation`, `gpus_of`, `meta`.
    pub name: String,
    /// First and last line of the definition.
    pub line: u32,
    pub end_line: u32,
    pub counted: BTreeSet<u32>,
}

/// The rule definitions of a Rego module, in source order, with the lines coverage counts.
pub fn rules_of(path: &str, text: &str) -> Result<Vec<RuleLines>, String> {
    let fail = |e: anyhow::Error| format!("{path}: {e}");
    let source = Source::from_contents(path.to_string(), text.to_string()).map_err(fail)?;
    let mut parser = Parser::new(&source).map_err(fail)?;
    parser.enable_rego_v1().map_err(fail)?;
    let module = parser.parse().map_err(fail)?;
    let line_of = |offset: u32| {
        let end = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(text.len());
        let newlines = text.as_bytes().iter().take(end).filter(|b| **b == b'\n');
        u32::try_from(newlines.count())
            .unwrap_or(u32::MAX)
            .saturating_add(1)
    };
    let mut rules = Vec::new();
    for rule in &module.policy {
        let mut counted = BTreeSet::new();
        let name = match rule.as_ref() {
            Rule::Spec { head, bodies, .. } => {
                let refr = match head {
                    RuleHead::Compr { refr, assign, .. } | RuleHead::Func { refr, assign, .. } => {
                        if let Some(a) = assign {
                            expr_lines(&a.value, &mut counted);
                        }
                        refr
                    }
                    RuleHead::Set { refr, key, .. } => {
                        if let Some(k) = key {
                            expr_lines(k, &mut counted);
                        }
                        refr
                    }
                };
                for body in bodies {
                    query_lines(&body.query, &mut counted);
                }
                refr.span().text().to_string()
            }
            Rule::Default { refr, value, .. } => {
                expr_lines(value, &mut counted);
                refr.span().text().to_string()
            }
        };
        let span = rule.span();
        rules.push(RuleLines {
            name,
            line: span.line,
            end_line: line_of(span.end).max(span.line),
            counted,
        });
    }
    Ok(rules)
}

/// The lines regorus counts in a query: as its `gather_coverage_in_query` walks it.
fn query_lines(query: &Ref<Query>, lines: &mut BTreeSet<u32>) {
    for stmt in &query.stmts {
        match &stmt.literal {
            Literal::SomeVars { .. } => (),
            Literal::SomeIn {
                value, collection, ..
            } => {
                expr_lines(value, lines);
                expr_lines(collection, lines);
            }
            Literal::Expr { expr, .. } | Literal::NotExpr { expr, .. } => expr_lines(expr, lines),
            Literal::Every { domain, query, .. } => {
                expr_lines(domain, lines);
                query_lines(query, lines);
            }
        }
    }
}

/// The lines regorus counts in an expression (its `gather_coverage_in_expr`): every
/// sub-expression's line, except that a comprehension counts only its body.
fn expr_lines(expr: &Ref<Expr>, lines: &mut BTreeSet<u32>) {
    let children: Vec<&Ref<Expr>> = match expr.as_ref() {
        Expr::ArrayCompr { query, .. }
        | Expr::SetCompr { query, .. }
        | Expr::ObjectCompr { query, .. } => {
            query_lines(query, lines);
            return;
        }
        Expr::String { .. }
        | Expr::RawString { .. }
        | Expr::Number { .. }
        | Expr::Bool { .. }
        | Expr::Null { .. }
        | Expr::Var { .. } => Vec::new(),
        Expr::Array { items, .. } | Expr::Set { items, .. } => items.iter().collect(),
        Expr::Object { fields, .. } => fields.iter().flat_map(|(_, k, v)| [k, v]).collect(),
        Expr::Call { params, .. } => params.iter().collect(),
        Expr::UnaryExpr { expr, .. } => vec![expr],
        Expr::RefDot { refr, .. } => vec![refr],
        Expr::RefBrack { refr, index, .. } => vec![refr, index],
        Expr::BinExpr { lhs, rhs, .. }
        | Expr::BoolExpr { lhs, rhs, .. }
        | Expr::ArithExpr { lhs, rhs, .. }
        | Expr::AssignExpr { lhs, rhs, .. } => vec![lhs, rhs],
        Expr::Membership {
            key,
            value,
            collection,
            ..
        } => key.iter().chain([value, collection]).collect(),
    };
    lines.insert(expr.span().line);
    for child in children {
        expr_lines(child, lines);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = r#"package t

default allow := false

allow if {
	input.x > 1
	input.y == [v | some v in input.z; v > 2]
}

names contains n if {
	some n in input.names
	every c in input.checks {
		c != n
	}
}

f(x) := "big" if {
	x > 10
} else := "small"
"#;

    #[test]
    fn rules_of_counts_the_lines_regorus_counts() -> anyhow::Result<()> {
        let mut engine = Engine::new();
        engine.add_policy("t.rego".into(), MODULE.into())?;
        engine.set_enable_coverage(true);
        engine.set_input(regorus::Value::from_json_str(r#"{"x": 0}"#)?);
        engine.eval_rule("data.t.allow".into())?;
        let sink = CoverageSink::default();
        sink.record(&engine);
        let files = sink.files();
        let theirs = files.get("t.rego").map(|f| f.counted.clone());
        let rules = rules_of("t.rego", MODULE).map_err(anyhow::Error::msg)?;
        let mine: BTreeSet<u32> = rules.iter().flat_map(|r| r.counted.clone()).collect();
        assert_eq!(Some(mine), theirs);
        let heads: Vec<(&str, u32, u32)> = rules
            .iter()
            .map(|r| (r.name.as_str(), r.line, r.end_line))
            .collect();
        assert_eq!(
            heads,
            [
                ("allow", 3, 3),
                ("allow", 5, 8),
                ("names", 10, 15),
                ("f", 17, 19)
            ]
        );
        Ok(())
    }
}
