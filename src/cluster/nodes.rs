//! The watch's view of the Nodes, kept as node classes as they change: what a Node costs is
//! its name and a share of its class, not the object the kubelet sends.
//!
//! A GPU node as GPU Feature Discovery, NFD and a cloud provider label it, with the images
//! and managedFields the API server returns, is about 16 KiB of JSON and ~67 KiB once
//! deserialised whole. The policies read only its labels, taints, schedulability and
//! allocatable ([`Class`]): [`NodeFacts`] deserialises only those (serde skips the rest
//! without allocating), and [`NodeIndex`] keeps, per node, its name and the key of its class;
//! each class is kept once. A status update that changes none of that (the kubelet's
//! heartbeat, new images, conditions) finds the node in the class it is already in, and
//! [`NodeIndex::apply`] says nothing changed: no summary is built, nothing is published.
//!
//! Relists (a restarted watch, 410 Gone) are built aside ([`NodeIndex::begin_relist`]) and
//! swapped in complete, so the last complete view keeps serving meanwhile.
//!
//! Past `max_bytes` (an estimate of what the index holds) new nodes are left out and
//! counted: the inventory stops growing and says so ([`NodeIndex::incomplete`]), and the
//! capacity policy treats capacity as unknown.
//!
//! Entry points: [`NodeFacts`] (what the watch deserialises), [`NodeIndex`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

use super::inventory::{Class, Inventory};
use super::view::Hostnames;

/// What the inventory reads of a Node, deserialised from the API server's JSON with
/// everything else skipped. A [`kube::Resource`] of its own, so a watcher can list and
/// watch Nodes as this type.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeFacts {
    #[serde(deserialize_with = "meta_facts")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<SpecFacts>,
    #[serde(default)]
    pub status: Option<StatusFacts>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct SpecFacts {
    #[serde(default)]
    pub unschedulable: Option<bool>,
    #[serde(default)]
    pub taints: Option<Vec<Taint>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct StatusFacts {
    #[serde(default)]
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    #[serde(default)]
    pub capacity: Option<BTreeMap<String, Quantity>>,
}

/// `metadata`: the name, labels and resourceVersion (the watcher resumes from it); the
/// annotations and managedFields, often most of a Node's bytes, are skipped.
fn meta_facts<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        name: Option<String>,
        labels: Option<BTreeMap<String, String>>,
        resource_version: Option<String>,
        uid: Option<String>,
    }
    let m = Meta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        labels: m.labels,
        resource_version: m.resource_version,
        uid: m.uid,
        ..ObjectMeta::default()
    })
}

impl kube::Resource for NodeFacts {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Node".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "nodes".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl NodeFacts {
    /// The facts as a [`Node`], for [`Class::of`] (which snapshots share).
    fn to_node(&self) -> Node {
        let spec = self.spec.as_ref().map(|s| NodeSpec {
            unschedulable: s.unschedulable,
            taints: s.taints.clone(),
            ..NodeSpec::default()
        });
        let status = self.status.as_ref().map(|s| NodeStatus {
            allocatable: s.allocatable.clone(),
            capacity: s.capacity.clone(),
            ..NodeStatus::default()
        });
        Node {
            metadata: ObjectMeta {
                name: self.metadata.name.clone(),
                labels: self.metadata.labels.clone(),
                ..ObjectMeta::default()
            },
            spec,
            status,
        }
    }
}

/// One node: the key of its class and what could not be read of it.
#[derive(Debug)]
struct Member {
    class: Arc<str>,
    problems: Vec<String>,
}

/// A class and the names of its nodes.
#[derive(Debug)]
struct Group {
    class: Class,
    names: BTreeSet<Arc<str>>,
    /// Estimated bytes of the class itself (its names are counted per node).
    bytes: usize,
}

/// The most a node's class may take, as its key (labels, taints, allocatable as JSON): the
/// API server lets a Node carry ~1.5 MB of labels, and one such node must not be a class the
/// inventory keeps. Real GPU nodes are ~4 KiB.
pub const MAX_CLASS_BYTES: usize = 64 << 10;

/// Estimated bytes per node beyond its name: the map entries, the set entry, the Arcs, its
/// entry in the published hostnames (calibrated on benches/inventory_scale.rs: RSS per node).
const NODE_OVERHEAD: usize = 320;

/// The Nodes as classes, kept current event by event.
#[derive(Debug)]
pub struct NodeIndex {
    nodes: HashMap<Arc<str>, Member>,
    groups: HashMap<Arc<str>, Group>,
    /// A relist being built; swapped in when complete.
    relist: Option<Box<NodeIndex>>,
    /// Nodes left out because the index reached `max_bytes`.
    left_out: HashSet<Arc<str>>,
    /// Nodes left out because their class is over [`MAX_CLASS_BYTES`]: name → why.
    oversized: HashMap<Arc<str>, String>,
    max_bytes: usize,
    bytes: usize,
}

