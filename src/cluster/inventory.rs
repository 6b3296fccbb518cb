//! The cluster inventory as policies see it (`data.cluster`): schedulable Nodes grouped into
//! *node classes* (same labels apart from per-node ones, same taints, same extended
//! resources), per-resource capacity, and Volcano Queues.
//!
//! Entry point: [`Inventory::summary`]. Grouping keeps policies cheap on big clusters: a
//! 5,000-node cluster is usually a handful of classes (GPU model × pool), so a policy walks
//! classes, not nodes. The per-node names stay in each class, for `kubernetes.io/hostname`
//! selectors.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{json, Map, Value};

use crate::controller::quantity::Nanos;

/// Taints that report a node's passing condition (not-ready, unreachable, pressure), set and
/// cleared by the node lifecycle controller: they say nothing about what the node can hold
/// once it recovers, so a gang is not refused for a node that is rebooting.
const CONDITION_TAINT_PREFIX: &str = "node.kubernetes.io/";
/// Labels that name one node rather than a class of nodes.
const PER_NODE_LABELS: &[&str] = &["kubernetes.io/hostname"];
/// The NVIDIA GPU Operator's label for the device plugin's MIG strategy.
pub const MIG_STRATEGY_LABEL: &str = "nvidia.com/mig.strategy";
const NANO: i128 = 1_000_000_000;

/// What the cluster has, as read (from a watch cache or a snapshot file).
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub nodes: Vec<Node>,
    /// Volcano `Queue` objects, as JSON; `None` when the Queue CRD is not installed.
    pub volcano_queues: Option<Vec<Value>>,
    /// Kueue `ClusterQueue` and `LocalQueue` objects; `None` when their CRDs are not installed.
    pub kueue_cluster_queues: Option<Vec<Value>>,
    pub kueue_local_queues: Option<Vec<Value>>,
    /// Whether `scheduling.k8s.io/v1alpha2` podgroups are served (Kubernetes' native gang,
    /// see [`discovery`](super::discovery)); `None` when nobody asked or the answer is unknown.
    pub native_gang_api: Option<bool>,
    /// Where it came from: `cluster` or the snapshot's path.
    pub source: String,
    /// Why the view may be out of date (the watch is failing), if it may.
    pub stale: Option<String>,
}

impl Inventory {
    /// `data.cluster`: see `policies/README.md` ("Cluster inventory") for the shape.
    pub fn summary(&self) -> Value {
        let mut problems = Vec::new();
        let mut classes: BTreeMap<String, Class> = BTreeMap::new();
        let mut unschedulable = 0;
        for node in &self.nodes {
            let Some(class) = Class::of(node, &mut problems) else {
                unschedulable += 1;
                continue;
            };
            let key = class.key();
            let name = node.metadata.name.clone().unwrap_or_default();
            classes
                .entry(key)
                .or_insert(class)
                .add(name, node, &mut problems);
        }
        let classes: Vec<&Class> = classes.values().collect();
        json!({
            "source": self.source,
            "stale": self.stale.clone().unwrap_or_default(),
            "node_count": self.nodes.len(),
            "unschedulable_nodes": unschedulable,
            "node_classes": classes.iter().map(|c| c.to_json()).collect::<Vec<_>>(),
            "resources": resource_totals(&classes),
            "mig_strategies": mig_strategies(&self.nodes),
            "volcano_queues": self.volcano_queues.as_ref().map(|qs| queues(qs)),
            "kueue": self.kueue(),
            "native_gang_api": self.native_gang_api,
            "problems": problems,
        })
    }
}

impl Inventory {
    /// Kueue's queues, when its CRDs are installed: ClusterQueues with their quota per
    /// resource (summed over flavors) and whether they admit, LocalQueues as
    /// `<namespace>/<name>` → ClusterQueue.
    fn kueue(&self) -> Option<Value> {
        let cluster_queues = self.kueue_cluster_queues.as_ref()?;
        let local_queues: Map<String, Value> = self
            .kueue_local_queues
            .iter()
            .flatten()
            .filter_map(|q| {
                let ns = q.pointer("/metadata/namespace")?.as_str()?;
                let name = q.pointer("/metadata/name")?.as_str()?;
                let target = q.pointer("/spec/clusterQueue")?.as_str()?;
                Some((format!("{ns}/{name}"), Value::from(target)))
            })
            .collect();
        let cluster_queues: Map<String, Value> = cluster_queues
            .iter()
            .filter_map(|q| {
                Some((
                    q.pointer("/metadata/name")?.as_str()?.to_string(),
                    cluster_queue(q),
                ))
            })
            .collect();
        Some(json!({"cluster_queues": cluster_queues, "local_queues": local_queues}))
    }
}

