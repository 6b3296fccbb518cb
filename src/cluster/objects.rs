//! The namespaced objects the storage and network policies read: PersistentVolumeClaims,
//! NetworkPolicies and Namespaces (their labels, for `namespaceSelector`), indexed by
//! namespace once per published inventory, so a request pays only for its own namespace.
//!
//! Each request's `data.cluster` gets three keys (see policies/README.md, "Cluster
//! inventory"): `namespace` (`{name, labels}`, labels `null` when Namespaces are unknown),
//! `claims` (the namespace's claims by name) and `network_policies` (those of the namespace
//! whose `podSelector` selects a pod of the job, each with `selects`: the keys of the
//! replica types it selects, so the policy need not match that selector again). A kind the
//! inventory does not hold (absent from the snapshot, not listable) is `null`, never empty:
//! the policy that needs it stays silent instead of warning about every job.
//!
//! Entry points: [`Objects::index`] (a snapshot), [`Incremental::update`] (the watch) and
//! [`Objects::add_to`] (a request).

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use regorus::Value as RegoValue;
use serde_json::{json, Value};

use super::cache::Kept;
use super::selector::Selector;
use super::view::field;
use crate::policy::to_rego::to_rego;

/// The namespaced objects of one inventory, converted for the engine once.
#[derive(Debug, Default)]
pub struct Objects {
    /// Namespace → `{claim name: claim}` as JSON text; `None` when claims are unknown.
    /// Converted for the engine when a request of that namespace comes ([`Converted`]): a
    /// claim as an engine value is ~940 bytes, as text ~150.
    claims: Option<HashMap<String, Arc<str>>>,
    /// The namespaces' claims converted lately.
    converted: Converted,
    /// Namespace → its NetworkPolicies; `None` when they are unknown.
    network_policies: Option<HashMap<String, Arc<NamespacePolicies>>>,
    /// Namespace name → its labels; `None` when Namespaces are unknown.
    namespaces: Option<HashMap<String, RegoValue>>,
    /// Objects that could not be read, left out.
    problems: Vec<String>,
    /// What the watch caches behind this index hold (zero for a snapshot).
    sizes: ObjectSizes,
}

/// What the namespaced watch caches hold, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectSizes {
    pub claims: usize,
    pub network_policies: usize,
    pub namespaces: usize,
    /// Estimated bytes of the kinds kept (a kind past the bound is not counted).
    pub bytes: usize,
}

/// A NetworkPolicy: its pod selector, parsed for the index, and `{name, spec}` as JSON text,
/// converted for the requests whose pods it selects (as an engine value a policy is ~6 KB).
#[derive(Debug)]
struct NetworkPolicy {
    selects: Selector,
    doc: Box<str>,
}

/// The largest NetworkPolicy kept: the API server accepts ~1.5 MB, and each request whose
/// pods one selects converts it for the engine. Real ones are a few KiB.
const MAX_POLICY_BYTES: usize = 256 << 10;

/// Engine values of the claims of the namespaces requests came from lately: at most
/// [`CONVERTED_NAMESPACES`], then it starts over rather than grow.
#[derive(Debug, Default)]
struct Converted(std::sync::Mutex<HashMap<String, RegoValue>>);

/// Namespaces whose converted claims are kept; requests come from far fewer at a time.
const CONVERTED_NAMESPACES: usize = 256;

impl Converted {
    /// `text` (the claims of `namespace`) as an engine value, converted once.
    fn get(&self, namespace: &str, text: &str) -> RegoValue {
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = cache.get(namespace) {
            return v.clone();
        }
        let value = serde_json::from_str::<Value>(text)
            .map(|v| to_rego(&v))
            .unwrap_or_else(|_| RegoValue::from(BTreeMap::new()));
        if cache.len() >= CONVERTED_NAMESPACES {
            cache.clear();
        }
        cache.insert(namespace.to_string(), value.clone());
        value
    }
}

/// A namespace's NetworkPolicies, indexed by one `matchLabels` pair of their pod selector:
/// a request matches only the policies that name one of its pods' labels, and those that
/// name none (an empty selector, expressions only), not every policy of the namespace.
#[derive(Debug)]
struct NamespacePolicies {
    list: Vec<NetworkPolicy>,
    /// Label key → value → the policies whose selector requires that pair.
    by_label: HashMap<String, HashMap<String, Vec<usize>>>,
    unindexed: Vec<usize>,
}

