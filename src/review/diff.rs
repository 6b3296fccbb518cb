//! The RFC 6902 patch from the submitted object to the mutated one, and the same patch
//! applied to the object's Rego value.
//!
//! Entry points: [`diff`] (what `json_patch::diff` returns, operation for operation, without
//! walking the subtrees the mutation left alone: a platform job is ~11 KB and a mutation
//! touches a few fields), [`diff_touched`] (the same patch, looking only along the paths the
//! mutation wrote) and [`patch_rego`] (validation sees the mutated object; patching the
//! Rego value the mutation already built costs a few µs where converting the whole object
//! again costs tens).

use std::borrow::Cow;

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

/// [`diff`] of `left` and `right` that differ only at or below `touched` (JSON pointers, as
/// mutation intents name them; a write may also create the parents of its path): the
/// subtrees no path leads into are taken as unchanged and not compared. A platform job's
/// patch then costs a walk along a few paths instead of a comparison of every env entry
/// of every container (180 K instructions). Debug builds check it against [`diff`].
pub fn diff_touched<'a>(
    left: &Value,
    right: &Value,
    touched: impl IntoIterator<Item = &'a str>,
) -> Patch {
    let trie = Touched::from_paths(touched);
    let mut patch = Patch(Vec::new());
    diff_along(left, right, &trie, &mut PointerBuf::new(), &mut patch);
    debug_assert_eq!(
        patch,
        diff(left, right),
        "a write outside the touched paths"
    );
    patch
}

/// The tokens of the touched paths, as a tree: `whole` where a path ends (everything below
/// may have changed).
#[derive(Default)]
struct Touched<'a> {
    whole: bool,
    children: Vec<(Cow<'a, str>, Touched<'a>)>,
}

impl<'a> Touched<'a> {
    fn from_paths(paths: impl IntoIterator<Item = &'a str>) -> Touched<'a> {
        let mut trie = Touched::default();
        for path in paths {
            match path.strip_prefix('/') {
                Some(rest) => trie.insert(rest.split('/').map(crate::pointer::unescape)),
                // The root, or not a pointer (the intent failed to apply): compare everything.
                None => trie.whole = true,
            }
        }
        trie
    }

    fn insert(&mut self, tokens: impl Iterator<Item = Cow<'a, str>>) {
        let mut node = self;
        for token in tokens {
            let i = match node.children.iter().position(|(t, _)| *t == token) {
                Some(i) => i,
                None => {
                    node.children.push((token, Touched::default()));
                    node.children.len() - 1
                }
            };
            node = match node.children.get_mut(i) {
                Some((_, child)) => child,
                None => return,
            };
        }
        node.whole = true;
    }

    fn child(&self, token: &str) -> Option<&Touched<'a>> {
        self.children
            .iter()
            .find(|(t, _)| t.as_ref() == token)
            .map(|(_, c)| c)
    }

    /// The indices of a list of `len` the paths go into, ascending; `None` when a path names
    /// anything else (`-`, past the end): the list is then compared whole.
    fn indices(&self, len: usize) -> Option<Vec<(usize, &Touched<'a>)>> {
        let mut found = self
            .children
            .iter()
            .map(|(t, c)| {
                // An index as a pointer writes it: digits, no leading zero.
                let canonical =
                    t.bytes().all(|b| b.is_ascii_digit()) && (t.len() == 1 || !t.starts_with('0'));
                match t.parse::<usize>() {
                    Ok(i) if canonical && i < len => Some((i, c)),
                    _ => None,
                }
            })
            .collect::<Option<Vec<_>>>()?;
        found.sort_by_key(|(i, _)| *i);
        Some(found)
    }
}

fn diff_along(
    left: &Value,
    right: &Value,
    touched: &Touched,
    at: &mut PointerBuf,
    patch: &mut Patch,
) {
    if touched.whole {
        return diff_at(left, right, at, patch);
    }
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            // In `diff_objects`' order: right's keys, then the keys only left has.
            for (key, value) in r {
                let Some(below) = touched.child(key) else {
                    continue;
                };
                at.push_back(key);
                match l.get(key) {
                    Some(old) => diff_along(old, value, below, at, patch),
                    None => patch.0.push(PatchOperation::Add(AddOperation {
                        path: at.clone(),
                        value: value.clone(),
                    })),
                }
                at.pop_back();
            }
            let removed = l
                .keys()
                .filter(|k| touched.child(k).is_some() && !r.contains_key(*k));
            for key in removed {
                at.push_back(key);
                patch
                    .0
                    .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
                at.pop_back();
            }
        }
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => {
            let Some(indices) = touched.indices(l.len()) else {
                return diff_at(left, right, at, patch);
            };
            for (i, below) in indices {
                if let (Some(old), Some(new)) = (l.get(i), r.get(i)) {
                    at.push_back(i);
                    diff_along(old, new, below, at, patch);
                    at.pop_back();
                }
            }
        }
        _ => diff_at(left, right, at, patch),
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

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // fixed test documents
mod tests {
    use serde_json::json;

    use super::*;

    fn job() -> Value {
        json!({
            "metadata": {"name": "j", "annotations": {"a": "1", "gone": "x"}},
            "spec": {"replicas": {"Worker": {"template": {"spec": {"containers": [
                {"name": "c0", "env": [{"name": "A", "value": "1"}]},
                {"name": "c1", "env": [{"name": "B", "value": "2"}]},
            ]}}}}},
        })
    }

    #[test]
    fn the_patch_along_the_touched_paths_is_the_full_one() {
        let containers = "/spec/replicas/Worker/template/spec/containers";
        let mut after = job();
        after["spec"]["runPolicy"] = json!({"backoffLimit": 3});
        let worker = &mut after["spec"]["replicas"]["Worker"]["template"]["spec"];
        worker["containers"][1]["env"] =
            json!([{"name": "B", "value": "2"}, {"name": "C", "value": "3"}]);
        after["metadata"]["annotations"] = json!({"a": "1"});
        let cases: [(&[&str], usize); 4] = [
            // Each write's own path; parents created on the way (runPolicy).
            (
                &[
                    "/spec/runPolicy/backoffLimit",
                    "/metadata/annotations/gone",
                    &format!("{containers}/1/env/-"),
                ],
                3,
            ),
            // A list index past the end or "-" compares that list whole.
            (
                &[
                    "/spec/runPolicy",
                    "/metadata/annotations",
                    &format!("{containers}/9/env"),
                ],
                3,
            ),
            // The root, or a path that is not a pointer: everything.
            (&[""], 3),
            (&["not a pointer"], 3),
        ];
        for (touched, ops) in cases {
            let patch = diff_touched(&job(), &after, touched.iter().copied());
            assert_eq!(patch, diff(&job(), &after), "{touched:?}");
            assert_eq!(patch.0.len(), ops, "{touched:?}");
        }
    }

    #[test]
    fn what_no_path_leads_into_is_not_compared() {
        let mut after = job();
        after["metadata"]["name"] = json!("k");
        // Nothing touched the name, so the patch does not see it (debug builds would stop on
        // such a write; this is the release behaviour).
        let trie = Touched::from_paths(["/spec/runPolicy"]);
        let mut patch = Patch(Vec::new());
        diff_along(&job(), &after, &trie, &mut PointerBuf::new(), &mut patch);
        assert!(patch.0.is_empty(), "{patch:?}");
    }
}
