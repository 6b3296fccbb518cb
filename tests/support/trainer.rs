//! Kubeflow Trainer v2 objects for the end-to-end suites.

use serde_json::{json, Value};

/// A ClusterTrainingRuntime `name` of one `node` step (the trainer) whose pod spec is `pod`,
/// with `extra` merged into its spec (a podGroupPolicy, say).
pub fn runtime(name: &str, pod: Value, extra: Value) -> Value {
    let mut runtime = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"spec": {"replicatedJobs": [{
                "name": "node",
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": pod}},
                },
            }]}},
        },
    });
    if let (Some(spec), Value::Object(extra)) = (runtime["spec"].as_object_mut(), extra) {
        spec.extend(extra);
    }
    runtime
}
