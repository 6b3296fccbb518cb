//! `deploy/` as a cluster would read it: every manifest parses, and the properties the
//! webhooks' safety depends on hold (which kinds reach gangplank, how it fails, where it never
//! runs, how its pods are hardened and kept available, that the policies it serves are the
//! ones in `policies/`).
//!
//! `deploy/policies/` is a generated copy of `policies/` (kustomize reads no file outside its
//! kustomization's directory; deploy/README.md). When it is stale, run
//! `GANGPLANK_UPDATE_DEPLOY=1 cargo test --test deploy_manifests` to rewrite it.
//!
//! When `kubectl` is on PATH, its built-in kustomize also builds both variants (plain and
//! cert-manager) offline; otherwise that test says it skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};

const NAMESPACE: &str = "gangplank-system";
const UPDATE_ENV: &str = "GANGPLANK_UPDATE_DEPLOY";
const POLICIES_CONFIGMAP: &str = "gangplank-policies";
const LIB_CONFIGMAP: &str = "gangplank-policy-lib";

/// The seven training kind/versions, as webhook rules name them.
const TRAINING_RESOURCES: [(&str, &str, &str); 7] = [
    ("kubeflow.org", "v1", "pytorchjobs"),
    ("kubeflow.org", "v1", "tfjobs"),
    ("kubeflow.org", "v1", "mpijobs"),
    ("kubeflow.org", "v1", "xgboostjobs"),
    ("kubeflow.org", "v1", "paddlejobs"),
    ("kubeflow.org", "v1", "jaxjobs"),
    ("kubeflow.org", "v2beta1", "mpijobs"),
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn deploy_dir() -> PathBuf {
    repo().join("deploy")
}

/// Every document of a YAML file, as JSON values; empty documents are dropped.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_documents(&text, &path.display().to_string())
}

fn parse_documents(text: &str, origin: &str) -> Vec<Value> {
    use serde::Deserialize as _;
    yaml_serde::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{origin}: {e}")))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// `*.yaml` files under `dir`, recursively, in name order.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(yaml_files(&path));
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn is_kustomize_file(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "kustomization.yaml")
}

/// The Kubernetes objects of `deploy/`: every document of every YAML file except
/// kustomize's own (`kustomization.yaml`) and the policy copy's params.yaml.
struct Manifests {
    objects: Vec<(PathBuf, Value)>,
}

impl Manifests {
    fn get() -> &'static Manifests {
        static MANIFESTS: OnceLock<Manifests> = OnceLock::new();
        MANIFESTS.get_or_init(|| {
            let policies = deploy_dir().join("policies");
            let objects = yaml_files(&deploy_dir())
                .into_iter()
                .filter(|p| !is_kustomize_file(p) && !p.starts_with(&policies))
                .flat_map(|p| documents(&p).into_iter().map(move |d| (p.clone(), d)))
                .collect();
            Manifests { objects }
        })
    }

    fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects
            .iter()
            .map(|(_, o)| o)
            .filter(|o| o["kind"] == kind)
            .collect()
    }

    /// The one object of `kind` in deploy/'s base (not the cert-manager component).
    fn one(&self, kind: &str) -> &Value {
        let component = deploy_dir().join("cert-manager");
        let found: Vec<&Value> = self
            .objects
            .iter()
            .filter(|(p, o)| o["kind"] == kind && !p.starts_with(&component))
            .map(|(_, o)| o)
            .collect();
        assert_eq!(found.len(), 1, "expected exactly one {kind} in deploy/");
        found[0]
    }

    fn deployment(&self) -> &Value {
        self.one("Deployment")
    }

    fn pod(&self) -> &Value {
        &self.deployment()["spec"]["template"]["spec"]
    }

    fn container(&self) -> &Value {
        let containers = self.pod()["containers"].as_array().expect("containers");
        assert_eq!(containers.len(), 1, "one container: the server");
        &containers[0]
    }

    fn webhook_configurations(&self) -> [(&'static str, &Value); 2] {
        [
            ("mutate", self.one("MutatingWebhookConfiguration")),
            ("validate", self.one("ValidatingWebhookConfiguration")),
        ]
    }
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("expected a string, got {s}"))
        })
        .collect()
}

