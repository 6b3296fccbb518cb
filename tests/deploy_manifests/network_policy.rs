//! deploy/networkpolicy.yaml, closed by default (issue 41 item 3): as shipped it admits no
//! peer to the webhook port 8443 (before, a placeholder `ipBlock 0.0.0.0/0` admitted every
//! address), the monitoring namespace to the metrics port 9090 alone, and the install guide's
//! two ways of naming the control plane (a kustomize patch, `kubectl patch`) each add one
//! rule admitting exactly the addresses given, to 8443 only.

use std::io::Write as _;
use std::process::Command;

use serde_json::{json, Value};

use crate::kustomize::{find, kustomize, relative_path};
use crate::support::*;

const WEBHOOK_PORT: u64 = 8443;
const METRICS_PORT: u64 = 9090;

/// The peers an Ingress NetworkPolicy admits to TCP `port`, as the API defines it: `None`
/// when some rule opening the port admits every source (no `from`, or an empty one), else
/// the `from` entries of the rules that open it (a rule without `ports` opens every port).
fn peers_admitted(policy: &Value, port: u64) -> Option<Vec<Value>> {
    let mut peers = Vec::new();
    let rules = policy["spec"]["ingress"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for rule in rules {
        let opens = match rule["ports"].as_array() {
            None => true,
            Some(ports) if ports.is_empty() => true,
            Some(ports) => ports.iter().any(|p| {
                let tcp = p["protocol"].is_null() || p["protocol"] == "TCP";
                let first = p["port"].as_u64();
                let last = p["endPort"].as_u64().or(first);
                tcp && first.is_none_or(|f| f <= port && port <= last.unwrap_or(f))
            }),
        };
        if !opens {
            continue;
        }
        match rule["from"].as_array() {
            Some(from) if !from.is_empty() => peers.extend(from.iter().cloned()),
            _ => return None,
        }
    }
    Some(peers)
}

#[test]
fn the_shipped_network_policy_admits_no_peer_to_the_webhook_port() {
    let manifests = Manifests::get();
    let policy = manifests.one("NetworkPolicy");
    let labels = &manifests.deployment()["spec"]["template"]["metadata"]["labels"];
    assert!(selects(
        &policy["spec"]["podSelector"]["matchLabels"],
        labels
    ));
    // Ingress only: egress (the registries, the API) untouched.
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(peers_admitted(policy, WEBHOOK_PORT), Some(vec![]));
    assert_eq!(
        peers_admitted(policy, METRICS_PORT),
        Some(vec![
            json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}})
        ])
    );
    assert_eq!(
        manifests.container()["ports"][0]["containerPort"],
        WEBHOOK_PORT
    );
    let metrics_addr = manifests.container()["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str()?.strip_prefix("--metrics-addr="))
        .next()
        .expect("--metrics-addr keeps /metrics off the webhook port");
    assert!(metrics_addr.ends_with(":9090"), "{metrics_addr}");

    // What kustomize renders (every component leaves the policy alone).
    let Some(built) = kustomize(&deploy_dir()) else {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: the rendered check (no kubectl for kustomize)"
        );
        return;
    };
    let rendered = find(&built, "NetworkPolicy", "gangplank-webhook");
    assert_eq!(peers_admitted(rendered, WEBHOOK_PORT), Some(vec![]));
}

/// The install guide's kustomize patch, as docs/src/install.md prints it (CIDR aside).
const KUSTOMIZE_PATCH: &str = concat!(
    "  - target: {kind: NetworkPolicy, name: gangplank-webhook}\n",
    "    patch: |-\n",
    "      - op: add\n",
    "        path: /spec/ingress/-\n",
    "        value:\n",
    "          from: [{ipBlock: {cidr: CIDR}}]\n",
    "          ports: [{protocol: TCP, port: 8443}]\n",
);

/// The install guide's `kubectl patch` JSON, as it prints it (CIDR aside).
const KUBECTL_PATCH: &str = r#"[{"op":"add","path":"/spec/ingress/-","value":{"from":[{"ipBlock":{"cidr":"CIDR"}}],"ports":[{"protocol":"TCP","port":8443}]}}]"#;

#[test]
fn the_install_guides_patches_admit_the_control_plane_to_the_webhook_port_and_nothing_else() {
    let guide = std::fs::read_to_string(repo().join("docs/src/install.md")).expect("install.md");
    for (what, text) in [("kustomize", KUSTOMIZE_PATCH), ("kubectl", KUBECTL_PATCH)] {
        let printed = text.replace("CIDR", "$CONTROL_PLANE_CIDR");
        assert!(
            guide.contains(&printed),
            "install.md prints the {what} patch this test applies:\n{printed}"
        );
    }
    let expected = Some(vec![json!({"ipBlock": {"cidr": "172.18.0.0/16"}})]);

    let overlay = tempfile::tempdir().expect("overlay");
    let deploy = relative_path(overlay.path(), &deploy_dir());
    let kustomization = format!(
        "resources: [{}]\npatches:\n{}",
        deploy.display(),
        KUSTOMIZE_PATCH.replace("CIDR", "172.18.0.0/16")
    );
    std::fs::write(overlay.path().join("kustomization.yaml"), kustomization).expect("write");
    let Some(built) = kustomize(overlay.path()) else {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: the patches need kubectl (kustomize, patch --local)"
        );
        return;
    };
    let patched = find(&built, "NetworkPolicy", "gangplank-webhook");
    assert_eq!(peers_admitted(patched, WEBHOOK_PORT), expected);
    let metrics = peers_admitted(patched, METRICS_PORT).expect("not everyone");
    assert_eq!(metrics.len(), 1, "the monitoring rule is kept: {metrics:?}");

    // `kubectl patch --local` applies the same JSON patch to the file, offline.
    let kubectl = gangplank::release::kubectl::find().expect("kubectl (kustomize ran)");
    let out = Command::new(kubectl)
        .args(["patch", "--local", "-o", "json", "--type=json", "-f"])
        .arg(deploy_dir().join("networkpolicy.yaml"))
        .arg("-p")
        .arg(KUBECTL_PATCH.replace("CIDR", "172.18.0.0/16"))
        .output()
        .expect("kubectl patch runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let patched: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(peers_admitted(&patched, WEBHOOK_PORT), expected);
}

#[test]
fn a_rule_without_peers_or_ports_is_read_as_admitting_everyone() {
    let open = json!({"spec": {"ingress": [{"ports": [{"port": 8443}]}]}});
    assert_eq!(peers_admitted(&open, WEBHOOK_PORT), None);
    let all_ports = json!({"spec": {"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]}});
    assert_eq!(
        peers_admitted(&all_ports, WEBHOOK_PORT).map(|p| p.len()),
        Some(1)
    );
    let range = json!({"spec": {"ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 8000, "endPort": 9000}]}]}});
    assert_eq!(
        peers_admitted(&range, WEBHOOK_PORT).map(|p| p.len()),
        Some(1)
    );
    let udp = json!({"spec": {"ingress": [{"ports": [{"protocol": "UDP", "port": 8443}]}]}});
    assert_eq!(peers_admitted(&udp, WEBHOOK_PORT), Some(vec![]));
}