impl NamespacePolicies {
    fn new(list: Vec<NetworkPolicy>) -> NamespacePolicies {
        let mut by_label: HashMap<String, HashMap<String, Vec<usize>>> = HashMap::new();
        let mut unindexed = Vec::new();
        for (i, p) in list.iter().enumerate() {
            match p.selects.first_equals() {
                Some((k, v)) => {
                    let values = by_label.entry(k.to_string()).or_default();
                    values.entry(v.to_string()).or_default().push(i);
                }
                None => unindexed.push(i),
            }
        }
        NamespacePolicies {
            list,
            by_label,
            unindexed,
        }
    }

    /// The policies that may select a pod with one of `pods`' label sets, in list order.
    fn candidates<'a>(
        &'a self,
        pods: &[(RegoValue, BTreeMap<&str, &str>)],
    ) -> impl Iterator<Item = &'a NetworkPolicy> + 'a {
        let mut picked: Vec<usize> = self.unindexed.clone();
        for (_, labels) in pods {
            for (k, v) in labels {
                let policies = self.by_label.get(*k).and_then(|values| values.get(*v));
                picked.extend(policies.into_iter().flatten());
            }
        }
        picked.sort_unstable();
        picked.dedup();
        picked.into_iter().filter_map(|i| self.list.get(i))
    }
}

/// The inventory's lists, as read (any of them may be unknown).
pub struct Lists<'a> {
    pub claims: Option<&'a [Value]>,
    pub network_policies: Option<&'a [Value]>,
    pub namespaces: Option<&'a [Value]>,
}

impl Objects {
    /// Indexes `lists`; an object that cannot be read is left out and said in
    /// [`Objects::problems`].
    pub fn index(lists: Lists<'_>) -> Objects {
        let mut problems = Vec::new();
        let claims = lists
            .claims
            .map(|items| as_text(claims(items, &mut problems)));
        let network_policies = lists.network_policies.map(|items| {
            network_policies(items, &mut problems)
                .into_iter()
                .map(|(ns, list)| (ns, Arc::new(NamespacePolicies::new(list))))
                .collect()
        });
        let namespaces = lists
            .namespaces
            .map(|items| namespaces(items, &mut problems));
        Objects {
            claims,
            converted: Converted::default(),
            network_policies,
            namespaces,
            problems,
            sizes: ObjectSizes::default(),
        }
    }

    /// What the watch caches behind this index hold.
    pub fn sizes(&self) -> ObjectSizes {
        self.sizes
    }

