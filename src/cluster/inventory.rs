//! The cluster inventory as policies see it (`data.cluster`): Nodes grouped into *node
//! classes* (same labels apart from per-node ones, same taints, same allocatable amount of
//! every resource; a cordoned node is a class with the `node.kubernetes.io/unschedulable`
//! taint), per-resource capacity, Volcano and Kueue queues ([`kueue`](super::kueue)), StorageClasses and
//! PriorityClasses.
//!
//! Entry point: [`Inventory::summary`]. Grouping keeps policies cheap on big clusters: a
//! 5,000-node cluster is usually a handful of classes (GPU model × pool), so a policy walks
//! classes, not nodes. The per-node names stay in each class, for `kubernetes.io/hostname`
//! selectors.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{json, Map, Value};

use super::classes::ClassTable;
use super::hypernodes;
use crate::job::quantity::{Nanos, NANO};

/// Taints that report a node's passing condition (not-ready, unreachable, pressure), set and
/// cleared by the node lifecycle controller: they say nothing about what the node can hold
/// once it recovers, so a gang is not refused for a node that is rebooting.
/// Policies do not model them (see policies/README.md, "Cluster inventory").
const CONDITION_TAINT_PREFIX: &str = "node.kubernetes.io/";
/// The taint of a cordoned node (`spec.unschedulable`), kept: kube-scheduler's
/// NodeUnschedulable plugin places a pod that tolerates it there.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
/// Labels that name one node rather than a class of nodes: its hostname, and the time GPU
/// Feature Discovery last labelled it (a value per node that changes on every relabel:
/// kept, it would make every GPU node a class of its own and every relabel a new view).
pub const PER_NODE_LABELS: &[&str] = &["kubernetes.io/hostname", "nvidia.com/gfd.timestamp"];
/// The NVIDIA GPU Operator's label for the device plugin's MIG strategy.
pub const MIG_STRATEGY_LABEL: &str = "nvidia.com/mig.strategy";

/// What the cluster has, as read (from a watch cache or a snapshot file).
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub nodes: Vec<Node>,
    /// Volcano `Queue` objects, as JSON; `None` when the Queue CRD is not installed.
    pub volcano_queues: Option<Vec<Value>>,
    /// Kueue `ClusterQueue`, `LocalQueue`, `Cohort`, `ResourceFlavor` and `Topology` objects
    /// (either served version); each `None` when unknown (CRD not installed, not listable, not in
    /// the snapshot). See [`kueue`](super::kueue).
    pub kueue_cluster_queues: Option<Vec<Value>>,
    pub kueue_local_queues: Option<Vec<Value>>,
    pub kueue_cohorts: Option<Vec<Value>>,
    pub kueue_flavors: Option<Vec<Value>>,
    pub kueue_topologies: Option<Vec<Value>>,
    /// Volcano `HyperNode` objects (network domains); `None` when their CRD is not installed.
    pub hypernodes: Option<Vec<Value>>,
    /// Trainer ClusterTrainingRuntimes and TrainingRuntimes (snapshots only; `serve` keeps
    /// its own runtime catalog); `None` when the snapshot lists none.
    pub trainer_runtimes: Option<Vec<Value>>,
    /// Whether `scheduling.k8s.io/v1alpha2` podgroups are served (Kubernetes' native gang,
    /// see [`discovery`](super::discovery)); `None` when nobody asked or the answer is unknown.
    pub native_gang_api: Option<bool>,
    /// PersistentVolumeClaims (every namespace listed), StorageClasses, NetworkPolicies and
    /// Namespaces, as JSON; each `None` when unknown (not in the snapshot, not listable), so
    /// the policies that read it stay silent rather than find every claim missing.
    pub claims: Option<Vec<Value>>,
    pub storage_classes: Option<Vec<Value>>,
    pub network_policies: Option<Vec<Value>>,
    pub namespaces: Option<Vec<Value>>,
    /// PriorityClasses, as JSON ([`priority_classes`](super::priority_classes)); `None` when
    /// unknown, and the `priority` policy then judges by its parameters alone.
    pub priority_classes: Option<Vec<Value>>,
    /// Items of the source that could not be read: left out, and said here.
    pub notes: Vec<String>,
    /// Where it came from: `cluster` or the snapshot's path.
    pub source: String,
    /// Why the view may be out of date (the watch is failing), if it may.
    pub stale: Option<String>,
    /// Why the view leaves nodes out (the inventory reached its memory bound), if it does:
    /// capacity is then unknown, and the capacity policy warns instead of refusing.
    pub incomplete: Option<String>,
}