/// The value of a `--name=value` argument of the server container.
fn arg(name: &str) -> String {
    let prefix = format!("--{name}=");
    strings(&Manifests::get().container()["args"])
        .into_iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_string))
        .unwrap_or_else(|| panic!("the server is started without {prefix}"))
}

/// A memory quantity in bytes (the binary and decimal suffixes the manifests use).
fn bytes(quantity: &str) -> u64 {
    let units = [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("M", 1_000_000),
    ];
    for (suffix, factor) in units {
        if let Some(n) = quantity.strip_suffix(suffix) {
            return n.parse::<u64>().expect("integer quantity") * factor;
        }
    }
    quantity.parse().expect("plain byte count")
}

// ---------------------------------------------------------------------------------------------
// Files and kustomize

#[test]
fn every_manifest_is_a_named_kubernetes_object() {
    let manifests = Manifests::get();
    assert!(manifests.objects.len() >= 8, "deploy/ looks empty");
    for (path, object) in &manifests.objects {
        for field in ["apiVersion", "kind"] {
            assert!(object[field].is_string(), "{}: no {field}", path.display());
        }
        assert!(
            object["metadata"]["name"].is_string(),
            "{}: a {} without metadata.name",
            path.display(),
            object["kind"]
        );
    }
}

#[test]
fn kustomization_applies_every_manifest_into_gangplanks_namespace() {
    let dir = deploy_dir();
    let kustomization = &documents(&dir.join("kustomization.yaml"))[0];
    assert_eq!(kustomization["namespace"], NAMESPACE);
    let listed: BTreeSet<&str> = strings(&kustomization["resources"]).into_iter().collect();
    let mut present: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("deploy/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    present.insert("policies".to_string());
    let present: BTreeSet<&str> = present.iter().map(String::as_str).collect();
    assert_eq!(
        listed, present,
        "deploy/kustomization.yaml resources must list every manifest in deploy/ (and only those)"
    );
    assert_eq!(
        Manifests::get().one("Namespace")["metadata"]["name"],
        NAMESPACE
    );

    // The component lists each of its files once.
    let component_dir = dir.join("cert-manager");
    let component = &documents(&component_dir.join("kustomization.yaml"))[0];
    assert_eq!(component["kind"], "Component");
    let mut used: BTreeSet<&str> = strings(&component["resources"]).into_iter().collect();
    for patch in component["patches"].as_array().expect("patches") {
        used.insert(patch["path"].as_str().expect("patch path"));
    }
    let files: BTreeSet<String> = yaml_files(&component_dir)
        .iter()
        .filter(|p| !is_kustomize_file(p))
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    let files: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    assert_eq!(used, files, "deploy/cert-manager/kustomization.yaml");
}

#[test]
fn image_tag_is_the_crate_version() {
    let kustomization = &documents(&deploy_dir().join("kustomization.yaml"))[0];
    let image = &kustomization["images"][0];
    assert_eq!(image["name"], "gangplank");
    assert_eq!(image["newTag"], env!("CARGO_PKG_VERSION"));
    let container_image = Manifests::get().container()["image"]
        .as_str()
        .expect("image");
    assert!(
        container_image.starts_with("gangplank:"),
        "{container_image}"
    );
}

// ---------------------------------------------------------------------------------------------
// Webhook configurations

#[test]
fn webhooks_cover_exactly_the_seven_training_kinds_on_create_and_update() {
    let expected: BTreeSet<(String, String, String, String)> = TRAINING_RESOURCES
        .iter()
        .flat_map(|(g, v, r)| {
            ["CREATE", "UPDATE"].map(|op| (g.to_string(), v.to_string(), r.to_string(), op.into()))
        })
        .collect();
    for (endpoint, configuration) in Manifests::get().webhook_configurations() {
        let webhooks = configuration["webhooks"].as_array().expect("webhooks");
        assert_eq!(webhooks.len(), 1, "{endpoint}: one webhook");
        let mut covered = BTreeSet::new();
        for rule in webhooks[0]["rules"].as_array().expect("rules") {
            assert_eq!(rule["scope"], "Namespaced", "{endpoint}: {rule}");
            for g in strings(&rule["apiGroups"]) {
                for v in strings(&rule["apiVersions"]) {
                    for r in strings(&rule["resources"]) {
                        for op in strings(&rule["operations"]) {
                            // Wildcards and subresources ("pytorchjobs/status") would widen
                            // the set; the comparison below catches them.
                            covered.insert((g.into(), v.into(), r.into(), op.into()));
                        }
                    }
                }
            }
        }
        assert_eq!(covered, expected, "{endpoint}: rules");
    }
}

#[test]
fn webhooks_fail_closed_within_five_seconds_and_allow_dry_runs() {
    for (endpoint, configuration) in Manifests::get().webhook_configurations() {
        let webhook = &configuration["webhooks"][0];
        assert_eq!(webhook["failurePolicy"], "Fail", "{endpoint}");
        assert_eq!(webhook["sideEffects"], "None", "{endpoint}");
        assert_eq!(webhook["timeoutSeconds"], 5, "{endpoint}");
        assert_eq!(
            webhook["admissionReviewVersions"],
            json!(["v1"]),
            "{endpoint}"
        );
        assert_eq!(webhook["matchPolicy"], "Exact", "{endpoint}");
        assert!(
            webhook["name"]
                .as_str()
                .is_some_and(|n| n.ends_with(".gangplank.dev")),
            "{endpoint}: webhook names are qualified"
        );
    }
}

#[test]
fn only_the_mutating_webhook_is_reinvoked() {
    let [(_, mutating), (_, validating)] = Manifests::get().webhook_configurations();
    assert_eq!(mutating["webhooks"][0]["reinvocationPolicy"], "IfNeeded");
    // ValidatingWebhook has no such field: the apiserver would drop it with a warning.
    assert!(validating["webhooks"][0]
        .get("reinvocationPolicy")
        .is_none());
}

#[test]
fn webhooks_call_the_service_on_their_own_paths() {
    let manifests = Manifests::get();
    let service = manifests.one("Service");
    let port = &service["spec"]["ports"][0];
    for (endpoint, configuration) in manifests.webhook_configurations() {
        let client = &configuration["webhooks"][0]["clientConfig"];
        let target = &client["service"];
        assert_eq!(target["name"], service["metadata"]["name"], "{endpoint}");
        assert_eq!(target["namespace"], NAMESPACE, "{endpoint}");
        assert_eq!(target["port"], port["port"], "{endpoint}");
        assert_eq!(target["path"], format!("/{endpoint}"), "{endpoint}");
        assert!(client.get("url").is_none(), "{endpoint}: service, not url");
        // Injected by cert-manager or patched from `gangplank certs`, never committed.
        assert!(client.get("caBundle").is_none(), "{endpoint}: caBundle");
    }
}

#[test]
fn webhooks_skip_gangplanks_namespace_and_kube_system() {
    for (endpoint, configuration) in Manifests::get().webhook_configurations() {
        let selector = &configuration["webhooks"][0]["namespaceSelector"];
        assert!(
            selector.get("matchLabels").is_none(),
            "{endpoint}: matchLabels would narrow the webhook to labelled namespaces"
        );
        let expressions = selector["matchExpressions"]
            .as_array()
            .expect("expressions");
        assert_eq!(expressions.len(), 1, "{endpoint}: {selector}");
        let expression = &expressions[0];
        assert_eq!(
            expression["key"], "kubernetes.io/metadata.name",
            "{endpoint}"
        );
        assert_eq!(expression["operator"], "NotIn", "{endpoint}");
        let excluded: BTreeSet<&str> = strings(&expression["values"]).into_iter().collect();
        assert_eq!(
            excluded,
            BTreeSet::from([NAMESPACE, "kube-system"]),
            "{endpoint}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Deployment, PDB, Service, ServiceAccount

#[test]
fn deployment_runs_two_replicas_kept_apart_and_kept_available() {
    let manifests = Manifests::get();
    let deployment = manifests.deployment();
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert!(selects(selector, labels), "selector must match the pods");

    let terms = &manifests.pod()["affinity"]["podAntiAffinity"]
        ["preferredDuringSchedulingIgnoredDuringExecution"];
    let term = &terms[0]["podAffinityTerm"];
    assert_eq!(term["topologyKey"], "kubernetes.io/hostname");
    assert!(selects(&term["labelSelector"]["matchLabels"], labels));

    let pdb = manifests.one("PodDisruptionBudget");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(pdb["spec"]["selector"]["matchLabels"], *selector);
}

/// Every label of `selector` is on `labels` (and the selector is not empty).
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("matchLabels");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels[k] == *v)
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
        .expect("the policies volume projects the two ConfigMaps");
    assert_eq!(sources[0]["configMap"]["name"], POLICIES_CONFIGMAP);
    assert!(
        sources[0]["configMap"].get("items").is_none(),
        "every key of {POLICIES_CONFIGMAP} lands at the top"
    );
    assert_eq!(sources[1]["configMap"]["name"], LIB_CONFIGMAP);
    let items: BTreeSet<(&str, &str)> = sources[1]["configMap"]["items"]
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
            manifests.all(kind).is_empty(),
            "a {kind} in deploy/: the webhook server calls no API (serviceaccount.yaml says \
             why); give the feature that needs it its own least-privilege Role and update this"
        );
    }
    let account = manifests.one("ServiceAccount");
    assert_eq!(account["automountServiceAccountToken"], false);
    let pod = manifests.pod();
    assert_eq!(pod["serviceAccountName"], account["metadata"]["name"]);
    assert_eq!(pod["automountServiceAccountToken"], false);
}