    /// What could not be read (and is left out).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The labels of `namespace` as the watch last saw them; `None` when Namespaces are
    /// unknown or this one is not (yet) among them. Exemptions by namespace label need the
    /// labels themselves: unlike [`Objects::add_to`], no guess for a namespace not seen.
    pub fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        let labels = self.namespaces.as_ref()?.get(namespace)?;
        let map = labels.as_object().ok()?;
        Some(
            map.iter()
                .filter_map(|(k, v)| {
                    let (k, v) = (k.as_string().ok()?, v.as_string().ok()?);
                    Some((k.to_string(), v.to_string()))
                })
                .collect(),
        )
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
            all.get(namespace).map_or_else(
                || RegoValue::from(BTreeMap::new()),
                |text| self.converted.get(namespace, text),
            )
        });
        let policies = self
            .network_policies
            .as_ref()
            .map_or(RegoValue::Null, |all| {
                let pods = pod_labels(input);
                let selecting = all
                    .get(namespace)
                    .into_iter()
                    .flat_map(|policies| policies.candidates(&pods))
                    .filter_map(|p| selecting_doc(p, &pods))
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

/// `metadata.namespace` and `metadata.name` of a listed object; `None`, said in
/// `problems`, when it lacks either.
fn namespaced_name<'a>(
    item: &'a Value,
    kind: &str,
    problems: &mut Vec<String>,
) -> Option<(&'a str, &'a str)> {
    let text = |field: &str| item.pointer(field).and_then(Value::as_str);
    let id = text("/metadata/namespace").zip(text("/metadata/name"));
    if id.is_none() {
        problems.push(format!(
            "a {kind} without metadata.namespace and metadata.name; ignored"
        ));
    }
    id
}

/// Claims by namespace, each as the storage policy reads it: `{name: claim}`.
fn claims(items: &[Value], problems: &mut Vec<String>) -> HashMap<String, Value> {
    let mut by_namespace: HashMap<String, serde_json::Map<String, Value>> = HashMap::new();
    for item in items {
        let Some((namespace, name)) = namespaced_name(item, "PersistentVolumeClaim", problems)
        else {
            continue;
        };
        match claim(item) {
            Ok(doc) => {
                let claims = by_namespace.entry(namespace.to_string()).or_default();
                claims.insert(name.to_string(), doc);
            }
            Err(why) => problems.push(format!(
                "PersistentVolumeClaim {namespace}/{name}: {why}; ignored"
            )),
        }
    }
    by_namespace
        .into_iter()
        .map(|(ns, claims)| (ns, Value::Object(claims)))
        .collect()
}

/// Each namespace's claims as JSON text.
fn as_text(by_namespace: HashMap<String, Value>) -> HashMap<String, Arc<str>> {
    by_namespace
        .into_iter()
        .map(|(ns, claims)| (ns, Arc::from(claims.to_string())))
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
        let Some((namespace, name)) = namespaced_name(item, "NetworkPolicy", problems) else {
            continue;
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
        let doc = json!({"name": name, "spec": spec})
            .to_string()
            .into_boxed_str();
        if doc.len() > MAX_POLICY_BYTES {
            problems.push(format!(
                "NetworkPolicy {namespace}/{name}: a spec of {} KiB (over {} KiB); ignored",
                doc.len() >> 10,
                MAX_POLICY_BYTES >> 10
            ));
            continue;
        }
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

/// Each replica type's key and the labels of its pods (`input.job.replicas[*].key` and
/// `.podLabels`).
fn pod_labels(input: &RegoValue) -> Vec<(RegoValue, BTreeMap<&str, &str>)> {
    let replicas = field(input, "job").and_then(|j| field(j, "replicas"));
    let Some(Ok(replicas)) = replicas.map(RegoValue::as_array) else {
        return Vec::new();
    };
    replicas
        .iter()
        .filter_map(|r| {
            let key = field(r, "key")?.clone();
            let labels = field(r, "podLabels")?.as_object().ok()?;
            let labels = labels
                .iter()
                .filter_map(|(k, v)| {
                    Some((k.as_string().ok()?.as_ref(), v.as_string().ok()?.as_ref()))
                })
                .collect();
            Some((key, labels))
        })
        .collect()
}

/// `{name, spec, selects}`: the policy's document with the keys of the replica types
/// whose pods its podSelector selects (none: left out).
fn selecting_doc(
    p: &NetworkPolicy,
    pods: &[(RegoValue, BTreeMap<&str, &str>)],
) -> Option<RegoValue> {
    let selects: Vec<RegoValue> = pods
        .iter()
        .filter(|(_, labels)| p.selects.matches(labels))
        .map(|(key, _)| key.clone())
        .collect();
    if selects.is_empty() {
        return None;
    }
    let mut doc = serde_json::from_str::<Value>(&p.doc).map_or(RegoValue::Null, |v| to_rego(&v));
    if let Ok(map) = doc.as_object_mut() {
        map.insert(RegoValue::from("selects"), RegoValue::from(selects));
    }
    Some(doc)
}

/// Keeps [`Objects`] current from the watch caches: a namespace's claims and
/// NetworkPolicies are converted again only when one of them changed (by name and
/// resourceVersion), so a cluster with tens of thousands of them pays for the namespaces
/// that moved, not for all of them, on each publish.
#[derive(Default)]
pub struct Incremental {
    claims: HashMap<String, Indexed<Arc<str>>>,
    network_policies: HashMap<String, Indexed<Arc<NamespacePolicies>>>,
    /// Namespaces are cluster-scoped: one entry, under "".
    namespaces: HashMap<String, Indexed<HashMap<String, RegoValue>>>,
}

/// One namespace's index, the fingerprint of the objects it was built from, and what could
/// not be read of them.
struct Indexed<T> {
    fingerprint: u64,
    index: T,
    problems: Vec<String>,
}

/// The watch caches' objects of each kind; `None` for a kind that is not listed (yet).
pub struct Cached<'a> {
    pub claims: Option<&'a [Arc<Kept>]>,
    pub network_policies: Option<&'a [Arc<Kept>]>,
    pub namespaces: Option<&'a [Arc<Kept>]>,
}

impl Incremental {
    /// The objects of `cached`, re-indexing what changed since the last call. Kinds are kept
    /// in the order Namespaces, claims, NetworkPolicies while their estimated bytes stay
    /// within `max_bytes`; a kind past it is unknown (its policies stay silent) and said.
    pub fn update(&mut self, cached: &Cached<'_>, max_bytes: usize) -> Objects {
        let mut budget = Budget {
            max_bytes,
            sizes: ObjectSizes::default(),
            problems: Vec::new(),
        };
        let namespaces_kept = budget.keep(cached.namespaces, "Namespaces", |s| &mut s.namespaces);
        let claims_kept = budget.keep(cached.claims, "PersistentVolumeClaims", |s| &mut s.claims);
        let policies_kept = budget.keep(cached.network_policies, "NetworkPolicies", |s| {
            &mut s.network_policies
        });
        let Budget {
            sizes,
            mut problems,
            ..
        } = budget;
        let claims = claims_kept.map(|objects| {
            refresh(&mut self.claims, objects, |items, problems| {
                as_text(claims(items, problems)).into_values().next()
            })
        });
        let network_policies = policies_kept.map(|objects| {
            refresh(&mut self.network_policies, objects, |items, problems| {
                network_policies(items, problems)
                    .into_values()
                    .next()
                    .map(|list| Arc::new(NamespacePolicies::new(list)))
            })
        });
        let namespaces = namespaces_kept.map(|objects| {
            let all = refresh(&mut self.namespaces, objects, |items, problems| {
                Some(namespaces(items, problems))
            });
            all.into_values().next().unwrap_or_default()
        });
        if claims_kept.is_some() {
            problems.extend(problems_of(&self.claims));
        }
        if policies_kept.is_some() {
            problems.extend(problems_of(&self.network_policies));
        }
        if namespaces_kept.is_some() {
            problems.extend(problems_of(&self.namespaces));
        }
        Objects {
            claims,
            converted: Converted::default(),
            network_policies,
            namespaces,
            problems,
            sizes,
        }
    }
}

/// The kinds kept so far within the inventory's memory bound.
struct Budget {
    max_bytes: usize,
    sizes: ObjectSizes,
    problems: Vec<String>,
}

impl Budget {
    /// `objects` if they fit in what is left (counted in `sizes`), else `None`, said.
    fn keep<'a>(
        &mut self,
        objects: Option<&'a [Arc<Kept>]>,
        what: &str,
        count: impl Fn(&mut ObjectSizes) -> &mut usize,
    ) -> Option<&'a [Arc<Kept>]> {
        let objects = objects?;
        *count(&mut self.sizes) = objects.len();
        let bytes: usize = objects.iter().map(|o| o.bytes()).sum();
        if self.sizes.bytes.saturating_add(bytes) > self.max_bytes {
            self.problems.push(format!(
                "{} {what}: past the inventory's memory bound ({} MiB, --inventory-max-mib), so they are unknown to the policies",
                objects.len(),
                self.max_bytes >> 20
            ));
            return None;
        }
        self.sizes.bytes += bytes;
        Some(objects)
    }
}

