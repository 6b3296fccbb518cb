//! Both variants built with kubectl's built-in kustomize (offline, no cluster): skipped with a
//! notice when kubectl is not installed.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::policies::PolicyFiles;
use crate::support::*;

/// kubectl where `gangplank-release render` finds it (on PATH, else the kube test binaries':
/// src/release/kubectl.rs); without one, plain `kubectl`, which then fails to start and
/// [`kustomize`] skips.
fn kubectl() -> PathBuf {
    gangplank::release::kubectl::find().unwrap_or_else(|_| PathBuf::from("kubectl"))
}

/// `kubectl kustomize DIR` as JSON documents, or `None` when no kubectl is installed.
pub fn kustomize(dir: &Path) -> Option<Vec<Value>> {
    let output = match Command::new(kubectl()).arg("kustomize").arg(dir).output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("kubectl: {e}"),
    };
    assert!(
        output.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8 output");
    Some(parse_documents(&text, "kubectl kustomize output"))
}

/// `to` as seen from `from`: kustomize refuses absolute paths to other kustomizations.
pub fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let from = from.canonicalize().expect("canonical overlay dir");
    let to = to.canonicalize().expect("canonical deploy dir");
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let up = from.components().count() - common;
    let mut path: PathBuf = std::iter::repeat_n(std::path::Component::ParentDir, up).collect();
    path.extend(to.components().skip(common));
    path
}

pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the build has no {kind} {name}"))
}

