//! YAML case files: a job (or AdmissionReview) in, the expected decision out.
//!
//! ```yaml
//! fixtures:                       # named objects cases can start from
//!   pytorch: {apiVersion: kubeflow.org/v1, kind: PyTorchJob, ...}
//! params:                         # overlay over params.yaml for every case of the file
//!   policies: {images: {action: audit}}
//! cases:
//! - note: a Master without replicas is defaulted to one
//!   object: {fixture: pytorch, merge: {spec: {pytorchReplicaSpecs: {Master: {replicas: null}}}}}
//!   expect:
//!     allowed: true
//!     patched: {/spec/pytorchReplicaSpecs/Master/replicas: 1}
//! ```
//!
//! See `policies/README.md` for every field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::cluster::{snapshot, ClusterHandle};
use crate::policy::ParamsFile;
use crate::review::{Caller, Input, Operation};
use crate::trainer::RuntimeCatalog;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    #[serde(default)]
    pub fixtures: BTreeMap<String, Value>,
    #[serde(default)]
    pub params: Option<ParamsFile>,
    /// The cluster inventory (`data.cluster`) of every case that gives none.
    #[serde(default)]
    pub cluster: Option<Value>,
    /// Trainer runtimes (files relative to the case file, or inline objects) TrainJobs of
    /// every case are rendered with; a case's own `runtimes` are added to them.
    #[serde(default)]
    pub runtimes: Vec<Value>,
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Case {
    pub note: String,
    /// The object: inline, or `{fixture: name, merge: <RFC 7386 merge patch>}`.
    pub object: Option<Value>,
    /// A manifest file (first document), relative to the case file.
    pub file: Option<PathBuf>,
    /// A whole AdmissionReview instead of an object.
    pub review: Option<Value>,
    pub operation: Option<String>,
    pub old_object: Option<Value>,
    pub namespace: Option<String>,
    /// `input.images`: image reference → digest, as a resolver would supply.
    #[serde(default)]
    pub images: Map<String, Value>,
    pub params: Option<ParamsFile>,
    /// `data.cluster`: a snapshot file (relative to the case file) as `kubectl get
    /// nodes,namespaces,pvc,storageclasses,networkpolicies,queues -A -o yaml` prints it, or
    /// its objects inline as a list.
    pub cluster: Option<Value>,
    /// The inventory leaves nodes out, for this reason (as the webhook's inventory says when
    /// it reaches its memory bound): capacity is unknown.
    pub cluster_incomplete: Option<String>,
    /// Trainer runtimes, as the file-level `runtimes`.
    #[serde(default)]
    pub runtimes: Vec<Value>,
    /// The runtimes are a last listing kept while their watch fails, for this reason (as
    /// the webhook's catalog marks them).
    pub runtimes_stale: Option<String>,
    /// Who asks: `authenticated` (the default: a local run, or the apiserver with its client
    /// certificate) or `anonymous` (a server's caller without one), whose messages name no
    /// other object of the namespace (`input.caller`).
    #[serde(default)]
    pub caller: Caller,
    pub expect: Expect,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    pub allowed: Option<bool>,
    pub skipped: Option<bool>,
    /// Each must match some violation (any action).
    #[serde(default)]
    pub violations: Vec<ViolationMatch>,
    /// When true, every violation must be matched by an entry of `violations`.
    #[serde(default)]
    pub exclusive: bool,
    #[serde(default)]
    pub no_violations_from: Vec<String>,
    /// Regexes; each must match some warning (`[policy] path: message`).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// JSON pointer → value expected in the mutated object.
    #[serde(default)]
    pub patched: BTreeMap<String, Value>,
    /// JSON pointers that must not exist in the mutated object.
    #[serde(default)]
    pub absent: Vec<String>,
    /// The exact RFC 6902 patch.
    pub patch: Option<Value>,
    /// True: no patch at all.
    pub unchanged: Option<bool>,
    /// Regex the evaluation error must match (the policies must fail on this input).
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ViolationMatch {
    pub policy: Option<String>,
    pub path: Option<String>,
    /// Regex over the message.
    pub message: Option<String>,
    pub action: Option<String>,
}

impl Expect {
    /// A case that asserts nothing cannot fail, which makes it a defect.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_none()
            && self.skipped.is_none()
            && self.violations.is_empty()
            && !self.exclusive
            && self.no_violations_from.is_empty()
            && self.warnings.is_empty()
            && self.patched.is_empty()
            && self.absent.is_empty()
            && self.patch.is_none()
            && self.unchanged.is_none()
            && self.error.is_none()
    }
}

