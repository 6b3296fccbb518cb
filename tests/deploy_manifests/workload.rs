//! The server's workload: Deployment, PodDisruptionBudget, Service, ServiceAccount; and the
//! environment every Deployment of deploy/ (the controller's too) gives the allocator.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::policies::PolicyFiles;
use crate::support::*;

#[test]
fn deployment_runs_three_replicas_spread_over_nodes_and_zones_and_kept_available() {
    let manifests = Manifests::get();
    let deployment = manifests.deployment();
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert!(selects(selector, labels), "selector must match the pods");

    // Hard on nodes (a lost node takes one replica), soft on zones (nodes without a zone
    // label must stay usable).
    let spread = manifests.pod()["topologySpreadConstraints"]
        .as_array()
        .expect("topologySpreadConstraints");
    let rule = |key: &str| -> (Value, Value) {
        let found = spread
            .iter()
            .find(|c| c["topologyKey"] == key)
            .unwrap_or_else(|| panic!("no spread over {key}"));
        assert_eq!(found["maxSkew"], 1, "{key}");
        assert!(
            selects(&found["labelSelector"]["matchLabels"], labels),
            "{key}"
        );
        (
            found["whenUnsatisfiable"].clone(),
            found["nodeTaintsPolicy"].clone(),
        )
    };
    assert_eq!(
        rule("kubernetes.io/hostname"),
        (json!("DoNotSchedule"), json!("Honor"))
    );
    assert_eq!(rule("topology.kubernetes.io/zone").0, "ScheduleAnyway");
    assert!(
        manifests.pod()["affinity"].is_null(),
        "the spread constraints replace the preferred anti-affinity"
    );

    let pdb = manifests.one("PodDisruptionBudget");
    assert_eq!(
        pdb["spec"]["maxUnavailable"], 1,
        "two of three keep answering"
    );
    assert_eq!(pdb["spec"]["selector"]["matchLabels"], *selector);
}

/// With failurePolicy Fail a preempted webhook stops all job admission, and a preempted
/// controller leaves jobs without restarts and deadlines: both Deployments run at the
/// shipped class, which outranks any workload class (and is not system-cluster-critical,
/// which a ResourceQuota may keep out of gangplank-system).
#[test]
fn both_deployments_run_at_gangplanks_priority_and_the_controller_keeps_a_pod_through_drains() {
    let manifests = Manifests::get();
    let classes = manifests.all("PriorityClass");
    assert_eq!(classes.len(), 1, "one PriorityClass in deploy/");
    let class = classes[0];
    assert_eq!(
        class["value"], 1_000_000_000,
        "the highest non-system value"
    );
    assert_eq!(class["globalDefault"], false);
    let name = &class["metadata"]["name"];
    for deployment in manifests.all("Deployment") {
        assert_eq!(
            deployment["spec"]["template"]["spec"]["priorityClassName"], *name,
            "{}",
            deployment["metadata"]["name"]
        );
    }
    let controller_pdb = manifests.in_component("controller", "PodDisruptionBudget");
    assert_eq!(controller_pdb.len(), 1, "a PDB in deploy/controller/");
    let controller = manifests.in_component("controller", "Deployment")[0];
    assert_eq!(controller_pdb[0]["spec"]["maxUnavailable"], 1);
    assert_eq!(
        controller_pdb[0]["spec"]["selector"]["matchLabels"],
        controller["spec"]["selector"]["matchLabels"]
    );
}

/// Transparent huge pages inflated RSS (RELIABILITY.md "Soak": 43 of 73 MiB of heap); the
/// binary never asks for them, and `MIMALLOC_ALLOW_THP=0` also keeps them off on nodes whose
/// THP mode is "always". Both processes are the same binary, so both Deployments carry it.
#[test]
fn every_deployment_turns_transparent_huge_pages_off_for_the_allocator() {
    let manifests = Manifests::get();
    let deployments = manifests.all("Deployment");
    let names: BTreeSet<&str> = deployments
        .iter()
        .map(|d| d["metadata"]["name"].as_str().expect("Deployment name"))
        .collect();
    assert!(
        names.is_superset(&BTreeSet::from([
            "gangplank-webhook",
            "gangplank-controller"
        ])),
        "the webhook's and the controller's Deployments are in deploy/: {names:?}"
    );
    for deployment in deployments {
        let name = &deployment["metadata"]["name"];
        for container in deployment["spec"]["template"]["spec"]["containers"]
            .as_array()
            .expect("containers")
        {
            assert_eq!(
                allocator_thp(container),
                Some("0"),
                "{name} container {}: env MIMALLOC_ALLOW_THP=\"0\"",
                container["name"]
            );
        }
    }
}

/// The value of `MIMALLOC_ALLOW_THP` in `container`'s env, if set there.
pub fn allocator_thp(container: &Value) -> Option<&str> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == "MIMALLOC_ALLOW_THP")?["value"]
        .as_str()
}

#[test]
fn deployment_is_hardened_to_the_restricted_pod_security_standard() {
    let manifests = Manifests::get();
    let pod = manifests.pod();
    let pod_security = &pod["securityContext"];
    assert_eq!(pod_security["runAsNonRoot"], true);
    assert!(pod_security["runAsUser"].as_u64().is_some_and(|u| u > 0));
    assert_eq!(pod_security["seccompProfile"]["type"], "RuntimeDefault");
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(pod.get(field).is_none(), "{field}");
    }
    let security = &manifests.container()["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["privileged"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert!(security["capabilities"].get("add").is_none());
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");

    let namespace = manifests.one("Namespace");
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
}