impl Inventory {
    /// `data.cluster` as a report shows it (`check --cluster`, tests): see
    /// `policies/README.md` ("Cluster inventory") for the shape. Its node classes list their
    /// labels and node names; policies read the compact form instead ([`Inventory::published`]).
    pub fn summary(&self) -> Value {
        let (classes, problems) = self.grouped();
        let table = ClassTable::of_classes(classes.values());
        let node_classes = classes.values().map(Class::to_json).collect();
        let facts: Vec<ClassFacts> = classes.values().map(Class::facts).collect();
        let mut summary = self.summary_of(&facts, Some(node_classes), problems);
        self.add_hypernodes(&mut summary, &table);
        summary
    }

    /// What a published view holds: the summary without its node classes, and the classes
    /// as a [`ClassTable`] (what [`view::project`](super::view::project) reads).
    pub fn published(&self) -> (Value, ClassTable) {
        let (classes, problems) = self.grouped();
        let table = ClassTable::of_classes(classes.values());
        let mut summary = self.summary_of(&table_facts(&table), None, problems);
        self.add_hypernodes(&mut summary, &table);
        (summary, table)
    }

    /// The nodes grouped into classes (by key), with what could not be read of them.
    fn grouped(&self) -> (BTreeMap<String, Class>, Vec<String>) {
        let mut problems = self.notes.clone();
        let mut classes: BTreeMap<String, Class> = BTreeMap::new();
        for node in &self.nodes {
            let class = Class::of(node, &mut problems);
            let key = class.key();
            let name = node.metadata.name.clone().unwrap_or_default();
            let class = classes.entry(key).or_insert(class);
            class.names.push(name);
            class.size += 1;
        }
        (classes, problems)
    }

    /// `hypernodes` in `summary` (see [`hypernodes`](super::hypernodes)): `null` without the
    /// CRD; the HyperNodes left out are said in its `problems`.
    pub(super) fn add_hypernodes(&self, summary: &mut Value, table: &ClassTable) {
        let Some(items) = self.hypernodes.as_deref() else {
            summary["hypernodes"] = Value::Null;
            return;
        };
        let mut problems = Vec::new();
        let resolved = {
            let nodes = hypernodes::node_labels(table);
            hypernodes::resolve(items, &nodes, &mut problems)
        };
        summary["hypernodes"] = Value::Object(resolved);
        if let Some(list) = summary["problems"].as_array_mut() {
            list.extend(problems.into_iter().map(Value::from));
        }
    }

    /// The summary of nodes already grouped into classes (`facts`; the watch keeps them so,
    /// [`NodeIndex`](super::nodes::NodeIndex)), listing `node_classes` when given (a
    /// report's); `self.nodes` is not read.
    pub(super) fn summary_of(
        &self,
        classes: &[ClassFacts],
        node_classes: Option<Vec<Value>>,
        mut problems: Vec<String>,
    ) -> Value {
        let priority_classes = self
            .priority_classes
            .as_deref()
            .map(|items| super::priority_classes::summary(items, &mut problems));
        let kueue = super::kueue::summary(&self.kueue_objects(), &mut problems);
        let node_count: usize = classes.iter().map(|c| c.size).sum();
        let unschedulable: usize = classes.iter().filter(|c| c.cordoned).map(|c| c.size).sum();
        let mut summary = json!({
            "source": self.source,
            "stale": self.stale.clone().unwrap_or_default(),
            "incomplete": self.incomplete.clone().unwrap_or_default(),
            "node_count": node_count,
            "unschedulable_nodes": unschedulable,
            "node_classes": node_classes,
            "resources": resource_totals(classes),
            "offered_resources": offered_resources(classes),
            "mig_strategies": mig_strategies(classes),
            "volcano_queues": self.volcano_queues.as_ref().map(|qs| queues(qs)),
            "kueue": kueue,
            "hypernodes": Value::Null,
            "native_gang_api": self.native_gang_api,
            "storage_classes": self.storage_classes.as_deref().map(storage_classes),
            "priority_classes": priority_classes,
            "problems": problems,
        });
        if summary["node_classes"].is_null() {
            // Not kept in a published view: its projections list the classes they need.
            summary.as_object_mut().map(|s| s.remove("node_classes"));
        }
        summary
    }
}

