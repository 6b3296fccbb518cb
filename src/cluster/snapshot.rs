//! An inventory from a file, for `gangplank check --cluster FILE` and test cases: what
//! `kubectl get nodes -o yaml` prints (a `List` of Nodes), optionally with Volcano Queues in
//! the same list (`kubectl get nodes,queues -o yaml`) or as further YAML documents, and
//! with the API server's discovery documents (`kubectl get --raw /apis`, an `APIGroupList`,
//! or `kubectl get --raw /apis/scheduling.k8s.io/v1alpha2`, an `APIResourceList`), which
//! say whether the native gang API is served.

use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use serde_json::Value;

use super::discovery::NATIVE_GANG_GROUP_VERSION;
use super::inventory::Inventory;
use crate::review::documents::split_yaml;

/// Reads `path`; the error names the file and the item that is wrong.
pub fn read(path: &Path) -> Result<Inventory, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// Parses snapshot text; `source` names it in errors and in `data.cluster.source`.
pub fn parse(text: &str, source: &str) -> Result<Inventory, String> {
    let mut items = Vec::new();
    for (line, document) in split_yaml(text) {
        let value: Value = yaml_serde::from_str(document)
            .map_err(|e| format!("{source}: document at line {line}: {e}"))?;
        match value.get("items").and_then(Value::as_array) {
            Some(list) => items.extend(list.iter().cloned()),
            None if value.is_null() => {}
            None => items.push(value),
        }
    }
    from_items(items, source)
}

/// Sorts Nodes and Queues out of `items` (anything else is an error: a wrong file).
pub fn from_items(items: Vec<Value>, source: &str) -> Result<Inventory, String> {
    let mut inventory = Inventory {
        source: source.to_string(),
        ..Inventory::default()
    };
    for (i, item) in items.into_iter().enumerate() {
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "Node" => {
                let node: Node = serde_json::from_value(item)
                    .map_err(|e| format!("{source}: item {i} (Node): {e}"))?;
                inventory.nodes.push(node);
            }
            "Queue" => inventory.volcano_queues.get_or_insert_with(Vec::new).push(item),
            "ClusterQueue" => inventory
                .kueue_cluster_queues
                .get_or_insert_with(Vec::new)
                .push(item),
            "LocalQueue" => inventory
                .kueue_local_queues
                .get_or_insert_with(Vec::new)
                .push(item),
            "ClusterTrainingRuntime" | "TrainingRuntime" => inventory
                .trainer_runtimes
                .get_or_insert_with(Vec::new)
                .push(item),
            "APIGroupList" => inventory.native_gang_api = Some(lists_native_gang(&item)),
            "APIResourceList" => {
                let version = item.get("groupVersion").and_then(Value::as_str);
                if version == Some(NATIVE_GANG_GROUP_VERSION) {
                    let resources = item.get("resources").and_then(Value::as_array);
                    let podgroups = resources.into_iter().flatten().any(|r| {
                        r.get("name").and_then(Value::as_str) == Some("podgroups")
                    });
                    inventory.native_gang_api = Some(podgroups);
                }
            }
            other => {
                return Err(format!(
                    "{source}: item {i} is a {other:?}; a cluster snapshot holds Nodes, Volcano Queues, Kueue ClusterQueues/LocalQueues, Trainer ClusterTrainingRuntimes/TrainingRuntimes (kubectl get nodes,queues,clustertrainingruntimes,trainingruntimes -A -o yaml) and discovery's APIGroupList/APIResourceList (kubectl get --raw /apis)"
                ))
            }
        }
    }
    Ok(inventory)
}

/// Whether an `APIGroupList` lists `scheduling.k8s.io/v1alpha2` (served only with the
/// GenericWorkload gate, and then with its podgroups).
fn lists_native_gang(list: &Value) -> bool {
    let groups = list.get("groups").and_then(Value::as_array);
    groups
        .into_iter()
        .flatten()
        .filter_map(|g| g.get("versions")?.as_array())
        .flatten()
        .any(|v| v.get("groupVersion").and_then(Value::as_str) == Some(NATIVE_GANG_GROUP_VERSION))
}
