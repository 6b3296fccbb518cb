//! The patch and the patched Rego input the mutation hands to validation: `diff` returns
//! what `json_patch::diff` returns, and patching the Rego value of the submitted object gives
//! exactly the value of the mutated object converted whole (so validation sees what it would
//! have seen had the object been converted again).

use std::path::Path;

use gangplank::policy::set::to_rego;
use gangplank::policy::PolicySet;
use gangplank::review::diff::{diff, patch_rego};
use gangplank::review::{decide, Input};
use proptest::prelude::*;
use serde_json::{json, Value};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..3).prop_map(Value::from),
        "[a-c/~]{0,2}".prop_map(Value::from),
    ]
}

/// Small trees over few keys, so that two of them share structure and differ in places.
fn tree() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 40, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-c/~]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// `left` edited in a few places: a pair as a mutation makes one.
fn edited() -> impl Strategy<Value = (Value, Value)> {
    (tree(), tree(), tree()).prop_map(|(left, a, b)| {
        let mut right = left.clone();
        edit(&mut right, &a, &b);
        (left, right)
    })
}

/// Removes the first key, adds one, appends to arrays and replaces leaves, then does the
/// same in the first child that was there before.
fn edit(v: &mut Value, a: &Value, b: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(first) = m.keys().next().cloned() {
                m.remove(&first);
            }
            if let Some((_, child)) = m.iter_mut().next() {
                edit(child, b, a);
            }
            m.insert("new".into(), a.clone());
        }
        Value::Array(items) => {
            if let Some(child) = items.first_mut() {
                edit(child, b, a);
            }
            items.push(a.clone());
        }
        other => *other = a.clone(),
    }
}

proptest! {
    #[test]
    fn diff_is_json_patch_diff((left, right) in edited()) {
        prop_assert_eq!(diff(&left, &right), json_patch::diff(&left, &right));
    }

    #[test]
    fn unrelated_trees_diff_alike(left in tree(), right in tree()) {
        prop_assert_eq!(diff(&left, &right), json_patch::diff(&left, &right));
    }

    #[test]
    fn the_patched_rego_value_is_the_converted_right_side((left, right) in edited()) {
        let patched = patch_rego(to_rego(&left), &diff(&left, &right));
        prop_assert_eq!(patched, Some(to_rego(&right)));
    }
}

#[test]
fn arrays_shrink_and_grow_at_their_end() {
    let left = json!({"a": [1, 2, 3, {"x": 1}], "b": [1]});
    let right = json!({"a": [1, 5], "b": [1, 2, {"y": [3]}]});
    let patch = diff(&left, &right);
    assert_eq!(patch, json_patch::diff(&left, &right));
    assert_eq!(patch_rego(to_rego(&left), &patch), Some(to_rego(&right)));
}

#[test]
fn a_patch_that_does_not_fit_the_value_is_refused_not_misapplied() {
    let patch = diff(&json!({"a": {"b": 1}}), &json!({"a": {"b": 2}}));
    assert_eq!(patch_rego(to_rego(&json!({"a": [1]})), &patch), None);
    assert_eq!(patch_rego(to_rego(&json!({})), &patch), None);
}

/// Every example and benchmark job through the shipped policies: the input validation gets
/// is the mutated object's input built from scratch.
#[test]
fn validation_sees_the_mutated_object_of_every_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let set = PolicySet::load(&root.join("policies")).expect("shipped policies load");
    let mut checked = 0;
    for dir in ["examples", "examples/rejected", "benches/data"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            for doc in serde_yaml_docs(&text) {
                let input = Input::create(doc, "default");
                if input.kind().is_none() {
                    continue;
                }
                let mut m = decide::mutate(&set, &input).expect("mutates");
                assert_eq!(
                    m.take_rego_input(&input),
                    input.rego_input_for(&m.mutated),
                    "{}",
                    path.display()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 15, "only {checked} jobs found");
}

fn serde_yaml_docs(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter_map(|d| yaml_serde::from_str::<Value>(d).ok())
        .filter(|v| !v.is_null())
        .collect()
}
