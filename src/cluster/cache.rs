//! The watch caches of the namespaced objects (claims, NetworkPolicies, Namespaces): each
//! object kept as [`Kept`], its identity and what the inventory reads of it as compact JSON
//! text, not as the object the API server sent.
//!
//! Why text: a claim stripped to its phase, modes, class and volume is ~150 bytes of JSON,
//! but ~3.6 KB as a `DynamicObject` (an `ObjectMeta` inline, a `BTreeMap` node per JSON
//! object); 50,000 of them were 221 MiB of RSS. The text is parsed again only when its
//! namespace is re-indexed ([`Incremental`](super::objects::Incremental)), i.e. when one
//! of its objects changed.
//!
//! Relists (a restarted watch, 410 Gone) are built aside and swapped in complete, so the
//! last complete list keeps serving meanwhile.
//!
//! Entry points: [`Kept::of`], [`Cache`].

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::Value;

use super::strip::strip;

/// One cached object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub namespace: Box<str>,
    pub name: Box<str>,
    /// resourceVersion: the API server changes it on every write.
    pub version: Box<str>,
    /// The stripped object ([`strip`]) as JSON.
    text: Box<str>,
}

/// Estimated bytes per kept object beyond its strings: the Arc, the boxes, the map entry, its
/// share of its namespace's index (calibrated on benches/inventory_scale.rs: RSS per claim).
const OVERHEAD: usize = 500;

impl Kept {
    /// `object` of kind `kind`, stripped to what the inventory reads.
    pub fn of(kind: &str, mut object: DynamicObject) -> Kept {
        strip(kind, &mut object);
        let text = |s: &Option<String>| s.as_deref().unwrap_or_default().into();
        Kept {
            namespace: text(&object.metadata.namespace),
            name: text(&object.metadata.name),
            version: text(&object.metadata.resource_version),
            // A DynamicObject always serialises; an empty object reads as unreadable later.
            text: serde_json::to_string(&object)
                .unwrap_or_default()
                .into_boxed_str(),
        }
    }

    /// The stripped object as JSON (`null` if it could not be kept).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// Estimated bytes held.
    pub fn bytes(&self) -> usize {
        self.namespace.len() + self.name.len() + self.version.len() + self.text.len() + OVERHEAD
    }
}

type Key = (Box<str>, Box<str>);

/// The objects of one kind, as the watch last listed and updated them.
#[derive(Debug)]
pub struct Cache {
    /// The kind's name, for [`strip`].
    kind: String,
    live: HashMap<Key, Arc<Kept>>,
    /// A relist being built; swapped in when complete.
    relist: Option<HashMap<Key, Arc<Kept>>>,
    /// Whether a list ever completed: until then the kind is unknown, not empty.
    listed: bool,
}

impl Cache {
    pub fn new(kind: impl Into<String>) -> Cache {
        Cache {
            kind: kind.into(),
            live: HashMap::new(),
            relist: None,
            listed: false,
        }
    }

    /// Adds or replaces `object`; true when the view changed (new, or a new version).
    pub fn apply(&mut self, object: DynamicObject) -> bool {
        let kept = Kept::of(&self.kind, object);
        let key = (kept.namespace.clone(), kept.name.clone());
        if let Some(relist) = self.relist.as_mut() {
            relist.insert(key, Arc::new(kept));
            return false;
        }
        if self.live.get(&key).is_some_and(|k| **k == kept) {
            return false;
        }
        self.live.insert(key, Arc::new(kept));
        true
    }

    /// Removes `object`; true when the view changed.
    pub fn delete(&mut self, object: &DynamicObject) -> bool {
        let key: Key = (
            object
                .metadata
                .namespace
                .as_deref()
                .unwrap_or_default()
                .into(),
            object.metadata.name.as_deref().unwrap_or_default().into(),
        );
        if let Some(relist) = self.relist.as_mut() {
            relist.remove(&key);
            return false;
        }
        self.live.remove(&key).is_some()
    }

    /// A relist starts: objects listed from now on make a new view.
    pub fn begin_relist(&mut self) {
        self.relist = Some(HashMap::new());
    }

    /// The relist is complete: its objects replace the view. True (the view is new).
    pub fn end_relist(&mut self) -> bool {
        match self.relist.take() {
            Some(fresh) => {
                self.live = fresh;
                self.listed = true;
                true
            }
            None => false,
        }
    }

    /// The objects, once a list completed (`None` before: unknown).
    pub fn objects(&self) -> Option<Vec<Arc<Kept>>> {
        self.listed.then(|| self.live.values().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(name: &str, version: &str, phase: &str) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "team", "resourceVersion": version,
                "managedFields": [{"manager": "kube-controller-manager"}]},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": phase}}))
        .expect("claim")
    }

    #[test]
    fn a_cache_is_unknown_until_listed_and_a_relist_keeps_the_last_view() {
        let mut cache = Cache::new("PersistentVolumeClaim");
        cache.begin_relist();
        cache.apply(claim("a", "1", "Bound"));
        assert_eq!(cache.objects(), None, "no list completed yet");
        assert!(cache.end_relist());
        assert_eq!(cache.objects().map(|o| o.len()), Some(1));
        assert!(
            !cache.apply(claim("a", "1", "Bound")),
            "same version: no change"
        );
        assert!(cache.apply(claim("a", "2", "Lost")));
        cache.begin_relist();
        cache.apply(claim("b", "3", "Bound"));
        let seen = cache.objects().expect("still listed");
        assert_eq!(&*seen[0].name, "a", "the last complete view serves");
        assert!(cache.end_relist());
        let seen = cache.objects().expect("listed");
        assert_eq!(seen.len(), 1);
        assert_eq!(&*seen[0].name, "b");
        assert!(cache.delete(&claim("b", "4", "Bound")));
        assert_eq!(cache.objects().map(|o| o.len()), Some(0));
    }

    #[test]
    fn a_kept_claim_is_its_identity_and_what_is_read() {
        let kept = Kept::of("PersistentVolumeClaim", claim("a", "7", "Bound"));
        assert_eq!(
            (&*kept.namespace, &*kept.name, &*kept.version),
            ("team", "a", "7")
        );
        let v = kept.value();
        assert_eq!(v["status"]["phase"], "Bound");
        assert_eq!(v["spec"]["accessModes"], json!(["ReadWriteOnce"]));
        assert_eq!(v["spec"].get("resources"), None);
        assert_eq!(v["metadata"].get("managedFields"), None);
    }
}
