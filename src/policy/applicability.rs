//! Which policies can apply to a request, decided in Rust before the VM runs.
//!
//! A policy may say, in the OPA `# METADATA` block above its `package` line, when it can
//! have anything to say:
//!
//! ```rego
//! # METADATA
//! # custom:
//! #   applies_when:
//! #     kinds: [PyTorchJob, TrainJob]   # the JobView's kind is one of these
//! #     all: [cluster]                  # every fact holds
//! #     any: [mig, params.defaultProfile]   # at least one holds
//! package gangplank.policies.example
//! ```
//!
//! Each request computes the facts once ([`Facts::of`]); a policy whose conditions are
//! false is not evaluated, and `gangplank check --explain` says why. A policy without
//! `applies_when` always runs, and a fact that cannot be read from the request (no JobView,
//! a field of the wrong type) counts as true: the index may only skip a policy that could
//! not have fired. The facts are documented for policy authors in policies/README.md
//! "Performance".

use std::fmt;
use std::path::Path;
use std::sync::LazyLock;

use regorus::Value as RegoValue;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::LoadError;

/// Set `GANGPLANK_INDEX=off` to evaluate every policy on every request (the reference the
/// index is tested against, and an escape hatch). Read at every (re)load.
pub const INDEX_ENV: &str = "GANGPLANK_INDEX";

pub fn index_disabled() -> bool {
    std::env::var(INDEX_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("off"))
}

/// A fact of one request that a policy's `applies_when` can name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `cluster`: a cluster inventory is known (`data.cluster` is set).
    Cluster,
    /// `gpus`: some replica asks for whole GPUs or MIG slices, or some container or init
    /// container lists a GPU resource (even a zero one).
    Gpus,
    /// `mig`: some container or init container asks for an `nvidia.com/mig-*` resource.
    Mig,
    /// `kueue`: the object carries the `kueue.x-k8s.io/queue-name` label.
    Kueue,
    /// `claims`: some replica's pods mount a PersistentVolumeClaim.
    Claims,
    /// `network_policies`: the inventory lists NetworkPolicies that select the job's pods.
    NetworkPolicies,
    /// `placement`: some replica has a nodeSelector, tolerations or an affinity.
    Placement,
    /// `update`: the request is an UPDATE.
    Update,
    /// `priority_class`: some replica's pod spec names a `priorityClassName`, or the job's
    /// `runPolicy.schedulingPolicy.priorityClass` names one.
    PriorityClass,
    /// `template_annotation:<key>`: some replica's pod template has annotation `<key>`.
    TemplateAnnotation(String),
    /// `params.<name>`: the policy's parameter `<name>` is set (not null, false, "", [] or
    /// {}). Decided at load: parameters change only with a reload.
    Param(String),
}

/// The facts without an argument, by the name policies write.
const NAMED: [(&str, Condition); 9] = [
    ("cluster", Condition::Cluster),
    ("gpus", Condition::Gpus),
    ("mig", Condition::Mig),
    ("kueue", Condition::Kueue),
    ("claims", Condition::Claims),
    ("network_policies", Condition::NetworkPolicies),
    ("placement", Condition::Placement),
    ("update", Condition::Update),
    ("priority_class", Condition::PriorityClass),
];

impl Condition {
    fn parse(text: &str) -> Result<Condition, String> {
        if let Some(key) = text.strip_prefix("template_annotation:") {
            return Ok(Condition::TemplateAnnotation(key.to_string()));
        }
        if let Some(name) = text.strip_prefix("params.") {
            return Ok(Condition::Param(name.to_string()));
        }
        match NAMED.iter().find(|(name, _)| *name == text) {
            Some((_, c)) => Ok(c.clone()),
            None => {
                let names: Vec<&str> = NAMED.iter().map(|(name, _)| *name).collect();
                Err(format!(
                    "unknown fact {text:?} (facts: {}, template_annotation:<key>, params.<name>)",
                    names.join(", ")
                ))
            }
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::TemplateAnnotation(key) => write!(f, "template_annotation:{key}"),
            Condition::Param(name) => write!(f, "params.{name}"),
            named => {
                let name = NAMED
                    .iter()
                    .find(|(_, c)| c == named)
                    .map(|(name, _)| *name);
                f.write_str(name.unwrap_or("?"))
            }
        }
    }
}

/// A policy's `applies_when`, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applicability {
    pub kinds: Option<Vec<String>>,
    pub all: Vec<Condition>,
    pub any: Vec<Condition>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    kinds: Option<Vec<String>>,
    #[serde(default)]
    all: Vec<String>,
    #[serde(default)]
    any: Vec<String>,
}

