//! Kueue's Topologies (Topology Aware Scheduling): the node label keys of each Topology's
//! levels, outermost first, which the `kueue_queue` policy groups a flavor's nodes by when a
//! pod set asks for one domain of a level (`kueue.x-k8s.io/podset-required-topology`).
//!
//! A Topology whose levels cannot be read is `readable: false`, and a ResourceFlavor naming a
//! Topology the inventory does not have is said in `problems`: the policy judges neither.

use serde_json::{json, Map, Value};

/// Topologies by name, `{"readable", "levels"}`; `None` (unknown) when not listed.
pub fn topologies(items: Option<&[Value]>, problems: &mut Vec<String>) -> Option<Value> {
    let mut out = Map::new();
    for (i, item) in items?.iter().enumerate() {
        let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) else {
            problems.push(format!("Kueue Topology item {i} has no name; left out"));
            continue;
        };
        let doc = match levels(item) {
            Some(levels) => json!({"readable": true, "levels": levels}),
            None => {
                problems.push(format!("Kueue Topology {name:?}: spec.levels is not a list of nodeLabel keys; the flavors naming it are not judged on topology"));
                json!({"readable": false})
            }
        };
        out.insert(name.to_string(), doc);
    }
    Some(Value::Object(out))
}

/// `spec.levels[*].nodeLabel`; `None` unless a non-empty list of non-empty keys.
fn levels(item: &Value) -> Option<Vec<String>> {
    let list = item.pointer("/spec/levels")?.as_array()?;
    let levels = list
        .iter()
        .map(|l| l.get("nodeLabel")?.as_str().filter(|k| !k.is_empty()))
        .map(|k| k.map(str::to_string))
        .collect::<Option<Vec<_>>>()?;
    (!levels.is_empty()).then_some(levels)
}

/// Says in `problems` each readable flavor whose `topology_name` names no Topology of
/// `topologies` (or any, when they are unknown).
pub fn name_absent(
    flavors: Option<&Value>,
    topologies: Option<&Value>,
    problems: &mut Vec<String>,
) {
    let flavors = flavors.and_then(Value::as_object).into_iter().flatten();
    for (name, flavor) in flavors {
        let wanted = flavor["topology_name"].as_str().unwrap_or_default();
        if wanted.is_empty() || topologies.is_some_and(|t| t.get(wanted).is_some()) {
            continue;
        }
        let why = if topologies.is_some() {
            "which is not in the inventory"
        } else {
            "and Kueue's Topologies are not known"
        };
        problems.push(format!("Kueue ResourceFlavor {name:?} names Topology {wanted:?}, {why}; its nodes are not judged on topology"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(text: &str) -> Vec<Value> {
        let list: Value = yaml_serde::from_str(text).expect("test YAML");
        list.as_array().cloned().expect("a list")
    }

    #[test]
    fn levels_are_read_outermost_first_and_bad_ones_named() {
        let list = items(
            r#"
- {metadata: {name: dc}, spec: {levels: [{nodeLabel: block}, {nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]}}
- {metadata: {name: empty}, spec: {levels: []}}
- {metadata: {name: odd}, spec: {levels: [{nodeLabel: rack}, {other: x}]}}
- {spec: {levels: [{nodeLabel: rack}]}}
"#,
        );
        let mut problems = Vec::new();
        let doc = topologies(Some(&list), &mut problems).expect("listed");
        assert_eq!(
            doc["dc"],
            json!({"readable": true, "levels": ["block", "rack", "kubernetes.io/hostname"]})
        );
        assert_eq!(doc["empty"], json!({"readable": false}));
        assert_eq!(doc["odd"], json!({"readable": false}));
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[1].starts_with(r#"Kueue Topology "odd": spec.levels is not"#));
        assert_eq!(problems[2], "Kueue Topology item 3 has no name; left out");
        assert_eq!(topologies(None, &mut problems), None, "not listed: unknown");
    }

    #[test]
    fn a_flavor_naming_a_topology_not_held_is_named() {
        let flavors = json!({
            "tas": {"topology_name": "dc"}, "ghost": {"topology_name": "gone"},
            "plain": {"topology_name": ""}, "broken": {"readable": false},
        });
        let known = json!({"dc": {"readable": true, "levels": ["rack"]}});
        let mut problems = Vec::new();
        name_absent(Some(&flavors), Some(&known), &mut problems);
        assert_eq!(
            problems,
            vec![
                r#"Kueue ResourceFlavor "ghost" names Topology "gone", which is not in the inventory; its nodes are not judged on topology"#
            ]
        );
        problems.clear();
        name_absent(Some(&flavors), None, &mut problems);
        assert_eq!(problems.len(), 2, "{problems:?}");
        let said = r#""tas" names Topology "dc", and Kueue's Topologies are not known"#;
        assert!(problems.iter().any(|p| p.contains(said)), "{problems:?}");
    }
}
