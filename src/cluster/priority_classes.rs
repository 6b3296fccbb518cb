//! PriorityClasses as the `priority` policy reads them (`data.cluster.priority_classes`):
//! each class's value, whether it is the cluster's default and its preemption policy, and
//! the default a pod without a class gets. Using a PriorityClass needs no RBAC, so which
//! classes a namespace's jobs may name is the policy's to decide, against these values.
//!
//! Entry points: [`resource`] (what the watch, `audit` and `check` list) and [`summary`].
//!
//! # Assumptions
//! PriorityClasses are cluster-scoped and only cluster administrators create them, so they
//! are few (tens); the watch keeps each one stripped to the three fields read here
//! ([`strip`](super::strip)), a few dozen bytes, and reads them whole like StorageClasses.

use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::ApiResource;
use serde_json::{json, Map, Value};

/// `scheduling.k8s.io/v1` PriorityClasses (built in: always served).
pub fn resource() -> ApiResource {
    ApiResource::erase::<PriorityClass>(&())
}

/// The fields of a PriorityClass the summary reads (and the watch keeps).
pub const KEPT_FIELDS: [&str; 3] = ["/value", "/globalDefault", "/preemptionPolicy"];

/// `{classes: {name: {value, globalDefault, preemptionPolicy}}, default: {name, value}}`.
///
/// The default is what kube-apiserver's Priority admission plugin gives a pod that names no
/// class: the `globalDefault` class, the one of lowest value when several are (a race the
/// API allows), else value 0 and name `""`. A class without a readable name or an integer
/// value is left out (the API server requires both, so only a hand-written snapshot has
/// one) and said in `problems`.
pub fn summary(items: &[Value], problems: &mut Vec<String>) -> Value {
    let mut classes = Map::new();
    let mut default: Option<(i64, String)> = None;
    for (i, item) in items.iter().enumerate() {
        let name = item.pointer("/metadata/name").and_then(Value::as_str);
        let value = item.get("value").and_then(Value::as_i64);
        let (Some(name), Some(value)) = (name, value) else {
            problems.push(format!(
                "PriorityClass item {i} ({}) has no name or no integer value; left out",
                name.unwrap_or("unnamed")
            ));
            continue;
        };
        let global_default = item.get("globalDefault").and_then(Value::as_bool) == Some(true);
        if global_default && default.as_ref().is_none_or(|(v, _)| value < *v) {
            default = Some((value, name.to_string()));
        }
        // The API server defaults it; a snapshot written by hand may leave it out.
        let preemption = item
            .get("preemptionPolicy")
            .and_then(Value::as_str)
            .unwrap_or("PreemptLowerPriority");
        classes.insert(
            name.to_string(),
            json!({"value": value, "globalDefault": global_default, "preemptionPolicy": preemption}),
        );
    }
    let (value, name) = default.unwrap_or((0, String::new()));
    json!({"classes": classes, "default": {"name": name, "value": value}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i64, global_default: bool) -> Value {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "globalDefault": global_default})
    }

    #[test]
    fn the_default_is_the_global_default_class() {
        let mut problems = Vec::new();
        let items = [class("low", -10, false), class("normal", 100, true)];
        let doc = summary(&items, &mut problems);
        assert_eq!(doc["default"], json!({"name": "normal", "value": 100}));
        assert_eq!(
            doc["classes"]["low"],
            json!({"value": -10, "globalDefault": false, "preemptionPolicy": "PreemptLowerPriority"})
        );
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn without_a_global_default_pods_get_value_zero() {
        let doc = summary(&[class("high", 1000, false)], &mut Vec::new());
        assert_eq!(doc["default"], json!({"name": "", "value": 0}));
    }

    #[test]
    fn of_several_global_defaults_the_lowest_value_wins_as_in_the_priority_plugin() {
        let items = [class("b", 500, true), class("a", 200, true)];
        let doc = summary(&items, &mut Vec::new());
        assert_eq!(doc["default"], json!({"name": "a", "value": 200}));
    }

    #[test]
    fn a_class_without_a_value_is_left_out_and_said() {
        let mut problems = Vec::new();
        let broken = json!({"kind": "PriorityClass", "metadata": {"name": "odd"}, "value": "high"});
        let doc = summary(&[broken, class("ok", 1, false)], &mut problems);
        assert_eq!(doc["classes"].as_object().map(Map::len), Some(1));
        assert_eq!(
            problems,
            ["PriorityClass item 0 (odd) has no name or no integer value; left out"]
        );
    }

    #[test]
    fn the_resource_is_scheduling_k8s_io_v1_priorityclasses() {
        let r = resource();
        assert_eq!(
            (r.api_version.as_str(), r.plural.as_str()),
            ("scheduling.k8s.io/v1", "priorityclasses")
        );
    }
}
