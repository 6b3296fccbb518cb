//! Kueue's queues as policies see them (`data.cluster.kueue`): LocalQueues, ClusterQueues with
//! their resource groups and, per (resource, flavor), the quota and the most the queue can
//! ever reserve ([`quota`]), and ResourceFlavors with the node labels, taints and tolerations
//! a flavor gives the pods Kueue admits into it.
//!
//! Entry point: [`summary`]. ClusterQueues of both served versions are read: v1beta2 names the
//! cohort `spec.cohortName`, v1beta1 `spec.cohort`; the rest of what is read is alike.
//!
//! # Bad input
//! The API server validates these objects, so only a hand-written snapshot holds a quota
//! that is not a quantity, a resource group that is not a list, a Cohort chain that loops
//! (that one the API server allows: Kueue then keeps the ClusterQueues below it inactive).
//! Each is said in `problems` and left out: the (flavor, resource) whose quota cannot be read,
//! for every ClusterQueue of its cohort tree, gets no `can_reserve`, a ClusterQueue whose
//! groups cannot be read is `readable: false`, and the policy judges neither; the rest is
//! judged.

pub mod quota;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{json, Map, Value};

use self::quota::{Amount, FlavorResource, Quota, QuotaNode, Reserve, Tree};
use crate::job::quantity::{Nanos, NANO};

/// What the inventory holds of Kueue; each list `None` when unknown (its CRD not installed,
/// not listable, not in the snapshot).
#[derive(Debug, Clone, Copy, Default)]
pub struct Objects<'a> {
    pub cluster_queues: Option<&'a [Value]>,
    pub local_queues: Option<&'a [Value]>,
    pub cohorts: Option<&'a [Value]>,
    pub flavors: Option<&'a [Value]>,
}

/// `data.cluster.kueue` (`None` without ClusterQueues): see policies/README.md for the shape.
pub fn summary(objects: &Objects, problems: &mut Vec<String>) -> Option<Value> {
    let cluster_queues = objects.cluster_queues?;
    // `null` while unknown (not listed yet, not in the snapshot): no LocalQueue is then
    // called missing, which a server that has listed ClusterQueues but not yet LocalQueues
    // would otherwise say of every job.
    let local_queues: Option<Map<String, Value>> = objects.local_queues.map(|items| {
        items
            .iter()
            .filter_map(|q| {
                let ns = q.pointer("/metadata/namespace")?.as_str()?;
                let name = q.pointer("/metadata/name")?.as_str()?;
                let target = q.pointer("/spec/clusterQueue")?.as_str()?;
                Some((format!("{ns}/{name}"), Value::from(target)))
            })
            .collect()
    });
    let mut queues = BTreeMap::new();
    let mut tree = Tree {
        cohorts: cohorts(objects.cohorts, problems),
        ..Tree::default()
    };
    for (i, item) in cluster_queues.iter().enumerate() {
        let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) else {
            problems.push(format!("Kueue ClusterQueue item {i} has no name; left out"));
            continue;
        };
        let what = format!("Kueue ClusterQueue {name:?}");
        let read = read_groups(item, &what, problems);
        tree.cluster_queues
            .insert(name.to_string(), read.node.clone());
        queues.insert(name.to_string(), (item, read));
    }
    let mut said_cycles = BTreeSet::new();
    let cluster_queues: Map<String, Value> = queues
        .iter()
        .map(|(name, (item, read))| {
            let doc = cluster_queue(name, item, read, &tree, problems, &mut said_cycles);
            (name.clone(), doc)
        })
        .collect();
    let flavors = objects.flavors.and_then(|items| flavors(items, problems));
    Some(json!({
        "cluster_queues": cluster_queues,
        "local_queues": local_queues,
        "cohorts_known": tree.cohorts.is_some(),
        "flavors": flavors,
    }))
}

/// A ClusterQueue or Cohort's resource groups as read.
#[derive(Debug, Clone, Default)]
struct Groups {
    node: QuotaNode,
    /// Each group's covered resources and flavors, in order.
    groups: Vec<(Vec<String>, Vec<String>)>,
}

/// The quota tree's Cohorts; `None` (unknown) when not listed, or when one has no name (a
/// ClusterQueue in it would be taken for one of an implicit Cohort, without its quota).
fn cohorts(
    items: Option<&[Value]>,
    problems: &mut Vec<String>,
) -> Option<BTreeMap<String, QuotaNode>> {
    let mut cohorts = BTreeMap::new();
    for (i, item) in items?.iter().enumerate() {
        let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) else {
            problems.push(format!("Kueue Cohort item {i} has no name: the Cohorts are taken as unknown, and a ClusterQueue in a cohort as able to reserve its nominal quota plus its borrowingLimit"));
            return None;
        };
        let mut read = read_groups(item, &format!("Kueue Cohort {name:?}"), problems);
        read.node.parent = text(item, "/spec/parentName");
        cohorts.insert(name.to_string(), read.node);
    }
    Some(cohorts)
}