/// What could not be read of the objects behind `state`'s indexes.
fn problems_of<T>(state: &HashMap<String, Indexed<T>>) -> impl Iterator<Item = String> + '_ {
    state.values().flat_map(|i| i.problems.iter().cloned())
}

/// Re-indexes the namespaces of `objects` whose fingerprint changed (and forgets those with
/// no objects left); the index of every namespace. Cluster-scoped objects (Namespaces) are
/// one group, under "".
fn refresh<T: Clone>(
    state: &mut HashMap<String, Indexed<T>>,
    objects: &[Arc<Kept>],
    build: impl Fn(&[Value], &mut Vec<String>) -> Option<T>,
) -> HashMap<String, T> {
    let mut by_namespace: HashMap<&str, Vec<&Kept>> = HashMap::new();
    for o in objects {
        by_namespace.entry(&o.namespace).or_default().push(o);
    }
    // A cache lists its objects in no fixed order; the fingerprint must not depend on it.
    for members in by_namespace.values_mut() {
        members.sort_by(|a, b| a.name.cmp(&b.name));
    }
    state.retain(|ns, _| by_namespace.contains_key(ns.as_str()));
    for (ns, members) in &by_namespace {
        let fingerprint = fingerprint(members.iter().copied());
        if state.get(*ns).is_some_and(|i| i.fingerprint == fingerprint) {
            continue;
        }
        let mut problems = Vec::new();
        let values: Vec<Value> = members.iter().map(|o| o.value()).collect();
        match build(&values, &mut problems) {
            Some(index) => {
                let indexed = Indexed {
                    fingerprint,
                    index,
                    problems,
                };
                state.insert(ns.to_string(), indexed);
            }
            None => {
                state.remove(*ns);
            }
        }
    }
    state
        .iter()
        .map(|(ns, i)| (ns.clone(), i.index.clone()))
        .collect()
}

/// A hash of the objects' names and resourceVersions: the API server changes an object's
/// resourceVersion on every write, so equal fingerprints mean nothing to re-index.
fn fingerprint<'a>(objects: impl Iterator<Item = &'a Kept>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for o in objects {
        o.namespace.hash(&mut h);
        o.name.hash(&mut h);
        o.version.hash(&mut h);
    }
    h.finish()
}
