//! The pods a TrainJob will get, rendered from it and its runtime the way the Trainer
//! (v2.2+, `pkg/runtime/core/trainingruntime.go` and the plugins) does it:
//!
//! 1. every `runtimePatches` entry, in order, strategic-merged into the runtime's JobSetSpec
//!    (the runtime's replicatedJob order kept);
//! 2. a count per replicatedJob: the Job's `parallelism` (default 1), `mlPolicy.numNodes`
//!    for the `trainer` step, then `trainer.numNodes` (MPI: the `node` job, one less with
//!    `runLauncherAsNode`; other frameworks: the first `trainer` step);
//! 3. `trainer.resourcesPerNode` merged per resource over container `node` of the trainer
//!    step (and of job `node` with `runLauncherAsNode`);
//! 4. `trainer.image`, `command`, `args` replacing, `trainer.env` upserted, on container
//!    `node` of the trainer step; initializer `storageUri` and `env` on theirs.
//!
//! Entry points: [`render_trainjob`] and [`render_runtime`] (a runtime alone, as its own
//! admission sees it: `mlPolicy.numNodes` for the trainer step). Rendering never fails:
//! what cannot be read is a [`Problem`] and the rest is still rendered.

use serde_json::{json, Map, Value};

use super::merge::strategic_merge;
use super::{ANCESTOR_LABEL, ANCESTOR_TRAINER, NODE};
use crate::job::problem::{problem, type_name, Problem};
use crate::job::view::MAX_REPLICA_TYPES;
use crate::pointer;

/// `runtimePatches` holds at most 16 entries (CRD `maxItems`).
const MAX_PATCHES: usize = 16;
const REPLICATED_JOBS: &str = "/spec/template/spec/replicatedJobs";

/// One replicatedJob of the JobSet the Trainer would build.
#[derive(Debug, Clone)]
pub struct RenderedJob {
    pub name: String,
    /// Index in the runtime's `replicatedJobs`.
    pub index: usize,
    /// `trainer.kubeflow.org/trainjob-ancestor-step`: trainer, dataset-initializer, …
    pub ancestor: Option<String>,
    /// Pods of this job (parallelism = completions).
    pub count: i64,
    /// JobSet `dependsOn`: created only once these reach their status.
    pub depends_on: Vec<Value>,
    /// The pod template (`metadata`, `spec`) after patches and overrides.
    pub pod_template: Value,
    /// Whether container `node` takes `spec.trainer` (image, command, args, env) here.
    pub takes_trainer: bool,
}

/// What the runtime's `mlPolicy` says.
#[derive(Debug, Clone, Default)]
pub struct MlPolicy {
    /// The one framework block: torch, mpi, jax, xgboost, flux; `None` for plain ML.
    pub framework: Option<String>,
    pub num_nodes: i64,
    pub num_proc_per_node: Option<i64>,
    pub run_launcher_as_node: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Rendered {
    pub jobs: Vec<RenderedJob>,
    pub ml_policy: MlPolicy,
    /// `coscheduling` or `volcano` (the key of `podGroupPolicy`), when set.
    pub pod_group_policy: Option<String>,
    /// `podGroupPolicy.volcano.networkTopology`, when set.
    pub network_topology: Option<Value>,
    pub problems: Vec<Problem>,
}

/// Where a field of the runtime is, as a path a message can show: `prefix` names the
/// runtime (`ClusterTrainingRuntime/torch-distributed:`) when the object under review is
/// the TrainJob, and is empty when it is the runtime itself.
#[derive(Debug, Clone, Copy)]
pub struct RuntimePaths<'a> {
    pub prefix: &'a str,
}

impl RuntimePaths<'_> {
    pub fn at(&self, pointer: &str) -> String {
        format!("{}{pointer}", self.prefix)
    }

    pub fn job(&self, index: usize) -> String {
        self.at(&format!("{REPLICATED_JOBS}/{index}"))
    }
}

/// The runtime alone, as its own admission sees it.
pub fn render_runtime(runtime: &Value) -> Rendered {
    render(runtime, None, RuntimePaths { prefix: "" })
}

/// A TrainJob with the runtime it names.
pub fn render_trainjob(trainjob: &Value, runtime: &Value, paths: RuntimePaths) -> Rendered {
    render(runtime, Some(trainjob), paths)
}

