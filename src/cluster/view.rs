//! `data.cluster` as one request's policies need it: node classes told apart only by the
//! labels the job's nodeSelectors name.
//!
//! A published inventory keeps every label (less the hostname) in its classes, so a
//! 5,000-node cluster with a `rack` label is 250 classes, and one with a label unique to
//! each node is 5,000. A job that selects only on `nvidia.com/gpu.product` cannot tell those
//! apart: merging classes that agree on the selected labels, the taints and the extended
//! resources gives the policies the same answers from a handful of classes. A
//! `kubernetes.io/hostname` selector singles out just the nodes it names. Projections are
//! cached per selector shape for the life of the inventory.
//!
//! Entry points: [`Projection::of`] (from the request's input) and [`project`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::classes::{ClassTable, Shape};
use super::labels::Sym;

use regorus::Value as RegoValue;
use serde_json::{json, Map, Value};

const HOSTNAME: &str = "kubernetes.io/hostname";

/// Labels kept in every projection, whatever the job selects: how a node shares its GPUs,
/// which the `gpu_sharing` policy reads (GPU Feature Discovery's, GKE's, and per MIG profile
/// `nvidia.com/mig-<profile>.replicas` / `.sharing-strategy`).
const SHARING_LABELS: [&str; 4] = [
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "cloud.google.com/gke-gpu-sharing-strategy",
    "cloud.google.com/gke-max-shared-clients-per-gpu",
];

/// The GPU product label: kept when GPU Feature Discovery marks it shared (`-SHARED`, time
/// slicing without renaming).
const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// Whether a projection keeps label `k`, whatever its value, though no nodeSelector names
/// it (the GPU product is kept by value: see [`Kept`]).
fn always_kept_key(k: &str) -> bool {
    SHARING_LABELS.contains(&k)
        || (k.starts_with("nvidia.com/mig-")
            && (k.ends_with(".replicas") || k.ends_with(".sharing-strategy")))
}

/// Node name → the index of its class in the summary's `node_classes`.
pub type Hostnames = HashMap<Arc<str>, usize>;

/// What a request's nodeSelectors look at: the label keys, and the hostnames they name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Projection {
    keys: BTreeSet<String>,
    hostnames: BTreeSet<String>,
}

impl Projection {
    /// From the policy input: `input.job.replicas[*].nodeSelector`.
    pub fn of(input: &RegoValue) -> Projection {
        let mut p = Projection::default();
        let replicas = field(input, "job").and_then(|j| field(j, "replicas"));
        let Some(Ok(replicas)) = replicas.map(RegoValue::as_array) else {
            return p;
        };
        for replica in replicas.iter() {
            let Some(Ok(selector)) = field(replica, "nodeSelector").map(RegoValue::as_object)
            else {
                continue;
            };
            for (k, v) in selector.iter() {
                let (Ok(k), Ok(v)) = (k.as_string(), v.as_string()) else {
                    continue;
                };
                if k.as_ref() == HOSTNAME {
                    p.hostnames.insert(v.to_string());
                } else {
                    p.keys.insert(k.to_string());
                }
            }
        }
        p
    }
}

impl Projection {
    /// For a job queued with Kueue (label `kueue.x-k8s.io/queue-name`), also the label keys of
    /// Kueue's ResourceFlavors in `summary`: the flavor Kueue admits the job into adds its
    /// node labels to the pods' nodeSelector, and the `kueue_queue` policy asks which nodes
    /// each flavor's labels select. When a pod set asks for a topology domain, also the level
    /// keys of the flavors' Topologies: the policy groups nodes into domains by them.
    pub fn with_flavor_labels(mut self, input: &RegoValue, summary: &Value) -> Projection {
        let labels = field(input, "object")
            .and_then(|o| field(o, "metadata"))
            .and_then(|m| field(m, "labels"));
        if labels.and_then(|l| field(l, KUEUE_QUEUE_LABEL)).is_none() {
            return self;
        }
        let flavors = summary.pointer("/kueue/flavors").and_then(Value::as_object);
        for flavor in flavors.into_iter().flatten().map(|(_, f)| f) {
            let labels = flavor["node_labels"].as_object();
            for (k, v) in labels.into_iter().flatten() {
                match (k.as_str(), v.as_str()) {
                    (HOSTNAME, Some(host)) => self.hostnames.insert(host.to_string()),
                    _ => self.keys.insert(k.clone()),
                };
            }
            if asks_topology(input) {
                self.keys.extend(topology_levels(flavor, summary));
            }
        }
        self
    }
}