impl NodeIndex {
    /// An empty index that holds at most about `max_bytes`.
    pub fn new(max_bytes: usize) -> NodeIndex {
        NodeIndex {
            nodes: HashMap::new(),
            groups: HashMap::new(),
            relist: None,
            left_out: HashSet::new(),
            oversized: HashMap::new(),
            max_bytes,
            bytes: 0,
        }
    }

    /// Adds or updates a node; true when the view changed (its class, its problems, a node
    /// new or left out). During a relist the node goes into the list being built.
    pub fn apply(&mut self, node: &NodeFacts) -> bool {
        if let Some(relist) = self.relist.as_mut() {
            relist.apply(node);
            return false;
        }
        let Some(name) = node.metadata.name.as_deref() else {
            return false;
        };
        let mut problems = Vec::new();
        let class = Class::of(&node.to_node(), &mut problems);
        let key = class.key();
        if let Some(member) = self.nodes.get(name) {
            if *member.class == *key && member.problems == problems {
                return false;
            }
        }
        let name: Arc<str> = Arc::from(name);
        if key.len() > MAX_CLASS_BYTES {
            let why = format!(
                "node {name}: {} KiB of labels, taints and allocatable (over {} KiB); left out",
                key.len() >> 10,
                MAX_CLASS_BYTES >> 10
            );
            let removed = self.remove(&name);
            return self.oversized.insert(name, why).is_none() || removed;
        }
        let was_oversized = self.oversized.remove(&name).is_some();
        let cost = self.cost_of(&name, &key, &class);
        let known = self.nodes.contains_key(&name);
        if !known && self.bytes.saturating_add(cost) > self.max_bytes {
            return self.left_out.insert(name) || was_oversized;
        }
        self.remove(&name);
        self.insert(name, key, class, problems);
        true
    }

    /// Removes a node; true when the view changed.
    pub fn delete(&mut self, name: &str) -> bool {
        if let Some(relist) = self.relist.as_mut() {
            relist.delete(name);
            return false;
        }
        self.left_out.remove(name) | self.oversized.remove(name).is_some() | self.remove(name)
    }

    /// A relist starts: the nodes listed from now on make a new index, swapped in by
    /// [`NodeIndex::end_relist`]; until then this one keeps serving.
    pub fn begin_relist(&mut self) {
        self.relist = Some(Box::new(NodeIndex::new(self.max_bytes)));
    }

    /// The relist is complete: its view replaces this one. True (the view is new).
    pub fn end_relist(&mut self) -> bool {
        match self.relist.take() {
            Some(fresh) => {
                *self = *fresh;
                true
            }
            None => false,
        }
    }

    /// Whether a relist is being built (the view served is the last complete one).
    #[cfg(test)]
    fn relisting(&self) -> bool {
        self.relist.is_some()
    }

    /// The classes in a stable order (by key), and what could not be read of the nodes.
    fn classes(&self) -> (Vec<(&Arc<str>, &Group)>, Vec<String>) {
        let mut keyed: Vec<(&Arc<str>, &Group)> = self.groups.iter().collect();
        keyed.sort_by(|a, b| a.0.cmp(b.0));
        let mut problems: Vec<String> = self
            .nodes
            .values()
            .flat_map(|m| m.problems.iter().cloned())
            .chain(self.oversized.values().cloned())
            .collect();
        problems.sort();
        (keyed, problems)
    }

    /// `data.cluster`: the summary of these nodes with `rest` (queues, StorageClasses,
    /// staleness; its `nodes` are not read), noting the nodes left out.
    pub fn summary(&self, rest: Inventory) -> (serde_json::Value, Hostnames) {
        let (groups, problems) = self.classes();
        let inventory = Inventory {
            incomplete: self.incomplete(),
            ..rest
        };
        // Names stay out of the summary: the projections look them up here, sharing the
        // index's strings (16 bytes a node, not a JSON string each).
        let mut hostnames = Hostnames::with_capacity(self.nodes.len());
        for (i, (_, group)) in groups.iter().enumerate() {
            hostnames.extend(group.names.iter().map(|n| (n.clone(), i)));
        }
        let mut summary = inventory.summary_of(groups.iter().map(|(_, g)| &g.class), problems);
        inventory.add_hypernodes(&mut summary, &hostnames);
        (summary, hostnames)
    }

    /// Why the view leaves nodes out, if it does.
    pub fn incomplete(&self) -> Option<String> {
        (!self.left_out.is_empty()).then(|| {
            format!(
                "the inventory reached its memory bound ({} MiB, --inventory-max-mib) and leaves {} of {} nodes out: capacity is unknown",
                self.max_bytes >> 20,
                self.left_out.len(),
                self.left_out.len() + self.nodes.len()
            )
        })
    }