impl Applicability {
    /// Reads the `applies_when` of the `# METADATA` block above the `package` line of a
    /// policy file. No block, or a block without it: `None` (the policy always runs). Every
    /// METADATA block of the file must be YAML; `applies_when` anywhere but above `package`
    /// is refused, since it would be silently ignored there.
    pub fn read(path: &Path, text: &str) -> Result<Option<Applicability>, LoadError> {
        let bad = |detail: String| LoadError::BadMetadata {
            path: path.to_path_buf(),
            detail,
        };
        let mut found = None;
        for block in metadata_blocks(text) {
            let yaml: Value = yaml_serde::from_str(&block.yaml).map_err(|e| {
                bad(format!(
                    "the METADATA block at line {} is not YAML: {e}",
                    block.line
                ))
            })?;
            let Some(written) = yaml.get("custom").and_then(|c| c.get("applies_when")) else {
                continue;
            };
            if !block.before_package {
                return Err(bad(format!(
                    "custom.applies_when (METADATA block at line {}) must be in the block directly above the package line",
                    block.line
                )));
            }
            let written: Written = serde_json::from_value(written.clone())
                .map_err(|e| bad(format!("custom.applies_when: {e}")))?;
            let parse = |list: Vec<String>| {
                list.iter()
                    .map(|c| Condition::parse(c))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad(format!("custom.applies_when: {e}")))
            };
            found = Some(Applicability {
                kinds: written.kinds,
                all: parse(written.all)?,
                any: parse(written.any)?,
            });
        }
        Ok(found)
    }

    /// Checks the parameters it names exist, and fixes their values: a reload re-reads it.
    pub fn resolve(&self, params: &Map<String, Value>) -> Result<Resolved, String> {
        let resolve = |list: &[Condition]| {
            list.iter()
                .map(|c| match c {
                    Condition::Param(name) => params
                        .get(name)
                        .map(|v| Resolved::param(c, v))
                        .ok_or_else(|| {
                            format!("custom.applies_when names params.{name}, which meta.params does not declare")
                        }),
                    other => Ok((other.clone(), None)),
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Resolved {
            kinds: self.kinds.clone(),
            all: resolve(&self.all)?,
            any: resolve(&self.any)?,
        })
    }
}

/// An [`Applicability`] with its parameters' values fixed (`Some(set)` for `params.*`).
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    kinds: Option<Vec<String>>,
    all: Vec<(Condition, Option<bool>)>,
    any: Vec<(Condition, Option<bool>)>,
}

impl Resolved {
    fn param(c: &Condition, v: &Value) -> (Condition, Option<bool>) {
        let set = match v {
            Value::Null | Value::Bool(false) => false,
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => true,
        };
        (c.clone(), Some(set))
    }

    /// `None` when the policy can apply to a request with these facts, else why not.
    pub fn skip_reason(&self, facts: &Facts) -> Option<String> {
        if let (Some(kinds), Some(kind)) = (&self.kinds, &facts.kind) {
            if !kinds.iter().any(|k| k == kind) {
                return Some(format!("kind {kind} is not one of {}", kinds.join(", ")));
            }
        }
        let holds =
            |(c, param): &(Condition, Option<bool>)| param.unwrap_or_else(|| facts.holds(c));
        if let Some((c, _)) = self.all.iter().find(|c| !holds(c)) {
            return Some(format!("{c} does not hold"));
        }
        if !self.any.is_empty() && !self.any.iter().any(holds) {
            let names: Vec<String> = self.any.iter().map(|(c, _)| c.to_string()).collect();
            return Some(format!("none of {} holds", names.join(", ")));
        }
        None
    }
}

/// The facts of one request, read once from its Rego input and cluster view. `None`: the
/// fact could not be read, and counts as true.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    kind: Option<String>,
    cluster: bool,
    update: bool,
    gpus: Option<bool>,
    mig: Option<bool>,
    kueue: Option<bool>,
    claims: Option<bool>,
    placement: Option<bool>,
    network_policies: Option<bool>,
    priority_class: Option<bool>,
    annotations: Option<Vec<String>>,
}

