//! The webhook configurations: which requests reach gangplank, where, and how a call fails.

use std::collections::BTreeSet;

use serde_json::json;

use crate::support::*;

#[test]
fn webhooks_cover_exactly_the_seven_training_kinds_on_create_and_update() {
    let expected: BTreeSet<(String, String, String, String)> = TRAINING_RESOURCES
        .iter()
        .flat_map(|(g, v, r)| {
            ["CREATE", "UPDATE"].map(|op| (g.to_string(), v.to_string(), r.to_string(), op.into()))
        })
        .collect();
    for (endpoint, configuration) in Manifests::get().webhook_configurations() {
        let webhooks = configuration["webhooks"].as_array().expect("webhooks");
        assert_eq!(webhooks.len(), 1, "{endpoint}: one webhook");
        let mut covered = BTreeSet::new();
        for rule in webhooks[0]["rules"].as_array().expect("rules") {
            assert_eq!(rule["scope"], "Namespaced", "{endpoint}: {rule}");
            for g in strings(&rule["apiGroups"]) {
                for v in strings(&rule["apiVersions"]) {
                    for r in strings(&rule["resources"]) {
                        for op in strings(&rule["operations"]) {
                            // Wildcards and subresources ("pytorchjobs/status") would widen
                            // the set; the comparison below catches them.
                            covered.insert((g.into(), v.into(), r.into(), op.into()));
                        }
                    }
                }
            }
        }
        assert_eq!(covered, expected, "{endpoint}: rules");
    }
}

#[test]
fn webhooks_fail_closed_within_five_seconds_and_allow_dry_runs() {
    for (endpoint, configuration) in Manifests::get().webhook_configurations() {
        let webhook = &configuration["webhooks"][0];
        assert_eq!(webhook["failurePolicy"], "Fail", "{endpoint}");
        assert_eq!(webhook["sideEffects"], "None", "{endpoint}");
        assert_eq!(webhook["timeoutSeconds"], 5, "{endpoint}");
        assert_eq!(
            webhook["admissionReviewVersions"],
            json!(["v1"]),
            "{endpoint}"
        );
        assert_eq!(webhook["matchPolicy"], "Exact", "{endpoint}");
        assert!(
            webhook["name"]
                .as_str()
                .is_some_and(|n| n.ends_with(".gangplank.dev")),
            "{endpoint}: webhook names are qualified"
        );
    }
}

#[test]
fn only_the_mutating_webhook_is_reinvoked() {
    let [(_, mutating), (_, validating)] = Manifests::get().webhook_configurations();
    assert_eq!(mutating["webhooks"][0]["reinvocationPolicy"], "IfNeeded");
    // ValidatingWebhook has no such field: the apiserver would drop it with a warning.
    assert!(validating["webhooks"][0]
        .get("reinvocationPolicy")
        .is_none());
}

#[test]
fn webhooks_call_the_service_on_their_own_paths() {
    let manifests = Manifests::get();
    let service = manifests.one("Service");
    let port = &service["spec"]["ports"][0];
    for (endpoint, configuration) in manifests.webhook_configurations() {
        let client = &configuration["webhooks"][0]["clientConfig"];
        let target = &client["service"];
        assert_eq!(target["name"], service["metadata"]["name"], "{endpoint}");
        assert_eq!(target["namespace"], NAMESPACE, "{endpoint}");
        assert_eq!(target["port"], port["port"], "{endpoint}");
        assert_eq!(target["path"], format!("/{endpoint}"), "{endpoint}");
        assert!(client.get("url").is_none(), "{endpoint}: service, not url");
        // Injected by cert-manager or patched from `gangplank certs`, never committed.
        assert!(client.get("caBundle").is_none(), "{endpoint}: caBundle");
    }
}

#[test]
fn webhooks_skip_gangplanks_namespace_and_kube_system() {
    for (endpoint, configuration) in Manifests::get().webhook_configurations() {
        let selector = &configuration["webhooks"][0]["namespaceSelector"];
        assert!(
            selector.get("matchLabels").is_none(),
            "{endpoint}: matchLabels would narrow the webhook to labelled namespaces"
        );
        let expressions = selector["matchExpressions"]
            .as_array()
            .expect("expressions");
        assert_eq!(expressions.len(), 1, "{endpoint}: {selector}");
        let expression = &expressions[0];
        assert_eq!(
            expression["key"], "kubernetes.io/metadata.name",
            "{endpoint}"
        );
        assert_eq!(expression["operator"], "NotIn", "{endpoint}");
        let excluded: BTreeSet<&str> = strings(&expression["values"]).into_iter().collect();
        assert_eq!(
            excluded,
            BTreeSet::from([NAMESPACE, "kube-system"]),
            "{endpoint}"
        );
    }
}

/// The controller's own requests skip both webhooks (so that its bookkeeping goes on while
/// the server is down): exactly its ServiceAccount's username, nothing wider (no group, no
/// prefix), and the same identity deploy/controller's admission policy fences.
#[test]
fn webhooks_skip_exactly_the_controllers_service_account() {
    let username = "system:serviceaccount:gangplank-system:gangplank-controller";
    for (endpoint, configuration) in Manifests::get().webhook_configurations() {
        let conditions = &configuration["webhooks"][0]["matchConditions"];
        assert_eq!(
            conditions,
            &json!([{
                "name": "not-the-gangplank-controller",
                "expression": format!("request.userInfo.username != '{username}'"),
            }]),
            "{endpoint}"
        );
    }
    let manifests = Manifests::get();
    let account = &manifests.in_component("controller", "ServiceAccount")[0]["metadata"];
    assert_eq!(
        format!(
            "system:serviceaccount:{}:{}",
            account["namespace"].as_str().unwrap_or_default(),
            account["name"].as_str().unwrap_or_default()
        ),
        username
    );
    for policy in manifests.in_component("controller", "ValidatingAdmissionPolicy") {
        // gangplank-released-at judges everyone but the controller (released-at-policy.yaml).
        let expected = match policy["metadata"]["name"] == "gangplank-released-at" {
            true => {
                json!([{"name": "not-the-gangplank-controller", "expression": format!("request.userInfo.username != '{username}'")}])
            }
            false => {
                json!([{"name": "gangplank-controller", "expression": format!("request.userInfo.username == '{username}'")}])
            }
        };
        assert_eq!(
            policy["spec"]["matchConditions"], expected,
            "{}",
            policy["metadata"]["name"]
        );
    }
}