fn render(runtime: &Value, trainjob: Option<&Value>, paths: RuntimePaths) -> Rendered {
    let mut out = Rendered::default();
    let spec = runtime.get("spec");
    out.ml_policy = ml_policy(
        spec.and_then(|s| s.get("mlPolicy")),
        paths,
        &mut out.problems,
    );
    out.pod_group_policy = spec
        .and_then(|s| s.get("podGroupPolicy"))
        .and_then(Value::as_object)
        .and_then(|p| p.keys().next().cloned());
    out.network_topology = spec
        .and_then(|s| s.pointer("/podGroupPolicy/volcano/networkTopology"))
        .filter(|t| t.is_object())
        .cloned();
    let mut jobset = spec
        .and_then(|s| s.pointer("/template/spec"))
        .cloned()
        .unwrap_or(Value::Null);
    if !jobset.is_object() {
        out.problems.push(problem(
            &paths.at("/spec/template/spec"),
            "is required: the runtime has no JobSet template".into(),
        ));
        return out;
    }
    let order = job_names(&jobset);
    if let Some(job) = trainjob {
        apply_patches(&mut jobset, job, &order, &mut out.problems);
    }
    let trainer = trainjob.and_then(|j| j.pointer("/spec/trainer"));
    out.jobs = jobs(&jobset, &order, &out.ml_policy, paths, &mut out.problems);
    apply_counts(&mut out.jobs, &out.ml_policy, trainer, &mut out.problems);
    if let Some(trainer) = trainer {
        apply_trainer(&mut out.jobs, trainer);
    }
    if let Some(init) = trainjob.and_then(|j| j.pointer("/spec/initializer")) {
        apply_initializers(&mut out.jobs, init);
    }
    out
}

