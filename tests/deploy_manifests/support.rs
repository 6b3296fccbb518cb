//! Reading deploy/: YAML documents as JSON, the objects by kind, and small helpers.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

pub const NAMESPACE: &str = "gangplank-system";
pub const UPDATE_ENV: &str = "GANGPLANK_UPDATE_DEPLOY";
pub const POLICIES_CONFIGMAP: &str = "gangplank-policies";
pub const LIB_CONFIGMAP: &str = "gangplank-policy-lib";

/// The seven training kind/versions, as webhook rules name them.
pub const TRAINING_RESOURCES: [(&str, &str, &str); 7] = [
    ("kubeflow.org", "v1", "pytorchjobs"),
    ("kubeflow.org", "v1", "tfjobs"),
    ("kubeflow.org", "v1", "mpijobs"),
    ("kubeflow.org", "v1", "xgboostjobs"),
    ("kubeflow.org", "v1", "paddlejobs"),
    ("kubeflow.org", "v1", "jaxjobs"),
    ("kubeflow.org", "v2beta1", "mpijobs"),
];

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn deploy_dir() -> PathBuf {
    repo().join("deploy")
}

/// Every document of a YAML file, as JSON values; empty documents are dropped.
pub fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_documents(&text, &path.display().to_string())
}

pub fn parse_documents(text: &str, origin: &str) -> Vec<Value> {
    use serde::Deserialize as _;
    yaml_serde::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{origin}: {e}")))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// `*.yaml` files under `dir`, recursively, in name order.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
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

pub fn is_kustomize_file(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "kustomization.yaml")
}

/// The Kubernetes objects of `deploy/`: every document of every YAML file except
/// kustomize's own (`kustomization.yaml`) and the policy copy's params.yaml.
pub struct Manifests {
    pub objects: Vec<(PathBuf, Value)>,
}

impl Manifests {
    pub fn get() -> &'static Manifests {
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

    pub fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects
            .iter()
            .map(|(_, o)| o)
            .filter(|o| o["kind"] == kind)
            .collect()
    }

    /// The one object of `kind` in deploy/'s base (not the cert-manager component).
    pub fn one(&self, kind: &str) -> &Value {
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

    pub fn deployment(&self) -> &Value {
        self.one("Deployment")
    }

    pub fn pod(&self) -> &Value {
        &self.deployment()["spec"]["template"]["spec"]
    }

    pub fn container(&self) -> &Value {
        let containers = self.pod()["containers"].as_array().expect("containers");
        assert_eq!(containers.len(), 1, "one container: the server");
        &containers[0]
    }

    pub fn webhook_configurations(&self) -> [(&'static str, &Value); 2] {
        [
            ("mutate", self.one("MutatingWebhookConfiguration")),
            ("validate", self.one("ValidatingWebhookConfiguration")),
        ]
    }
}

pub fn strings(v: &Value) -> Vec<&str> {
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
pub fn arg(name: &str) -> String {
    let prefix = format!("--{name}=");
    strings(&Manifests::get().container()["args"])
        .into_iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_string))
        .unwrap_or_else(|| panic!("the server is started without {prefix}"))
}

/// A memory quantity in bytes (the binary and decimal suffixes the manifests use).
pub fn bytes(quantity: &str) -> u64 {
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

/// Every label of `selector` is on `labels` (and the selector is not empty).
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("matchLabels");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels[k] == *v)
}
