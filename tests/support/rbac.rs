//! deploy/'s identities as the apiserver sees them: an install of deploy/ with some of its
//! components rendered by `kubectl kustomize` (as users build it), its RBAC objects and admission
//! policies applied, and each ServiceAccount's effective rights read back with `kubectl auth can-i --list
//! --as=system:serviceaccount:...` (the apiserver's own SelfSubjectRulesReview, so what the
//! RBAC authorizer answers, not what the YAML seems to say).
//!
//! Entry points: [`Install::render`], [`Install::apply`] / [`Install::remove`], [`rights`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ControlPlane;

/// gangplank's namespace: the ServiceAccounts live there.
pub const SYSTEM_NAMESPACE: &str = "gangplank-system";

/// The kinds that decide what an identity may do: RBAC, and the admission policies that
/// fence the controller's ServiceAccount whatever RBAC says. The rest of a render
/// (Deployments, webhook configurations, ConfigMaps) is not applied here.
const APPLIED_KINDS: [&str; 8] = [
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// `deploy/` with `components` (paths under deploy/, in order), rendered.
pub struct Install {
    pub name: String,
    pub objects: Vec<Value>,
    file: PathBuf,
}

impl Install {
    /// Renders an overlay `target/test-overlays/<name>` of deploy/ with `components` and, for
    /// each `(dir, namespace)` of `bindings`, deploy/<dir> included in that namespace, as a
    /// platform team lists its namespaces (deploy/README.md). kustomize takes relative paths
    /// only, so the overlay sits at a fixed depth in the repo.
    pub fn render(
        control_plane: &ControlPlane,
        name: &str,
        components: &[&str],
        bindings: &[(&str, &str)],
    ) -> Install {
        let objects = render_overlay(control_plane, name, components, bindings);
        let applied: Vec<Value> = objects
            .iter()
            .filter(|o| APPLIED_KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
            .cloned()
            .collect();
        let file = control_plane.file(&format!("rbac-{name}.json"));
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": applied});
        std::fs::write(&file, list.to_string()).expect("write rendered RBAC");
        Install {
            name: name.to_string(),
            objects,
            file,
        }
    }

    /// `kubectl apply` of the render's RBAC objects and admission policies.
    pub fn apply(&self, control_plane: &ControlPlane) {
        kubectl(
            control_plane,
            &["apply", "-f", &self.file.display().to_string()],
        );
    }

    /// `kubectl delete` of what [`Install::apply`] applied, except the namespaces (their
    /// deletion needs a namespace controller, which does not run here).
    pub fn remove(&self, control_plane: &ControlPlane) {
        let text = std::fs::read_to_string(&self.file).expect("rendered RBAC");
        let mut list: Value = serde_json::from_str(&text).expect("rendered RBAC JSON");
        if let Some(items) = list["items"].as_array_mut() {
            items.retain(|o| o["kind"] != "Namespace");
        }
        let file = control_plane.file(&format!("rbac-{}-remove.json", self.name));
        std::fs::write(&file, list.to_string()).expect("write RBAC to remove");
        let path = file.display().to_string();
        kubectl(
            control_plane,
            &["delete", "--ignore-not-found", "-f", &path],
        );
    }

    /// The rendered objects of `kind`.
    pub fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }
}

fn render_overlay(
    control_plane: &ControlPlane,
    name: &str,
    components: &[&str],
    bindings: &[(&str, &str)],
) -> Vec<Value> {
    let overlay = super::repo().join("target/test-overlays").join(name);
    std::fs::create_dir_all(&overlay).expect("create overlay dir");
    let mut text = String::from("resources:\n  - ../../../deploy\n");
    for (dir, namespace) in bindings {
        // One small kustomization per namespace: it sets the namespace of what it includes.
        let sub = format!("{}-{namespace}", dir.replace('/', "-"));
        let sub_dir = overlay.join(&sub);
        std::fs::create_dir_all(&sub_dir).expect("create per-namespace dir");
        let sub_text =
            format!("namespace: {namespace}\nresources:\n  - ../../../../deploy/{dir}\n");
        std::fs::write(sub_dir.join("kustomization.yaml"), sub_text)
            .expect("write per-namespace kustomization");
        text.push_str(&format!("  - {sub}\n"));
    }
    if !components.is_empty() {
        text.push_str("components:\n");
        for component in components {
            text.push_str(&format!("  - ../../../deploy/{component}\n"));
        }
    }
    std::fs::write(overlay.join("kustomization.yaml"), text).expect("write overlay");
    let output = std::process::Command::new(control_plane.assets.kubectl())
        .arg("kustomize")
        .arg(&overlay)
        .output()
        .expect("run kubectl kustomize");
    assert!(
        output.status.success(),
        "kubectl kustomize {}: {}",
        overlay.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("kustomize output is UTF-8");
    yaml_serde::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("kustomize output is YAML"))
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// Runs kubectl with the admin kubeconfig; its stdout, or a panic with its stderr.
pub fn kubectl(control_plane: &ControlPlane, args: &[&str]) -> String {
    let output = std::process::Command::new(control_plane.assets.kubectl())
        .arg("--kubeconfig")
        .arg(&control_plane.kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl");
    assert!(
        output.status.success(),
        "kubectl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// One grant: a resource (`pods`, `leases.coordination.k8s.io`, a non-resource URL) with
/// the names it is limited to (empty: any), and its verbs.
pub type Rights = BTreeMap<(String, String), BTreeSet<String>>;

/// What `system:serviceaccount:<account_namespace>:<account>` may do in `namespace`
/// (cluster-wide grants included), as `kubectl auth can-i --list` reports it.
pub fn rights(
    control_plane: &ControlPlane,
    account_namespace: &str,
    account: &str,
    namespace: &str,
) -> Rights {
    let user = format!("--as=system:serviceaccount:{account_namespace}:{account}");
    let text = kubectl(
        control_plane,
        &[
            "auth",
            "can-i",
            "--list",
            "--no-headers",
            &user,
            "-n",
            namespace,
        ],
    );
    parse_can_i(&text)
}

/// `Resources  Non-Resource URLs  Resource Names  Verbs` lines: a resource (or nothing)
/// then three bracketed lists. Rows for the same resource and names are merged.
pub fn parse_can_i(text: &str) -> Rights {
    let mut out = Rights::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (resource, lists) = line
            .split_once('[')
            .map_or((line, ""), |(r, rest)| (r, rest));
        let lists = format!("[{lists}");
        let groups: Vec<Vec<String>> = lists
            .split(']')
            .filter_map(|g| g.trim().strip_prefix('['))
            .map(|g| g.split_whitespace().map(str::to_string).collect())
            .collect();
        let [urls, names, verbs] = groups.as_slice() else {
            panic!("unexpected `kubectl auth can-i --list` line: {line:?}")
        };
        let names = names.join(",");
        let targets: Vec<String> = match resource.trim() {
            "" => urls.clone(),
            resource => vec![resource.to_string()],
        };
        for target in targets {
            out.entry((target, names.clone()))
                .or_default()
                .extend(verbs.iter().cloned());
        }
    }
    out
}

/// `rights` less what `baseline` (an identity with no bindings) has: the grants every
/// authenticated user or ServiceAccount holds (discovery, self reviews).
pub fn without(rights: Rights, baseline: &Rights) -> Rights {
    rights
        .into_iter()
        .filter_map(|(key, verbs)| {
            let common = baseline.get(&key).cloned().unwrap_or_default();
            let left: BTreeSet<String> = verbs.difference(&common).cloned().collect();
            (!left.is_empty()).then_some((key, left))
        })
        .collect()
}

/// The directory of the repository's checked-in test data.
pub fn data(path: &str) -> PathBuf {
    super::repo().join("tests/data").join(path)
}

/// True if `path` (relative to the repo) exists and contains `needle`.
pub fn file_mentions(path: &Path, needle: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(super::repo().join(path))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    text.contains(needle)
        .then_some(())
        .ok_or_else(|| format!("{} does not mention {needle}", path.display()))
}