// ---------------------------------------------------------------------------------------------
// cert-manager component

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

// ---------------------------------------------------------------------------------------------
// The policies ConfigMaps

/// What `policies/` holds that the server loads: top-level `*.rego` and `params.yaml`, and
/// `lib/*.rego`. File names only; `tests/` is not deployed.
struct PolicyFiles {
    top: Vec<String>,
    lib: Vec<String>,
}

impl PolicyFiles {
    fn read() -> PolicyFiles {
        let dir = repo().join("policies");
        let names = |dir: &Path, keep: &dyn Fn(&str) -> bool| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|e| e.expect("entry"))
                .filter(|e| e.path().is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| keep(n))
                .collect();
            names.sort();
            names
        };
        let top = names(&dir, &|n| n.ends_with(".rego") || n == "params.yaml");
        let lib_dir = dir.join("lib");
        let nested = std::fs::read_dir(&lib_dir)
            .map(|entries| entries.flatten().any(|e| e.path().is_dir()))
            .unwrap_or(false);
        // ConfigMap keys are flat; nested helpers would need `key=path` generator entries
        // and matching items in deployment.yaml.
        assert!(!nested, "deploy/ supports a flat policies/lib/ only");
        let lib = if lib_dir.is_dir() {
            names(&lib_dir, &|n| n.ends_with(".rego"))
        } else {
            Vec::new()
        };
        PolicyFiles { top, lib }
    }

    /// deploy/policies/kustomization.yaml, as the update mode writes it.
    fn kustomization(&self) -> String {
        let mut out = String::from(
            "# Generated by tests/deploy_manifests.rs from ../../policies: do not edit. After a change\n\
             # to policies/, run `GANGPLANK_UPDATE_DEPLOY=1 cargo test --test deploy_manifests`.\n\
             apiVersion: kustomize.config.k8s.io/v1beta1\n\
             kind: Kustomization\n\
             generatorOptions:\n  \
               # Stable names: `kubectl apply -k` updates the ConfigMaps in place, the kubelet\n  \
               # updates the mounted files and the server hot-reloads them. A hash suffix would\n  \
               # restart every pod on each policy edit instead.\n  \
               disableNameSuffixHash: true\n  \
               labels:\n    \
                 app.kubernetes.io/name: gangplank\n    \
                 app.kubernetes.io/part-of: gangplank\n\
             configMapGenerator:\n",
        );
        let mut generator = |name: &str, files: Vec<String>| {
            out.push_str(&format!("  - name: {name}\n    files:\n"));
            for file in files {
                out.push_str(&format!("      - {file}\n"));
            }
        };
        generator(POLICIES_CONFIGMAP, self.top.clone());
        if !self.lib.is_empty() {
            generator(
                LIB_CONFIGMAP,
                self.lib.iter().map(|n| format!("lib/{n}")).collect(),
            );
        }
        out
    }

    /// Every deployed file: its path under deploy/policies/ and its expected content.
    fn expected(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let source = repo().join("policies");
        let read =
            |p: PathBuf| std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let mut files = BTreeMap::new();
        for name in &self.top {
            files.insert(PathBuf::from(name), read(source.join(name)));
        }
        for name in &self.lib {
            let path = PathBuf::from("lib").join(name);
            files.insert(path.clone(), read(source.join(&path)));
        }
        files.insert(
            PathBuf::from("kustomization.yaml"),
            self.kustomization().into_bytes(),
        );
        files
    }
}