/// Kueue's annotations by which a pod set asks for one domain of a topology level.
const TOPOLOGY_ANNOTATIONS: [&str; 2] = [
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
];

/// Whether some replica's pod template asks for a topology domain.
fn asks_topology(input: &RegoValue) -> bool {
    let replicas = field(input, "job").and_then(|j| field(j, "replicas"));
    let Some(Ok(replicas)) = replicas.map(RegoValue::as_array) else {
        return false;
    };
    replicas.iter().any(|r| {
        let annotations = field(r, "annotations");
        TOPOLOGY_ANNOTATIONS
            .iter()
            .any(|a| annotations.and_then(|m| field(m, a)).is_some())
    })
}

/// The level keys of the Topology `flavor` names, but the hostname (every node is a domain
/// of its own there, whatever the classes merge).
fn topology_levels(flavor: &Value, summary: &Value) -> Vec<String> {
    let name = flavor["topology_name"].as_str().unwrap_or_default();
    let topology = summary
        .pointer("/kueue/topologies")
        .and_then(|t| t.get(name));
    let levels = topology.and_then(|t| t["levels"].as_array());
    levels
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|k| *k != HOSTNAME)
        .map(str::to_string)
        .collect()
}

/// The label that queues a job with Kueue.
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

pub(super) fn field<'a>(v: &'a RegoValue, name: &str) -> Option<&'a RegoValue> {
    v.as_object().ok()?.get(&RegoValue::from(name))
}

/// `summary` with the node classes of `table` merged as `p` sees them (and without node
/// names), in `node_classes` and in each HyperNode's.
pub fn project(summary: &Value, p: &Projection, table: &ClassTable) -> Value {
    let mut picked: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for host in &p.hostnames {
        if let Some(&i) = table.hostnames().get(host.as_str()) {
            picked.entry(i).or_default().push(host);
        }
    }
    let mut members = Members::new();
    for (i, (_, size)) in table.classes().enumerate() {
        let hosts = picked.remove(&i).unwrap_or_default();
        let rest = size.saturating_sub(hosts.len());
        members.insert(i, (hosts, rest));
    }
    let keep = Kept::of(table, p);
    let mut out = Map::new();
    for (k, v) in summary.as_object().into_iter().flatten() {
        if k != "node_classes" && k != "hypernodes" {
            out.insert(k.clone(), v.clone());
        }
    }
    out.insert(
        "node_classes".into(),
        Value::Array(merged(table, members, &keep)),
    );
    out.insert(
        "hypernodes".into(),
        project_hypernodes(&summary["hypernodes"], table, p, &keep),
    );
    Value::Object(out)
}

/// Which labels a projection keeps, told once per distinct string rather than per class.
struct Kept {
    /// By key id: kept whatever its value.
    keys: Vec<bool>,
    /// The id of `nvidia.com/gpu.product`, kept when its value says shared.
    product: Option<Sym>,
}

impl Kept {
    fn of(table: &ClassTable, p: &Projection) -> Kept {
        let strings = table.strings();
        let keys = strings
            .iter()
            .map(|k| p.keys.contains(&**k) || always_kept_key(k))
            .collect();
        let product = strings.iter().position(|k| &**k == PRODUCT_LABEL);
        Kept {
            keys,
            product: product.and_then(|i| Sym::try_from(i).ok()),
        }
    }

