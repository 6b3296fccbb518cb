//! The watch's view of the Nodes, kept as node classes as they change: what a Node costs is
//! its name and a share of its class, not the object the kubelet sends.
//!
//! A GPU node as GPU Feature Discovery, NFD and a cloud provider label it, with the images
//! and managedFields the API server returns, is about 16 KiB of JSON and ~67 KiB once
//! deserialised whole. The policies read only its labels, taints, schedulability and
//! allocatable ([`Class`]): [`NodeFacts`] deserialises only those (serde skips the rest
//! without allocating), and [`NodeIndex`] keeps, per node, its name and its class; each class
//! is kept once, as the ids of its labels (each key and value interned once for all classes,
//! [`labels`](super::labels)) and a shape shared with the classes that differ only in labels
//! ([`classes`](super::classes)): ~0.5 KiB a class of 53 labels, however finely topology
//! labels split the nodes. A status update that changes none of that (the kubelet's
//! heartbeat, new images, conditions) finds the node in the class it is already in, and
//! [`NodeIndex::apply`] says nothing changed: no summary is built, nothing is published.
//!
//! Relists (a restarted watch, 410 Gone) are built aside ([`NodeIndex::begin_relist`]) and
//! swapped in complete, so the last complete view keeps serving meanwhile.
//!
//! A node whose labels change on most of its updates (a value per heartbeat: each value a
//! class, each change a new view) is named in the summary's `problems`.
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

use super::classes::{ClassKey, ClassTable, Shape, Shapes};
use super::inventory::{table_facts, Class, Inventory};
use super::labels::{new_bytes, Interner, Sym};
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

/// One node: its class and what could not be read of it.
#[derive(Debug)]
struct Member {
    class: ClassKey,
    problems: Vec<String>,
    /// Its last [`HISTORY`] updates, a bit each (newest lowest): set when the update changed
    /// its labels.
    relabels: u8,
    /// Why its labels look like a value per update, when they do (said in `problems`).
    flapping: Option<String>,
}

/// A class's nodes.
#[derive(Debug)]
struct Group {
    names: BTreeSet<Arc<str>>,
    /// Estimated bytes of the class itself (its names are counted per node, its strings and
    /// shape by their tables).
    bytes: usize,
}

/// The most a node's class may take, as its key (labels, taints, allocatable as JSON): the
/// API server lets a Node carry ~1.5 MB of labels, and one such node must not be a class the
/// inventory keeps. Real GPU nodes are ~4 KiB.
pub const MAX_CLASS_BYTES: usize = 64 << 10;

/// Estimated bytes per node beyond its name: the map entries, the set entry, the Arcs, its
/// entry in the published hostnames (calibrated on benches/inventory_labels.rs).
const NODE_OVERHEAD: usize = 320;

/// Estimated bytes per class beyond its 8 bytes a label: the slice's Arc, the group and its
/// map entry, its entry in the published table (calibrated on benches/inventory_labels.rs).
const CLASS_OVERHEAD: usize = 256;

/// The updates of a node remembered to tell a label that changes on every update, and how
/// many of them must have changed its labels.
const HISTORY: u32 = 8;
const FLAPPING_UPDATES: u32 = 4;

/// The Nodes as classes, kept current event by event.
#[derive(Debug)]
pub struct NodeIndex {
    nodes: HashMap<Arc<str>, Member>,
    groups: HashMap<ClassKey, Group>,
    /// The classes' label keys and values, each once.
    strings: Interner,
    shapes: Shapes,
    /// A relist being built; swapped in when complete.
    relist: Option<Box<NodeIndex>>,
    /// Nodes left out because the index reached `max_bytes`.
    left_out: HashSet<Arc<str>>,
    /// Nodes left out because their class is over [`MAX_CLASS_BYTES`]: name → why.
    oversized: HashMap<Arc<str>, String>,
    /// The nodes with problems or a flapping note: a summary walks these, not every node.
    troubled: HashSet<Arc<str>>,
    max_bytes: usize,
    /// Estimated bytes of the nodes and the classes (strings and shapes apart).
    bytes: usize,
}