/// Every file under `dir`, as paths relative to it.
fn files_below(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = PathBuf::from(entry.file_name());
        if path.is_dir() {
            for (rel, content) in files_below(&path) {
                out.insert(name.join(rel), content);
            }
        } else {
            out.insert(name, std::fs::read(&path).expect("readable"));
        }
    }
    out
}

#[test]
fn deployed_policies_are_a_current_copy_of_the_policies_directory() {
    let target = deploy_dir().join("policies");
    let expected = PolicyFiles::read().expected();
    let actual = files_below(&target);
    if actual == expected {
        return;
    }
    if std::env::var_os(UPDATE_ENV).is_some() {
        for stale in actual.keys().filter(|p| !expected.contains_key(*p)) {
            std::fs::remove_file(target.join(stale)).expect("remove a stale copy");
        }
        for (path, content) in &expected {
            let path = target.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, content).expect("write the copy");
        }
        eprintln!("updated {}", target.display());
        return;
    }
    let differing: Vec<String> = expected
        .keys()
        .chain(actual.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|p| expected.get(*p) != actual.get(*p))
        .map(|p| p.display().to_string())
        .collect();
    panic!(
        "deploy/policies/ is not a copy of policies/ (differs: {}); a policy that is not \
         copied is not deployed. Run `{UPDATE_ENV}=1 cargo test --test deploy_manifests`",
        differing.join(", ")
    );
}

