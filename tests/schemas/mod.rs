//! CRD schemas as validators, shared by the suites that check manifests against CRDs
//! (tests/corpus.rs: the upstream CRDs; tests/crds.rs: ours), and where the corpus is.
//!
//! Schemas are checked twice, as the apiserver would treat them:
//! - *loose*: the openAPIV3Schema as JSON Schema (draft 4, which OpenAPI 3.0 schemas follow):
//!   what the apiserver would reject;
//! - *strict*: also `additionalProperties: false` wherever the schema lists properties and
//!   does not preserve unknown fields: fields the apiserver would silently prune.
//!
//! Each test binary uses a part of this module.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use jsonschema::Validator;
use serde_json::{Map, Value};

/// Schema error messages quote the offending value, which can be a whole pod template.
const MAX_MESSAGE_CHARS: usize = 300;

/// The corpus directory (`GANGPLANK_CORPUS`, else `../shared/corpus` beside the crate), or
/// why there is none.
pub fn find_corpus() -> Result<PathBuf, String> {
    let dir = std::env::var_os("GANGPLANK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"));
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(format!(
            "corpus not found at {} (set GANGPLANK_CORPUS)",
            dir.display()
        ))
    }
}

/// Compiled validators of one CRD version.
pub struct Schemas {
    /// `file (version)`, for messages.
    pub crd: String,
    pub loose: Validator,
    pub strict: Validator,
}

/// (apiVersion, kind) → validators.
pub type Crds = HashMap<(String, String), Schemas>;

/// The validators of every `*.yaml` CRD in `dir`.
pub fn load_dir(dir: &Path) -> Crds {
    let mut out = Crds::new();
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list the CRDs in {}: {e}", dir.display()));
    for path in entries.map(|e| e.expect("readable directory entry").path()) {
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let crd: Value = yaml_serde::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
        let file = path
            .file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
        add_crd(&mut out, &file, &crd);
    }
    assert!(!out.is_empty(), "no CRDs found in {}", dir.display());
    out
}

/// Adds the validators of every version of `crd`, named `file` in messages.
pub fn add_crd(out: &mut Crds, file: &str, crd: &Value) {
    let text = |ptr: &str| crd.pointer(ptr).and_then(Value::as_str).unwrap_or_default();
    let (group, kind) = (text("/spec/group"), text("/spec/names/kind"));
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    for version in versions.into_iter().flatten() {
        let Some(schema) = version.pointer("/schema/openAPIV3Schema") else {
            continue;
        };
        let name = version
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let compile = |strict: bool| {
            jsonschema::draft4::new(&to_json_schema(schema, strict))
                .unwrap_or_else(|e| panic!("{file} {name}: schema does not compile: {e}"))
        };
        out.insert(
            (format!("{group}/{name}"), kind.to_string()),
            Schemas {
                crd: format!("{file} ({name})"),
                loose: compile(false),
                strict: compile(true),
            },
        );
    }
}

/// A Kubernetes structural schema as plain JSON Schema: `x-kubernetes-*` keys dropped, and
/// `type` dropped where `x-kubernetes-int-or-string` allows either. With `strict`, objects
/// that list properties refuse others (see the module doc).
pub fn to_json_schema(schema: &Value, strict: bool) -> Value {
    match schema {
        Value::Object(map) => {
            let flag = |k: &str| map.get(k).and_then(Value::as_bool).unwrap_or(false);
            let int_or_string = flag("x-kubernetes-int-or-string");
            let preserve = flag("x-kubernetes-preserve-unknown-fields");
            let mut out: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| !k.starts_with("x-kubernetes-"))
                .filter(|(k, _)| !(int_or_string && *k == "type"))
                .map(|(k, v)| (k.clone(), to_json_schema(v, strict)))
                .collect();
            if strict
                && !preserve
                && out.contains_key("properties")
                && !out.contains_key("additionalProperties")
            {
                out.insert("additionalProperties".into(), Value::Bool(false));
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| to_json_schema(v, strict)).collect())
        }
        other => other.clone(),
    }
}

/// The apiserver drops `null` fields that the schema does not mark nullable (none of these
/// CRDs marks any) before validating; upstream examples rely on it (`command:` left empty).
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Every schema error as `instance path: message`.
pub fn schema_errors(validator: &Validator, object: &Value) -> Vec<String> {
    let object = without_nulls(object);
    validator
        .iter_errors(&object)
        .map(|e| {
            let msg: String = e.to_string().chars().take(MAX_MESSAGE_CHARS).collect();
            format!("{}: {msg}", e.instance_path())
        })
        .collect()
}

/// YAML or JSON, as `gangplank check` picks files in a directory (examples/ may also hold
/// Cargo example programs).
pub fn is_manifest(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
}

/// The manifests directly in `dir`, sorted.
pub fn manifests_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.is_file() && is_manifest(p))
        .collect();
    files.sort();
    files
}

/// Panics with every failure, one a line.
pub fn assert_no_failures(what: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{what}: {} failures\n{}",
        failures.len(),
        failures.join("\n")
    );
}
