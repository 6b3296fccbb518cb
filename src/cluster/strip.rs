//! What the watch caches keep of the objects they list: only the fields the inventory reads,
//! so a cache of 50,000 claims holds their phase and modes, not their managedFields,
//! annotations and finalizers. Applied to every object before it enters the cache
//! (kube-runtime's `.modify()`).
//!
//! Entry point: [`strip`].

use kube::api::DynamicObject;
use kube::core::ObjectMeta;
use serde_json::{Map, Value};

/// Annotations any kept object may need: a StorageClass's default-class markers.
const KEPT_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

/// Reduces `object`, of kind `kind`, to what the inventory reads of that kind.
pub fn strip(kind: &str, object: &mut DynamicObject) {
    let keep_labels = kind == "Namespace";
    object.metadata = kept_metadata(&object.metadata, keep_labels);
    let data = std::mem::take(&mut object.data);
    object.data = match kind {
        "PersistentVolumeClaim" => pick(
            &data,
            &[
                "/spec/accessModes",
                "/spec/storageClassName",
                "/spec/volumeName",
                "/status/phase",
                "/status/accessModes",
            ],
        ),
        "NetworkPolicy" => pick(&data, &["/spec"]),
        // HyperNodes: their status (node count, conditions) changes nothing policies read.
        "HyperNode" => pick(&data, &["/spec"]),
        "Namespace" => Value::Object(Map::new()),
        // Not its description (free text, the only field of any size).
        "PriorityClass" => pick(&data, &super::priority_classes::KEPT_FIELDS),
        // Queues, ClusterQueues, LocalQueues, StorageClasses: few, and read in full.
        _ => data,
    };
}

/// Name, namespace, resourceVersion (the fingerprints compare it), uid, creation time (the
/// default StorageClass is the newest), the kept annotations and, for Namespaces, labels.
fn kept_metadata(meta: &ObjectMeta, keep_labels: bool) -> ObjectMeta {
    let annotations = meta.annotations.as_ref().map(|all| {
        all.iter()
            .filter(|(k, _)| KEPT_ANNOTATIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    });
    ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        resource_version: meta.resource_version.clone(),
        uid: meta.uid.clone(),
        creation_timestamp: meta.creation_timestamp.clone(),
        annotations: annotations.filter(|a: &std::collections::BTreeMap<_, _>| !a.is_empty()),
        labels: if keep_labels {
            meta.labels.clone()
        } else {
            None
        },
        ..ObjectMeta::default()
    }
}

/// A copy of `data` with only the fields at `pointers` (and their parents).
fn pick(data: &Value, pointers: &[&str]) -> Value {
    let mut out = Value::Object(Map::new());
    for pointer in pointers {
        let Some(value) = data.pointer(pointer) else {
            continue;
        };
        let mut at = &mut out;
        let parts: Vec<&str> = pointer.split('/').skip(1).collect();
        for (i, part) in parts.iter().enumerate() {
            let Some(map) = at.as_object_mut() else {
                break;
            };
            at = if i + 1 == parts.len() {
                map.insert((*part).to_string(), value.clone());
                break;
            } else {
                map.entry((*part).to_string())
                    .or_insert_with(|| Value::Object(Map::new()))
            };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> DynamicObject {
        serde_json::from_value(v).expect("object")
    }

    #[test]
    fn a_claim_keeps_what_the_storage_policy_reads() {
        let mut claim = object(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "team", "resourceVersion": "7",
                "labels": {"a": "b"}, "finalizers": ["kubernetes.io/pvc-protection"],
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
                "managedFields": [{"manager": "kube-controller-manager"}]},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "fast",
                "volumeName": "pv-1", "resources": {"requests": {"storage": "1Ti"}}},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteMany"],
                "capacity": {"storage": "1Ti"}},
        }));
        strip("PersistentVolumeClaim", &mut claim);
        let v = serde_json::to_value(&claim).expect("json");
        assert_eq!(
            v,
            json!({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": "team", "resourceVersion": "7"},
                "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "fast",
                    "volumeName": "pv-1"},
                "status": {"phase": "Bound", "accessModes": ["ReadWriteMany"]},
            })
        );
    }

    #[test]
    fn a_namespace_keeps_its_labels_and_a_storage_class_its_default_marker() {
        let mut ns = object(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team", "labels": {"tier": "gpu"},
                "annotations": {"x": "y"}}, "spec": {"finalizers": ["kubernetes"]}}));
        strip("Namespace", &mut ns);
        assert_eq!(
            serde_json::to_value(&ns).expect("json")["metadata"],
            json!({"name": "team", "labels": {"tier": "gpu"}})
        );
        let mut class = object(
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "fast", "creationTimestamp": "2026-01-01T00:00:00Z",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true",
                    "kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
            "provisioner": "csi.example.com"}),
        );
        strip("StorageClass", &mut class);
        let v = serde_json::to_value(&class).expect("json");
        assert_eq!(
            v["metadata"]["annotations"],
            json!({"storageclass.kubernetes.io/is-default-class": "true"})
        );
        assert_eq!(v["provisioner"], "csi.example.com");
    }

    #[test]
    fn a_priority_class_keeps_its_value_default_and_preemption_not_its_description() {
        let mut class = object(json!({"apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass", "metadata": {"name": "high", "labels": {"a": "b"}},
            "value": 100000, "globalDefault": false, "preemptionPolicy": "Never",
            "description": "a long text nobody reads at admission"}));
        strip("PriorityClass", &mut class);
        let v = serde_json::to_value(&class).expect("json");
        assert_eq!(
            v,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "high"}, "value": 100000, "globalDefault": false,
                "preemptionPolicy": "Never"})
        );
    }
}