#[test]
fn policies_configmap_generator_lists_every_policy_and_params() {
    let files = PolicyFiles::read();
    let kustomization = &documents(&deploy_dir().join("policies/kustomization.yaml"))[0];
    assert_eq!(
        kustomization["generatorOptions"]["disableNameSuffixHash"],
        true
    );
    let generators: BTreeMap<&str, Vec<&str>> = kustomization["configMapGenerator"]
        .as_array()
        .expect("configMapGenerator")
        .iter()
        .map(|g| (g["name"].as_str().expect("name"), strings(&g["files"])))
        .collect();
    let deployed: Vec<&str> = generators[POLICIES_CONFIGMAP].clone();
    let mut missing: Vec<&str> = files
        .top
        .iter()
        .map(String::as_str)
        .filter(|f| !deployed.contains(f))
        .collect();
    let lib: Vec<String> = files.lib.iter().map(|n| format!("lib/{n}")).collect();
    let deployed_lib = generators.get(LIB_CONFIGMAP).cloned().unwrap_or_default();
    missing.extend(
        lib.iter()
            .map(String::as_str)
            .filter(|f| !deployed_lib.contains(f)),
    );
    assert!(
        missing.is_empty(),
        "not deployed: {missing:?}; run `{UPDATE_ENV}=1 cargo test --test deploy_manifests`"
    );
    assert!(
        files.top.iter().any(|f| f.ends_with(".rego")),
        "policies/ has no policy"
    );
}