impl NodeIndex {
    /// An empty index that holds at most about `max_bytes`.
    pub fn new(max_bytes: usize) -> NodeIndex {
        NodeIndex {
            nodes: HashMap::new(),
            groups: HashMap::new(),
            strings: Interner::default(),
            shapes: Shapes::default(),
            relist: None,
            left_out: HashSet::new(),
            oversized: HashMap::new(),
            troubled: HashSet::new(),
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
        let shape_key = Shape::key_of(&class);
        let (relabels, flapping) = match self.nodes.get_mut(name) {
            Some(member) => {
                let changed = changed_label(&self.strings, &member.class.labels, &class);
                let relabels = (member.relabels << 1) | u8::from(changed.is_some());
                let flapping = flapping(name, relabels, changed, &member.flapping);
                if changed.is_none()
                    && member.class.shape.key() == shape_key
                    && member.problems == problems
                    && member.flapping == flapping
                {
                    member.relabels = relabels;
                    return false;
                }
                (relabels, flapping)
            }
            None => (0, None),
        };
        let name: Arc<str> = Arc::from(name);
        let key_len = key_len(&class, &shape_key);
        if key_len > MAX_CLASS_BYTES {
            let why = format!(
                "node {name}: {} KiB of labels, taints and allocatable (over {} KiB); left out",
                key_len >> 10,
                MAX_CLASS_BYTES >> 10
            );
            let removed = self.remove(&name);
            return self.oversized.insert(name, why).is_none() || removed;
        }
        let was_oversized = self.oversized.remove(&name).is_some();
        let cost = member_bytes(&name, &problems) + self.class_cost(&class, &shape_key);
        let known = self.nodes.contains_key(&name);
        if !known && self.total_bytes().saturating_add(cost) > self.max_bytes {
            return self.left_out.insert(name) || was_oversized;
        }
        self.remove(&name);
        let class = self.class_of(&class, &shape_key);
        let member = Member {
            class,
            problems,
            relabels,
            flapping,
        };
        self.insert(name, member);
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

    /// The classes, and what could not be read of the nodes. The classes' order is the map's:
    /// nothing a policy reads depends on it (projections order their merged classes by their
    /// JSON), and sorting 25,000 classes was a third of a publish.
    fn classes(&self) -> (Vec<(&ClassKey, &Group)>, Vec<String>) {
        let keyed: Vec<(&ClassKey, &Group)> = self.groups.iter().collect();
        let mut problems: Vec<String> = self
            .troubled
            .iter()
            .filter_map(|name| self.nodes.get(name))
            .flat_map(|m| m.problems.iter().chain(&m.flapping).cloned())
            .chain(self.oversized.values().cloned())
            .collect();
        problems.sort();
        (keyed, problems)
    }

    /// `data.cluster` as a published view holds it: the summary of these nodes with `rest`
    /// (queues, StorageClasses, staleness; its `nodes` are not read), noting the nodes left
    /// out, and the classes as a [`ClassTable`] sharing the index's ids and strings.
    pub fn summary(&self, rest: Inventory) -> (serde_json::Value, ClassTable) {
        let (groups, problems) = self.classes();
        let inventory = Inventory {
            incomplete: self.incomplete(),
            ..rest
        };
        // Names stay out of the summary: the projections look them up in the table, sharing
        // the index's strings (16 bytes a node, not a JSON string each).
        let mut hostnames = Hostnames::with_capacity(self.nodes.len());
        for (i, (_, group)) in groups.iter().enumerate() {
            hostnames.extend(group.names.iter().map(|n| (n.clone(), i)));
        }
        let classes = groups
            .iter()
            .map(|(key, group)| ((*key).clone(), group.names.len()))
            .collect();
        let table = ClassTable::new(self.strings.strings(), classes, hostnames);
        let mut summary = inventory.summary_of(&table_facts(&table), None, problems);
        inventory.add_hypernodes(&mut summary, &table);
        (summary, table)
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
            bytes: self.total_bytes(),
        }
    }

    /// Estimated bytes held: nodes, classes, their strings and shapes.
    fn total_bytes(&self) -> usize {
        self.bytes + self.strings.bytes() + self.shapes.bytes()
    }

    /// The class `class` (with shape key `shape_key`) is, if the index has it.
    fn existing(&self, class: &Class, shape_key: &str) -> Option<ClassKey> {
        let shape = self.shapes.get(shape_key)?.clone();
        let ids: Option<Vec<(Sym, Sym)>> = class
            .labels
            .iter()
            .map(|(k, v)| Some((self.strings.get(k)?, self.strings.get(v)?)))
            .collect();
        let key = ClassKey {
            labels: ids?.into(),
            shape,
        };
        self.groups.get_key_value(&key).map(|(k, _)| k.clone())
    }

    /// What `class` would add to the index: nothing if it has it, else the class, its new
    /// strings and its new shape.
    fn class_cost(&self, class: &Class, shape_key: &str) -> usize {
        if self.existing(class, shape_key).is_some() {
            return 0;
        }
        let labels = class.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let shape = match self.shapes.get(shape_key) {
            Some(_) => 0,
            None => 4 * shape_key.len() + 512,
        };
        class_bytes(class.labels.len()) + new_bytes(&self.strings, labels) + shape
    }

    /// The class `class` is, added (its strings and shape held) if new.
    fn class_of(&mut self, class: &Class, shape_key: &str) -> ClassKey {
        if let Some(key) = self.existing(class, shape_key) {
            return key;
        }
        let labels = class
            .labels
            .iter()
            .map(|(k, v)| (self.strings.intern(k), self.strings.intern(v)))
            .collect();
        let key = ClassKey {
            labels,
            shape: self.shapes.intern(class, shape_key),
        };
        let bytes = class_bytes(key.labels.len());
        self.bytes += bytes;
        let group = Group {
            names: BTreeSet::new(),
            bytes,
        };
        self.groups.insert(key.clone(), group);
        key
    }

    fn insert(&mut self, name: Arc<str>, member: Member) {
        if let Some(group) = self.groups.get_mut(&member.class) {
            group.names.insert(name.clone());
        }
        self.bytes += member_bytes(&name, &member.problems);
        if !member.problems.is_empty() || member.flapping.is_some() {
            self.troubled.insert(name.clone());
        }
        self.nodes.insert(name, member);
    }

    /// Takes `name` out of the index (and its class, when it was the last of it).
    fn remove(&mut self, name: &str) -> bool {
        let Some((name, member)) = self.nodes.remove_entry(name) else {
            return false;
        };
        self.troubled.remove(&name);
        self.bytes = self
            .bytes
            .saturating_sub(member_bytes(&name, &member.problems));
        let Some(group) = self.groups.get_mut(&member.class) else {
            return true;
        };
        group.names.remove(&name);
        if group.names.is_empty() {
            self.bytes = self.bytes.saturating_sub(group.bytes);
            self.groups.remove(&member.class);
            for &(k, v) in member.class.labels.iter() {
                self.strings.release(k);
                self.strings.release(v);
            }
            self.shapes.release(&member.class.shape);
        }
        true
    }
}

/// The length of `class`'s key (its labels, taints and allocatable as JSON), or less when that
/// is far below [`MAX_CLASS_BYTES`]: the JSON is written only for a class that may be over it
/// (each label is its text plus 6 bytes of JSON, and escaping at most sextuples a byte).
fn key_len(class: &Class, shape_key: &str) -> usize {
    let labels: usize = class
        .labels
        .iter()
        .map(|(k, v)| k.len() + v.len() + 6)
        .sum();
    if 6 * (labels + shape_key.len()) <= MAX_CLASS_BYTES {
        return labels + shape_key.len();
    }
    class.key().len()
}

/// The first label key whose value `class` has otherwise than `ids` (`None`: the same labels).
fn changed_label<'a>(
    strings: &'a Interner,
    ids: &[(Sym, Sym)],
    class: &'a Class,
) -> Option<&'a str> {
    let mut held = ids.iter().map(|&(k, v)| (strings.text(k), strings.text(v)));
    let mut now = class.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    loop {
        match (held.next(), now.next()) {
            (None, None) => return None,
            (Some(a), Some(b)) if a == b => continue,
            (Some((a, _)), Some((b, _))) => return Some(a.min(b)),
            (Some((k, _)), None) | (None, Some((k, _))) => return Some(k),
        }
    }
}