fn ml_policy(policy: Option<&Value>, paths: RuntimePaths, problems: &mut Vec<Problem>) -> MlPolicy {
    let Some(policy) = policy.and_then(Value::as_object) else {
        return MlPolicy {
            num_nodes: 1,
            ..MlPolicy::default()
        };
    };
    let framework = ["torch", "mpi", "jax", "xgboost", "flux"]
        .into_iter()
        .find(|f| policy.contains_key(*f))
        .map(str::to_string);
    let block = framework.as_deref().and_then(|f| policy.get(f));
    MlPolicy {
        num_nodes: count_at(
            policy.get("numNodes"),
            1,
            &paths.at("/spec/mlPolicy/numNodes"),
            problems,
        ),
        num_proc_per_node: block
            .and_then(|b| b.get("numProcPerNode"))
            .and_then(Value::as_i64),
        run_launcher_as_node: framework.as_deref() == Some("mpi")
            && block
                .and_then(|b| b.get("runLauncherAsNode"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        framework,
    }
}

fn job_names(jobset: &Value) -> Vec<String> {
    names(jobset.get("replicatedJobs"))
}

/// Strategic-merges each patch entry, after checking it names only jobs and containers the
/// runtime has (the Trainer's own webhook refuses the rest; here they are problems, so a
/// patch for a container the runtime lacks is named rather than silently added).
fn apply_patches(
    jobset: &mut Value,
    trainjob: &Value,
    order: &[String],
    problems: &mut Vec<Problem>,
) {
    let Some(patches) = trainjob.pointer("/spec/runtimePatches") else {
        return;
    };
    let Some(patches) = patches.as_array() else {
        if !patches.is_null() {
            problems.push(problem(
                "/spec/runtimePatches",
                format!("must be a list, got {}", type_name(patches)),
            ));
        }
        return;
    };
    for (i, entry) in patches.iter().take(MAX_PATCHES).enumerate() {
        let base = format!("/spec/runtimePatches/{i}/trainingRuntimeSpec/template/spec");
        let Some(patch) = entry.pointer("/trainingRuntimeSpec/template/spec") else {
            continue;
        };
        if !patch.is_object() {
            problems.push(problem(
                &base,
                format!("must be an object, got {}", type_name(patch)),
            ));
            continue;
        }
        if patch_targets_exist(jobset, patch, order, &base, problems) {
            strategic_merge(jobset, patch);
        }
    }
    if let Some(Value::Array(jobs)) = jobset.get_mut("replicatedJobs") {
        jobs.sort_by_key(|j| {
            let name = j.get("name").and_then(Value::as_str).unwrap_or_default();
            order.iter().position(|n| n == name).unwrap_or(usize::MAX)
        });
    }
}

fn patch_targets_exist(
    jobset: &Value,
    patch: &Value,
    order: &[String],
    base: &str,
    problems: &mut Vec<Problem>,
) -> bool {
    let before = problems.len();
    let jobs = patch.get("replicatedJobs").and_then(Value::as_array);
    for (j, job) in jobs.into_iter().flatten().enumerate() {
        let name = job.get("name").and_then(Value::as_str).unwrap_or_default();
        let at = format!("{base}/replicatedJobs/{j}");
        let Some(runtime_job) = order
            .iter()
            .position(|n| n == name)
            .and_then(|k| jobset.get("replicatedJobs")?.get(k))
        else {
            problems.push(problem(
                &format!("{at}/name"),
                format!("patches replicatedJob {name:?}, which the runtime does not have (it has {}); the Trainer refuses it", order.join(", ")),
            ));
            continue;
        };
        for field in ["containers", "initContainers"] {
            let pod = "/template/spec/template/spec";
            let have = names(runtime_job.pointer(&format!("{pod}/{field}")));
            let wanted = job
                .pointer(&format!("{pod}/{field}"))
                .and_then(Value::as_array);
            for (c, container) in wanted.into_iter().flatten().enumerate() {
                let cname = container
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !have.iter().any(|h| h == cname) {
                    problems.push(problem(
                        &format!("{at}{pod}/{field}/{c}/name"),
                        format!("patches {field} entry {cname:?} of replicatedJob {name}, which has none by that name (it has {}); a patch can only change existing containers", have.join(", ")),
                    ));
                }
            }
        }
    }
    problems.len() == before
}

fn names(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|c| c.get("name")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn jobs(
    jobset: &Value,
    order: &[String],
    ml: &MlPolicy,
    paths: RuntimePaths,
    problems: &mut Vec<Problem>,
) -> Vec<RenderedJob> {
    let list = match jobset.get("replicatedJobs") {
        Some(Value::Array(list)) => list,
        other => {
            problems.push(problem(
                &paths.at(REPLICATED_JOBS),
                format!(
                    "must be a list of replicatedJobs, got {}",
                    other.map_or("nothing", type_name)
                ),
            ));
            return Vec::new();
        }
    };
    if list.len() > MAX_REPLICA_TYPES {
        problems.push(problem(
            &paths.at(REPLICATED_JOBS),
            format!(
                "has {} replicatedJobs; gangplank reads at most {MAX_REPLICA_TYPES}",
                list.len()
            ),
        ));
    }
    list.iter()
        .take(MAX_REPLICA_TYPES)
        .enumerate()
        .map(|(i, job)| {
            let name = job
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let index = order.iter().position(|n| *n == name).unwrap_or(i);
            let ancestor = job
                .pointer("/template/metadata/labels")
                .and_then(|l| l.get(ANCESTOR_LABEL))
                .and_then(Value::as_str)
                .map(str::to_string);
            let parallelism = count_at(
                job.pointer("/template/spec/parallelism"),
                1,
                &format!("{}/template/spec/parallelism", paths.job(index)),
                problems,
            );
            let count = match ancestor.as_deref() {
                Some(ANCESTOR_TRAINER) => ml.num_nodes,
                _ => parallelism,
            };
            RenderedJob {
                takes_trainer: ancestor.as_deref() == Some(ANCESTOR_TRAINER),
                depends_on: job
                    .get("dependsOn")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                pod_template: job
                    .pointer("/template/spec/template")
                    .cloned()
                    .unwrap_or(Value::Null),
                name,
                index,
                ancestor,
                count,
            }
        })
        .collect()
}

/// `trainer.numNodes` as the plugins apply it, and `resourcesPerNode`.
fn apply_counts(
    jobs: &mut [RenderedJob],
    ml: &MlPolicy,
    trainer: Option<&Value>,
    problems: &mut Vec<Problem>,
) {
    let Some(trainer) = trainer else {
        return;
    };
    let num_nodes = trainer
        .get("numNodes")
        .filter(|n| !n.is_null())
        .map(|n| count_at(Some(n), 1, "/spec/trainer/numNodes", problems));
    if let Some(n) = num_nodes {
        let target = if ml.framework.as_deref() == Some("mpi") {
            jobs.iter_mut().find(|j| j.name == NODE)
        } else {
            jobs.iter_mut().find(|j| j.takes_trainer)
        };
        if let Some(job) = target {
            job.count = if ml.run_launcher_as_node {
                (n - 1).max(1)
            } else {
                n
            };
        }
    }
    let Some(resources) = trainer.get("resourcesPerNode").filter(|r| r.is_object()) else {
        return;
    };
    for job in jobs.iter_mut() {
        if job.takes_trainer || (ml.run_launcher_as_node && job.name == NODE) {
            if let Some(node) = container_mut(&mut job.pod_template, "containers", NODE) {
                merge_resources(node, resources);
            }
        }
    }
}

/// `MergeResourceRequirements`: each of limits, requests, claims merged per key, the
/// TrainJob's value winning.
fn merge_resources(container: &mut Map<String, Value>, resources: &Value) {
    let slot = container
        .entry("resources")
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    strategic_merge(slot, resources);
}

fn apply_trainer(jobs: &mut [RenderedJob], trainer: &Value) {
    for job in jobs.iter_mut().filter(|j| j.takes_trainer) {
        let Some(node) = container_mut(&mut job.pod_template, "containers", NODE) else {
            continue;
        };
        for field in ["image", "command", "args"] {
            if let Some(v) = trainer.get(field).filter(|v| !v.is_null()) {
                node.insert(field.into(), v.clone());
            }
        }
        if let Some(env) = trainer.get("env").filter(|e| e.is_array()) {
            upsert_env(node, env);
        }
    }
}

fn apply_initializers(jobs: &mut [RenderedJob], init: &Value) {
    for (step, which) in [
        ("dataset-initializer", "dataset"),
        ("model-initializer", "model"),
    ] {
        let Some(source) = init.get(which).filter(|s| s.is_object()) else {
            continue;
        };
        for job in jobs
            .iter_mut()
            .filter(|j| j.ancestor.as_deref() == Some(step))
        {
            let Some(c) = container_mut(&mut job.pod_template, "containers", step) else {
                continue;
            };
            if let Some(uri) = source.get("storageUri").and_then(Value::as_str) {
                upsert_env(c, &json!([{"name": "STORAGE_URI", "value": uri}]));
            }
            if let Some(env) = source.get("env").filter(|e| e.is_array()) {
                upsert_env(c, env);
            }
        }
    }
}

fn upsert_env(container: &mut Map<String, Value>, env: &Value) {
    let existing = container
        .remove("env")
        .filter(Value::is_array)
        .unwrap_or_else(|| json!([]));
    let mut holder = json!({ "env": existing });
    strategic_merge(&mut holder, &json!({ "env": env }));
    if let Some(env) = holder.get_mut("env") {
        container.insert("env".into(), env.take());
    }
}

fn container_mut<'a>(
    template: &'a mut Value,
    list: &str,
    name: &str,
) -> Option<&'a mut Map<String, Value>> {
    template
        .pointer_mut(&format!("/spec/{list}"))?
        .as_array_mut()?
        .iter_mut()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))?
        .as_object_mut()
}

/// A pod count: a non-negative integer, `default` when unset; anything else is a problem
/// and reads as `default`.
fn count_at(v: Option<&Value>, default: i64, path: &str, problems: &mut Vec<Problem>) -> i64 {
    match v {
        None | Some(Value::Null) => default,
        Some(Value::Number(n)) if n.as_i64().is_some_and(|n| n >= 0) => {
            n.as_i64().unwrap_or(default)
        }
        Some(other) => {
            problems.push(problem(
                path,
                format!(
                    "must be a non-negative integer, got {} {other}",
                    type_name(other)
                ),
            ));
            default
        }
    }
}

/// A pointer into the pod template of `job`, for paths of the rendered view.
pub fn pod_template_path(paths: RuntimePaths, job: &RenderedJob) -> String {
    pointer::join(&paths.job(job.index), ["template", "spec", "template"])
}