/// The directory the pods see: each ConfigMap key where the projected volume puts it, built
/// from the generators (key = file name) and the volume's items. The server must load it.
#[test]
fn mounted_policy_volume_loads_as_a_policy_set() {
    let copy = deploy_dir().join("policies");
    let kustomization = &documents(&copy.join("kustomization.yaml"))[0];
    let mut sources: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for generator in kustomization["configMapGenerator"]
        .as_array()
        .expect("generators")
    {
        let keys = strings(&generator["files"])
            .into_iter()
            .map(|f| {
                let key = Path::new(f).file_name().expect("file name");
                (key.to_string_lossy().into_owned(), copy.join(f))
            })
            .collect();
        sources.insert(generator["name"].as_str().expect("name").to_string(), keys);
    }

    let mounted = tempfile::tempdir().expect("temp dir");
    let volume = Manifests::get().pod()["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "policies")
        .expect("policies volume");
    for source in volume["projected"]["sources"].as_array().expect("sources") {
        let configmap = &source["configMap"];
        let keys = &sources[configmap["name"].as_str().expect("ConfigMap name")];
        let placed: Vec<(String, String)> = match configmap["items"].as_array() {
            Some(items) => items
                .iter()
                .map(|i| {
                    (
                        i["key"].as_str().expect("key").into(),
                        i["path"].as_str().expect("path").into(),
                    )
                })
                .collect(),
            None => keys.keys().map(|k| (k.clone(), k.clone())).collect(),
        };
        for (key, path) in placed {
            let target = mounted.path().join(path);
            std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
            std::fs::copy(&keys[&key], &target).expect("copy a key");
        }
    }

    let set = gangplank::policy::PolicySet::load(mounted.path())
        .unwrap_or_else(|e| panic!("the mounted policy directory does not load: {e}"));
    let loaded: BTreeSet<&str> = set.policies().iter().map(|p| p.name.as_str()).collect();
    let files = PolicyFiles::read();
    let expected: BTreeSet<&str> = files
        .top
        .iter()
        .filter_map(|f| f.strip_suffix(".rego"))
        .collect();
    assert_eq!(loaded, expected);
}

#[test]
fn policies_fit_a_configmap_applied_client_side() {
    // `kubectl apply` (client-side) keeps the whole object in an annotation, and annotations
    // are limited to 256 KiB in total; a ConfigMap itself to 1 MiB.
    let total: usize = files_below(&deploy_dir().join("policies"))
        .values()
        .map(Vec::len)
        .sum();
    assert!(
        total < 200 * 1024,
        "{total} bytes of policies: split the ConfigMap or use server-side apply"
    );
}

// ---------------------------------------------------------------------------------------------
// kustomize build (kubectl's built-in kustomize, offline)

/// `kubectl kustomize DIR` as JSON documents, or `None` when kubectl is not installed.
fn kustomize(dir: &Path) -> Option<Vec<Value>> {
    let output = match Command::new("kubectl").arg("kustomize").arg(dir).output() {
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
fn relative_path(from: &Path, to: &Path) -> PathBuf {
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

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the build has no {kind} {name}"))
}

#[test]
fn kustomize_builds_the_plain_and_the_cert_manager_variants() {
    let Some(plain) = kustomize(&deploy_dir()) else {
        println!("skipped: kubectl not on PATH (the kustomize build check needs it; no cluster)");
        return;
    };
    let cluster_scoped = [
        "Namespace",
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
    assert_eq!(
        keys(find(&plain, "ConfigMap", POLICIES_CONFIGMAP)),
        files.top
    );
    if !files.lib.is_empty() {
        assert_eq!(keys(find(&plain, "ConfigMap", LIB_CONFIGMAP)), files.lib);
    }
    let image = find(&plain, "Deployment", "gangplank-webhook")["spec"]["template"]["spec"]
        ["containers"][0]["image"]
        .clone();
    assert_eq!(image, format!("gangplank:{}", env!("CARGO_PKG_VERSION")));

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
    let certificate = find(&with_cert_manager, "Certificate", "gangplank-webhook");
    assert_eq!(certificate["metadata"]["namespace"], NAMESPACE);
    assert_eq!(
        with_cert_manager.len(),
        plain.len() + 4,
        "Issuers and Certificates"
    );
}
