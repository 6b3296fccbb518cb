//! Credentials from the cluster: the `imagePullSecrets` of each pod template of a job and of
//! the ServiceAccounts its pods run as, as the kubelet would use them.
//!
//! Entry point: [`keychain`]. A secret or ServiceAccount that cannot be read is logged and
//! skipped (the kubelet does the same); the lookup then goes on with what was found.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::Api;
use serde_json::Value;
use tracing::{debug, warn};

use super::credentials::Keychain;

const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CFG: &str = "kubernetes.io/dockercfg";

/// The credentials the pods of `job` in `namespace` would pull with.
pub async fn keychain(client: &kube::Client, namespace: &str, job: &Value) -> Keychain {
    let (mut secrets, accounts) = references(job);
    let accounts_api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    for account in accounts {
        match accounts_api.get_opt(&account).await {
            Ok(Some(sa)) => {
                let names = sa
                    .image_pull_secrets
                    .unwrap_or_default()
                    .into_iter()
                    .map(|r| r.name);
                secrets.extend(names.filter(|n| !n.is_empty()));
            }
            Ok(None) => debug!(namespace, account, "ServiceAccount not found"),
            Err(e) => {
                warn!(namespace, account, error = %e, "cannot read ServiceAccount for its imagePullSecrets")
            }
        }
    }
    let secrets_api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut keychain = Keychain::default();
    for name in secrets {
        match secrets_api.get_opt(&name).await {
            Ok(Some(secret)) => match from_secret(&secret, namespace, &name) {
                Some(found) => keychain.merge(found),
                None => {
                    warn!(namespace, secret = %name, "pull secret holds no usable docker config; skipped")
                }
            },
            Ok(None) => warn!(namespace, secret = %name, "pull secret not found; skipped"),
            Err(e) => {
                warn!(namespace, secret = %name, error = %e, "cannot read pull secret; skipped")
            }
        }
    }
    keychain
}

/// Pull secret names of every pod template, in order, and the ServiceAccounts the pods run
/// as (`default` when a template names none).
fn references(job: &Value) -> (Vec<String>, BTreeSet<String>) {
    let mut secrets = Vec::new();
    let mut accounts = BTreeSet::new();
    let specs = job
        .get("spec")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|spec| spec.iter())
        .filter(|(key, _)| key.ends_with("ReplicaSpecs"))
        .filter_map(|(_, replicas)| replicas.as_object())
        .flat_map(|replicas| replicas.values());
    for replica in specs {
        let Some(pod) = replica.pointer("/template/spec") else {
            continue;
        };
        let names = pod
            .get("imagePullSecrets")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("name").and_then(Value::as_str));
        for name in names {
            if !secrets.iter().any(|s| s == name) {
                secrets.push(name.to_string());
            }
        }
        let account = pod
            .get("serviceAccountName")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
            .unwrap_or("default");
        accounts.insert(account.to_string());
    }
    (secrets, accounts)
}

fn from_secret(secret: &Secret, namespace: &str, name: &str) -> Option<Keychain> {
    let data = secret.data.as_ref()?;
    let origin = format!("secret {namespace}/{name}");
    let parsed = match secret.type_.as_deref() {
        Some(DOCKER_CONFIG_JSON) => {
            Keychain::from_docker_config(&data.get(".dockerconfigjson")?.0, &origin)
        }
        // The legacy form is the `auths` map on its own.
        Some(DOCKER_CFG) => {
            let auths: Value = serde_json::from_slice(&data.get(".dockercfg")?.0).ok()?;
            let doc = serde_json::json!({ "auths": auths }).to_string();
            Keychain::from_docker_config(doc.as_bytes(), &origin)
        }
        _ => return None,
    };
    parsed
        .map_err(|e| warn!(error = %crate::error_chain(&e), "unusable pull secret"))
        .ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn finds_secrets_and_service_accounts_of_every_template() {
        let job = json!({"spec": {"pytorchReplicaSpecs": {
            "Master": {"template": {"spec": {"imagePullSecrets": [{"name": "a"}], "serviceAccountName": "trainer"}}},
            "Worker": {"template": {"spec": {"imagePullSecrets": [{"name": "b"}, {"name": "a"}]}}}
        }}});
        let (secrets, accounts) = super::references(&job);
        assert_eq!(secrets, vec!["a", "b"]);
        assert_eq!(
            accounts.into_iter().collect::<Vec<_>>(),
            vec!["default", "trainer"]
        );
    }
}
