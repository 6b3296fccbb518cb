//! Our CRDs against upstream's (`corpus/upstream-crds`: training-operator v1.9.4, and
//! mpi-operator v0.8.2 for the v2beta1 MPIJob): a structured comparison that names each
//! difference, and the list of intended ones.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

use super::{generated, generated_values};

/// One way our CRD differs from upstream's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The kind and its version, `MPIJob v2beta1`.
    pub kind: String,
    /// Where: `crd.<field>`, or a schema path such as `spec.pytorchReplicaSpecs{}.template`
    /// (`{}` for a map's values, `[]` for a list's items).
    pub path: String,
    /// Which keyword or property differs.
    pub aspect: String,
    pub detail: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            kind,
            path,
            aspect,
            detail,
        } = self;
        write!(f, "{kind} {path} [{aspect}]: {detail}")
    }
}

/// A difference we mean, at the schema path ending in `at` or below it, for every kind.
struct Intended {
    at: &'static str,
    aspect: &'static str,
    reason: &'static str,
}

const TEMPLATE_REASON: &str = "the pod template is kept as written \
    (x-kubernetes-preserve-unknown-fields) instead of upstream's inlined PodTemplateSpec: it \
    accepts everything upstream's schema accepts, keeps pod fields newer than the CRD instead \
    of pruning them, and keeps each CRD small enough for client-side kubectl apply; the pod is \
    validated when the controller creates it, and by the validating webhook before";

const METRICS_REASON: &str = "autoscaling/v2 MetricSpec items are kept as written, `type` \
    still required, for the same reasons as the pod template";

const INTENDED: &[Intended] = &[
    Intended {
        at: ".template",
        aspect: "properties",
        reason: TEMPLATE_REASON,
    },
    Intended {
        at: ".template",
        aspect: "x-kubernetes-preserve-unknown-fields",
        reason: TEMPLATE_REASON,
    },
    Intended {
        at: ".metrics[]",
        aspect: "field",
        reason: METRICS_REASON,
    },
    Intended {
        at: ".metrics[]",
        aspect: "x-kubernetes-preserve-unknown-fields",
        reason: METRICS_REASON,
    },
    Intended {
        at: ".minResources{}",
        aspect: "anyOf",
        reason: "no `anyOf: [integer, string]` beside x-kubernetes-int-or-string: kube's \
            structural rewriter empties its branches, and the flag alone means integer or \
            string to the apiserver",
    },
];

impl Intended {
    fn covers(&self, d: &Difference) -> bool {
        let below = d.path.contains(&format!("{}.", self.at));
        (d.path.ends_with(self.at) || below) && d.aspect == self.aspect
    }
}

/// Schema keywords compared at every node (descriptions are ours, and not compared).
const KEYWORDS: &[&str] = &[
    "type",
    "format",
    "required",
    "default",
    "enum",
    "pattern",
    "anyOf",
    "nullable",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-validations",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
];

/// Every difference between two CRDs of `kind`.
pub fn compare(kind: &str, upstream: &Value, ours: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut differ = |path: &str, aspect: &str, detail: String| {
        out.push(Difference {
            kind: kind.into(),
            path: path.into(),
            aspect: aspect.into(),
            detail,
        })
    };
    for ptr in [
        "/metadata/name",
        "/spec/group",
        "/spec/scope",
        "/spec/names",
    ] {
        let (u, o) = (upstream.pointer(ptr), ours.pointer(ptr));
        if u != o {
            differ(
                &format!("crd{}", ptr.replace('/', ".")),
                "value",
                upstream_ours(u, o),
            );
        }
    }
    compare_versions(upstream, ours, &mut differ);
    let schema = "/schema/openAPIV3Schema";
    for (name, u, o) in paired_versions(upstream, ours) {
        let (Some(u), Some(o)) = (u.pointer(schema), o.pointer(schema)) else {
            differ(&format!("crd.versions.{name}"), "schema", "missing".into());
            continue;
        };
        walk("", u, o, &mut differ);
    }
    out
}

type Differ<'a> = dyn FnMut(&str, &str, String) + 'a;

fn versions(crd: &Value) -> Vec<&Value> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default()
}