#[test]
fn kustomize_builds_the_plain_and_the_cert_manager_variants() {
    let Some(plain) = kustomize(&deploy_dir()) else {
        // Written to stderr directly: libtest captures eprintln!, and a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: no kubectl on PATH or among the kube test binaries (the kustomize build \
             check needs it; no cluster)"
        );
        return;
    };
    let cluster_scoped = [
        "Namespace",
        "PriorityClass",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ];
    for object in &plain {
        if !cluster_scoped.contains(&object["kind"].as_str().unwrap_or_default()) {
            assert_eq!(
                object["metadata"]["namespace"], NAMESPACE,
                "{}",
                object["kind"]
            );
        }
    }
    let files = PolicyFiles::read();
    let keys = |cm: &Value| -> Vec<String> {
        let mut keys: Vec<String> = cm["data"]
            .as_object()
            .expect("ConfigMap data")
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    let mut deployed = keys(find(&plain, "ConfigMap", POLICIES_CONFIGMAP));
    deployed.extend(keys(find(&plain, "ConfigMap", CLUSTER_POLICIES_CONFIGMAP)));
    deployed.sort();
    assert_eq!(deployed, files.top);
    if !files.lib.is_empty() {
        assert_eq!(keys(find(&plain, "ConfigMap", LIB_CONFIGMAP)), files.lib);
    }
    let image = find(&plain, "Deployment", "gangplank-webhook")["spec"]["template"]["spec"]
        ["containers"][0]["image"]
        .clone();
    assert_eq!(image, crate::support::pinned_image());

    // The cert-manager variant as certs/README.md tells users to build it: an overlay of
    // their own that adds the component.
    let overlay = tempfile::tempdir().expect("temp dir");
    let deploy = relative_path(overlay.path(), &deploy_dir());
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "resources: [{}]\ncomponents: [{}]\n",
            deploy.display(),
            deploy.join("cert-manager").display()
        ),
    )
    .expect("write overlay");
    let with_cert_manager = kustomize(overlay.path()).expect("kubectl is installed");
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let configuration = find(&with_cert_manager, kind, "gangplank");
        assert_eq!(
            configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            format!("{NAMESPACE}/gangplank-webhook"),
            "{kind}"
        );
        // The patch adds an annotation and leaves the webhooks as they are.
        assert_eq!(
            configuration["webhooks"],
            find(&plain, kind, "gangplank")["webhooks"],
            "{kind}"
        );
    }
    // The cluster-inventory variant: the webhook pods get a token and read-only access to
    // the inventory's kinds (list/watch), nothing else.
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "resources: [{}]\ncomponents: [{}]\n",
            deploy.display(),
            deploy.join("cluster-inventory").display()
        ),
    )
    .expect("write overlay");
    let with_inventory = kustomize(overlay.path()).expect("kubectl is installed");
    let pod = &find(&with_inventory, "Deployment", "gangplank-webhook")["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], true);
    // The memory limit grows by the inventory's bound over the reviews' 256 Mi.
    let container = &pod["containers"][0];
    let bound: u64 = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "GANGPLANK_INVENTORY_MAX_MIB")
        .and_then(|e| e["value"].as_str()?.parse().ok())
        .expect("the component sets --inventory-max-mib");
    let limit = container["resources"]["limits"]["memory"]
        .as_str()
        .unwrap_or_default();
    let limit_mib: u64 = limit.trim_end_matches("Mi").parse().expect("a limit in Mi");
    assert!(
        limit_mib >= 256 + bound,
        "limit {limit} for a bound of {bound} MiB"
    );
    let role = find(&with_inventory, "ClusterRole", "gangplank-webhook");
    assert_eq!(
        role["rules"],
        serde_json::json!([
            {"apiGroups": [""], "resources": ["nodes", "namespaces", "persistentvolumeclaims"], "verbs": ["list", "watch"]},
            {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["list", "watch"]},
            {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["list", "watch"]},
            {"apiGroups": ["scheduling.volcano.sh"], "resources": ["queues"], "verbs": ["list", "watch"]},
            {"apiGroups": ["topology.volcano.sh"], "resources": ["hypernodes"], "verbs": ["list", "watch"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues", "cohorts", "resourceflavors", "topologies"], "verbs": ["list", "watch"]},
            {"nonResourceURLs": ["/apis/scheduling.k8s.io/v1alpha2"], "verbs": ["get"]},
        ])
    );
    let binding = find(&with_inventory, "ClusterRoleBinding", "gangplank-webhook");
    assert_eq!(binding["subjects"][0]["name"], "gangplank-webhook");
    assert_eq!(binding["subjects"][0]["namespace"], NAMESPACE);

    // The controller variant, as deploy/controller/kustomization.yaml tells users to build it.
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "resources: [{}]\ncomponents: [{}]\n",
            deploy.display(),
            deploy.join("controller").display()
        ),
    )
    .expect("write overlay");
    let with_controller = kustomize(overlay.path()).expect("kubectl is installed");
    let controller = find(&with_controller, "Deployment", "gangplank-controller");
    assert_eq!(controller["metadata"]["namespace"], NAMESPACE);
    // Both processes keep the allocator's setting through the build.
    for name in ["gangplank-webhook", "gangplank-controller"] {
        let container = &find(&with_controller, "Deployment", name)["spec"]["template"]["spec"]
            ["containers"][0];
        assert_eq!(
            crate::workload::allocator_thp(container),
            Some("0"),
            "{name}"
        );
    }
    let image = &controller["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(image, &crate::support::pinned_image());
    // ServiceAccount, ClusterRole and its binding, the leader Role and its binding, the
    // Deployment, its PDB, nine admission policies and their bindings.
    assert_eq!(
        with_controller.len(),
        plain.len() + 25,
        "{with_controller:#?}"
    );

    // The Trainer variant: TrainJobs and both runtime kinds on both webhooks (the
    // cluster-scoped ClusterTrainingRuntime in a rule of its own scope), a token, and
    // list/watch of the runtimes only.
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "resources: [{}]\ncomponents: [{}]\n",
            deploy.display(),
            deploy.join("trainer").display()
        ),
    )
    .expect("write overlay");
    let with_trainer = kustomize(overlay.path()).expect("kubectl is installed");
    let pod = &find(&with_trainer, "Deployment", "gangplank-webhook")["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], true);
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let rules = &find(&with_trainer, kind, "gangplank")["webhooks"][0]["rules"];
        let base = &find(&plain, kind, "gangplank")["webhooks"][0]["rules"];
        let added: Vec<&Value> = rules
            .as_array()
            .expect("rules")
            .iter()
            .skip(base.as_array().map_or(0, Vec::len))
            .collect();
        assert_eq!(
            added,
            [
                &serde_json::json!({"apiGroups": ["trainer.kubeflow.org"], "apiVersions": ["v1alpha1"], "resources": ["trainjobs", "trainingruntimes"], "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}),
                &serde_json::json!({"apiGroups": ["trainer.kubeflow.org"], "apiVersions": ["v1alpha1"], "resources": ["clustertrainingruntimes"], "operations": ["CREATE", "UPDATE"], "scope": "Cluster"}),
            ],
            "{kind}"
        );
    }
    // The pod webhook of the native gang: pod CREATE, labelled pods only, failing closed.
    let hooks = &find(&with_trainer, "MutatingWebhookConfiguration", "gangplank")["webhooks"];
    let pods = &hooks[1];
    assert_eq!(pods["name"], "pods.gangplank.dev");
    assert_eq!(
        pods["rules"],
        serde_json::json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"], "scope": "Namespaced"}])
    );
    assert_eq!(
        pods["objectSelector"],
        serde_json::json!({"matchExpressions": [{"key": "gangplank.dev/pod-group", "operator": "Exists"}]})
    );
    assert_eq!(pods["failurePolicy"], "Fail");
    assert_eq!(pods["sideEffects"], "None");
    assert_eq!(pods["clientConfig"]["service"]["path"], "/mutate");
    let role = find(&with_trainer, "ClusterRole", "gangplank-webhook-trainer");
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": ["trainer.kubeflow.org"], "resources": ["clustertrainingruntimes", "trainingruntimes"], "verbs": ["list", "watch"]}])
    );
    let binding = find(
        &with_trainer,
        "ClusterRoleBinding",
        "gangplank-webhook-trainer",
    );
    assert_eq!(binding["subjects"][0]["name"], "gangplank-webhook");
    assert_eq!(binding["subjects"][0]["namespace"], NAMESPACE);

    let certificate = find(&with_cert_manager, "Certificate", "gangplank-webhook");
    assert_eq!(certificate["metadata"]["namespace"], NAMESPACE);
    assert_eq!(
        with_cert_manager.len(),
        plain.len() + 4,
        "Issuers and Certificates"
    );
}