/// `spec.resourceGroups` of a ClusterQueue or Cohort, with its cohort (the parent).
fn read_groups(item: &Value, what: &str, problems: &mut Vec<String>) -> Groups {
    let mut read = Groups::default();
    read.node.parent = text(item, "/spec/cohortName").or_else(|| text(item, "/spec/cohort"));
    let groups = match item.pointer("/spec/resourceGroups") {
        None | Some(Value::Null) => return read,
        Some(Value::Array(groups)) => groups,
        Some(_) => {
            problems.push(format!(
                "{what}: spec.resourceGroups is not a list; its quota is not judged"
            ));
            read.node.all_unreadable = true;
            return read;
        }
    };
    for group in groups {
        match read_group(group, what, &mut read.node, problems) {
            Some(g) => read.groups.push(g),
            None => {
                problems.push(format!("{what}: a resource group without coveredResources or flavors (with names and resources); its quota is not judged"));
                read.node.all_unreadable = true;
                return read;
            }
        }
    }
    read
}

/// One resource group: its covered resources and flavors, the quotas added to `node`.
fn read_group(
    group: &Value,
    what: &str,
    node: &mut QuotaNode,
    problems: &mut Vec<String>,
) -> Option<(Vec<String>, Vec<String>)> {
    let covered: Vec<String> = group
        .get("coveredResources")?
        .as_array()?
        .iter()
        .map(|r| r.as_str().map(str::to_string))
        .collect::<Option<_>>()?;
    let mut flavors = Vec::new();
    for flavor in group.get("flavors")?.as_array()? {
        let name = flavor.get("name")?.as_str()?;
        flavors.push(name.to_string());
        for r in flavor.get("resources")?.as_array()? {
            let resource = r.get("name")?.as_str()?;
            let fr = (name.to_string(), resource.to_string());
            match read_quota(r, resource) {
                Ok(quota) => {
                    node.quotas.insert(fr, quota);
                }
                Err(field) => {
                    problems.push(format!("{what}: flavor {name:?} {resource} {field} {} is not a quantity; what it can reserve of {resource} in {name:?} (and every ClusterQueue of its cohort tree) is not judged", r.get(field).unwrap_or(&Value::Null)));
                    node.unreadable.insert(fr);
                }
            }
        }
    }
    Some((covered, flavors))
}

/// One resource's quota; `Err` names the field that is not a quantity.
fn read_quota(r: &Value, resource: &str) -> Result<Quota, &'static str> {
    let field = |name: &'static str| -> Result<Option<Amount>, &'static str> {
        match r.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => amount(resource, v).map(Some).ok_or(name),
        }
    };
    Ok(Quota {
        nominal: field("nominalQuota")?.unwrap_or(Amount::ZERO),
        borrowing_limit: field("borrowingLimit")?,
        lending_limit: field("lendingLimit")?,
    })
}

/// Kueue's `AmountFromQuantity`: cpu in millicores, every other resource in units, rounded
/// up; unlimited from `math.MaxInt64 / 1000` cores (cpu) or `math.MaxInt64` units up.
/// `None` for what is not a non-negative quantity.
fn amount(resource: &str, v: &Value) -> Option<Amount> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let Nanos(n) = Nanos::parse(&Quantity(text)).filter(|n| n.0 >= 0)?;
    let max = i128::from(i64::MAX);
    let (per_unit, limit) = if resource == "cpu" {
        (NANO / 1000, max / 1000 * NANO)
    } else {
        (NANO, max * NANO)
    };
    if n >= limit {
        return Some(Amount::UNLIMITED);
    }
    let units = n / per_unit + i128::from(n % per_unit != 0);
    i64::try_from(units).ok().map(Amount)
}

