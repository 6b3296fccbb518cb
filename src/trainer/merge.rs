//! Strategic merge of a TrainJob's `runtimePatches` into a runtime's JobSetSpec, as the
//! Trainer does with `strategicpatch.StrategicMergePatch(…, JobSetSpec{})`.
//!
//! Entry point: [`strategic_merge`]. Only the parts of the Kubernetes rules that a
//! `runtimePatches` entry can reach are modelled: objects merge key by key (`null` deletes),
//! the lists below merge item by item on their merge key, every other list is replaced
//! (tolerations, args, dependsOn: no patch strategy in the API), and `$patch: replace` /
//! `$patch: delete` directives on objects and list items are honoured.

use serde_json::{Map, Value};

/// Lists the Kubernetes and JobSet types declare `patchStrategy:"merge"` for, with their
/// `patchMergeKey`, by field name (the name is unambiguous within a JobSetSpec).
const MERGE_KEYS: &[(&str, &str)] = &[
    ("replicatedJobs", "name"),
    ("containers", "name"),
    ("initContainers", "name"),
    ("ephemeralContainers", "name"),
    ("env", "name"),
    ("volumes", "name"),
    ("imagePullSecrets", "name"),
    ("schedulingGates", "name"),
    ("resourceClaims", "name"),
    ("volumeMounts", "mountPath"),
    ("volumeDevices", "devicePath"),
    ("ports", "containerPort"),
];

const DIRECTIVE: &str = "$patch";

/// Merges `patch` into `target` in place.
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => merge_objects(t, p),
        (t, p) => *t = without_directives(p),
    }
}

fn merge_objects(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    if patch.get(DIRECTIVE).and_then(Value::as_str) == Some("replace") {
        *target = strip(patch);
        return;
    }
    for (key, value) in patch {
        if key == DIRECTIVE {
            continue;
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Array(items) => match merge_key(key) {
                Some(merge_key) => {
                    let slot = target
                        .entry(key.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    match slot {
                        Value::Array(existing) => merge_lists(existing, items, merge_key),
                        other => *other = without_directives(value),
                    }
                }
                None => {
                    target.insert(key.clone(), without_directives(value));
                }
            },
            Value::Object(_) => {
                let slot = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                strategic_merge(slot, value);
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
}

/// Items with the merge key merge into the item of the same key (or are appended, in patch
/// order); a `$patch: delete` item removes it; items without the key are appended.
fn merge_lists(existing: &mut Vec<Value>, items: &[Value], merge_key: &str) {
    for item in items {
        let key = item.get(merge_key).filter(|k| !k.is_null());
        let position = key.and_then(|k| existing.iter().position(|e| e.get(merge_key) == Some(k)));
        let delete = item.get(DIRECTIVE).and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                if let Some(slot) = existing.get_mut(i) {
                    strategic_merge(slot, item);
                }
            }
            (None, false) => existing.push(without_directives(item)),
        }
    }
}

fn merge_key(field: &str) -> Option<&'static str> {
    MERGE_KEYS
        .iter()
        .find(|(name, _)| *name == field)
        .map(|(_, key)| *key)
}

/// `value` with every `$patch` directive taken out (what lands when nothing was there).
fn without_directives(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(strip(m)),
        Value::Array(items) => Value::Array(items.iter().map(without_directives).collect()),
        other => other.clone(),
    }
}

fn strip(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| k.as_str() != DIRECTIVE)
        .map(|(k, v)| (k.clone(), without_directives(v)))
        .collect()
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // fixed test documents
mod tests {
    use super::strategic_merge;
    use serde_json::json;

    #[test]
    fn lists_with_a_merge_key_merge_by_it_and_other_lists_are_replaced() {
        let mut spec = json!({"replicatedJobs": [
            {"name": "init", "template": {"spec": {"template": {"spec": {"containers": [{"name": "init", "image": "a"}]}}}}},
            {"name": "node", "template": {"spec": {"template": {"spec": {
                "tolerations": [{"key": "a"}],
                "containers": [{"name": "node", "image": "b", "env": [{"name": "X", "value": "1"}]}]}}}}}
        ]});
        let patch = json!({"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": {
                "tolerations": [{"key": "b"}],
                "nodeSelector": {"pool": "h100"},
                "containers": [{"name": "node", "env": [{"name": "Y", "value": "2"}]}]}}}}}
        ]});
        strategic_merge(&mut spec, &patch);
        let node = &spec["replicatedJobs"][1]["template"]["spec"]["template"]["spec"];
        assert_eq!(spec["replicatedJobs"][0]["name"], "init");
        assert_eq!(node["tolerations"], json!([{"key": "b"}]));
        assert_eq!(node["nodeSelector"], json!({"pool": "h100"}));
        assert_eq!(node["containers"][0]["image"], "b");
        assert_eq!(
            node["containers"][0]["env"],
            json!([{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}])
        );
    }

    #[test]
    fn directives_replace_and_delete() {
        let mut spec = json!({"a": {"x": 1, "y": 2}, "volumes": [{"name": "v", "emptyDir": {}}, {"name": "w"}]});
        strategic_merge(
            &mut spec,
            &json!({"a": {"$patch": "replace", "z": 3}, "volumes": [{"name": "v", "$patch": "delete"}], "b": null}),
        );
        assert_eq!(spec, json!({"a": {"z": 3}, "volumes": [{"name": "w"}]}));
    }
}