/// A platform's own registry, as deploy/README.md ("Image") tells: an overlay's `images:`
/// entry naming the released repository, with `digest:`, reaches both Deployments, webhook
/// and controller, and the audit CronJob, as `name@sha256:...` and nothing else (no tag
/// beside it to drift).
#[test]
fn an_overlay_pins_both_deployments_to_one_image_digest() {
    let overlay = tempfile::tempdir().expect("temp dir");
    let deploy = relative_path(overlay.path(), &deploy_dir());
    let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "resources: [{}]\ncomponents: [{}, {}]\nimages:\n  - name: ghcr.io/gangplank-dev/gangplank\n    newName: registry.example.com/platform/gangplank\n    digest: {digest}\n",
            deploy.display(),
            deploy.join("controller").display(),
            deploy.join("audit").display()
        ),
    )
    .expect("write overlay");
    let Some(built) = kustomize(overlay.path()) else {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: no kubectl on PATH or among the kube test binaries (the kustomize build \
             check needs it; no cluster)"
        );
        return;
    };
    for name in ["gangplank-webhook", "gangplank-controller"] {
        let image =
            &find(&built, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]["image"];
        assert_eq!(
            image.as_str(),
            Some(format!("registry.example.com/platform/gangplank@{digest}").as_str()),
            "{name}"
        );
    }
    let cronjob = &find(&built, "CronJob", "gangplank-audit");
    assert_eq!(
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str(),
        Some(format!("registry.example.com/platform/gangplank@{digest}").as_str()),
    );
}