#[test]
fn deployment_probes_health_and_readiness_over_https_on_8443() {
    let container = Manifests::get().container();
    let https = &container["ports"][0];
    assert_eq!(https["name"], "https");
    assert_eq!(https["containerPort"], 8443);
    assert!(arg("addr").ends_with(":8443"), "--addr={}", arg("addr"));
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["scheme"], "HTTPS", "{probe}");
        assert!(
            get["port"] == "https" || get["port"] == 8443,
            "{probe} port {}",
            get["port"]
        );
    }
}

#[test]
fn deployment_resources_fit_a_64_mib_server() {
    let resources = &Manifests::get().container()["resources"];
    let request = bytes(
        resources["requests"]["memory"]
            .as_str()
            .expect("memory request"),
    );
    let limit = bytes(
        resources["limits"]["memory"]
            .as_str()
            .expect("memory limit"),
    );
    assert_eq!(request, 64 << 20, "request what the server is sized for");
    assert!(
        (request..=256 << 20).contains(&limit),
        "limit {limit} bytes: at least the request, and small enough to catch a leak"
    );
    assert!(resources["requests"]["cpu"].is_string());
    assert!(resources["limits"]["cpu"].is_string());
}

#[test]
fn deployment_mounts_the_tls_secret_and_the_policies_where_the_server_reads_them() {
    let manifests = Manifests::get();
    let pod = manifests.pod();
    let mounts: BTreeMap<&str, &Value> = manifests.container()["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .map(|m| (m["name"].as_str().expect("mount name"), m))
        .collect();
    for mount in mounts.values() {
        assert_eq!(mount["readOnly"], true, "{mount}");
        assert!(
            mount.get("subPath").is_none(),
            "subPath mounts never update"
        );
    }
    let volumes: BTreeMap<&str, &Value> = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .map(|v| (v["name"].as_str().expect("volume name"), v))
        .collect();

    let tls_dir = mounts["tls"]["mountPath"].as_str().expect("tls mountPath");
    assert_eq!(arg("tls-cert"), format!("{tls_dir}/tls.crt"));
    assert_eq!(arg("tls-key"), format!("{tls_dir}/tls.key"));
    assert_eq!(
        volumes["tls"]["secret"]["secretName"],
        "gangplank-webhook-tls"
    );

    assert_eq!(mounts["policies"]["mountPath"], "/etc/gangplank/policies");
    assert_eq!(arg("policies"), "/etc/gangplank/policies");
    let sources = volumes["policies"]["projected"]["sources"]
        .as_array()
        .expect("the policies volume projects the three ConfigMaps");
    assert_eq!(sources[0]["configMap"]["name"], POLICIES_CONFIGMAP);
    assert!(
        sources[0]["configMap"].get("items").is_none(),
        "every key of {POLICIES_CONFIGMAP} lands at the top"
    );
    assert_eq!(sources[1]["configMap"]["name"], CLUSTER_POLICIES_CONFIGMAP);
    assert!(
        sources[1]["configMap"].get("items").is_none(),
        "every key of {CLUSTER_POLICIES_CONFIGMAP} lands at the top"
    );
    assert_eq!(sources[2]["configMap"]["name"], LIB_CONFIGMAP);
    let items: BTreeSet<(&str, &str)> = sources[2]["configMap"]["items"]
        .as_array()
        .expect("lib items")
        .iter()
        .map(|i| {
            (
                i["key"].as_str().expect("key"),
                i["path"].as_str().expect("path"),
            )
        })
        .collect();
    let lib = PolicyFiles::read().lib;
    let expected: BTreeSet<(String, String)> = lib
        .iter()
        .map(|name| (name.clone(), format!("lib/{name}")))
        .collect();
    let expected: BTreeSet<(&str, &str)> = expected
        .iter()
        .map(|(k, p)| (k.as_str(), p.as_str()))
        .collect();
    assert_eq!(
        items, expected,
        "deploy/deployment.yaml: the policies volume needs one item per policies/lib file"
    );
}

#[test]
fn service_sends_port_443_to_the_servers_https_port() {
    let manifests = Manifests::get();
    let service = manifests.one("Service");
    let ports = service["spec"]["ports"].as_array().expect("ports");
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0]["port"], 443);
    assert_eq!(ports[0]["targetPort"], "https");
    let labels = &manifests.deployment()["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&service["spec"]["selector"], labels));
}

#[test]
fn service_account_holds_no_permissions_and_no_token() {
    let manifests = Manifests::get();
    for kind in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
        assert!(
            manifests.in_base(kind).is_empty(),
            "a {kind} in deploy/'s base: the webhook server calls no API (serviceaccount.yaml says \
             why); give the feature that needs it its own least-privilege Role and update this"
        );
    }
    let account = manifests.one("ServiceAccount");
    assert_eq!(account["automountServiceAccountToken"], false);
    let pod = manifests.pod();
    assert_eq!(pod["serviceAccountName"], account["metadata"]["name"]);
    assert_eq!(pod["automountServiceAccountToken"], false);
}