/// One ClusterQueue's document: cohort, stopPolicy, its groups and, per resource and flavor,
/// the quota and `can_reserve` (left out when unbounded or not known).
fn cluster_queue(
    name: &str,
    item: &Value,
    read: &Groups,
    tree: &Tree,
    problems: &mut Vec<String>,
    said_cycles: &mut BTreeSet<Vec<String>>,
) -> Value {
    let mut resources: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for (covered, flavors) in &read.groups {
        for resource in covered {
            let entry = resources.entry(resource).or_default();
            for flavor in flavors {
                let fr: FlavorResource = (flavor.clone(), resource.clone());
                let quota = read.node.quotas.get(&fr).copied();
                let mut doc = json!({
                    "nominal": quota.map(|q| number(q.nominal)),
                    "borrowing_limit": quota.and_then(|q| q.borrowing_limit).map(number),
                    "lending_limit": quota.and_then(|q| q.lending_limit).map(number),
                });
                match tree.can_reserve(name, &fr) {
                    Some(Reserve::AtMost(n)) if !n.is_unlimited() => {
                        doc["can_reserve"] = json!(n.0.max(0));
                    }
                    Some(Reserve::Cycle(cycle)) if said_cycles.insert(cycle.clone()) => {
                        problems.push(format!("Kueue Cohort chain {} is a cycle: Kueue admits nothing through the ClusterQueues below it; their quota is not judged", cycle.join(" -> ")));
                    }
                    _ => {}
                }
                entry.insert(flavor.clone(), doc);
            }
        }
    }
    let resources: Map<String, Value> = resources
        .into_iter()
        .map(|(r, flavors)| (r.to_string(), json!({"flavors": flavors})))
        .collect();
    let groups: Vec<Value> = read
        .groups
        .iter()
        .map(|(covered, flavors)| json!({"resources": covered, "flavors": flavors}))
        .collect();
    json!({
        "cohort": read.node.parent.clone().unwrap_or_default(),
        "stop_policy": item.pointer("/spec/stopPolicy").and_then(Value::as_str).unwrap_or("None"),
        "readable": !read.node.all_unreadable,
        "groups": groups,
        "resources": resources,
    })
}

/// An amount as JSON: `null` when unlimited.
fn number(a: Amount) -> Value {
    if a.is_unlimited() {
        Value::Null
    } else {
        Value::from(a.0)
    }
}

/// ResourceFlavors by name: node labels, node taints, tolerations, topology; `readable:
/// false` for one whose fields cannot be read. `None` (unknown) when one has no name: a
/// ClusterQueue naming it would otherwise seem to name a missing flavor.
fn flavors(items: &[Value], problems: &mut Vec<String>) -> Option<Value> {
    let mut out = Map::new();
    for (i, item) in items.iter().enumerate() {
        let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) else {
            problems.push(format!("Kueue ResourceFlavor item {i} has no name: the ResourceFlavors are taken as unknown"));
            return None;
        };
        let field = |f: &str, object: bool| {
            let v = item.pointer(&format!("/spec/{f}")).unwrap_or(&Value::Null);
            let ok = v.is_null() || if object { v.is_object() } else { v.is_array() };
            ok.then(|| v.clone())
        };
        let labels = field("nodeLabels", true);
        let taints = field("nodeTaints", false);
        let tolerations = field("tolerations", false);
        let topology = text(item, "/spec/topologyName").unwrap_or_default();
        let taints = taints.and_then(|t| node_taints(&t));
        let doc = match (labels, taints, tolerations) {
            (Some(l), Some(t), Some(tol)) => json!({
                "readable": true,
                "node_labels": or_empty(l, json!({})),
                "node_taints": t,
                "tolerations": or_empty(tol, json!([])),
                "topology_name": topology,
            }),
            _ => {
                problems.push(format!("Kueue ResourceFlavor {name:?}: nodeLabels, nodeTaints or tolerations cannot be read; the nodes of this flavor are not judged"));
                json!({"readable": false})
            }
        };
        out.insert(name.to_string(), doc);
    }
    Some(Value::Object(out))
}

/// A flavor's taints as node classes carry theirs (`{key, value, effect}`, value `""` when
/// absent), so the policies match tolerations to both alike; `None` when one is not a taint.
fn node_taints(taints: &Value) -> Option<Value> {
    let list = taints.as_array().map(Vec::as_slice).unwrap_or_default();
    let taints: Option<Vec<Value>> = list
        .iter()
        .map(|t| {
            let key = t.get("key")?.as_str()?;
            let effect = t.get("effect")?.as_str()?;
            let value = t.get("value").and_then(Value::as_str).unwrap_or_default();
            Some(json!({"key": key, "value": value, "effect": effect}))
        })
        .collect();
    taints.map(Value::from)
}

fn or_empty(v: Value, empty: Value) -> Value {
    if v.is_null() {
        empty
    } else {
        v
    }
}

fn text(item: &Value, pointer: &str) -> Option<String> {
    let s = item.pointer(pointer)?.as_str()?;
    (!s.is_empty()).then(|| s.to_string())
}

#[cfg(test)]
mod tests;
