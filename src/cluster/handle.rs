//! [`ClusterHandle`]: the latest cluster inventory, shared between whoever keeps it current
//! (the watch in `serve`, a snapshot file in `check`) and the policy engine, which reads it
//! as `data.cluster` on every evaluation. Publishing never recompiles the policies, and
//! reading never waits on the cluster.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use regorus::Value as RegoValue;
use serde_json::Value;

use super::classes::ClassTable;
use super::inventory::Inventory;
use super::objects::Objects;
use super::view::{project, Projection};
use crate::placement::{self, model::NodeClass};
use crate::policy::to_rego::to_rego;

/// `data.cluster`: the summary as JSON (for reports), and the engine values of its
/// projections (see [`view`](super::view)), each converted once per selector shape.
#[derive(Debug)]
pub struct ClusterDoc {
    /// The summary without its node classes (see [`Inventory::published`]).
    pub json: Arc<Value>,
    /// The node classes, compact, and which class each node is in.
    classes: Arc<ClassTable>,
    /// Shared by the docs of one summary: new objects do not cost the projections.
    projections: Arc<Mutex<HashMap<Projection, Projected>>>,
    /// Claims, NetworkPolicies and Namespaces, added per request for its namespace.
    objects: Arc<Objects>,
}

/// One projection: as the policies read it, and its classes as the placement search does.
#[derive(Debug, Clone)]
struct Projected {
    value: RegoValue,
    classes: Arc<Vec<NodeClass>>,
}

/// Distinct selector shapes kept per inventory; more is unusual (every job its own labels),
/// and then the cache starts over rather than grow.
const MAX_PROJECTIONS: usize = 64;

impl ClusterDoc {
    /// `data.cluster` for the request whose policy input is `input`.
    pub fn view(&self, input: &RegoValue) -> RegoValue {
        let p = Projection::of(input).with_flavor_labels(input, &self.json);
        let mut cache = self.projections.lock().unwrap_or_else(|e| e.into_inner());
        let projected = match cache.get(&p) {
            Some(v) => v.clone(),
            None => {
                let json = project(&self.json, &p, &self.classes);
                let v = Projected {
                    value: to_rego(&json),
                    classes: Arc::new(NodeClass::all_of(&json)),
                };
                if cache.len() >= MAX_PROJECTIONS {
                    cache.clear();
                }
                cache.insert(p, v.clone());
                v
            }
        };
        drop(cache);
        let mut v = projected.value;
        self.objects.add_to(&mut v, input);
        self.add_placement(&mut v, &projected.classes, input);
        v
    }

    /// `kube_scheduler`: where kube-scheduler would put this request's pods, when the
    /// capacity policy's counts cannot tell (see [`crate::placement`]).
    fn add_placement(&self, v: &mut RegoValue, classes: &[NodeClass], input: &RegoValue) {
        let complete = self.json["incomplete"].as_str().is_none_or(str::is_empty);
        let nodes = self.json["node_count"].as_u64().unwrap_or(0);
        if !complete {
            return;
        }
        let Some(found) = placement::kube_scheduler(classes, nodes, input) else {
            return;
        };
        if let Ok(map) = v.as_object_mut() {
            map.insert(RegoValue::from("kube_scheduler"), to_rego(&found));
        }
    }

    /// The labels of `namespace`, when the inventory holds them (see
    /// [`Objects::namespace_labels`]).
    pub fn namespace_labels(
        &self,
        namespace: &str,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        self.objects.namespace_labels(namespace)
    }

    /// What could not be read from the inventory's source (left out of it).
    pub fn problems(&self) -> Vec<String> {
        let problems = self.json["problems"].as_array().map(Vec::as_slice);
        let summary = problems
            .unwrap_or_default()
            .iter()
            .filter_map(Value::as_str);
        summary
            .map(str::to_string)
            .chain(self.objects.problems().iter().cloned())
            .collect()
    }
}

/// Empty until an inventory is published: then policies see `data.cluster`.
#[derive(Debug, Clone, Default)]
pub struct ClusterHandle(Arc<RwLock<Option<Arc<ClusterDoc>>>>);

impl ClusterHandle {
    /// A handle holding `inventory` for good (a snapshot file, a test case).
    pub fn fixed(inventory: &Inventory) -> ClusterHandle {
        let handle = ClusterHandle::default();
        handle.publish(inventory);
        handle
    }

    /// Makes `inventory` what every following evaluation sees.
    pub fn publish(&self, inventory: &Inventory) {
        let objects = Arc::new(Objects::index(inventory.lists()));
        let (json, classes) = inventory.published();
        self.swap(|_| ClusterDoc {
            classes: Arc::new(classes),
            json: Arc::new(json),
            projections: Arc::default(),
            objects,
        });
    }

    /// Publishes a summary (Nodes, queues, StorageClasses: [`Inventory::published`]),
    /// keeping the namespaced objects the watch published last
    /// ([`ClusterHandle::publish_objects`]).
    pub fn publish_summary(&self, (summary, classes): (Value, ClassTable)) {
        let json = Arc::new(summary);
        self.swap(|current| ClusterDoc {
            json,
            classes: Arc::new(classes),
            projections: Arc::default(),
            objects: current.map(|d| d.objects.clone()).unwrap_or_default(),
        });
    }

    /// Publishes new namespaced objects, keeping the summary (and its projections).
    pub fn publish_objects(&self, objects: Objects) {
        let objects = Arc::new(objects);
        self.swap(|current| match current {
            Some(doc) => ClusterDoc {
                json: doc.json.clone(),
                classes: doc.classes.clone(),
                projections: doc.projections.clone(),
                objects,
            },
            None => ClusterDoc {
                json: Arc::new(Inventory::default().published().0),
                classes: Arc::default(),
                projections: Arc::default(),
                objects,
            },
        });
    }

    /// Replaces the doc with `next(current)` under the write lock, so that two publishers
    /// never lose each other's part.
    fn swap(&self, next: impl FnOnce(Option<&ClusterDoc>) -> ClusterDoc) {
        // A poisoned lock only means a publisher panicked mid-swap of an Arc: the value
        // inside is still whole, so keep using it.
        let mut slot = self.0.write().unwrap_or_else(|e| e.into_inner());
        let doc = next(slot.as_deref());
        *slot = Some(Arc::new(doc));
    }

    /// The inventory evaluations see now, if any.
    pub fn current(&self) -> Option<Arc<ClusterDoc>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
