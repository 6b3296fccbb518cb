//! What kube-scheduler's placement of a replica's pods depends on beyond its requests,
//! nodeSelector and tolerations: the facts the placement search
//! ([`crate::placement`]) needs to model its order and scores, and the pod-spec fields it
//! does not model (a search that meets one of them says so and decides nothing).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::requests::non_zero_requests;

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PlacementFacts {
    /// cpu and memory as NodeResourcesFit's LeastAllocated score counts them
    /// ([`non_zero_requests`]).
    pub non_zero_requests: BTreeMap<String, i64>,
    /// `priorityClassName`: the pod group cycle places higher priorities first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Pod-spec fields that steer placement and that the search does not evaluate, by name.
    pub unmodelled: Vec<&'static str>,
}

/// Pod-spec fields the search leaves to the scheduler: affinities and spread constraints
/// filter and score nodes, a nodeName bypasses scheduling, gates hold pods back, claims and
/// volumes bring their own node constraints, an explicit priority reorders the cycle.
const UNMODELLED: [&str; 7] = [
    "affinity",
    "topologySpreadConstraints",
    "nodeName",
    "schedulingGates",
    "resourceClaims",
    "priority",
    "runtimeClassName",
];

/// The facts of the pod spec `spec` (none when the template has no spec).
pub fn placement_facts(spec: Option<&Map<String, Value>>) -> PlacementFacts {
    let Some(spec) = spec else {
        return PlacementFacts::default();
    };
    let mut unmodelled: Vec<&'static str> = UNMODELLED
        .into_iter()
        .filter(|field| spec.get(*field).is_some_and(|v| !v.is_null()))
        .collect();
    if host_ports(spec) {
        unmodelled.push("hostPort");
    }
    if claim_volumes(spec) {
        unmodelled.push("persistentVolumeClaim volumes");
    }
    PlacementFacts {
        non_zero_requests: non_zero_requests(Some(spec)),
        priority_class_name: spec
            .get("priorityClassName")
            .and_then(Value::as_str)
            .map(str::to_string),
        unmodelled,
    }
}

fn containers(spec: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    ["containers", "initContainers"]
        .into_iter()
        .filter_map(|f| spec.get(f).and_then(Value::as_array))
        .flatten()
}

/// A container port with a hostPort: NodePorts filters nodes where the port is taken.
fn host_ports(spec: &Map<String, Value>) -> bool {
    containers(spec)
        .filter_map(|c| c.get("ports").and_then(Value::as_array))
        .flatten()
        .any(|p| p.get("hostPort").is_some_and(|h| !h.is_null()))
}

/// A volume from a claim (or an ephemeral one): VolumeBinding and VolumeZone filter nodes
/// by where the volume can be.
fn claim_volumes(spec: &Map<String, Value>) -> bool {
    spec.get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|v| v.get("persistentVolumeClaim").is_some() || v.get("ephemeral").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plain_pod_has_nothing_unmodelled() {
        let spec = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}],
            "nodeSelector": {"a": "b"}, "tolerations": [{"operator": "Exists"}],
            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}]});
        let facts = placement_facts(spec.as_object());
        assert!(facts.unmodelled.is_empty(), "{facts:?}");
        assert_eq!(facts.non_zero_requests.get("cpu"), Some(&1000));
        assert_eq!(facts.non_zero_requests.get("memory"), Some(&209_715_200));
    }

    #[test]
    fn affinity_host_ports_and_claims_are_named() {
        let spec = json!({
            "affinity": {"nodeAffinity": {}},
            "priorityClassName": "high",
            "containers": [{"ports": [{"containerPort": 1, "hostPort": 1}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
        });
        let facts = placement_facts(spec.as_object());
        assert_eq!(
            facts.unmodelled,
            ["affinity", "hostPort", "persistentVolumeClaim volumes"]
        );
        assert_eq!(facts.priority_class_name.as_deref(), Some("high"));
    }
}
