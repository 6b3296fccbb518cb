//! Kubernetes label selectors (`matchLabels`, `matchExpressions`), as
//! `metav1.LabelSelectorAsSelector` reads them: every term must hold, and an empty selector
//! selects everything.
//!
//! Used to tell which replica types' pods a NetworkPolicy's `podSelector` selects (see
//! [`objects`]): policies that select none of the job's pods are left out of its request,
//! and the others carry the keys of the types they select. The selectors of a rule's peers
//! are matched in Rego, where the decision is made.
//!
//! [`objects`]: super::objects

use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector(Vec<Term>);

impl Selector {
    /// Parses a `LabelSelector` object; the error says what is wrong with it.
    pub fn parse(v: &Value) -> Result<Selector, String> {
        let Value::Object(map) = v else {
            return Err("is not an object".into());
        };
        let mut terms = Vec::new();
        match map.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, v) in labels {
                    let v = v
                        .as_str()
                        .ok_or(format!("matchLabels.{k} is not a string"))?;
                    terms.push(Term::Equals(k.clone(), v.to_string()));
                }
            }
            Some(_) => return Err("matchLabels is not an object".into()),
        }
        match map.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for e in exprs {
                    terms.push(expression(e)?);
                }
            }
            Some(_) => return Err("matchExpressions is not a list".into()),
        }
        Ok(Selector(terms))
    }

    /// The first `matchLabels` pair: a pod the selector selects carries it (an index key).
    pub fn first_equals(&self) -> Option<(&str, &str)> {
        self.0.iter().find_map(|term| match term {
            Term::Equals(k, v) => Some((k.as_str(), v.as_str())),
            _ => None,
        })
    }

    /// Whether a pod with `labels` is selected.
    pub fn matches(&self, labels: &BTreeMap<&str, &str>) -> bool {
        self.0.iter().all(|term| match term {
            Term::Equals(k, v) => labels.get(k.as_str()) == Some(&v.as_str()),
            Term::In(k, vs) => labels
                .get(k.as_str())
                .is_some_and(|l| vs.iter().any(|v| v == l)),
            Term::NotIn(k, vs) => !labels
                .get(k.as_str())
                .is_some_and(|l| vs.iter().any(|v| v == l)),
            Term::Exists(k) => labels.contains_key(k.as_str()),
            Term::DoesNotExist(k) => !labels.contains_key(k.as_str()),
        })
    }
}

fn expression(e: &Value) -> Result<Term, String> {
    let key = e
        .get("key")
        .and_then(Value::as_str)
        .ok_or("a matchExpressions entry has no key")?
        .to_string();
    let values: Vec<String> = match e.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(vs)) => vs
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or(format!("matchExpressions {key}: values are not strings"))?,
        Some(_) => return Err(format!("matchExpressions {key}: values is not a list")),
    };
    let operator = e.get("operator").and_then(Value::as_str).unwrap_or("");
    Ok(match operator {
        "In" => Term::In(key, values),
        "NotIn" => Term::NotIn(key, values),
        "Exists" => Term::Exists(key),
        "DoesNotExist" => Term::DoesNotExist(key),
        other => {
            return Err(format!(
            "matchExpressions {key}: operator {other:?} is not In, NotIn, Exists or DoesNotExist"
        ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selects(selector: Value, labels: &[(&str, &str)]) -> bool {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        Selector::parse(&selector)
            .map(|s| s.matches(&labels))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_empty_selector_selects_every_pod() {
        assert!(selects(json!({}), &[]));
        assert!(selects(json!({}), &[("app", "x")]));
    }

    #[test]
    fn every_term_must_hold() {
        let s = json!({"matchLabels": {"app": "train"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gpu", "cpu"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ]});
        assert!(selects(s.clone(), &[("app", "train"), ("tier", "gpu")]));
        assert!(!selects(s.clone(), &[("app", "train"), ("tier", "tpu")]));
        assert!(!selects(
            s.clone(),
            &[("app", "train"), ("tier", "gpu"), ("canary", "1")]
        ));
        assert!(!selects(s, &[("tier", "gpu")]));
    }

    #[test]
    fn not_in_selects_pods_without_the_label() {
        let s =
            json!({"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["ps"]}]});
        assert!(selects(s.clone(), &[]));
        assert!(selects(s.clone(), &[("role", "worker")]));
        assert!(!selects(s, &[("role", "ps")]));
    }

    #[test]
    fn a_malformed_selector_says_what_is_wrong() {
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Near"}]});
        let err = Selector::parse(&bad).unwrap_err();
        assert!(err.contains("\"Near\""), "{err}");
        assert!(Selector::parse(&json!({"matchLabels": {"a": 1}})).is_err());
        assert!(Selector::parse(&json!("x")).is_err());
    }
}