/// The field names the facts read, as Rego values built once: indexing a regorus value by
/// `&str` builds and frees a string key on every lookup, which made the facts cost about
/// 40 K instructions per stage of a review.
struct Keys {
    job: RegoValue,
    problems: RegoValue,
    replicas: RegoValue,
    annotations: RegoValue,
    kind: RegoValue,
    request: RegoValue,
    operation: RegoValue,
    gpus_per_pod: RegoValue,
    mig_slices_per_pod: RegoValue,
    containers: RegoValue,
    init_containers: RegoValue,
    gpu_resources: RegoValue,
    name: RegoValue,
    claim_volumes: RegoValue,
    object: RegoValue,
    metadata: RegoValue,
    labels: RegoValue,
    network_policies: RegoValue,
    node_selector: RegoValue,
    tolerations: RegoValue,
    pod_spec_path: RegoValue,
    affinity: RegoValue,
    placement: RegoValue,
    priority_class_name: RegoValue,
    spec: RegoValue,
    run_policy: RegoValue,
    scheduling_policy: RegoValue,
    priority_class: RegoValue,
}

static KEYS: LazyLock<Keys> = LazyLock::new(|| Keys {
    job: "job".into(),
    problems: "problems".into(),
    replicas: "replicas".into(),
    annotations: "annotations".into(),
    kind: "kind".into(),
    request: "request".into(),
    operation: "operation".into(),
    gpus_per_pod: "gpusPerPod".into(),
    mig_slices_per_pod: "migSlicesPerPod".into(),
    containers: "containers".into(),
    init_containers: "initContainers".into(),
    gpu_resources: "gpuResources".into(),
    name: "name".into(),
    claim_volumes: "claimVolumes".into(),
    object: "object".into(),
    metadata: "metadata".into(),
    labels: "labels".into(),
    network_policies: "network_policies".into(),
    node_selector: "nodeSelector".into(),
    tolerations: "tolerations".into(),
    pod_spec_path: "podSpecPath".into(),
    affinity: "affinity".into(),
    placement: "placement".into(),
    priority_class_name: "priorityClassName".into(),
    spec: "spec".into(),
    run_policy: "runPolicy".into(),
    scheduling_policy: "schedulingPolicy".into(),
    priority_class: "priorityClass".into(),
});

impl Facts {
    /// The facts of `input` (the Rego input document) and `cluster` (this request's view of
    /// `data.cluster`, if an inventory is known).
    pub fn of(input: &RegoValue, cluster: Option<&RegoValue>) -> Facts {
        let k = &*KEYS;
        let job = &input[&k.job];
        // A view that could not read all of the job may have left out what a fact is about:
        // its facts are unknown, and every policy runs.
        let readable = job[&k.problems].as_array().is_ok_and(|p| p.is_empty());
        let replicas = job[&k.replicas].as_array().ok().filter(|_| readable);
        let any_replica = |test: &dyn Fn(&RegoValue) -> Option<bool>| -> Option<bool> {
            replicas?
                .iter()
                .map(test)
                .try_fold(false, |acc, r| Some(acc || r?))
        };
        let annotations = replicas.and_then(|rs| {
            let mut keys = Vec::new();
            for r in rs.iter() {
                for (key, _) in r[&k.annotations].as_object().ok()?.iter() {
                    keys.push(key.as_string().ok()?.to_string());
                }
            }
            Some(keys)
        });
        Facts {
            kind: job[&k.kind].as_string().ok().map(|k| k.to_string()),
            cluster: cluster.is_some(),
            update: input[&k.request][&k.operation]
                .as_string()
                .is_ok_and(|op| op.as_ref() == "UPDATE"),
            gpus: any_replica(&|r| {
                let n = |key: &RegoValue| r[key].as_i64().ok();
                let listed = |list: &RegoValue| gpu_resources(&r[list], |_| true);
                Some(
                    n(&k.gpus_per_pod)? + n(&k.mig_slices_per_pod)? > 0
                        || listed(&k.containers)?
                        || listed(&k.init_containers)?,
                )
            }),
            mig: any_replica(&|r| {
                let mig = |list: &RegoValue| {
                    gpu_resources(&r[list], |name| name.starts_with("nvidia.com/mig-"))
                };
                Some(mig(&k.containers)? || mig(&k.init_containers)?)
            }),
            kueue: labels_have(&input[&k.object], "kueue.x-k8s.io/queue-name"),
            claims: any_replica(&|r| Some(!r[&k.claim_volumes].as_array().ok()?.is_empty())),
            placement: any_replica(&|r| placement(input, r)),
            network_policies: cluster.and_then(|c| {
                c[&k.network_policies]
                    .as_array()
                    .ok()
                    .map(|a| !a.is_empty())
            }),
            priority_class: any_replica(&|r| {
                Some(names_a_class(&r[&k.placement][&k.priority_class_name]))
            })
            .map(|named| named || job_priority_class(&input[&k.object])),
            annotations,
        }
    }

