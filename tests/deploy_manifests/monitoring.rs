//! deploy/monitoring built after deploy/ and deploy/controller as its kustomization says
//! (kubectl's kustomize, offline): each PodMonitor selects the pods of its Deployment on a
//! container port those pods declare, and everything lands in gangplank's namespace. (What
//! the rules and the dashboard query is tests/monitoring.rs.)

use serde_json::Value;

use crate::components::build;
use crate::kustomize::find;
use crate::support::*;

/// The container port `name` of a Deployment's pods, if any container declares it.
fn has_port(deployment: &Value, name: &str) -> bool {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .any(|p| p["name"] == name)
}

#[test]
fn monitoring_scrapes_the_webhook_and_controller_pods_on_their_metrics_ports() {
    let Some(objects) = build(&["controller", "monitoring"], None, &[]) else {
        return;
    };
    for (monitor, deployment) in [
        ("gangplank-webhook", "gangplank-webhook"),
        ("gangplank-controller", "gangplank-controller"),
    ] {
        let pm = find(&objects, "PodMonitor", monitor);
        assert_eq!(pm["metadata"]["namespace"], NAMESPACE);
        let d = find(&objects, "Deployment", deployment);
        let pod_labels = &d["spec"]["template"]["metadata"]["labels"];
        let selector = pm["spec"]["selector"]["matchLabels"]
            .as_object()
            .expect("matchLabels");
        for (k, v) in selector {
            assert_eq!(
                &pod_labels[k], v,
                "{monitor} selects {k}={v}; {deployment}'s pods"
            );
        }
        for endpoint in pm["spec"]["podMetricsEndpoints"]
            .as_array()
            .expect("endpoints")
        {
            let port = endpoint["port"].as_str().expect("a named port");
            assert!(has_port(d, port), "{deployment}'s pods have no port {port}");
            assert_eq!(endpoint["path"], "/metrics");
        }
    }
    let rule = find(&objects, "PrometheusRule", "gangplank");
    assert_eq!(rule["metadata"]["namespace"], NAMESPACE);
    let dashboard = find(&objects, "ConfigMap", "gangplank-grafana-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
}
