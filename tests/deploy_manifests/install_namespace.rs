//! deploy/install-namespace: the install namespace written once. Rendered into another
//! namespace (an overlay with `namespace: platform-gp`, every component, a per-namespace
//! binding, and the transformer), no admission policy, binding, webhook configuration or
//! certificate names gangplank-system any more, and every ServiceAccount username follows.
//! Rendered as shipped, every one of them names gangplank-system.

use std::io::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::kustomize::{kustomize, relative_path};
use crate::support::*;

/// Every component that names the install namespace somewhere.
const COMPONENTS: [&str; 6] = [
    "controller",
    "controller-namespaced",
    "controller-mpi-v1",
    "trainer",
    "cert-manager",
    "opt-in",
];

/// The kinds whose strings must follow the install namespace. (The policies' params
/// ConfigMap lists gangplank-system in excludedNamespaces as data: deploy/README.md says to
/// change it with the rest of policies/params.yaml.)
const FOLLOWING: [&str; 9] = [
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ClusterRoleBinding",
    "RoleBinding",
    "Role",
    "ServiceAccount",
    "Certificate",
];

fn write(dir: &Path, text: String) {
    std::fs::create_dir_all(dir).expect("overlay dir");
    std::fs::write(dir.join("kustomization.yaml"), text).expect("write kustomization");
}

/// deploy/ and [`COMPONENTS`] in `namespace`, with team-a's binding and the transformer.
fn render(namespace: &str) -> Option<Vec<Value>> {
    let root = tempfile::tempdir().expect("temp dir");
    let inner = root.path().join("install");
    let team = root.path().join("team-a");
    let transformer = relative_path(root.path(), &deploy_dir().join("install-namespace"));
    std::fs::create_dir_all(&inner).expect("install dir");
    let deploy = relative_path(&inner, &deploy_dir());
    let components: Vec<String> = COMPONENTS
        .iter()
        .map(|c| deploy.join(c).display().to_string())
        .collect();
    write(
        &inner,
        format!(
            "namespace: {namespace}\nresources: [{}]\ncomponents: [{}]\n",
            deploy.display(),
            components.join(", ")
        ),
    );
    std::fs::create_dir_all(&team).expect("team dir");
    let binding = relative_path(&team, &deploy_dir().join("controller-namespaced/binding"));
    write(
        &team,
        format!("namespace: team-a\nresources: [{}]\n", binding.display()),
    );
    write(
        root.path(),
        format!(
            "resources: [install, team-a]\ntransformers: [{}]\n",
            transformer.display()
        ),
    );
    kustomize(root.path())
}

/// Every string in `value`.
fn strings_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings_in(v, out)),
        _ => {}
    }
}

/// The strings of the [`FOLLOWING`] objects, each with the object it is in.
fn following_strings(objects: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        if !FOLLOWING.contains(&kind) {
            continue;
        }
        let mut strings = Vec::new();
        strings_in(object, &mut strings);
        let name = format!("{kind} {}", object["metadata"]["name"]);
        out.extend(strings.into_iter().map(|s| (name.clone(), s)));
    }
    out
}

/// The namespace of each ServiceAccount username in `text`.
fn username_namespaces(text: &str) -> Vec<String> {
    text.split("system:serviceaccount:")
        .skip(1)
        .filter_map(|rest| rest.split(':').next())
        .map(str::to_string)
        .collect()
}

fn assert_follows(objects: &[Value], namespace: &str, other: &str) {
    let strings = following_strings(objects);
    let usernames: Vec<&(String, String)> = strings
        .iter()
        .filter(|(_, s)| s.contains("system:serviceaccount:"))
        .collect();
    // The controller's fence (eight policies), released-at and the webhooks' bypass (two).
    assert!(usernames.len() >= 11, "{usernames:#?}");
    for (object, text) in usernames {
        assert_eq!(username_namespaces(text), [namespace], "{object}: {text}");
    }
    let left: Vec<&(String, String)> = strings.iter().filter(|(_, s)| s.contains(other)).collect();
    assert!(left.is_empty(), "{other} left in: {left:#?}");
}

#[test]
fn every_policy_and_binding_follows_the_install_namespace() {
    let Some(elsewhere) = render("platform-gp") else {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: no kubectl on PATH or among the kube test binaries (the install-namespace \
             render needs its kustomize; no cluster)"
        );
        return;
    };
    assert_follows(&elsewhere, "platform-gp", NAMESPACE);
    // team-a's RoleBinding names the controller where it now lives.
    let bound = elsewhere
        .iter()
        .find(|o| o["kind"] == "RoleBinding" && o["metadata"]["namespace"] == "team-a")
        .expect("team-a's RoleBinding");
    assert_eq!(bound["subjects"][0]["namespace"], "platform-gp");
    // As shipped, the transformer changes nothing: every string names gangplank-system.
    let shipped = render(NAMESPACE).expect("kubectl is installed");
    assert_follows(&shipped, NAMESPACE, "platform-gp");
}