/// One ClusterQueue: `stop_policy`, `cohort`, and per covered resource the nominal quota
/// and the borrowing limit summed over its flavors (`null` borrowing: unlimited in a cohort).
fn cluster_queue(q: &Value) -> Value {
    let mut quota: BTreeMap<String, (i64, Option<i64>)> = BTreeMap::new();
    let groups = q.pointer("/spec/resourceGroups").and_then(Value::as_array);
    for flavor in groups
        .into_iter()
        .flatten()
        .filter_map(|g| g.get("flavors")?.as_array())
        .flatten()
    {
        for r in flavor
            .get("resources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(name) = r.get("name").and_then(Value::as_str) else {
                continue;
            };
            let amount = |field: &str| r.get(field).and_then(|v| quantity_value(v).as_i64());
            let entry = quota.entry(name.to_string()).or_insert((0, Some(0)));
            entry.0 = entry.0.saturating_add(amount("nominalQuota").unwrap_or(0));
            entry.1 = match (entry.1, amount("borrowingLimit")) {
                (Some(sum), Some(n)) => Some(sum.saturating_add(n)),
                _ => None,
            };
        }
    }
    let cohort = q
        .pointer("/spec/cohort")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let resources: Map<String, Value> = quota
        .into_iter()
        .map(|(name, (nominal, borrowing))| {
            // Outside a cohort nothing can be borrowed, whatever the limit says.
            let borrowing = if cohort.is_empty() {
                Some(0)
            } else {
                borrowing
            };
            (
                name,
                json!({"nominal": nominal, "borrowing_limit": borrowing}),
            )
        })
        .collect();
    json!({
        "cohort": cohort,
        "stop_policy": q.pointer("/spec/stopPolicy").and_then(Value::as_str).unwrap_or("None"),
        "resources": resources,
    })
}

/// Nodes that a pod sees alike.
#[derive(Debug, Clone)]
struct Class {
    labels: BTreeMap<String, String>,
    taints: Vec<Value>,
    /// Extended resources (`vendor/name`) per node, whole units.
    extended: BTreeMap<String, i64>,
    names: Vec<String>,
    /// The largest cpu (millicores) and memory (bytes) of one node of the class.
    max_cpu_millis: i64,
    max_memory_bytes: i64,
}

impl Class {
    /// The class of a schedulable node; `None` for a cordoned one.
    fn of(node: &Node, problems: &mut Vec<String>) -> Option<Class> {
        let spec = node.spec.clone().unwrap_or_default();
        if spec.unschedulable == Some(true) {
            return None;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels: BTreeMap<String, String> = node
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, v)| !PER_NODE_LABELS.contains(&k.as_str()) && *v != name)
            .collect();
        let taints = spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            .filter(|t| !t.key.starts_with(CONDITION_TAINT_PREFIX))
            .map(
                |t| json!({"key": t.key, "value": t.value.unwrap_or_default(), "effect": t.effect}),
            )
            .collect();
        let mut extended = BTreeMap::new();
        for (resource, q) in allocatable(node) {
            if resource.contains('/') {
                match whole(&q) {
                    Some(n) => {
                        extended.insert(resource, n);
                    }
                    None => problems.push(format!(
                        "node {name}: allocatable {resource} {:?} is not a whole number; ignored",
                        q.0
                    )),
                }
            }
        }
        Some(Class {
            labels,
            taints,
            extended,
            names: Vec::new(),
            max_cpu_millis: 0,
            max_memory_bytes: 0,
        })
    }

    fn key(&self) -> String {
        json!([self.labels, self.taints, self.extended]).to_string()
    }

    fn add(&mut self, name: String, node: &Node, problems: &mut Vec<String>) {
        let resources = allocatable(node);
        let mut amount = |resource: &str, per_unit: i128| match resources.get(resource) {
            None => 0,
            Some(q) => match Nanos::parse(q) {
                Some(Nanos(n)) => i64::try_from(n / per_unit).unwrap_or(i64::MAX),
                None => {
                    problems.push(format!(
                        "node {name}: allocatable {resource} {:?} is not a quantity; ignored",
                        q.0
                    ));
                    0
                }
            },
        };
        let cpu = amount("cpu", NANO / 1000);
        let memory = amount("memory", NANO);
        self.max_cpu_millis = self.max_cpu_millis.max(cpu);
        self.max_memory_bytes = self.max_memory_bytes.max(memory);
        self.names.push(name);
    }

    fn to_json(&self) -> Value {
        json!({
            "size": self.names.len(),
            "names": self.names,
            "labels": self.labels,
            "taints": self.taints,
            "allocatable": self.extended,
            "max_cpu_millis": self.max_cpu_millis,
            "max_memory_bytes": self.max_memory_bytes,
        })
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
fn mig_strategies(nodes: &[Node]) -> Vec<String> {
    let strategies: std::collections::BTreeSet<String> = nodes
        .iter()
        .filter(|n| n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true))
        .filter_map(|n| n.metadata.labels.as_ref()?.get(MIG_STRATEGY_LABEL).cloned())
        .collect();
    strategies.into_iter().collect()
}

/// Per extended resource over schedulable nodes: the largest per-node amount, the total,
/// and how many nodes have any.
fn resource_totals(classes: &[&Class]) -> Map<String, Value> {
    let mut totals: BTreeMap<&str, (i64, i64, usize)> = BTreeMap::new();
    for class in classes {
        let nodes = class.names.len();
        for (resource, &n) in &class.extended {
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

/// Volcano Queues by name: state (`Open` when the status has none yet), capability and
/// deserved resources as whole units (GPUs) or as written.
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
            });
            Some((name.to_string(), summary))
        })
        .collect()
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