/// Why `name`'s labels look like a value per update, when `relabels` (its last updates, this
/// one lowest) say so: `changed` names the label that changed now, else the note stays.
fn flapping(
    name: &str,
    relabels: u8,
    changed: Option<&str>,
    said: &Option<String>,
) -> Option<String> {
    let count = relabels.count_ones();
    if count < FLAPPING_UPDATES {
        return None;
    }
    match changed {
        Some(label) => Some(format!(
            "node {name}: its labels changed on {count} of its last {HISTORY} updates (label {label} last): each value is a node class and each change a new view; a label that changes this often belongs to the node, not its class"
        )),
        None => said.clone(),
    }
}

/// Estimated bytes of one node's entry: its name (in the map and its class's set, one
/// allocation counted twice for the hostnames map's share), its problems, the overhead.
fn member_bytes(name: &str, problems: &[String]) -> usize {
    name.len() * 2 + NODE_OVERHEAD + problems.iter().map(String::len).sum::<usize>()
}

/// Estimated bytes of a class of `labels` labels (its strings counted by the interner).
fn class_bytes(labels: usize) -> usize {
    labels * std::mem::size_of::<(Sym, Sym)>() + CLASS_OVERHEAD
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
        assert_eq!(index.sizes().classes, 2);
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
        let (listed, listed_table) = listed.published();
        let (indexed, table) = index.summary(Inventory::default());
        assert_eq!(indexed, listed, "the same summary");
        let classes = |t: &ClassTable| {
            let mut all: Vec<_> = (0..t.len())
                .filter_map(|i| {
                    let labels: Vec<(String, String)> = t
                        .labels(i)
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    let (key, size) = t.class(i)?;
                    Some((labels, key.shape.key().to_string(), size))
                })
                .collect();
            all.sort();
            all
        };
        assert_eq!(classes(&table), classes(&listed_table), "the same classes");
        let hostnames = table.hostnames();
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
        let (s, table) = index.summary(Inventory::default());
        assert_eq!(s["node_count"], 1, "a and b were not listed again: gone");
        let names: Vec<&str> = table.hostnames().keys().map(|n| &**n).collect();
        assert_eq!(names, ["c"]);
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

    /// Node `name` with extra labels `labels`.
    fn labelled(name: &str, labels: &[(String, String)]) -> NodeFacts {
        let mut n = node(name, "8", json!({}));
        if let Some(map) = n.metadata.labels.as_mut() {
            map.extend(labels.iter().cloned());
        }
        n
    }

    fn problems(index: &NodeIndex) -> Vec<String> {
        let s = summary(index);
        let list = s["problems"].as_array().cloned().unwrap_or_default();
        list.iter()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect()
    }

    #[test]
    fn a_value_shared_by_every_node_is_kept_once_whatever_the_classes() {
        let shared = ("example.com/image".to_string(), "x".repeat(63));
        let mut index = NodeIndex::new(usize::MAX);
        for i in 0..1_000 {
            let own = ("example.com/rack".to_string(), format!("rack-{i}"));
            index.apply(&labelled(&format!("n{i}"), &[shared.clone(), own]));
        }
        assert_eq!(index.sizes().classes, 1_000, "a class per node");
        // Keys: pool, image, rack; values: p1, the image, 1,000 racks.
        assert_eq!(index.strings.len(), 3 + 2 + 1_000);
        let table = index.summary(Inventory::default()).1;
        let image = (0..table.len()).filter_map(|i| table.label(i, "example.com/image"));
        assert!(image.clone().all(|v| v == shared.1) && image.count() == 1_000);
        // Every class gone, every string and shape gone.
        for i in 0..1_000 {
            index.delete(&format!("n{i}"));
        }
        assert_eq!((index.strings.len(), index.strings.bytes()), (0, 0));
        assert_eq!(index.sizes().bytes, 0);
    }

    #[test]
    fn a_label_changing_on_every_update_is_named_and_grows_nothing() {
        let mut index = NodeIndex::new(usize::MAX);
        index.apply(&labelled("steady", &[]));
        let beat = |i: usize| labelled("a", &[("example.com/build".into(), format!("b{i:03}"))]);
        assert!(index.apply(&beat(0)));
        let held = (index.strings.len(), index.sizes().bytes);
        for i in 1..100 {
            assert!(index.apply(&beat(i)), "a new value is a new class");
        }
        assert_eq!(
            (index.strings.len(), index.sizes().bytes),
            held,
            "old values freed"
        );
        assert_eq!(index.sizes().classes, 2);
        let said = problems(&index);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with(
                "node a: its labels changed on 8 of its last 8 updates (label example.com/build last)"
            ),
            "{said:?}"
        );
        // Once it stops changing, the note goes with the changes it counted.
        let quiet = (0..8).map(|_| index.apply(&beat(99))).collect::<Vec<_>>();
        assert_eq!(
            quiet.iter().filter(|&&c| c).count(),
            1,
            "said once, gone once"
        );
        assert!(problems(&index).is_empty());
        // A relabel once per node (a rolling upgrade) is not a value per update.
        index.apply(&labelled("steady", &[("k".into(), "v".into())]));
        assert!(problems(&index).is_empty());
    }

    #[test]
    fn nodes_of_500_labels_each_a_class_stop_at_the_bound_and_say_so() {
        let labels = |i: usize| -> Vec<(String, String)> {
            (0..500)
                .map(|l| (format!("example.com/feature-{l}"), format!("{i:05}{l:058}")))
                .collect()
        };
        let bound = 4 << 20;
        let mut index = NodeIndex::new(bound);
        for i in 0..400 {
            index.apply(&labelled(&format!("n{i}"), &labels(i)));
        }
        let sizes = index.sizes();
        assert!(sizes.nodes > 0 && sizes.left_out > 0, "{sizes:?}");
        assert_eq!(sizes.nodes + sizes.left_out, 400);
        assert!(sizes.bytes <= bound, "{sizes:?}");
        let why = index.incomplete().expect("says so");
        assert!(
            why.contains(&format!("leaves {} of 400 nodes out", sizes.left_out)),
            "{why}"
        );
        // The 500 keys are held once, not once per class; the values once each.
        assert_eq!(index.strings.len(), 501 + 1 + 500 * sizes.nodes);
    }

    #[test]
    fn a_table_gives_each_class_its_labels_and_each_node_its_class() {
        let mut index = NodeIndex::new(usize::MAX);
        let rack = |r: &str| vec![("example.com/rack".to_string(), r.to_string())];
        index.apply(&labelled("a", &rack("r0")));
        index.apply(&labelled("b", &rack("r1")));
        index.apply(&labelled("c", &rack("r1")));
        let (_, table) = index.summary(Inventory::default());
        assert_eq!(table.len(), 2);
        let class_of = |n: &str| table.hostnames().get(n).copied();
        assert_eq!(class_of("b"), class_of("c"));
        let b = class_of("b").unwrap_or(usize::MAX);
        assert_eq!(table.label(b, "example.com/rack"), Some("r1"));
        assert_eq!(table.class(b).map(|(_, size)| size), Some(2));
        let labels: Vec<(&str, &str)> = table.labels(b).collect();
        assert_eq!(
            labels,
            [("example.com/rack", "r1"), ("pool", "p1")],
            "sorted by key"
        );
    }
}