/// What the summary's totals read of a class.
pub(super) struct ClassFacts<'a> {
    pub size: usize,
    pub cordoned: bool,
    pub allocatable: &'a BTreeMap<String, i64>,
    pub mig_strategy: Option<&'a str>,
}

impl ClassFacts<'_> {
    /// Extended resources (`vendor/name`) per node.
    fn extended(&self) -> impl Iterator<Item = (&String, &i64)> {
        self.allocatable.iter().filter(|(r, _)| r.contains('/'))
    }
}

/// The facts of a table's classes.
pub(super) fn table_facts(table: &ClassTable) -> Vec<ClassFacts<'_>> {
    let mig = table.id_of(MIG_STRATEGY_LABEL);
    table
        .classes()
        .enumerate()
        .map(|(i, (key, size))| ClassFacts {
            size,
            cordoned: key.shape.cordoned,
            allocatable: &key.shape.allocatable,
            mig_strategy: mig.and_then(|mig| table.value_of(i, mig)),
        })
        .collect()
}

impl Inventory {
    /// The namespaced lists, for [`Objects::index`](super::objects::Objects::index).
    pub fn lists(&self) -> super::objects::Lists<'_> {
        super::objects::Lists {
            claims: self.claims.as_deref(),
            network_policies: self.network_policies.as_deref(),
            namespaces: self.namespaces.as_deref(),
        }
    }

    /// Kueue's objects, for [`kueue::summary`](super::kueue::summary).
    fn kueue_objects(&self) -> super::kueue::Objects<'_> {
        super::kueue::Objects {
            cluster_queues: self.kueue_cluster_queues.as_deref(),
            local_queues: self.kueue_local_queues.as_deref(),
            cohorts: self.kueue_cohorts.as_deref(),
            flavors: self.kueue_flavors.as_deref(),
            topologies: self.kueue_topologies.as_deref(),
        }
    }
}

/// Nodes that a pod sees alike: same labels (less per-node ones), same taints, and the same
/// allocatable amount of every resource, so a class's allocatable is exact for each node in
/// it (a pod fits one node of a class exactly when it fits all of them).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Class {
    pub(super) labels: BTreeMap<String, String>,
    pub(super) taints: Vec<Value>,
    /// Allocatable per node: cpu in millicores, extended resources (`vendor/name`) in whole
    /// units, every other resource (memory, pods, ephemeral-storage, hugepages-*) in units
    /// (bytes), as kube-scheduler's NodeInfo counts them.
    pub(super) allocatable: BTreeMap<String, i64>,
    /// Cordoned (`spec.unschedulable`): the class carries the taint
    /// `node.kubernetes.io/unschedulable:NoSchedule`, which kube-scheduler's NodeUnschedulable
    /// plugin lets a pod tolerate, and is left out of the resource totals.
    pub(super) cordoned: bool,
    /// PreferNoSchedule taints: no filter, but kube-scheduler's TaintToleration scores a node
    /// lower for each one a pod does not tolerate (the placement search reads them).
    pub(super) preferred_taints: Vec<Value>,
    /// The nodes' names: listed by [`Inventory::summary`] (snapshots); the watch keeps
    /// them in its index instead, and leaves this empty.
    pub(super) names: Vec<String>,
    /// How many nodes the class has.
    pub(super) size: usize,
}

