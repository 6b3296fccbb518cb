//! The image-pinning component: the webhook pods get a token that can `get` Secrets and
//! ServiceAccounts (the pull secrets of a job), and nothing else.

use serde_json::{json, Value};

use crate::support::*;

#[test]
fn image_pinning_grants_only_get_on_secrets_and_service_accounts_to_the_webhook() {
    let manifests = Manifests::get();
    let roles = manifests.in_component("image-pinning", "ClusterRole");
    assert_eq!(roles.len(), 1, "one ClusterRole in deploy/image-pinning/");
    assert_eq!(
        roles[0]["rules"],
        json!([{"apiGroups": [""], "resources": ["secrets", "serviceaccounts"], "verbs": ["get"]}])
    );
    let bindings = manifests.in_component("image-pinning", "ClusterRoleBinding");
    assert_eq!(
        bindings.len(),
        1,
        "one ClusterRoleBinding in deploy/image-pinning/"
    );
    assert_eq!(bindings[0]["roleRef"]["name"], roles[0]["metadata"]["name"]);
    let account = manifests.one("ServiceAccount");
    assert_eq!(
        bindings[0]["subjects"],
        json!([{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}])
    );

    let component = &documents(&deploy_dir().join("image-pinning/kustomization.yaml"))[0];
    assert_eq!(component["kind"], "Component");
    assert_eq!(component["resources"], json!(["rbac.yaml"]));
    let patch = component["patches"][0]["patch"]
        .as_str()
        .unwrap_or_default();
    assert!(
        patch.contains("/spec/template/spec/automountServiceAccountToken")
            && patch.contains("value: true"),
        "the component mounts the token the reads need: {patch}"
    );
}

/// `--pull-secrets` (issue 41 item 3): pull secrets are read only when a component asks, and
/// each says which reads its RBAC grants: `cluster` for deploy/image-pinning (the server then
/// refuses to start without `--client-ca`), `namespaced` for deploy/image-pinning-namespaced
/// (which includes it: one variable, replaced, not a second entry). Without either, the
/// server's default is `off`.
#[test]
fn each_image_pinning_component_declares_the_scope_of_its_pull_secret_reads() {
    let pull_secrets = |objects: &[Value]| -> Vec<Value> {
        let container = &crate::kustomize::find(objects, "Deployment", "gangplank-webhook")["spec"]
            ["template"]["spec"]["containers"][0];
        container["env"]
            .as_array()
            .expect("env")
            .iter()
            .filter(|e| e["name"] == "GANGPLANK_PULL_SECRETS")
            .map(|e| e["value"].clone())
            .collect()
    };
    let builds = [
        (vec![], vec![]),
        (vec!["image-pinning"], vec![json!("cluster")]),
        (vec!["image-pinning-namespaced"], vec![json!("namespaced")]),
        (
            vec!["cluster-inventory", "image-pinning-namespaced"],
            vec![json!("namespaced")],
        ),
    ];
    for (components, expected) in builds {
        let Some(objects) = crate::components::build(&components, None, &[]) else {
            return;
        };
        assert_eq!(pull_secrets(&objects), expected, "{components:?}");
    }
}
