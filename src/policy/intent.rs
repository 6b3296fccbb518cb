//! Mutation intents: what a policy asks to change, and how Rust applies it.
//!
//! A policy's `mutation` rule yields `{"op": ..., "path": <JSON pointer>, "value": ...}`:
//!
//! | op        | effect                                                                   |
//! |-----------|--------------------------------------------------------------------------|
//! | `default` | sets the value only where the field is absent or null                    |
//! | `set`     | sets the value, replacing what the user wrote                            |
//! | `merge`   | objects: adds missing keys (deeply); lists: appends items whose `name`    |
//! |           | (or, for unnamed items, whole value) is not there yet. User values win.   |
//! | `remove`  | removes the field if present                                             |
//!
//! Missing parent objects are created. Only `set` and `remove` ever change a value the user
//! wrote, so a policy cannot overwrite user input by accident. An intent may carry a `msg`:
//! when it changes the object, the user is told, as a warning (`remove` of something the
//! user must not write, e.g. the controller's own `gangplank.dev/released-at`).

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::EvalError;
use crate::job::problem::type_name;
use crate::pointer;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Default,
    Set,
    Merge,
    Remove,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        match s {
            "default" => Some(Op::Default),
            "set" => Some(Op::Set),
            "merge" => Some(Op::Merge),
            "remove" => Some(Op::Remove),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Default => "default",
            Op::Set => "set",
            Op::Merge => "merge",
            Op::Remove => "remove",
        }
    }
}

/// One intent, tagged with the policy that produced it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Intent {
    pub policy: String,
    pub op: Op,
    pub path: String,
    pub value: Value,
    /// `"derived": true`: the value is computed from the job's shape (minAvailable from the
    /// replica counts), so while the field still holds what gangplank wrote it is recomputed
    /// on every update ([`crate::review::provenance`]). Only `default` and `set` record it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub derived: bool,
    /// What to tell the user when the intent changes the object (a warning, whatever the
    /// policy's action: the change is made, nothing is refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
}

impl Intent {
    /// Parses one element of a policy's `mutation` set.
    pub fn parse(policy: &str, v: &Value) -> Result<Intent, EvalError> {
        let bad = |detail: &str| EvalError::BadOutput {
            policy: policy.to_string(),
            what: "mutation",
            detail: format!("{detail}: {v}"),
        };
        let op = v
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("missing \"op\""))?;
        let op =
            Op::parse(op).ok_or_else(|| bad("\"op\" must be default, set, merge or remove"))?;
        let path = v
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("missing \"path\""))?;
        let value = v.get("value").cloned();
        if op != Op::Remove && value.is_none() {
            return Err(bad("missing \"value\""));
        }
        Ok(Intent {
            policy: policy.to_string(),
            op,
            path: path.to_string(),
            value: value.unwrap_or(Value::Null),
            derived: v.get("derived") == Some(&Value::Bool(true))
                && matches!(op, Op::Default | Op::Set),
            msg: match v.get("msg") {
                None | Some(Value::Null) => None,
                Some(Value::String(msg)) => Some(msg.clone()),
                Some(_) => return Err(bad("\"msg\" must be a string")),
            },
        })
    }

    /// Applies the intent to `doc`. Returns whether anything changed.
    pub fn apply(&self, doc: &mut Value) -> Result<bool, EvalError> {
        let err = |detail: String| EvalError::Intent {
            policy: self.policy.clone(),
            op: self.op.as_str().to_string(),
            path: self.path.clone(),
            detail,
        };
        let mut tokens = pointer::split(&self.path).map_err(&err)?;
        let last = tokens
            .pop()
            .ok_or_else(|| err("cannot replace the whole object".into()))?;
        let create = self.op != Op::Remove;
        let Some(parent) = descend(doc, &tokens, create).map_err(&err)? else {
            return Ok(false); // removing below a missing parent: nothing to do
        };
        match parent {
            Value::Object(map) => Ok(self.apply_to_key(map, last).map_err(&err)?),
            Value::Array(items) => self.apply_to_index(items, &last).map_err(&err),
            other => Err(err(format!(
                "{} is a {}, not an object or list",
                pointer::join("", tokens.iter().map(String::as_str)),
                type_name(other)
            ))),
        }
    }

    fn apply_to_key(&self, map: &mut Map<String, Value>, key: String) -> Result<bool, String> {
        let current = map.get_mut(&key).filter(|v| !v.is_null());
        match (self.op, current) {
            (Op::Remove, None) | (Op::Default, Some(_)) => Ok(false),
            (Op::Remove, Some(_)) => Ok(map.remove(&key).is_some()),
            (Op::Merge, Some(existing)) => merge(existing, &self.value),
            (Op::Set, Some(existing)) if *existing == self.value => Ok(false),
            (Op::Set | Op::Default | Op::Merge, _) => {
                map.insert(key, self.value.clone());
                Ok(true)
            }
        }
    }

    fn apply_to_index(&self, items: &mut Vec<Value>, token: &str) -> Result<bool, String> {
        if token == "-" && self.op != Op::Remove {
            items.push(self.value.clone());
            return Ok(true);
        }
        let i = index(token, items.len())?;
        let Some(slot) = items.get_mut(i) else {
            return Err(format!(
                "index {i} is past the end of a list of {}",
                items.len()
            ));
        };
        match self.op {
            Op::Default if !slot.is_null() => Ok(false),
            Op::Merge if !slot.is_null() => merge(slot, &self.value),
            Op::Remove => {
                items.remove(i);
                Ok(true)
            }
            _ if *slot == self.value => Ok(false),
            _ => {
                *slot = self.value.clone();
                Ok(true)
            }
        }
    }
}

