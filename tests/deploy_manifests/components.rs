//! The opt-in components that widen or narrow the default rights, built as their
//! kustomizations tell users to (kubectl's kustomize, offline): MPIJob's rules only with
//! deploy/controller-mpi or deploy/controller-mpi-v1, and RoleBindings per listed namespace
//! instead of ClusterRoleBindings with deploy/controller-namespaced and
//! deploy/image-pinning-namespaced. (What the API server then allows each ServiceAccount is
//! e2e_rbac's table.)

use std::io::Write as _;

use serde_json::{json, Value};

use crate::controller::{grants, Grants};
use crate::kustomize::{find, kustomize, relative_path};
use crate::support::*;

/// `kubectl kustomize` of an overlay of deploy/ with `components` and, for each namespace
/// of `namespaces`, deploy/`binding` included in it; `None` (after a notice) without kubectl.
pub fn build(
    components: &[&str],
    binding: Option<&str>,
    namespaces: &[&str],
) -> Option<Vec<Value>> {
    let overlay = tempfile::tempdir().expect("temp dir");
    let deploy = relative_path(overlay.path(), &deploy_dir());
    let mut resources = vec![deploy.display().to_string()];
    for ns in namespaces {
        let dir = overlay.path().join(ns);
        std::fs::create_dir_all(&dir).expect("namespace dir");
        let binding_dir = relative_path(&dir, &deploy_dir().join(binding.unwrap_or_default()));
        let text = format!("namespace: {ns}\nresources: [{}]\n", binding_dir.display());
        std::fs::write(dir.join("kustomization.yaml"), text).expect("write namespace dir");
        resources.push(ns.to_string());
    }
    let components: Vec<String> = components
        .iter()
        .map(|c| deploy.join(c).display().to_string())
        .collect();
    let text = format!(
        "resources: [{}]\ncomponents: [{}]\n",
        resources.join(", "),
        components.join(", ")
    );
    std::fs::write(overlay.path().join("kustomization.yaml"), text).expect("write overlay");
    let built = kustomize(overlay.path());
    if built.is_none() {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: no kubectl on PATH or among the kube test binaries (the component builds \
             need its kustomize; no cluster)"
        );
    }
    built
}

fn rows(rows: &[(&str, &str, &[&str])]) -> Grants {
    rows.iter()
        .flat_map(|(g, r, verbs)| {
            verbs
                .iter()
                .map(move |v| (g.to_string(), r.to_string(), v.to_string()))
        })
        .collect()
}

/// What an MPI component adds to the controller's ClusterRole, and the kinds its Deployment
/// runs (after deploy/controller-namespaced, without which it does not build).
fn added_by(component: &str) -> Option<(Grants, Vec<String>)> {
    let confined = ["controller", "controller-namespaced"];
    let base = build(&confined, None, &[])?;
    let with = build(&[confined[0], confined[1], component], None, &[])?;
    let role = |objects: &[Value]| grants(find(objects, "ClusterRole", "gangplank-controller"));
    let added = role(&with).difference(&role(&base)).cloned().collect();
    let args = &find(&with, "Deployment", "gangplank-controller")["spec"]["template"]["spec"]
        ["containers"][0]["args"];
    let kinds = strings(args)
        .into_iter()
        .filter(|a| a.starts_with("--kinds="))
        .map(str::to_string)
        .collect();
    Some((added, kinds))
}

const JOBS: (&str, &str, &[&str]) = (
    "kubeflow.org",
    "mpijobs",
    &["list", "watch", "patch", "delete"],
);
const STATUS: (&str, &str, &[&str]) = ("kubeflow.org", "mpijobs/status", &["patch"]);
const CONFIG_MAPS: (&str, &str, &[&str]) = (
    "",
    "configmaps",
    &["get", "list", "watch", "create", "patch"],
);
const DEFAULT_KINDS: &str = "--kinds=PyTorchJob,TFJob,XGBoostJob,PaddleJob,JAXJob";

#[test]
fn controller_mpi_adds_mpijobs_their_config_maps_and_ssh_secrets_and_nothing_else() {
    let Some((added, kinds)) = added_by("controller-mpi") else {
        return;
    };
    let secrets = ("", "secrets", &["get", "create", "patch"][..]);
    assert_eq!(added, rows(&[JOBS, STATUS, CONFIG_MAPS, secrets]));
    assert_eq!(kinds, [DEFAULT_KINDS, "--kinds=MPIJob"]);
}

