//! The cert-manager component: a certificate for the Service's names, written to the Secret
//! the pods mount, and injected as the caBundle of both webhook configurations.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::support::*;

#[test]
fn cert_manager_component_issues_the_mounted_secret_for_the_service_names() {
    let manifests = Manifests::get();
    let certificates = manifests.all("Certificate");
    let serving = certificates
        .iter()
        .find(|c| c["spec"]["isCA"] != true)
        .expect("a serving Certificate");
    let name = serving["metadata"]["name"].as_str().expect("name");
    assert_eq!(serving["metadata"]["namespace"], NAMESPACE);
    let volumes = manifests.pod()["volumes"].as_array().expect("volumes");
    let tls = volumes.iter().find(|v| v["name"] == "tls").expect("tls");
    assert_eq!(serving["spec"]["secretName"], tls["secret"]["secretName"]);

    let service = manifests.one("Service")["metadata"]["name"]
        .as_str()
        .expect("service name");
    let dns: BTreeSet<&str> = strings(&serving["spec"]["dnsNames"]).into_iter().collect();
    for name in [
        format!("{service}.{NAMESPACE}.svc"),
        format!("{service}.{NAMESPACE}.svc.cluster.local"),
    ] {
        assert!(dns.contains(name.as_str()), "dnsNames lack {name}");
    }

    // The issuer chain: serving cert ← CA Issuer ← CA Certificate ← self-signed Issuer.
    let issuers = manifests.all("Issuer");
    let issuer = |name: &Value| {
        *issuers
            .iter()
            .find(|i| i["metadata"]["name"] == *name)
            .unwrap_or_else(|| panic!("no Issuer {name}"))
    };
    let ca_issuer = issuer(&serving["spec"]["issuerRef"]["name"]);
    let ca_secret = &ca_issuer["spec"]["ca"]["secretName"];
    let ca = certificates
        .iter()
        .find(|c| c["spec"]["secretName"] == *ca_secret)
        .expect("a CA Certificate writes the CA Issuer's Secret");
    assert_eq!(ca["spec"]["isCA"], true);
    assert!(issuer(&ca["spec"]["issuerRef"]["name"])["spec"]
        .get("selfSigned")
        .is_some());

    // The CA injector fills both configurations from the serving certificate.
    let patches = documents(&deploy_dir().join("cert-manager/inject-ca.yaml"));
    let injected: BTreeSet<&str> = patches
        .iter()
        .map(|p| {
            assert_eq!(
                p["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                format!("{NAMESPACE}/{name}")
            );
            assert_eq!(p["metadata"]["name"], "gangplank");
            p["kind"].as_str().expect("kind")
        })
        .collect();
    assert_eq!(
        injected,
        BTreeSet::from([
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration"
        ])
    );
}