    fn keeps(&self, table: &ClassTable, (k, v): (Sym, Sym)) -> bool {
        self.keys.get(k as usize).copied().unwrap_or(false)
            || (Some(k) == self.product && table.text(v).ends_with("-SHARED"))
    }
}

/// Each HyperNode with its nodes as merged classes (`node_classes`, as `project` merges the
/// cluster's) and their count (`node_count`) in place of their names; `null` stays `null`.
fn project_hypernodes(
    hypernodes: &Value,
    table: &ClassTable,
    p: &Projection,
    keep: &Kept,
) -> Value {
    let Some(hypernodes) = hypernodes.as_object() else {
        return Value::Null;
    };
    let mut out = Map::new();
    for (name, hn) in hypernodes {
        // Per class of the cluster: the HyperNode's nodes in it that a selector names, and
        // how many others.
        let mut by_class = Members::new();
        let names = hn["nodes"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for node in names.iter().filter_map(Value::as_str) {
            let Some(&i) = table.hostnames().get(node) else {
                continue;
            };
            let entry = by_class.entry(i).or_default();
            if p.hostnames.contains(node) {
                entry.0.push(node);
            } else {
                entry.1 += 1;
            }
        }
        out.insert(
            name.clone(),
            json!({
                "tier": hn["tier"],
                "tier_name": hn["tier_name"],
                "node_count": names.len(),
                "node_classes": merged(table, by_class, keep),
            }),
        );
    }
    Value::Object(out)
}

/// Per class index: the nodes in it that a selector names, and how many others.
type Members<'a> = BTreeMap<usize, (Vec<&'a str>, usize)>;

/// Nodes that look alike to a projection: the labels it keeps (ids), the one named node if
/// any, the shape.
type Merge<'a> = (Vec<(Sym, Sym)>, Option<&'a str>, *const Shape);

/// The classes of `members`, merged as `keep` sees them: a named node alone, the rest
/// together. Classes are grouped by ids first (no JSON per class), then each group rendered
/// once; groups whose JSON is the same merge, in the order of their JSON.
fn merged(table: &ClassTable, members: Members, keep: &Kept) -> Vec<Value> {
    let mut groups: HashMap<Merge, (Arc<Shape>, usize)> = HashMap::new();
    for (i, (picked, rest)) in members {
        let Some((class, _)) = table.class(i) else {
            continue;
        };
        let kept: Vec<(Sym, Sym)> = class
            .labels
            .iter()
            .copied()
            .filter(|&l| keep.keeps(table, l))
            .collect();
        let shape = Arc::as_ptr(&class.shape);
        let sizes = picked.into_iter().map(|h| (Some(h), 1));
        for (host, size) in sizes.chain((rest > 0).then_some((None, rest))) {
            let entry = groups
                .entry((kept.clone(), host, shape))
                .or_insert_with(|| (class.shape.clone(), 0));
            entry.1 += size;
        }
    }
    let mut merged: BTreeMap<String, Value> = BTreeMap::new();
    for ((labels, host, _), (shape, size)) in groups {
        let mut labels: Map<String, Value> = labels
            .iter()
            .map(|&(k, v)| (table.text(k).to_string(), Value::from(table.text(v))))
            .collect();
        if let Some(host) = host {
            labels.insert(HOSTNAME.to_string(), Value::from(host));
        }
        add(&mut merged, labels, &shape, size);
    }
    merged.into_values().collect()
}