/// Walks to the parent of the target, creating missing objects when `create` is set.
fn descend<'a>(
    doc: &'a mut Value,
    tokens: &[String],
    create: bool,
) -> Result<Option<&'a mut Value>, String> {
    let mut cur = doc;
    for (depth, t) in tokens.iter().enumerate() {
        let upto = |n: usize| pointer::join("", tokens.iter().take(n).map(String::as_str));
        let here = || upto(depth + 1);
        cur = match cur {
            Value::Object(map) => {
                let missing = map.get(t).is_none_or(Value::is_null);
                if missing && !create {
                    return Ok(None);
                }
                if missing {
                    map.insert(t.clone(), Value::Object(Map::new()));
                }
                match map.get_mut(t) {
                    Some(v) => v,
                    None => return Ok(None),
                }
            }
            Value::Array(items) => {
                let len = items.len();
                match items.get_mut(index(t, len)?) {
                    Some(v) => v,
                    None => return Err(format!("{} is past the end of a list of {len}", here())),
                }
            }
            other => {
                return Err(format!(
                    "{} is a {}, not an object or list",
                    upto(depth),
                    type_name(other)
                ))
            }
        };
    }
    Ok(Some(cur))
}

fn index(token: &str, len: usize) -> Result<usize, String> {
    token
        .parse::<usize>()
        .map_err(|_| format!("{token:?} is not a list index (list of {len})"))
}

/// Merges `src` into `dst` without replacing anything `dst` already has.
fn merge(dst: &mut Value, src: &Value) -> Result<bool, String> {
    match (dst, src) {
        (Value::Object(d), Value::Object(s)) => Ok(merge_objects(d, s)),
        (Value::Array(d), Value::Array(s)) => Ok(merge_lists(d, s)),
        (d, s) => Err(format!(
            "merge needs two objects or two lists, found {} and {}",
            type_name(d),
            type_name(s)
        )),
    }
}

fn merge_objects(dst: &mut Map<String, Value>, src: &Map<String, Value>) -> bool {
    let mut changed = false;
    for (k, v) in src {
        match dst.get_mut(k) {
            None | Some(Value::Null) => {
                dst.insert(k.clone(), v.clone());
                changed = true;
            }
            Some(existing) => changed |= merge(existing, v).unwrap_or(false),
        }
    }
    changed
}

