//! Hand-written schemas for the embedded Kubernetes types in the job specs, in the shape the
//! upstream CRDs give them (controller-gen output), so that the apiserver treats the fields alike.
//!
//! The pod template is the one deliberate exception: see [`pod_template`].

use schemars::{json_schema, Schema, SchemaGenerator};

/// Quantities as upstream's CRDs accept them: an integer, or a string in Kubernetes'
/// quantity syntax (`500m`, `16Gi`).
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A replica's pod template: any object, kept as written.
///
/// Upstream inlines the whole PodTemplateSpec schema (about 8,000 lines per CRD). Keeping
/// unknown fields instead accepts everything that schema accepts, so no upstream manifest
/// is refused; fields newer than the CRD survive rather than being pruned; and the CRD stays
/// small enough for client-side `kubectl apply` (upstream's exceed the 256 KiB annotation
/// limit). The pod itself is validated by the apiserver when the controller creates it, and
/// by gangplank's validating webhook before that.
pub fn pod_template(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// autoscaling/v2 MetricSpec items: `type` required as upstream, the rest kept as written
/// (for the same reasons as [`pod_template`]).
pub fn metrics(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"type": "string"}},
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// A map of resource names to quantities (`schedulingPolicy.minResources`).
pub fn quantity_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        // No `anyOf: [integer, string]` as controller-gen writes: kube's structural rewriter
        // would empty its branches, and the flag alone means the same to the apiserver.
        "additionalProperties": {
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        },
    })
}

/// A metav1.Time: an RFC 3339 timestamp.
pub fn date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "date-time"})
}

/// `schedulingPolicy.queue`, which upstream makes immutable with a CEL rule.
pub fn immutable_queue(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "x-kubernetes-validations": [{
            "message": "spec.runPolicy.schedulingPolicy.queue is immutable",
            "rule": "self == oldSelf",
        }],
    })
}

/// A metav1.LabelSelector (the deprecated `replicaStatuses.*.labelSelector`).
pub fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "matchExpressions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {"type": "string"},
                        "values": {
                            "type": "array",
                            "items": {"type": "string"},
                            "x-kubernetes-list-type": "atomic",
                        },
                    },
                },
                "x-kubernetes-list-type": "atomic",
            },
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "x-kubernetes-map-type": "atomic",
    })
}
