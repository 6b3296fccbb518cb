//! Kubeflow Trainer v2 objects for the end-to-end suites.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::ControlPlane;

/// `kubectl apply` of `object` in `ns`, again every 250 ms for up to `limit` while the
/// refusal says the runtime it names is not known yet (the webhook's runtime watch has not
/// seen it); the last answer.
pub async fn apply_when_runtime_known(
    plane: &ControlPlane,
    ns: &str,
    object: &Value,
    limit: Duration,
) -> Result<String, String> {
    let started = Instant::now();
    loop {
        let answer = plane.kubectl_apply(Some(ns), object, &[]);
        match &answer {
            Err(e) if e.contains("is not known here") || e.contains("does not exist") => {
                if started.elapsed() >= limit {
                    return answer;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            _ => return answer,
        }
    }
}

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
