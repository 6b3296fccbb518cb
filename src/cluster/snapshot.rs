//! An inventory from a file, for `gangplank check --cluster FILE` and test cases: what
//! `kubectl get nodes -o yaml` prints (a `List` of Nodes), optionally with Namespaces,
//! PersistentVolumeClaims, StorageClasses, PriorityClasses, NetworkPolicies, Volcano Queues
//! and HyperNodes, Kueue's objects and Trainer runtimes in the same list (`kubectl get
//! nodes,namespaces,pvc,storageclasses,priorityclasses,networkpolicies,queues -A -o yaml`) or
//! as further YAML documents (a kind not listed is unknown, not empty), and with the API
//! server's discovery documents (`kubectl get --raw /apis`, an `APIGroupList`, or `kubectl get
//! --raw /apis/scheduling.k8s.io/v1alpha2`, an `APIResourceList`), which say whether the
//! native gang API is served.
//!
//! Kueue (`kubectl get clusterqueues,localqueues,cohorts,resourceflavors,topologies -A -o
//! yaml`, either API version): ClusterQueues, LocalQueues, Cohorts, ResourceFlavors and
//! Topologies are read; its other kinds (Workloads, WorkloadPriorityClasses, AdmissionChecks,
//! ...) are passed over, as they say nothing about what a queue can ever admit. A snapshot
//! that holds ResourceFlavors was taken of Kueue's kinds: its Cohorts and Topologies are
//! known, and a cohort without a Cohort object is an implicit one (no quota of its own), as
//! Kueue makes it.

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

/// The kinds a snapshot may hold, for the error about any other.
const KINDS_HELD: &str = "a cluster snapshot holds Nodes, Namespaces, PersistentVolumeClaims, StorageClasses, PriorityClasses, NetworkPolicies, Volcano Queues and HyperNodes, Kueue's objects (ClusterQueues, LocalQueues, Cohorts, ResourceFlavors and Topologies are read, its other kinds passed over), Trainer ClusterTrainingRuntimes/TrainingRuntimes (kubectl get nodes,namespaces,pvc,storageclasses,priorityclasses,networkpolicies,queues,hypernodes,clusterqueues,localqueues,cohorts,resourceflavors,topologies,clustertrainingruntimes,trainingruntimes -A -o yaml) and discovery's APIGroupList/APIResourceList (kubectl get --raw /apis)";

/// Kueue's API group: its kinds not read here are passed over, not refused.
const KUEUE_GROUP: &str = "kueue.x-k8s.io/";

/// Sorts the items into an inventory. A kind that is not listed stays unknown (`None`).
/// An item of a known kind that cannot be read is left out and said in `notes` (a bad
/// Node also marks the inventory stale, so a capacity refusal says it counted without
/// it); Kueue's kinds not read are passed over; an item of any other kind is an error: the
/// file is not a cluster snapshot.
pub fn from_items(items: Vec<Value>, source: &str) -> Result<Inventory, String> {
    let mut inventory = Inventory {
        source: source.to_string(),
        ..Inventory::default()
    };
    let mut unreadable_nodes = 0;
    for (i, item) in items.into_iter().enumerate() {
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
        let list = match kind {
            "Node" => {
                match serde_json::from_value::<Node>(item) {
                    Ok(node) => inventory.nodes.push(node),
                    Err(e) => {
                        inventory.notes.push(format!(
                            "{source}: item {i} (Node) cannot be read: {e}; ignored"
                        ));
                        unreadable_nodes += 1;
                    }
                }
                continue;
            }
            "PersistentVolumeClaim" => &mut inventory.claims,
            "StorageClass" => &mut inventory.storage_classes,
            "PriorityClass" => &mut inventory.priority_classes,
            "NetworkPolicy" => &mut inventory.network_policies,
            "Namespace" => &mut inventory.namespaces,
            "Queue" => &mut inventory.volcano_queues,
            "HyperNode" => &mut inventory.hypernodes,
            "ClusterQueue" => &mut inventory.kueue_cluster_queues,
            "LocalQueue" => &mut inventory.kueue_local_queues,
            "Cohort" => &mut inventory.kueue_cohorts,
            "ResourceFlavor" => &mut inventory.kueue_flavors,
            "Topology" => &mut inventory.kueue_topologies,
            "ClusterTrainingRuntime" | "TrainingRuntime" => &mut inventory.trainer_runtimes,
            "APIGroupList" => {
                inventory.native_gang_api = Some(lists_native_gang(&item));
                continue;
            }
            "APIResourceList" => {
                let version = item.get("groupVersion").and_then(Value::as_str);
                if version == Some(NATIVE_GANG_GROUP_VERSION) {
                    let resources = item.get("resources").and_then(Value::as_array);
                    let podgroups = resources
                        .into_iter()
                        .flatten()
                        .any(|r| r.get("name").and_then(Value::as_str) == Some("podgroups"));
                    inventory.native_gang_api = Some(podgroups);
                }
                continue;
            }
            _ if is_kueue(&item) => continue,
            other => return Err(format!("{source}: item {i} is a {other:?}; {KINDS_HELD}")),
        };
        if item.is_object() {
            list.get_or_insert_with(Vec::new).push(item);
        }
    }
    if inventory.kueue_flavors.is_some() {
        inventory.kueue_cohorts.get_or_insert_with(Vec::new);
        inventory.kueue_topologies.get_or_insert_with(Vec::new);
    }
    if unreadable_nodes > 0 {
        inventory.stale = Some(format!(
            "{unreadable_nodes} Node item(s) of {source} could not be read and are not counted"
        ));
    }
    Ok(inventory)
}

/// Whether `item` is one of Kueue's objects (`apiVersion: kueue.x-k8s.io/...`).
fn is_kueue(item: &Value) -> bool {
    let version = item.get("apiVersion").and_then(Value::as_str);
    version.is_some_and(|v| v.starts_with(KUEUE_GROUP))
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