/// Adds `size` nodes with `labels` and `shape` to the merged classes.
fn add(
    merged: &mut BTreeMap<String, Value>,
    labels: Map<String, Value>,
    shape: &Shape,
    size: usize,
) {
    let preferred = &shape.preferred_taints;
    let allocatable = &shape.allocatable_json;
    let key = json!([labels, shape.taints, allocatable, preferred]).to_string();
    let entry = merged.entry(key).or_insert_with(|| {
        let mut doc = json!({
            "size": 0, "labels": labels, "taints": shape.taints, "allocatable": allocatable,
            "max_cpu_millis": 0, "max_memory_bytes": 0,
        });
        if !preferred.is_null() {
            doc["preferred_taints"] = preferred.clone();
        }
        doc
    });
    let grow = |entry: &mut Value, field: &str, v: i64, sum: bool| {
        let have = entry[field].as_i64().unwrap_or(0);
        entry[field] = Value::from(if sum {
            have.saturating_add(v)
        } else {
            have.max(v)
        });
    };
    grow(entry, "size", i64::try_from(size).unwrap_or(i64::MAX), true);
    grow(entry, "max_cpu_millis", shape.amount("cpu"), false);
    grow(entry, "max_memory_bytes", shape.amount("memory"), false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::to_rego::to_rego;

    /// Two nodes that differ only by `pool`, the label of Kueue's flavor `a100`.
    fn published() -> (Value, ClassTable) {
        let node = |name: &str, pool: &str| {
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"pool": pool}},
                "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
        };
        let flavor = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "a100"}, "spec": {"nodeLabels": {"pool": "a100"}}});
        // Kueue is known to the inventory once its ClusterQueues are listed.
        let queue = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "gpus"}, "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}});
        let items = vec![node("n1", "a100"), node("n2", "h100"), flavor, queue];
        let inventory = crate::cluster::snapshot::from_items(items, "test").expect("inventory");
        inventory.published()
    }

    fn classes_seen(labels: Value) -> usize {
        let input =
            to_rego(&json!({"object": {"metadata": {"labels": labels}}, "job": {"replicas": []}}));
        let (summary, table) = published();
        let p = Projection::of(&input).with_flavor_labels(&input, &summary);
        let projected = project(&summary, &p, &table);
        projected["node_classes"].as_array().map_or(0, Vec::len)
    }

    #[test]
    fn a_kueue_job_sees_classes_apart_by_its_flavors_labels_and_no_other_job_does() {
        assert_eq!(classes_seen(json!({KUEUE_QUEUE_LABEL: "q"})), 2);
        assert_eq!(classes_seen(json!({"app": "x"})), 1);
    }

    /// Classes a Kueue job sees of two a100 nodes in racks r1 and r2, the flavor's Topology
    /// levels rack and hostname, its Worker's template annotated with `annotations`.
    fn racks_seen(annotations: Value) -> usize {
        let node = |name: &str, rack: &str| {
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"pool": "a100", "rack": rack}},
                "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
        };
        let flavor = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "a100"}, "spec": {"nodeLabels": {"pool": "a100"}, "topologyName": "dc"}});
        let topology = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
            "metadata": {"name": "dc"}, "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": HOSTNAME}]}});
        let queue = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "gpus"}, "spec": {}});
        let items = vec![node("n1", "r1"), node("n2", "r2"), flavor, topology, queue];
        let inventory = crate::cluster::snapshot::from_items(items, "test").expect("inventory");
        let (summary, table) = inventory.published();
        let input = to_rego(&json!({
            "object": {"metadata": {"labels": {KUEUE_QUEUE_LABEL: "q"}}},
            "job": {"replicas": [{"nodeSelector": {}, "annotations": annotations}]}}));
        let p = Projection::of(&input).with_flavor_labels(&input, &summary);
        let projected = project(&summary, &p, &table);
        projected["node_classes"].as_array().map_or(0, Vec::len)
    }

    #[test]
    fn a_pod_set_asking_for_a_topology_domain_sees_classes_apart_by_its_levels() {
        let asks = json!({"kueue.x-k8s.io/podset-required-topology": "rack"});
        assert_eq!(racks_seen(asks), 2);
        assert_eq!(racks_seen(json!({})), 1, "no topology asked: racks merged");
    }
}
