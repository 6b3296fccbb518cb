//! The namespaced objects the storage and network policies read: PersistentVolumeClaims,
//! NetworkPolicies and Namespaces (their labels, for `namespaceSelector`), indexed by
//! namespace once per published inventory, so a request pays only for its own namespace.
//!
//! Each request's `data.cluster` gets three keys (see policies/README.md, "Cluster
//! inventory"): `namespace` (`{name, labels}`, labels `null` when Namespaces are unknown),
//! `claims` (the namespace's claims by name) and `network_policies` (those of the namespace
//! whose `podSelector` selects a pod of the job). A kind the inventory does not hold (absent
//! from the snapshot, not listable) is `null`, never empty: the policy that needs it stays
//! silent instead of warning about every job.
//!
//! Entry points: [`Objects::index`] and [`Objects::add_to`].

use std::collections::{BTreeMap, HashMap};

use regorus::Value as RegoValue;
use serde_json::{json, Value};

use super::selector::Selector;
use super::view::field;
use crate::policy::to_rego::to_rego;

/// The namespaced objects of one inventory, converted for the engine once.
#[derive(Debug, Default)]
pub struct Objects {
    /// Namespace → `{claim name: claim}`; `None` when claims are unknown.
    claims: Option<HashMap<String, RegoValue>>,
    /// Namespace → its NetworkPolicies; `None` when they are unknown.
    network_policies: Option<HashMap<String, Vec<NetworkPolicy>>>,
    /// Namespace name → its labels; `None` when Namespaces are unknown.
    namespaces: Option<HashMap<String, RegoValue>>,
}

/// A NetworkPolicy: its pod selector, parsed for the index, and `{name, spec}` for policies.
#[derive(Debug)]
struct NetworkPolicy {
    selects: Selector,
    doc: RegoValue,
}

/// The inventory's lists, as read (any of them may be unknown).
pub struct Lists<'a> {
    pub claims: Option<&'a [Value]>,
    pub network_policies: Option<&'a [Value]>,
    pub namespaces: Option<&'a [Value]>,
}

impl Objects {
    /// Indexes `lists`; an object that cannot be read is left out and said in `problems`.
    pub fn index(lists: Lists<'_>, problems: &mut Vec<String>) -> Objects {
        Objects {
            claims: lists.claims.map(|items| claims(items, problems)),
            network_policies: lists
                .network_policies
                .map(|items| network_policies(items, problems)),
            namespaces: lists.namespaces.map(|items| namespaces(items, problems)),
        }
    }

    /// Adds `namespace`, `claims` and `network_policies` for the request `input` to its
    /// `data.cluster` document `cluster`.
    pub fn add_to(&self, cluster: &mut RegoValue, input: &RegoValue) {
        let namespace = request_namespace(input);
        let labels = self.namespaces.as_ref().map_or(RegoValue::Null, |all| {
            all.get(namespace).cloned().unwrap_or_else(|| {
                // A namespace not (yet) in the cache still has the label the API server
                // puts on every namespace.
                to_rego(&json!({"kubernetes.io/metadata.name": namespace}))
            })
        });
        let claims = self.claims.as_ref().map_or(RegoValue::Null, |all| {
            all.get(namespace)
                .cloned()
                .unwrap_or_else(|| RegoValue::from(BTreeMap::new()))
        });
        let policies = self
            .network_policies
            .as_ref()
            .map_or(RegoValue::Null, |all| {
                let pods = pod_labels(input);
                let selecting = all
                    .get(namespace)
                    .into_iter()
                    .flatten()
                    .filter(|p| pods.iter().any(|labels| p.selects.matches(labels)))
                    .map(|p| p.doc.clone())
                    .collect::<Vec<_>>();
                RegoValue::from(selecting)
            });
        let Ok(map) = cluster.as_object_mut() else {
            return;
        };
        let namespace_doc = BTreeMap::from([
            (RegoValue::from("name"), RegoValue::from(namespace)),
            (RegoValue::from("labels"), labels),
        ]);
        map.insert(RegoValue::from("namespace"), RegoValue::from(namespace_doc));
        map.insert(RegoValue::from("claims"), claims);
        map.insert(RegoValue::from("network_policies"), policies);
    }
}

/// `metadata.namespace` and `metadata.name` of a listed object, or what is wrong.
fn namespaced_name<'a>(item: &'a Value, kind: &str) -> Result<(&'a str, &'a str), String> {
    let text = |field: &str| item.pointer(field).and_then(Value::as_str);
    match (text("/metadata/namespace"), text("/metadata/name")) {
        (Some(ns), Some(name)) => Ok((ns, name)),
        _ => Err(format!(
            "a {kind} without metadata.namespace and metadata.name; ignored"
        )),
    }
}