    /// Nodes held, node classes, nodes left out, estimated bytes held.
    pub fn sizes(&self) -> IndexSizes {
        IndexSizes {
            nodes: self.nodes.len(),
            classes: self.groups.len(),
            left_out: self.left_out.len(),
            bytes: self.bytes,
        }
    }

    fn cost_of(&self, name: &str, key: &str, class: &Class) -> usize {
        let node = member_bytes(name, &[]);
        if self.groups.contains_key(key) {
            node
        } else {
            node + class_bytes(key, class)
        }
    }

    fn insert(&mut self, name: Arc<str>, key: String, class: Class, problems: Vec<String>) {
        let key: Arc<str> = match self.groups.get_key_value(key.as_str()) {
            Some((k, _)) => k.clone(),
            None => {
                let bytes = class_bytes(&key, &class);
                self.bytes += bytes;
                let key: Arc<str> = Arc::from(key);
                let group = Group {
                    class,
                    names: BTreeSet::new(),
                    bytes,
                };
                self.groups.insert(key.clone(), group);
                key
            }
        };
        if let Some(group) = self.groups.get_mut(&key) {
            group.names.insert(name.clone());
            group.class.size = group.names.len();
        }
        self.bytes += member_bytes(&name, &problems);
        self.nodes.insert(
            name,
            Member {
                class: key,
                problems,
            },
        );
    }

    /// Takes `name` out of the index (and its class, when it was the last of it).
    fn remove(&mut self, name: &str) -> bool {
        let Some((name, member)) = self.nodes.remove_entry(name) else {
            return false;
        };
        self.bytes = self
            .bytes
            .saturating_sub(member_bytes(&name, &member.problems));
        if let Some(group) = self.groups.get_mut(&member.class) {
            group.names.remove(&name);
            group.class.size = group.names.len();
            if group.names.is_empty() {
                self.bytes = self.bytes.saturating_sub(group.bytes);
                self.groups.remove(&member.class);
            }
        }
        true
    }
}

/// Estimated bytes of one node's entry: its name (in the map and its class's set, one
/// allocation counted twice for the hostnames map's share), its problems, the overhead.
fn member_bytes(name: &str, problems: &[String]) -> usize {
    name.len() * 2 + NODE_OVERHEAD + problems.iter().map(String::len).sum::<usize>()
}

/// Estimated bytes of a class: its key, its labels, taints and allocatable, map overhead.
fn class_bytes(key: &str, class: &Class) -> usize {
    let labels: usize = class
        .labels
        .iter()
        .map(|(k, v)| k.len() + v.len() + 96)
        .sum();
    let allocatable: usize = class.allocatable.keys().map(|k| k.len() + 64).sum();
    // Twice: the index's copy and the published summary's.
    2 * (key.len() + labels + allocatable + class.taints.len() * 128 + 256)
}