impl CaseFile {
    pub fn read(path: &Path) -> Result<CaseFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        yaml_serde::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl Case {
    /// Builds the admission input the case describes. `dir` is the case file's directory.
    pub fn input(&self, fixtures: &BTreeMap<String, Value>, dir: &Path) -> Result<Input, String> {
        let mut input = match (&self.object, &self.file, &self.review) {
            (Some(obj), None, None) => Input::create(resolve(obj, fixtures)?, "default"),
            (None, Some(file), None) => Input::create(first_document(&dir.join(file))?, "default"),
            (None, None, Some(review)) => Input::from_review(review.clone())?,
            _ => return Err("give exactly one of object, file, review".into()),
        };
        if let Some(op) = &self.operation {
            input.operation =
                Operation::parse(op).ok_or_else(|| format!("unknown operation {op:?}"))?;
        }
        if let Some(old) = &self.old_object {
            input.old_object = Some(resolve(old, fixtures)?);
        }
        if let Some(ns) = &self.namespace {
            input.namespace = ns.clone();
        }
        input.images.extend(self.images.clone());
        input.caller = self.caller;
        Ok(input)
    }
}

impl Case {
    /// The case's cluster inventory, if it gives one.
    pub fn cluster(&self, dir: &Path) -> Result<Option<ClusterHandle>, String> {
        let mut inventory = match &self.cluster {
            None if self.cluster_incomplete.is_some() => {
                return Err("clusterIncomplete needs a cluster to mark".into())
            }
            None => return Ok(None),
            Some(Value::String(file)) => snapshot::read(&dir.join(file))?,
            Some(Value::Array(items)) => snapshot::from_items(items.clone(), "the case's cluster")?,
            Some(other) => {
                let items = other.get("items").and_then(Value::as_array).ok_or(
                    "cluster: give a snapshot file name or a list of objects (Nodes, Namespaces, PersistentVolumeClaims, StorageClasses, NetworkPolicies, queues)",
                )?;
                snapshot::from_items(items.clone(), "the case's cluster")?
            }
        };
        if let Some(why) = &self.cluster_incomplete {
            inventory.incomplete = Some(why.clone());
        }
        Ok(Some(ClusterHandle::fixed(&inventory)))
    }
}

/// An inline object, or a fixture with a merge patch applied.
fn resolve(spec: &Value, fixtures: &BTreeMap<String, Value>) -> Result<Value, String> {
    let Some(name) = spec.get("fixture").filter(|_| spec.get("kind").is_none()) else {
        return Ok(spec.clone());
    };
    let name = name.as_str().ok_or("fixture must be a name")?;
    let mut obj = fixtures
        .get(name)
        .cloned()
        .ok_or_else(|| format!("no fixture named {name:?}"))?;
    if let Some(patch) = spec.get("merge") {
        json_patch::merge(&mut obj, patch);
    }
    Ok(obj)
}

/// The runtimes `entries` give (file names relative to `dir`: every runtime in the file;
/// or inline objects and `{fixture: name}`), as a complete listing: a runtime not among them does not exist.
/// `None` when there are none.
pub fn runtime_catalog(
    entries: &[&Value],
    dir: &Path,
    fixtures: &BTreeMap<String, Value>,
) -> Result<Option<RuntimeCatalog>, String> {
    if entries.is_empty() {
        return Ok(None);
    }
    let catalog = RuntimeCatalog::default();
    for entry in entries {
        let objects = match entry {
            Value::String(file) => documents(&dir.join(file))?,
            other => vec![resolve(other, fixtures)?],
        };
        for object in objects {
            catalog.insert(&object);
        }
    }
    catalog.mark_listed("the case's runtimes");
    Ok(Some(catalog))
}

/// Every document of the file at `path`; any unreadable one is the error.
fn documents(path: &Path) -> Result<Vec<Value>, String> {
    parsed(path)?.into_iter().collect()
}

fn parsed(path: &Path) -> Result<Vec<Result<Value, String>>, String> {
    let mut out = Vec::new();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    crate::review::documents::parse_text(
        &path.display().to_string(),
        &text,
        &Default::default(),
        &mut out,
    );
    Ok(out
        .into_iter()
        .map(|d| {
            d.map(|d| d.input.object)
                .map_err(|e| format!("{}: {}", e.source, e.message))
        })
        .collect())
}

/// `file.yaml` (its first document) or `file.yaml#N` (its N-th, from 1).
fn first_document(path: &Path) -> Result<Value, String> {
    let text = path.display().to_string();
    let (file, n) = match text.rsplit_once('#') {
        Some((file, n)) => {
            let n: usize = n
                .parse()
                .map_err(|_| format!("{text}: #{n} is not a document number"))?;
            (Path::new(file), n)
        }
        None => (path, 1),
    };
    parsed(file)?
        .into_iter()
        .nth(n.saturating_sub(1))
        .unwrap_or_else(|| Err(format!("{}: no document {n}", file.display())))
}