impl Class {
    /// The class of `node`, with the malformed quantities it has reported in `problems`.
    pub(super) fn of(node: &Node, problems: &mut Vec<String>) -> Class {
        let spec = node.spec.clone().unwrap_or_default();
        let cordoned = spec.unschedulable == Some(true);
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels: BTreeMap<String, String> = node
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, v)| !PER_NODE_LABELS.contains(&k.as_str()) && *v != name)
            .collect();
        let all_taints = spec.taints.unwrap_or_default();
        let mut preferred_taints: Vec<Value> = all_taints
            .iter()
            .filter(|t| t.effect == "PreferNoSchedule")
            .map(|t| json!({"key": t.key, "value": t.value.clone().unwrap_or_default(), "effect": t.effect}))
            .collect();
        preferred_taints.sort_by_key(Value::to_string);
        preferred_taints.dedup();
        let mut taints: Vec<Value> = all_taints
            .into_iter()
            .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            .filter(|t| t.key == UNSCHEDULABLE_TAINT || !t.key.starts_with(CONDITION_TAINT_PREFIX))
            .map(
                |t| json!({"key": t.key, "value": t.value.unwrap_or_default(), "effect": t.effect}),
            )
            .collect();
        let cordon = json!({"key": UNSCHEDULABLE_TAINT, "value": "", "effect": "NoSchedule"});
        if cordoned && !taints.contains(&cordon) {
            taints.push(cordon);
        }
        taints.sort_by_key(Value::to_string);
        taints.dedup();
        let resources = allocatable(node);
        let mut allocatable = BTreeMap::new();
        // Extended resources first: their problems were reported first before cpu and
        // memory were counted, and the messages keep that order.
        let (extended, standard): (Vec<_>, Vec<_>) =
            resources.iter().partition(|(r, _)| r.contains('/'));
        for (resource, q) in extended {
            match whole(q) {
                Some(n) => {
                    allocatable.insert(resource.clone(), n);
                }
                None => problems.push(format!(
                    "node {name}: allocatable {resource} {:?} is not a whole number; ignored",
                    q.0
                )),
            }
        }
        for (resource, q) in standard {
            let per_unit = if resource == "cpu" { NANO / 1000 } else { NANO };
            match Nanos::parse(q).filter(|n| n.0 >= 0) {
                Some(Nanos(n)) => {
                    let units = i64::try_from(n / per_unit + i128::from(n % per_unit != 0))
                        .unwrap_or(i64::MAX);
                    allocatable.insert(resource.clone(), units);
                }
                None => problems.push(format!(
                    "node {name}: allocatable {resource} {:?} is not a quantity; ignored",
                    q.0
                )),
            }
        }
        Class {
            labels,
            taints,
            allocatable,
            cordoned,
            preferred_taints,
            names: Vec::new(),
            size: 0,
        }
    }

    pub(super) fn key(&self) -> String {
        json!([
            self.labels,
            self.taints,
            self.allocatable,
            self.preferred_taints
        ])
        .to_string()
    }

    fn facts(&self) -> ClassFacts<'_> {
        ClassFacts {
            size: self.size,
            cordoned: self.cordoned,
            allocatable: &self.allocatable,
            mig_strategy: self.labels.get(MIG_STRATEGY_LABEL).map(String::as_str),
        }
    }

    fn to_json(&self) -> Value {
        let amount = |r: &str| self.allocatable.get(r).copied().unwrap_or(0);
        let mut doc = json!({
            "size": self.size,
            "labels": self.labels,
            "taints": self.taints,
            "allocatable": self.allocatable,
            "max_cpu_millis": amount("cpu"),
            "max_memory_bytes": amount("memory"),
        });
        if !self.names.is_empty() {
            doc["names"] = json!(self.names);
        }
        if !self.preferred_taints.is_empty() {
            doc["preferred_taints"] = json!(self.preferred_taints);
        }
        doc
    }
}

fn allocatable(node: &Node) -> BTreeMap<String, Quantity> {
    let status = node.status.as_ref();
    status
        .and_then(|s| s.allocatable.clone().or_else(|| s.capacity.clone()))
        .unwrap_or_default()
}

/// A quantity that is a whole number of units (extended resources always are).
fn whole(q: &Quantity) -> Option<i64> {
    let Nanos(n) = Nanos::parse(q)?;
    (n % NANO == 0 && n >= 0).then(|| i64::try_from(n / NANO).ok())?
}

/// The MIG strategies schedulable nodes report (label `nvidia.com/mig.strategy`), sorted.
fn mig_strategies(classes: &[ClassFacts]) -> Vec<String> {
    let strategies: std::collections::BTreeSet<String> = classes
        .iter()
        .filter(|c| !c.cordoned && c.size > 0)
        .filter_map(|c| c.mig_strategy.map(str::to_string))
        .collect();
    strategies.into_iter().collect()
}