/// What a [`NodeIndex`] holds, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexSizes {
    pub nodes: usize,
    pub classes: usize,
    pub left_out: usize,
    pub bytes: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, gpus: &str, extra: serde_json::Value) -> NodeFacts {
        let mut v = json!({
            "metadata": {"name": name, "resourceVersion": "1",
                "labels": {"kubernetes.io/hostname": name, "pool": "p1",
                    "nvidia.com/gfd.timestamp": "1732780000"},
                "annotations": {"big": "x".repeat(1000)},
                "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": gpus},
                "images": [{"names": ["r/x@sha256:00"], "sizeBytes": 1}],
                "conditions": [{"type": "Ready", "status": "True"}]},
        });
        if let (Some(obj), Some(more)) = (v.as_object_mut(), extra.as_object()) {
            for (k, val) in more {
                obj.insert(k.clone(), val.clone());
            }
        }
        serde_json::from_value(v).expect("node facts")
    }

    fn summary(index: &NodeIndex) -> serde_json::Value {
        index.summary(Inventory::default()).0
    }

    #[test]
    fn only_what_the_classes_read_is_kept_and_a_heartbeat_changes_nothing() {
        let mut index = NodeIndex::new(usize::MAX);
        assert!(index.apply(&node("a", "8", json!({}))));
        assert!(index.apply(&node("b", "8", json!({}))));
        assert_eq!(
            index.sizes().classes,
            1,
            "hostname and GFD timestamp are per node"
        );
        // The kubelet's heartbeat: new conditions, images, annotations, GFD relabel.
        let mut beat = node("a", "8", json!({}));
        beat.metadata.resource_version = Some("2".into());
        if let Some(labels) = beat.metadata.labels.as_mut() {
            labels.insert("nvidia.com/gfd.timestamp".into(), "1732789999".into());
        }
        assert!(!index.apply(&beat), "nothing the policies read changed");
        // A GPU lost is a change: the node moves to a class of its own.
        assert!(index.apply(&node("a", "7", json!({}))));
        let s = summary(&index);
        assert_eq!(s["node_count"], 2);
        assert_eq!(s["node_classes"].as_array().map(Vec::len), Some(2));
        assert_eq!(s["resources"]["nvidia.com/gpu"]["total"], 15);
        assert!(index.delete("a"));
        assert!(!index.delete("a"));
        assert_eq!(summary(&index)["node_count"], 1);
        assert_eq!(index.sizes().classes, 1, "an emptied class is dropped");
    }

    #[test]
    fn the_index_gives_the_summary_a_list_of_the_same_nodes_gives() {
        let nodes = [
            node("a", "8", json!({})),
            node("b", "8", json!({"spec": {"unschedulable": true}})),
            node("c", "x", json!({})),
        ];
        let mut index = NodeIndex::new(usize::MAX);
        for n in &nodes {
            index.apply(n);
        }
        let listed = Inventory {
            nodes: nodes.iter().map(NodeFacts::to_node).collect(),
            ..Default::default()
        };
        let mut listed = listed.summary();
        for class in listed["node_classes"].as_array_mut().into_iter().flatten() {
            class.as_object_mut().map(|c| c.remove("names"));
        }
        assert_eq!(summary(&index), listed, "the same, but for the names");
        let (_, hostnames) = index.summary(Inventory::default());
        assert_eq!(hostnames.len(), 3);
        assert_ne!(hostnames.get("a"), hostnames.get("b"), "b is cordoned");
    }

    #[test]
    fn a_relist_keeps_the_last_view_until_it_is_complete() {
        let mut index = NodeIndex::new(usize::MAX);
        index.apply(&node("a", "8", json!({})));
        index.apply(&node("b", "8", json!({})));
        index.begin_relist();
        assert!(!index.apply(&node("c", "8", json!({}))));
        assert!(index.relisting());
        assert_eq!(
            summary(&index)["node_count"],
            2,
            "the last complete view serves"
        );
        assert!(index.end_relist());
        let (s, hostnames) = index.summary(Inventory::default());
        assert_eq!(s["node_count"], 1, "a and b were not listed again: gone");
        assert_eq!(hostnames.keys().map(|n| &**n).collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn past_its_bound_the_index_stops_growing_and_says_so() {
        let mut probe = NodeIndex::new(usize::MAX);
        probe.apply(&node("a", "8", json!({})));
        let one = probe.sizes().bytes;
        let mut index = NodeIndex::new(one + 10);
        assert!(index.apply(&node("a", "8", json!({}))));
        assert!(index.incomplete().is_none());
        assert!(
            index.apply(&node("b", "8", json!({}))),
            "left out is a change"
        );
        assert_eq!(index.sizes().nodes, 1);
        assert_eq!(index.sizes().left_out, 1);
        let why = index.incomplete().expect("says so");
        assert!(why.contains("leaves 1 of 2 nodes out"), "{why}");
        // Known nodes still update; the left-out one going away clears the note.
        assert!(index.apply(&node("a", "4", json!({}))));
        assert!(index.delete("b"));
        assert!(index.incomplete().is_none());
    }

    #[test]
    fn a_node_with_megabytes_of_labels_is_left_out_and_named() {
        let mut index = NodeIndex::new(usize::MAX);
        index.apply(&node("a", "8", json!({})));
        let mut huge = node("big", "8", json!({}));
        if let Some(labels) = huge.metadata.labels.as_mut() {
            for i in 0..2_000 {
                labels.insert(format!("example.com/label-{i}"), "v".repeat(60));
            }
        }
        assert!(index.apply(&huge));
        assert!(!index.apply(&huge), "said once");
        let s = summary(&index);
        assert_eq!(s["node_count"], 1);
        let problem = s["problems"][0].as_str().unwrap_or_default().to_string();
        assert!(
            problem.starts_with("node big: ") && problem.ends_with("(over 64 KiB); left out"),
            "{problem}"
        );
        // Relabelled to a normal size, it is counted again.
        assert!(index.apply(&node("big", "8", json!({}))));
        assert_eq!(summary(&index)["node_count"], 2);
        assert_eq!(summary(&index)["problems"], json!([]));
    }

    #[test]
    fn a_malformed_quantity_is_a_problem_of_that_node_only() {
        let mut index = NodeIndex::new(usize::MAX);
        index.apply(&node("bad", "eight", json!({})));
        let problems = summary(&index)["problems"].clone();
        let problems: Vec<&str> = problems
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str())
            .collect();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("node bad: allocatable nvidia.com/gpu"));
        assert!(index.delete("bad"));
        assert_eq!(summary(&index)["problems"], json!([]));
    }
}