    fn holds(&self, c: &Condition) -> bool {
        let known = |v: Option<bool>| v.unwrap_or(true);
        match c {
            Condition::Cluster => self.cluster,
            Condition::Update => self.update,
            Condition::Gpus => known(self.gpus),
            Condition::Mig => known(self.mig),
            Condition::Kueue => known(self.kueue),
            Condition::Claims => known(self.claims),
            Condition::Placement => known(self.placement),
            Condition::PriorityClass => known(self.priority_class),
            // Without an inventory there are no NetworkPolicies to read.
            Condition::NetworkPolicies => self.cluster && known(self.network_policies),
            Condition::TemplateAnnotation(key) => self
                .annotations
                .as_ref()
                .is_none_or(|keys| keys.iter().any(|k| k == key)),
            Condition::Param(_) => true,
        }
    }
}

/// Whether a container list of the view lists a GPU resource whose name passes `test`;
/// `None` if it cannot be read.
fn gpu_resources(containers: &RegoValue, test: impl Fn(&str) -> bool) -> Option<bool> {
    for c in containers.as_array().ok()?.iter() {
        for g in c[&KEYS.gpu_resources].as_array().ok()?.iter() {
            if test(g[&KEYS.name].as_string().ok()?) {
                return Some(true);
            }
        }
    }
    Some(false)
}

fn labels_have(object: &RegoValue, key: &str) -> Option<bool> {
    match &object[&KEYS.metadata][&KEYS.labels] {
        RegoValue::Undefined | RegoValue::Null => Some(false),
        labels => Some(!matches!(
            labels.as_object().ok()?.get(&RegoValue::from(key)),
            None | Some(RegoValue::Null)
        )),
    }
}

/// Whether `v` names a PriorityClass: a non-empty string (`""` is no class).
fn names_a_class(v: &RegoValue) -> bool {
    v.as_string().is_ok_and(|s| !s.is_empty())
}

/// Whether the job's `runPolicy.schedulingPolicy.priorityClass` names a class (its PodGroup's).
fn job_priority_class(object: &RegoValue) -> bool {
    let k = &*KEYS;
    names_a_class(&object[&k.spec][&k.run_policy][&k.scheduling_policy][&k.priority_class])
}

/// Whether replica `r` constrains where its pods go: a nodeSelector, tolerations, or an
/// affinity in its pod spec (read from the object at the view's `podSpecPath`).
fn placement(input: &RegoValue, r: &RegoValue) -> Option<bool> {
    let non_empty = |v: &RegoValue| match v {
        RegoValue::Undefined | RegoValue::Null => Some(false),
        RegoValue::Object(o) => Some(!o.is_empty()),
        RegoValue::Array(a) => Some(!a.is_empty()),
        _ => None,
    };
    let k = &*KEYS;
    if non_empty(&r[&k.node_selector])? || non_empty(&r[&k.tolerations])? {
        return Some(true);
    }
    let mut spec = &input[&k.object];
    for segment in r[&k.pod_spec_path].as_string().ok()?.split('/').skip(1) {
        spec = &spec[segment.replace("~1", "/").replace("~0", "~").as_str()];
    }
    match spec {
        RegoValue::Object(_) => non_empty(&spec[&k.affinity]),
        // The view points elsewhere (a TrainJob's runtime): not known here.
        _ => None,
    }
}

/// One `# METADATA` comment block of a Rego file: its YAML, first line, and whether the
/// `package` line directly follows it.
struct MetadataBlock {
    yaml: String,
    line: usize,
    before_package: bool,
}

fn metadata_blocks(text: &str) -> Vec<MetadataBlock> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while let Some(line) = lines.get(i) {
        if line.trim() != "# METADATA" {
            i += 1;
            continue;
        }
        let start = i;
        let mut yaml = String::new();
        i += 1;
        while let Some(body) = lines.get(i).and_then(|l| l.trim_start().strip_prefix('#')) {
            yaml.push_str(body.strip_prefix(' ').unwrap_or(body));
            yaml.push('\n');
            i += 1;
        }
        let before_package = lines
            .get(i)
            .is_some_and(|l| l.trim_start().starts_with("package "));
        blocks.push(MetadataBlock {
            yaml,
            line: start + 1,
            before_package,
        });
    }
    blocks
}