/// Extended resources some node offers, cordoned ones included (a pod may tolerate the
/// cordon): resource -> true, so a policy tests one name in one lookup.
fn offered_resources(classes: &[ClassFacts]) -> Map<String, Value> {
    classes
        .iter()
        .filter(|c| c.size > 0)
        .flat_map(|c| c.extended())
        .filter(|(_, &n)| n > 0)
        .map(|(r, _)| (r.clone(), Value::Bool(true)))
        .collect()
}

/// Per extended resource over schedulable (not cordoned) nodes: the largest per-node amount, the total,
/// and how many nodes have any.
fn resource_totals(classes: &[ClassFacts]) -> Map<String, Value> {
    let mut totals: BTreeMap<&str, (i64, i64, usize)> = BTreeMap::new();
    for class in classes.iter().filter(|c| !c.cordoned) {
        let nodes = class.size;
        for (resource, &n) in class.extended() {
            let entry = totals.entry(resource).or_default();
            entry.0 = entry.0.max(n);
            let count = i64::try_from(nodes).unwrap_or(i64::MAX);
            entry.1 = entry.1.saturating_add(n.saturating_mul(count));
            entry.2 += if n > 0 { nodes } else { 0 };
        }
    }
    totals
        .into_iter()
        .map(|(r, (max, total, nodes))| {
            let summary = json!({"max_per_node": max, "total": total, "nodes": nodes});
            (r.to_string(), summary)
        })
        .collect()
}

/// Volcano Queues by name: state (`Open` when the status has none yet), capability,
/// deserved and guarantee resources as whole units (GPUs) or as written.
fn queues(items: &[Value]) -> Map<String, Value> {
    items
        .iter()
        .filter_map(|q| {
            let name = q.pointer("/metadata/name")?.as_str()?;
            let state = q
                .pointer("/status/state")
                .and_then(Value::as_str)
                .unwrap_or("Open");
            let resources = |field: &str| -> Map<String, Value> {
                let map = q
                    .pointer(&format!("/spec/{field}"))
                    .and_then(Value::as_object);
                map.into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), quantity_value(v)))
                    .collect()
            };
            let summary = json!({
                "state": state,
                "capability": resources("capability"),
                "deserved": resources("deserved"),
                // Volcano's proportion plugin takes every queue's guarantee out of what
                // the others may hold (policies/volcano_queue.rego).
                "guarantee": resources("guarantee/resource"),
            });
            Some((name.to_string(), summary))
        })
        .collect()
}

/// The annotation that makes a StorageClass the one a claim without `storageClassName`
/// gets (and its beta spelling, still honoured by the API server).
const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

/// StorageClasses: each one's provisioner, and the default class (`""` when none). With
/// several defaults the API server gives new claims the newest, and so does this.
fn storage_classes(items: &[Value]) -> Value {
    let text = |item: &Value, field: &str| {
        item.pointer(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut default: Option<(String, String)> = None;
    let mut classes = Map::new();
    for item in items {
        let name = text(item, "/metadata/name");
        let is_default = DEFAULT_CLASS_ANNOTATIONS.iter().any(|a| {
            let annotation = item
                .pointer("/metadata/annotations")
                .and_then(|m| m.get(*a));
            annotation.and_then(Value::as_str) == Some("true")
        });
        if is_default {
            let created = text(item, "/metadata/creationTimestamp");
            if default.as_ref().is_none_or(|(at, _)| created >= *at) {
                default = Some((created, name.clone()));
            }
        }
        let provisioner = text(item, "/provisioner");
        classes.insert(name, json!({"provisioner": provisioner}));
    }
    let default = default.map(|(_, name)| name).unwrap_or_default();
    json!({"default": default, "classes": classes})
}

/// A resource amount as a number when it is a whole number of units, else as written.
fn quantity_value(v: &Value) -> Value {
    let text = match v {
        Value::Number(n) => return Value::Number(n.clone()),
        Value::String(s) => s,
        _ => return v.clone(),
    };
    whole(&Quantity(text.clone())).map_or_else(|| v.clone(), Value::from)
}