/// Appends items that are not there yet. Items with a `name` (env vars, ports, volumes)
/// are matched by name, so a user's `NCCL_DEBUG=INFO` is kept over a policy's `WARN`.
fn merge_lists(dst: &mut Vec<Value>, src: &[Value]) -> bool {
    let mut changed = false;
    for item in src {
        let present = match item.get("name").and_then(Value::as_str) {
            Some(name) => dst
                .iter()
                .any(|d| d.get("name").and_then(Value::as_str) == Some(name)),
            None => dst.contains(item),
        };
        if !present {
            dst.push(item.clone());
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn intent(op: Op, path: &str, value: Value) -> Intent {
        Intent {
            policy: "t".into(),
            op,
            path: path.into(),
            value,
            derived: false,
            msg: None,
        }
    }

    fn applied(mut doc: Value, i: Intent) -> Value {
        let r = i.apply(&mut doc);
        assert!(r.is_ok(), "{r:?}");
        doc
    }

    #[test]
    fn default_creates_parents_and_keeps_user_values() {
        let doc = applied(
            json!({"spec": {}}),
            intent(Op::Default, "/spec/runPolicy/backoffLimit", json!(3)),
        );
        assert_eq!(doc, json!({"spec": {"runPolicy": {"backoffLimit": 3}}}));
        let doc = applied(
            doc,
            intent(Op::Default, "/spec/runPolicy/backoffLimit", json!(5)),
        );
        assert_eq!(doc.pointer("/spec/runPolicy/backoffLimit"), Some(&json!(3)));
    }

    #[test]
    fn default_fills_explicit_nulls() {
        let doc = applied(json!({"a": null}), intent(Op::Default, "/a", json!(1)));
        assert_eq!(doc, json!({"a": 1}));
    }

    #[test]
    fn set_overwrites_and_remove_deletes_escaped_keys() {
        let doc = json!({"limits": {"nvidia.com/gpu": 1}});
        let doc = applied(
            doc,
            intent(Op::Remove, "/limits/nvidia.com~1gpu", Value::Null),
        );
        let doc = applied(
            doc,
            intent(Op::Set, "/limits/nvidia.com~1mig-1g.10gb", json!(1)),
        );
        assert_eq!(doc, json!({"limits": {"nvidia.com/mig-1g.10gb": 1}}));
    }

    #[test]
    fn merge_appends_missing_env_by_name() {
        let doc = json!({"env": [{"name": "NCCL_DEBUG", "value": "INFO"}]});
        let doc = applied(
            doc,
            intent(
                Op::Merge,
                "/env",
                json!([{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "X", "value": "1"}]),
            ),
        );
        assert_eq!(
            doc,
            json!({"env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "X", "value": "1"}]})
        );
    }

    #[test]
    fn merge_into_absent_field_sets_it() {
        let doc = applied(
            json!({}),
            intent(Op::Merge, "/nodeSelector", json!({"a": "b"})),
        );
        assert_eq!(doc, json!({"nodeSelector": {"a": "b"}}));
    }

    #[test]
    fn walks_into_lists_by_index() {
        let doc = json!({"containers": [{"name": "a"}, {"name": "b"}]});
        let doc = applied(doc, intent(Op::Default, "/containers/1/image", json!("x")));
        assert_eq!(doc.pointer("/containers/1/image"), Some(&json!("x")));
    }

    #[test]
    fn reports_paths_through_scalars_and_bad_indexes() {
        let mut doc = json!({"spec": "oops", "list": []});
        let e = intent(Op::Set, "/spec/x", json!(1))
            .apply(&mut doc)
            .err()
            .map(|e| e.to_string());
        assert!(e.as_deref().is_some_and(|e| e.contains("string")), "{e:?}");
        let e = intent(Op::Set, "/list/3/x", json!(1))
            .apply(&mut doc)
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("past the end")),
            "{e:?}"
        );
        assert!(intent(Op::Set, "", json!(1)).apply(&mut doc).is_err());
    }

    #[test]
    fn remove_below_missing_parent_is_a_no_op() {
        let mut doc = json!({});
        assert_eq!(
            intent(Op::Remove, "/a/b", Value::Null).apply(&mut doc).ok(),
            Some(false)
        );
        assert_eq!(doc, json!({}));
    }

    #[test]
    fn parse_rejects_unknown_ops_and_missing_values() {
        assert!(Intent::parse("p", &json!({"op": "replace", "path": "/a", "value": 1})).is_err());
        assert!(Intent::parse("p", &json!({"op": "set", "path": "/a"})).is_err());
        assert!(Intent::parse("p", &json!({"op": "remove", "path": "/a"})).is_ok());
        let told = Intent::parse("p", &json!({"op": "remove", "path": "/a", "msg": "gone"}));
        assert_eq!(told.ok().and_then(|i| i.msg), Some("gone".to_string()));
        assert!(Intent::parse("p", &json!({"op": "remove", "path": "/a", "msg": 1})).is_err());
    }
}