#[test]
fn controller_mpi_v1_adds_the_launchers_identity_and_exec_and_nothing_else() {
    let Some((added, kinds)) = added_by("controller-mpi-v1") else {
        return;
    };
    let expected = rows(&[
        JOBS,
        STATUS,
        CONFIG_MAPS,
        ("", "serviceaccounts", &["get", "create"]),
        (
            "rbac.authorization.k8s.io",
            "roles",
            &["get", "create", "patch"],
        ),
        (
            "rbac.authorization.k8s.io",
            "rolebindings",
            &["get", "create"],
        ),
        // What the launcher's Role grants, which the controller must hold to grant it
        // (pods get/list/watch are in the base role already).
        ("", "pods/exec", &["create"]),
    ]);
    assert_eq!(added, expected);
    assert_eq!(kinds, [DEFAULT_KINDS, "--kinds=MPIJob/v1"]);
}

fn bindings<'a>(objects: &'a [Value], kind: &str, role: &str) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| o["kind"] == kind && o["roleRef"]["name"] == role)
        .collect()
}

#[test]
fn controller_namespaced_binds_its_role_only_in_the_listed_namespaces_and_watches_only_those() {
    let listed = ["team-a", "team-b"];
    let components = ["controller", "controller-namespaced", "controller-mpi-v1"];
    let Some(objects) = build(&components, Some("controller-namespaced/binding"), &listed) else {
        return;
    };
    assert!(
        bindings(&objects, "ClusterRoleBinding", "gangplank-controller").is_empty(),
        "no cluster-wide binding of the controller's role"
    );
    let bound = bindings(&objects, "RoleBinding", "gangplank-controller");
    let namespaces: Vec<&str> = bound
        .iter()
        .map(|b| b["metadata"]["namespace"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(namespaces, listed);
    for binding in bound {
        assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "gangplank-controller", "namespace": NAMESPACE}]),
            "the namespace transformer leaves the subject in gangplank's namespace"
        );
    }
    // The MPI component's rules are in the one ClusterRole the RoleBindings bind.
    let role = grants(find(&objects, "ClusterRole", "gangplank-controller"));
    assert!(role.contains(&("".into(), "pods/exec".into(), "create".into())));
    // The leader Lease stays bound in gangplank-system.
    let leader = find(&objects, "RoleBinding", "gangplank-controller-leader");
    assert_eq!(leader["metadata"]["namespace"], NAMESPACE);
    // The namespaces reach the flag from a ConfigMap the overlay makes; without it the pod
    // does not start (never cluster-wide by default).
    let env = &find(&objects, "Deployment", "gangplank-controller")["spec"]["template"]["spec"]
        ["containers"][0]["env"];
    let namespaces = env
        .as_array()
        .expect("env")
        .iter()
        .find(|e| e["name"] == "GANGPLANK_NAMESPACES")
        .expect("GANGPLANK_NAMESPACES");
    let from = &namespaces["valueFrom"]["configMapKeyRef"];
    assert_eq!(from["name"], "gangplank-controller-namespaces");
    assert_eq!(from["key"], "namespaces");
    assert!(from["optional"].is_null() || from["optional"] == false);
}

#[test]
fn image_pinning_namespaced_reads_pull_secrets_only_in_the_opted_in_namespaces() {
    let Some(objects) = build(
        &["image-pinning-namespaced"],
        Some("image-pinning-namespaced/binding"),
        &["team-a"],
    ) else {
        return;
    };
    let role = "gangplank-webhook-image-pinning";
    assert!(bindings(&objects, "ClusterRoleBinding", role).is_empty());
    let bound = bindings(&objects, "RoleBinding", role);
    assert_eq!(bound.len(), 1);
    assert_eq!(bound[0]["metadata"]["namespace"], "team-a");
    assert_eq!(
        bound[0]["subjects"],
        json!([{"kind": "ServiceAccount", "name": "gangplank-webhook", "namespace": NAMESPACE}])
    );
    assert_eq!(
        find(&objects, "ClusterRole", role)["rules"],
        json!([{"apiGroups": [""], "resources": ["secrets", "serviceaccounts"], "verbs": ["get"]}])
    );
    let pod = &find(&objects, "Deployment", "gangplank-webhook")["spec"]["template"]["spec"];
    assert_eq!(
        pod["automountServiceAccountToken"], true,
        "the token the reads need"
    );
}
