//! The controller component (deploy/controller/): least-privilege RBAC that names exactly
//! what the controller does, a hardened Deployment that elects a leader, and a build of
//! deploy/ with the component (end to end, `e2e_controller_process` runs the controller with
//! this RBAC alone).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::support::*;

fn one<'a>(manifests: &'a Manifests, kind: &str) -> &'a Value {
    let found = manifests.in_component("controller", kind);
    assert_eq!(
        found.len(),
        1,
        "expected exactly one {kind} in deploy/controller/"
    );
    found[0]
}

/// (apiGroup, resource, verb) triples.
pub type Grants = BTreeSet<(String, String, String)>;

/// (apiGroup, resource, verb) of every rule of `role`.
pub fn grants(role: &Value) -> Grants {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    out.insert((group.to_string(), resource.to_string(), verb.to_string()));
                }
            }
        }
    }
    out
}

fn expected(rows: &[(&str, &[&str], &[&str])]) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for (group, resources, verbs) in rows {
        for resource in *resources {
            for verb in *verbs {
                out.insert((group.to_string(), resource.to_string(), verb.to_string()));
            }
        }
    }
    out
}

#[test]
fn controller_rbac_grants_exactly_what_the_controller_does() {
    let manifests = Manifests::get();
    // The default kinds only: MPIJob's rules are in deploy/controller-mpi and
    // deploy/controller-mpi-v1 (components.rs).
    let jobs = [
        "pytorchjobs",
        "tfjobs",
        "xgboostjobs",
        "paddlejobs",
        "jaxjobs",
    ];
    let statuses = jobs.map(|j| format!("{j}/status"));
    let statuses: Vec<&str> = statuses.iter().map(String::as_str).collect();
    let cluster = expected(&[
        ("kubeflow.org", &jobs, &["list", "watch", "patch", "delete"]),
        ("kubeflow.org", &statuses, &["patch"]),
        // patch: the native gang's release gate (gangplank.dev/release-order), pods only.
        (
            "",
            &["pods"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        (
            "",
            &["services"],
            &["get", "list", "watch", "create", "delete"],
        ),
        ("", &["events"], &["list"]),
        ("", &["persistentvolumeclaims"], &["get"]),
        ("events.k8s.io", &["events"], &["create", "patch"]),
        (
            "autoscaling",
            &["horizontalpodautoscalers"],
            &["get", "create", "patch", "delete"],
        ),
        (
            "scheduling.volcano.sh",
            &["podgroups"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        // The Queue a PodGroup names, while Volcano has not looked at it (it says nothing
        // about a missing Queue).
        ("scheduling.volcano.sh", &["queues"], &["get"]),
        (
            "scheduling.x-k8s.io",
            &["podgroups"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        // The native PodGroup's spec is immutable: never patched.
        (
            "scheduling.k8s.io",
            &["podgroups"],
            &["get", "list", "watch", "create", "delete"],
        ),
        // --trainjobs: the TrainJobs whose native PodGroup it creates, read only.
        ("trainer.kubeflow.org", &["trainjobs"], &["list", "watch"]),
        // --namespace-selector: the Namespaces carrying the opt-in label, read only.
        ("", &["namespaces"], &["list", "watch"]),
    ]);
    let role = one(manifests, "ClusterRole");
    for reach in [
        "secrets",
        "configmaps",
        "pods/exec",
        "serviceaccounts",
        "roles",
        "rolebindings",
    ] {
        assert!(
            !grants(role).iter().any(|(_, r, _)| r == reach),
            "the default controller role reaches {reach}"
        );
    }
    assert_eq!(grants(one(manifests, "ClusterRole")), cluster);
    let leases = expected(&[(
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update"],
    )]);
    let role = one(manifests, "Role");
    assert_eq!(grants(role), leases);
    // Read and renewed by name; only create cannot be limited to one.
    for rule in role["rules"].as_array().expect("rules") {
        let named = rule["resourceNames"] == serde_json::json!(["gangplank-controller"]);
        assert!(named || strings(&rule["verbs"]) == ["create"], "{rule}");
    }
    assert_eq!(
        role["metadata"]["namespace"], "gangplank-system",
        "the Lease is namespaced"
    );

    let account = &one(manifests, "ServiceAccount")["metadata"];
    for binding in [
        one(manifests, "ClusterRoleBinding"),
        one(manifests, "RoleBinding"),
    ] {
        let subjects = binding["subjects"].as_array().expect("subjects");
        assert_eq!(subjects.len(), 1, "{binding}");
        assert_eq!(subjects[0]["name"], account["name"]);
        assert_eq!(subjects[0]["namespace"], account["namespace"]);
    }
}

#[test]
fn controller_deployment_elects_a_leader_and_is_hardened() {
    let manifests = Manifests::get();
    let deployment = one(manifests, "Deployment");
    assert_eq!(
        deployment["spec"]["replicas"], 2,
        "a follower ready to take over"
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        pod["serviceAccountName"],
        one(manifests, "ServiceAccount")["metadata"]["name"]
    );
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    let args = strings(&container["args"]);
    assert_eq!(args.first(), Some(&"controller"));
    assert!(args.contains(&"--leader-elect=true"), "{args:?}");
    let env = container["env"].as_array().expect("env");
    let namespace = env
        .iter()
        .find(|e| e["name"] == "POD_NAMESPACE")
        .expect("POD_NAMESPACE");
    assert_eq!(
        namespace["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let probe = &container["livenessProbe"]["httpGet"];
    assert_eq!(
        (probe["path"].as_str(), probe["port"].as_str()),
        (Some("/healthz"), Some("metrics"))
    );
}

/// The admission policies fence the controller's ServiceAccount whatever its RBAC says: each
/// is bound with Deny, fails closed, and matches only that user (webhooks.rs checks the
/// expression); e2e_admission_policy drives each rule through a real API server.
#[test]
fn controller_admission_policies_are_bound_to_deny_and_fail_closed() {
    let manifests = Manifests::get();
    let policies = manifests.in_component("controller", "ValidatingAdmissionPolicy");
    let names: BTreeSet<&str> = policies
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "gangplank-controller-namespaces",
            "gangplank-controller-managed-namespaces",
            "gangplank-controller-pods",
            "gangplank-controller-pod-updates",
            "gangplank-controller-jobs",
            "gangplank-controller-subresources",
            "gangplank-controller-deletes",
            "gangplank-controller-owned-objects",
            "gangplank-released-at",
        ])
    );
    let bindings = manifests.in_component("controller", "ValidatingAdmissionPolicyBinding");
    for policy in &policies {
        assert_eq!(policy["apiVersion"], "admissionregistration.k8s.io/v1");
        assert_eq!(policy["spec"]["failurePolicy"], "Fail");
        let name = &policy["metadata"]["name"];
        let bound: Vec<&&Value> = bindings
            .iter()
            .filter(|b| b["spec"]["policyName"] == *name)
            .collect();
        assert_eq!(bound.len(), 1, "{name}: one binding");
        assert_eq!(
            bound[0]["spec"]["validationActions"],
            serde_json::json!(["Deny"])
        );
        assert!(
            bound[0]["spec"]["paramRef"].is_null(),
            "{name}: no parameters"
        );
    }
    let kustomization = &documents(&deploy_dir().join("controller/kustomization.yaml"))[0];
    for file in [
        "admission-policy.yaml",
        "allow-list-policy.yaml",
        "owned-objects-policy.yaml",
        "released-at-policy.yaml",
    ] {
        assert!(
            strings(&kustomization["resources"]).contains(&file),
            "{file}"
        );
    }
}

/// The controller's own allow-list (`--namespace-selector`, src/controller/managed.rs) and
/// the admission policy that refuses its writes elsewhere name the same label: were they to
/// drift, the controller would reconcile jobs whose every write is refused (or the fence
/// would cover namespaces the controller ignores).
#[test]
fn the_controllers_namespace_selector_and_the_allow_list_policy_name_one_label() {
    let manifests = Manifests::get();
    let deployment = one(manifests, "Deployment");
    let args = strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"]);
    let selector = args
        .iter()
        .find_map(|a| a.strip_prefix("--namespace-selector="))
        .expect("deploy/controller runs the controller with --namespace-selector");
    let (key, value) = selector
        .split_once('=')
        .expect("--namespace-selector is one key=value label");
    let policy = manifests
        .in_component("controller", "ValidatingAdmissionPolicy")
        .into_iter()
        .find(|p| p["metadata"]["name"] == "gangplank-controller-managed-namespaces")
        .expect("the allow-list policy gangplank-controller-managed-namespaces");
    let expressions = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
        .as_array()
        .expect("matchExpressions");
    let label = expressions
        .iter()
        .find(|e| e["key"] == key)
        .unwrap_or_else(|| panic!("the policy's namespaceSelector does not name {key}"));
    assert_eq!(label["operator"], "NotIn", "{label}");
    assert_eq!(strings(&label["values"]), [value], "{label}");
    // pod_sandbox judges jobs where the controller runs them: the same label.
    let policy = std::fs::read_to_string(policies_dir().join("pod_sandbox.rego"))
        .expect("policies/pod_sandbox.rego");
    assert_eq!(
        quoted_list(&policy, "\"namespaceSelector\": ", ','),
        BTreeSet::from([selector.to_string()]),
        "pod_sandbox's namespaceSelector default"
    );
}

/// The quoted words of `text` between `start` and the next `end`: a list literal, CEL's
/// (`['A', 'B']`) or Rego's (`["A", "B"]`).
fn quoted_list(text: &str, start: &str, end: char) -> BTreeSet<String> {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start} not found"))
        + start.len();
    let list = &text[from..from + text[from..].find(end).expect("the list's end")];
    list.split(['\'', '"'])
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// policies/pod_sandbox.rego refuses at apply what the controller's pod fence would refuse at
/// pod creation; were their capability lists to drift, a job would be admitted and never run
/// (or refused though it would run).
#[test]
fn pod_sandbox_allows_the_capabilities_the_pod_fence_allows() {
    let manifests = Manifests::get();
    let fence = manifests
        .in_component("controller", "ValidatingAdmissionPolicy")
        .into_iter()
        .find(|p| p["metadata"]["name"] == "gangplank-controller-pods")
        .expect("the pod fence gangplank-controller-pods");
    let variable = fence["spec"]["variables"]
        .as_array()
        .expect("variables")
        .iter()
        .find(|v| v["name"] == "allowedCapabilities")
        .expect("the fence's allowedCapabilities variable");
    let expression = variable["expression"].as_str().expect("an expression");
    let fence_allows = quoted_list(expression, "[", ']');
    let policy = std::fs::read_to_string(policies_dir().join("pod_sandbox.rego"))
        .expect("policies/pod_sandbox.rego");
    let policy_allows = quoted_list(&policy, "\"allowedCapabilities\": [", ']');
    assert!(fence_allows.contains("IPC_LOCK"), "{fence_allows:?}");
    assert_eq!(policy_allows, fence_allows);
}