fn version_name(v: &Value) -> &str {
    v.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// Versions both CRDs have, by name.
fn paired_versions<'a>(
    upstream: &'a Value,
    ours: &'a Value,
) -> Vec<(String, &'a Value, &'a Value)> {
    versions(upstream)
        .into_iter()
        .filter_map(|u| {
            let o = versions(ours)
                .into_iter()
                .find(|o| version_name(o) == version_name(u))?;
            Some((version_name(u).to_string(), u, o))
        })
        .collect()
}

fn compare_versions(upstream: &Value, ours: &Value, differ: &mut Differ<'_>) {
    let names = |crd: &Value| -> Vec<String> {
        versions(crd)
            .into_iter()
            .map(|v| version_name(v).to_string())
            .collect()
    };
    if names(upstream) != names(ours) {
        differ(
            "crd.versions",
            "names",
            format!("upstream {:?}, ours {:?}", names(upstream), names(ours)),
        );
    }
    for (name, u, o) in paired_versions(upstream, ours) {
        for field in [
            "served",
            "storage",
            "deprecated",
            "subresources",
            "additionalPrinterColumns",
        ] {
            let (uf, of) = (u.get(field), o.get(field));
            if uf != of {
                differ(
                    &format!("crd.versions.{name}"),
                    field,
                    upstream_ours(uf, of),
                );
            }
        }
    }
}

/// Compares one schema node and recurses into properties, map values and list items.
fn walk(path: &str, u: &Value, o: &Value, differ: &mut Differ<'_>) {
    for &keyword in KEYWORDS {
        let (uk, ok) = (normalized(u, keyword), normalized(o, keyword));
        if uk != ok {
            differ(
                display_path(path),
                keyword,
                upstream_ours(uk.as_ref(), ok.as_ref()),
            );
        }
    }
    walk_properties(path, u, o, differ);
    for (keyword, suffix) in [("additionalProperties", "{}"), ("items", "[]")] {
        match (u.get(keyword), o.get(keyword)) {
            (Some(us), Some(os)) if us.is_object() && os.is_object() => {
                walk(&format!("{path}{suffix}"), us, os, differ)
            }
            (us, os) if us != os => differ(display_path(path), keyword, upstream_ours(us, os)),
            _ => {}
        }
    }
}

fn walk_properties(path: &str, u: &Value, o: &Value, differ: &mut Differ<'_>) {
    let props = |v: &Value| v.get("properties").and_then(Value::as_object).cloned();
    match (props(u), props(o)) {
        (Some(up), Some(op)) => {
            let keys: BTreeSet<&String> = up.keys().chain(op.keys()).collect();
            for key in keys {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match (up.get(key), op.get(key)) {
                    (Some(us), Some(os)) => walk(&child, us, os, differ),
                    (Some(_), None) => differ(&child, "field", "upstream has it, ours not".into()),
                    (None, _) => differ(&child, "field", "ours has it, upstream not".into()),
                }
            }
        }
        (None, None) => {}
        (up, op) => {
            let keys = |p: Option<serde_json::Map<String, Value>>| {
                p.map_or("none".to_string(), |p| {
                    format!("{:?}", p.keys().collect::<Vec<_>>())
                })
            };
            differ(
                display_path(path),
                "properties",
                format!("upstream {}, ours {}", keys(up), keys(op)),
            );
        }
    }
}

/// `required` is a set; everything else compares as written.
fn normalized(node: &Value, keyword: &str) -> Option<Value> {
    let value = node.get(keyword)?;
    if keyword == "required" {
        let mut names: Vec<String> = value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        names.sort();
        return Some(Value::from(names));
    }
    Some(value.clone())
}

fn display_path(path: &str) -> &str {
    if path.is_empty() {
        "(root)"
    } else {
        path
    }
}

fn upstream_ours(u: Option<&Value>, o: Option<&Value>) -> String {
    let show = |v: Option<&Value>| v.map_or("none".to_string(), Value::to_string);
    format!("upstream {}, ours {}", show(u), show(o))
}