/// Claims by namespace, each as the storage policy reads it.
fn claims(items: &[Value], problems: &mut Vec<String>) -> HashMap<String, RegoValue> {
    let mut by_namespace: HashMap<String, BTreeMap<RegoValue, RegoValue>> = HashMap::new();
    for item in items {
        let (namespace, name) = match namespaced_name(item, "PersistentVolumeClaim") {
            Ok(id) => id,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        match claim(item) {
            Ok(doc) => {
                let claims = by_namespace.entry(namespace.to_string()).or_default();
                claims.insert(RegoValue::from(name), to_rego(&doc));
            }
            Err(why) => problems.push(format!(
                "PersistentVolumeClaim {namespace}/{name}: {why}; ignored"
            )),
        }
    }
    by_namespace
        .into_iter()
        .map(|(ns, claims)| (ns, RegoValue::from(claims)))
        .collect()
}

/// What the storage policy reads of a claim: its phase, the modes asked and bound, its
/// class as written (`null` when absent: the default class) and its volume.
fn claim(item: &Value) -> Result<Value, String> {
    let modes = |field: &str| -> Result<Value, String> {
        match item.pointer(field) {
            None | Some(Value::Null) => Ok(json!([])),
            Some(Value::Array(modes)) if modes.iter().all(Value::is_string) => {
                Ok(Value::Array(modes.clone()))
            }
            Some(_) => Err(format!("{field} is not a list of access modes")),
        }
    };
    let class = match item.pointer("/spec/storageClassName") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) => Value::from(s.as_str()),
        Some(_) => return Err("spec.storageClassName is not a string".into()),
    };
    let text = |field: &str| item.pointer(field).and_then(Value::as_str).unwrap_or("");
    Ok(json!({
        "phase": text("/status/phase"),
        "accessModes": modes("/spec/accessModes")?,
        "boundAccessModes": modes("/status/accessModes")?,
        "storageClassName": class,
        "volumeName": text("/spec/volumeName"),
    }))
}

/// NetworkPolicies by namespace, each with its parsed pod selector.
fn network_policies(
    items: &[Value],
    problems: &mut Vec<String>,
) -> HashMap<String, Vec<NetworkPolicy>> {
    let mut by_namespace: HashMap<String, Vec<NetworkPolicy>> = HashMap::new();
    for item in items {
        let (namespace, name) = match namespaced_name(item, "NetworkPolicy") {
            Ok(id) => id,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        let spec = item.get("spec").unwrap_or(&Value::Null);
        let selects = match spec.get("podSelector").map(Selector::parse) {
            Some(Ok(selector)) => selector,
            Some(Err(why)) => {
                problems.push(format!(
                    "NetworkPolicy {namespace}/{name}: spec.podSelector {why}; ignored"
                ));
                continue;
            }
            None => {
                problems.push(format!(
                    "NetworkPolicy {namespace}/{name}: no spec.podSelector; ignored"
                ));
                continue;
            }
        };
        let doc = to_rego(&json!({"name": name, "spec": spec}));
        by_namespace
            .entry(namespace.to_string())
            .or_default()
            .push(NetworkPolicy { selects, doc });
    }
    by_namespace
}

/// Namespace labels by name.
fn namespaces(items: &[Value], problems: &mut Vec<String>) -> HashMap<String, RegoValue> {
    let mut out = HashMap::new();
    for item in items {
        let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) else {
            problems.push("a Namespace without metadata.name; ignored".into());
            continue;
        };
        let labels = match item.pointer("/metadata/labels") {
            None | Some(Value::Null) => json!({}),
            Some(Value::Object(l)) if l.values().all(Value::is_string) => Value::Object(l.clone()),
            Some(_) => {
                problems.push(format!(
                    "Namespace {name}: metadata.labels is not a map of strings; ignored"
                ));
                continue;
            }
        };
        out.insert(name.to_string(), to_rego(&labels));
    }
    out
}

/// `input.request.namespace`.
fn request_namespace(input: &RegoValue) -> &str {
    let namespace = field(input, "request").and_then(|r| field(r, "namespace"));
    namespace
        .and_then(|n| n.as_string().ok())
        .map_or("", |n| n.as_ref())
}

/// The labels of each replica type's pods: `input.job.replicas[*].podLabels`.
fn pod_labels(input: &RegoValue) -> Vec<BTreeMap<&str, &str>> {
    let replicas = field(input, "job").and_then(|j| field(j, "replicas"));
    let Some(Ok(replicas)) = replicas.map(RegoValue::as_array) else {
        return Vec::new();
    };
    replicas
        .iter()
        .filter_map(|r| field(r, "podLabels")?.as_object().ok())
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    Some((k.as_string().ok()?.as_ref(), v.as_string().ok()?.as_ref()))
                })
                .collect()
        })
        .collect()
}
