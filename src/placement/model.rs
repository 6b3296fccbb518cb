//! What the search reads: the request's node classes (as `data.cluster` shows them to its
//! policies) and its replica types (as `input.job.replicas` shows them), and which classes
//! each replica type reaches.

use std::collections::BTreeMap;

use regorus::Value as RegoValue;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A taint as the inventory keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Taint {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub effect: String,
}

/// Identical nodes: one class of `data.cluster.node_classes`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct NodeClass {
    pub size: u32,
    #[serde(default)]
    pub labels: BTreeMap<String, Value>,
    /// NoSchedule and NoExecute taints (the cordon's included): filters.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// PreferNoSchedule taints: TaintToleration's score.
    #[serde(default)]
    pub preferred_taints: Vec<Taint>,
    /// cpu in millicores, every other resource in units.
    #[serde(default)]
    pub allocatable: BTreeMap<String, i64>,
}

impl NodeClass {
    /// The classes of a `data.cluster` document; classes that do not read are skipped (the
    /// inventory writes them, so none is expected).
    pub fn all_of(cluster: &Value) -> Vec<NodeClass> {
        cluster["node_classes"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|c| serde_json::from_value(c.clone()).ok())
            .collect()
    }

    /// Whether a node of this class limits `resource`: a node that reports no `pods`
    /// (hand-written snapshots) takes any number, as policies/capacity.rego counts it.
    pub fn limits(&self, resource: &str) -> bool {
        resource != "pods" || self.allocatable.contains_key("pods")
    }

    pub fn amount(&self, resource: &str) -> i64 {
        self.allocatable.get(resource).copied().unwrap_or(0)
    }
}

/// A toleration as written in the pod spec.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
pub struct Toleration {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub effect: String,
}

impl Toleration {
    /// Kubernetes' `ToleratesTaint`, as policies/lib/nodes.rego has it: an empty effect
    /// matches every effect, `Exists` without a key every taint.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if !self.effect.is_empty() && self.effect != taint.effect {
            return false;
        }
        match self.operator.as_str() {
            "Exists" => self.key.is_empty() || self.key == taint.key,
            "" | "Equal" => self.key == taint.key && self.value == taint.value,
            _ => false,
        }
    }
}

/// What the search needs of one replica type (`input.job.replicas[_]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replica {
    pub key: String,
    #[serde(rename = "type")]
    pub replica_type: String,
    pub replicas: i64,
    #[serde(default)]
    pub pod_requests: BTreeMap<String, i64>,
    #[serde(default)]
    pub node_selector: BTreeMap<String, Value>,
    #[serde(default)]
    pub tolerations: Vec<Value>,
    #[serde(default)]
    pub scheduler_name: Option<String>,
    #[serde(default)]
    pub placement: Placement,
    /// The pod template's annotations (Volcano reads `volcano.sh/task-priority`).
    #[serde(default)]
    pub annotations: BTreeMap<String, Value>,
    /// `<job>-<type>-<replicas - 1>` for indexed types; Volcano orders pods by that index.
    #[serde(default)]
    pub last_pod_name: String,
    /// A TrainJob's JobSet step: its pods are the JobSet's, named by Jobs.
    #[serde(default)]
    pub step: Option<Value>,
}

/// `input.job.replicas[_].placement` (src/job/placement_facts.rs).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    #[serde(default)]
    pub non_zero_requests: BTreeMap<String, i64>,
    #[serde(default)]
    pub priority_class_name: Option<String>,
    #[serde(default)]
    pub unmodelled: Vec<String>,
}

/// The fields of a replica the search reads, converted from the engine's value one by one
/// (a replica also carries its containers, which the search has no use for).
const FIELDS: [&str; 11] = [
    "key",
    "type",
    "replicas",
    "podRequests",
    "nodeSelector",
    "tolerations",
    "schedulerName",
    "placement",
    "annotations",
    "lastPodName",
    "step",
];

impl Replica {
    /// The replica types of a policy input; `None` when the input has no job view.
    pub fn all_of(input: &RegoValue) -> Option<Vec<Replica>> {
        let replicas = field(field(input, "job")?, "replicas")?.as_array().ok()?;
        let mut out = Vec::with_capacity(replicas.len());
        for r in replicas.iter() {
            let mut doc = Map::new();
            for name in FIELDS {
                if let Some(v) = field(r, name) {
                    doc.insert(name.to_string(), serde_json::to_value(v).ok()?);
                }
            }
            out.push(serde_json::from_value(Value::Object(doc)).ok()?);
        }
        Some(out)
    }

    /// The tolerations that read as tolerations; others tolerate nothing.
    pub fn parsed_tolerations(&self) -> Vec<Toleration> {
        self.tolerations
            .iter()
            .filter_map(|t| serde_json::from_value(t.clone()).ok())
            .collect()
    }

    /// Whether this replica's pods may use nodes of `class`: kube-scheduler's NodeAffinity
    /// (the nodeSelector), TaintToleration and NodeUnschedulable filters, as
    /// policies/lib/nodes.rego's `node_admits` has them.
    pub fn admits(&self, tolerations: &[Toleration], class: &NodeClass) -> bool {
        let selected = self
            .node_selector
            .iter()
            .all(|(k, v)| class.labels.get(k) == Some(v));
        selected
            && class
                .taints
                .iter()
                .all(|taint| tolerations.iter().any(|t| t.tolerates(taint)))
    }
}

/// `input.object.spec.runPolicy.schedulingPolicy.minAvailable`, when a number.
pub fn min_available(input: &RegoValue) -> Option<i64> {
    let mut v = field(input, "object")?;
    for name in ["spec", "runPolicy", "schedulingPolicy", "minAvailable"] {
        v = field(v, name)?;
    }
    v.as_i64().ok()
}

/// The value at `path` under `v`, when every step is an object field.
pub fn at<'a>(v: &'a RegoValue, path: &[&str]) -> Option<&'a RegoValue> {
    path.iter().try_fold(v, |v, name| field(v, name))
}

pub fn field<'a>(v: &'a RegoValue, name: &str) -> Option<&'a RegoValue> {
    v.as_object().ok()?.get(&RegoValue::from(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
        }
    }

    fn toleration(v: Value) -> Toleration {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_keyless_exists_tolerates_every_taint_the_cordon_included() {
        let all = toleration(json!({"operator": "Exists"}));
        assert!(all.tolerates(&taint("node.kubernetes.io/unschedulable", "", "NoSchedule")));
        assert!(all.tolerates(&taint("gpu", "true", "NoExecute")));
        let no_schedule = toleration(json!({"operator": "Exists", "effect": "NoSchedule"}));
        assert!(!no_schedule.tolerates(&taint("gpu", "true", "NoExecute")));
    }

    #[test]
    fn equal_needs_key_and_value() {
        let t = toleration(json!({"key": "gpu", "value": "true"}));
        assert!(t.tolerates(&taint("gpu", "true", "NoSchedule")));
        assert!(!t.tolerates(&taint("gpu", "false", "NoSchedule")));
        assert!(!t.tolerates(&taint("other", "true", "NoSchedule")));
    }
}