/// The upstream CRD of the same file name (the directory of ours aside: the v1 MPIJob's
/// `mpijob-v1/kubeflow.org_mpijobs.yaml` is upstream's `kubeflow.org_mpijobs.yaml`).
fn upstream_crd(our_path: &str) -> Value {
    let corpus = super::find_corpus().unwrap_or_else(|why| panic!("{why}"));
    let file_name = our_path.rsplit('/').next().unwrap_or(our_path);
    let path = corpus.join("upstream-crds").join(file_name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no upstream CRD {}: {e}", path.display()));
    yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()))
}

pub fn our_crds_differ_from_upstream_only_as_intended() {
    let mut unintended = Vec::new();
    let mut used = vec![false; INTENDED.len()];
    for (file, ours) in generated().iter().zip(generated_values()) {
        // `MPIJob v2beta1`: the kind alone does not tell the two MPIJob CRDs apart.
        let text = |v: &Value, ptr: &str| {
            v.pointer(ptr)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let versions: Vec<String> = versions(&ours)
            .into_iter()
            .map(|v| text(v, "/name"))
            .collect();
        let kind = format!("{} {}", text(&ours, "/spec/names/kind"), versions.join(","));
        for d in compare(&kind, &upstream_crd(&file.path), &ours) {
            match INTENDED.iter().position(|i| i.covers(&d)) {
                Some(i) => used[i] = true,
                None => unintended.push(d.to_string()),
            }
        }
    }
    let stale: Vec<String> = INTENDED
        .iter()
        .zip(&used)
        .filter(|(_, used)| !**used)
        .map(|(i, _)| format!("{} [{}] no longer differs ({})", i.at, i.aspect, i.reason))
        .collect();
    assert!(
        unintended.is_empty() && stale.is_empty(),
        "our CRDs and upstream's differ in ways not listed in tests/crds/compat.rs INTENDED \
         (fix src/crd/ or list the difference with its reason, and in crds/README.md):\n{}\n\
         intended differences that no longer occur (remove them):\n{}",
        unintended.join("\n"),
        stale.join("\n")
    );
    let compared: Vec<&str> = generated().iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        compared,
        [
            "kubeflow.org_jaxjobs.yaml",
            "kubeflow.org_mpijobs.v2beta1.yaml",
            "kubeflow.org_paddlejobs.yaml",
            "kubeflow.org_pytorchjobs.yaml",
            "kubeflow.org_tfjobs.yaml",
            "kubeflow.org_xgboostjobs.yaml",
            "mpijob-v1/kubeflow.org_mpijobs.yaml",
        ],
        "the five v1 kinds and both MPIJob versions, each compared with its upstream CRD"
    );
}

pub fn the_comparison_names_each_difference() {
    let upstream = upstream_crd("kubeflow.org_pytorchjobs.yaml");
    let mut changed = upstream.clone();
    let version = "/spec/versions/0";
    changed["spec"]["names"]["shortNames"] = serde_json::json!(["pt"]);
    let v = changed.pointer_mut(version).expect("a version");
    v["storage"] = Value::Bool(false);
    v["subresources"]
        .as_object_mut()
        .expect("subresources")
        .remove("scale");
    let spec = v
        .pointer_mut("/schema/openAPIV3Schema/properties/spec")
        .expect("spec schema");
    spec["required"] = serde_json::json!(["runPolicy", "pytorchReplicaSpecs"]);
    spec["properties"]["runPolicy"]["properties"]["backoffLimit"]["type"] = Value::from("string");
    spec["properties"]["runPolicy"]["properties"]
        .as_object_mut()
        .expect("runPolicy properties")
        .remove("suspend");
    let found: Vec<String> = compare("PyTorchJob", &upstream, &changed)
        .iter()
        .map(|d| format!("{} [{}]", d.path, d.aspect))
        .collect();
    assert_eq!(
        found,
        [
            "crd.spec.names [value]",
            "crd.versions.v1 [storage]",
            "crd.versions.v1 [subresources]",
            "spec [required]",
            "spec.runPolicy.backoffLimit [type]",
            "spec.runPolicy.suspend [field]",
        ]
    );
    assert!(compare("PyTorchJob", &upstream, &upstream).is_empty());
}
