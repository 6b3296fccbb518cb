//! The RFC 6902 patch from the submitted object to the mutated one, and the same patch
//! applied to the object's Rego value.
//!
//! Entry points: [`diff`] (what `json_patch::diff` returns, operation for operation, without
//! walking the subtrees the mutation left alone: a platform job is ~11 KB and a mutation
//! touches a few fields) and [`patch_rego`] (validation sees the mutated object; patching the
//! Rego value the mutation already built costs a few µs where converting the whole object
//! again costs tens).

use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};
use jsonptr::PointerBuf;
use regorus::Value as RegoValue;
use serde_json::{Map, Value};

use crate::policy::set::to_rego;

/// `json_patch::diff(left, right)`: the same operations in the same order.
pub fn diff(left: &Value, right: &Value) -> Patch {
    let mut patch = Patch(Vec::new());
    diff_at(left, right, &mut PointerBuf::new(), &mut patch);
    patch
}

fn diff_at(left: &Value, right: &Value, at: &mut PointerBuf, patch: &mut Patch) {
    if same(left, right) {
        return;
    }
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => diff_objects(l, r, at, patch),
        (Value::Array(l), Value::Array(r)) => diff_arrays(l, r, at, patch),
        _ => patch.0.push(PatchOperation::Replace(ReplaceOperation {
            path: at.clone(),
            value: right.clone(),
        })),
    }
}

fn diff_objects(
    l: &Map<String, Value>,
    r: &Map<String, Value>,
    at: &mut PointerBuf,
    patch: &mut Patch,
) {
    for (key, value) in r {
        at.push_back(key);
        match l.get(key) {
            Some(old) => diff_at(old, value, at, patch),
            None => patch.0.push(PatchOperation::Add(AddOperation {
                path: at.clone(),
                value: value.clone(),
            })),
        }
        at.pop_back();
    }
    for key in l.keys().filter(|k| !r.contains_key(*k)) {
        at.push_back(key);
        patch
            .0
            .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
        at.pop_back();
    }
}

/// Whether two values are equal with their keys in the same order: what a mutated object
/// and the one it was cloned from are wherever the mutation left them alone. Cheaper than
/// `==`, which looks every key up by hash; a `false` for maps equal in another order only
/// makes the diff descend and find nothing.
fn same(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            l.len() == r.len()
                && l.iter()
                    .zip(r)
                    .all(|((lk, lv), (rk, rv))| lk == rk && same(lv, rv))
        }
        (Value::Array(l), Value::Array(r)) => {
            l.len() == r.len() && l.iter().zip(r).all(|(a, b)| same(a, b))
        }
        _ => left == right,
    }
}

/// Index by index; surplus elements on the left are removed at the index where the first
/// of them was (each removal shifts the rest down), surplus on the right appended.
fn diff_arrays(l: &[Value], r: &[Value], at: &mut PointerBuf, patch: &mut Patch) {
    for (i, (old, new)) in l.iter().zip(r).enumerate() {
        at.push_back(i);
        diff_at(old, new, at, patch);
        at.pop_back();
    }
    for _ in r.len()..l.len() {
        at.push_back(r.len());
        patch
            .0
            .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
        at.pop_back();
    }
    for (i, new) in r.iter().enumerate().skip(l.len()) {
        at.push_back(i);
        patch.0.push(PatchOperation::Add(AddOperation {
            path: at.clone(),
            value: new.clone(),
        }));
        at.pop_back();
    }
}

/// Applies `patch` (add, remove and replace operations, as [`diff`] makes them) to `value`,
/// the Rego value of the patch's left side. `None` when an operation does not fit the value
/// (the caller then converts the right side whole).
pub fn patch_rego(mut value: RegoValue, patch: &Patch) -> Option<RegoValue> {
    for op in &patch.0 {
        match op {
            PatchOperation::Add(AddOperation { path, value: v }) => {
                put(&mut value, path, to_rego(v), true)?
            }
            PatchOperation::Replace(ReplaceOperation { path, value: v }) => {
                put(&mut value, path, to_rego(v), false)?
            }
            PatchOperation::Remove(RemoveOperation { path }) => remove(&mut value, path)?,
            _ => return None,
        }
    }
    Some(value)
}

/// The parent of the pointer's last token, and that token.
fn parent<'a>(root: &'a mut RegoValue, path: &PointerBuf) -> Option<(&'a mut RegoValue, String)> {
    let mut tokens: Vec<String> = path.tokens().map(|t| t.decoded().into_owned()).collect();
    let last = tokens.pop()?;
    let mut at = root;
    for token in tokens {
        at = child(at, &token)?;
    }
    Some((at, last))
}

fn child<'a>(value: &'a mut RegoValue, token: &str) -> Option<&'a mut RegoValue> {
    match value {
        RegoValue::Object(_) => value
            .as_object_mut()
            .ok()?
            .get_mut(&RegoValue::String(token.into())),
        RegoValue::Array(_) => {
            let i: usize = token.parse().ok()?;
            value.as_array_mut().ok()?.get_mut(i)
        }
        _ => None,
    }
}

fn put(root: &mut RegoValue, path: &PointerBuf, new: RegoValue, insert: bool) -> Option<()> {
    if path.is_root() {
        *root = new;
        return Some(());
    }
    let (at, last) = parent(root, path)?;
    match at {
        RegoValue::Object(_) => {
            at.as_object_mut()
                .ok()?
                .insert(RegoValue::String(last.as_str().into()), new);
        }
        RegoValue::Array(_) => {
            let items = at.as_array_mut().ok()?;
            let i: usize = last.parse().ok()?;
            let len = items.len();
            match (insert, items.get_mut(i)) {
                (false, Some(slot)) => *slot = new,
                (true, _) if i == len => items.push(new),
                (true, Some(_)) => {
                    // regorus arrays cannot insert in place; diff only appends.
                    let mut v = items.to_vec();
                    v.insert(i, new);
                    *at = RegoValue::from(v);
                }
                _ => return None,
            }
        }
        _ => return None,
    }
    Some(())
}

fn remove(root: &mut RegoValue, path: &PointerBuf) -> Option<()> {
    let (at, last) = parent(root, path)?;
    match at {
        RegoValue::Object(_) => {
            at.as_object_mut()
                .ok()?
                .remove(&RegoValue::String(last.as_str().into()))?;
        }
        RegoValue::Array(_) => {
            let i: usize = last.parse().ok()?;
            let mut v = at.as_array_mut().ok()?.to_vec();
            (i < v.len()).then(|| v.remove(i))?;
            *at = RegoValue::from(v);
        }
        _ => return None,
    }
    Some(())
}
