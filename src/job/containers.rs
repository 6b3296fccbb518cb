//! The containers of a pod template as the JobView shows them: name, image, path, GPUs and
//! MIG slices asked, env names; bounded in count ([`MAX_CONTAINERS`], [`MAX_ENV`]).

use serde::Serialize;
use serde_json::{Map, Value};

use super::fields::{checked_total, optional_text};
use super::problem::{problem, type_name, Problem};
use super::quantity::{gpu_resources, GpuResource};
use crate::pointer;

/// Containers read per list (`containers`, `initContainers`) of one pod template: a
/// training pod has one to a few (the trainer and its sidecars); 64 is far past any real
/// one.
pub const MAX_CONTAINERS: usize = 64;
/// Env entries read per container. Real trainers set tens (rendezvous, NCCL); 1,024 bounds
/// what policies compare (16 × 64 × 1,024 names at most per job) without refusing any job
/// seen in practice.
pub const MAX_ENV: usize = 1024;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView {
    pub name: String,
    pub image: String,
    pub index: usize,
    pub path: String,
    /// Whole GPUs this container asks for (limit, else request).
    pub gpus: i64,
    /// MIG slices this container asks for (limit, else request).
    pub mig_slices: i64,
    /// Every GPU-like extended resource with its request and limit.
    pub gpu_resources: Vec<GpuResource>,
    /// Names of env vars the container sets.
    pub env_names: Vec<String>,
}

/// The container the operator configures: the one with the default name, else the first
/// (upstream adds its port to container[0] when no container has the default name).
pub(super) fn default_container(
    containers: &[ContainerView],
    default_name: Option<&str>,
) -> Option<usize> {
    default_name
        .and_then(|n| containers.iter().position(|c| c.name == n))
        .or_else(|| (!containers.is_empty()).then_some(0))
}

pub(super) fn containers_at(
    pod_spec: Option<&Map<String, Value>>,
    field: &str,
    pod_spec_path: &str,
    problems: &mut Vec<Problem>,
) -> Vec<ContainerView> {
    let base = pointer::join(pod_spec_path, [field]);
    let items = match pod_spec.and_then(|s| s.get(field)) {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            problems.push(problem(
                &base,
                format!("must be a list of containers, got {}", type_name(other)),
            ));
            return Vec::new();
        }
    };
    if items.len() > MAX_CONTAINERS {
        problems.push(problem(
            &base,
            format!(
                "has {} containers; gangplank reads at most {MAX_CONTAINERS} per pod template: move helpers into fewer containers or another replica type",
                items.len()
            ),
        ));
    }
    items
        .iter()
        .take(MAX_CONTAINERS)
        .enumerate()
        .filter_map(|(index, c)| {
            let path = format!("{base}/{index}");
            match c {
                Value::Object(c) => Some(container(c, index, path, problems)),
                other => {
                    problems.push(problem(
                        &path,
                        format!("must be a container object, got {}", type_name(other)),
                    ));
                    None
                }
            }
        })
        .collect()
}

fn container(
    c: &Map<String, Value>,
    index: usize,
    path: String,
    problems: &mut Vec<Problem>,
) -> ContainerView {
    let resources = pointer::join(&path, ["resources"]);
    let gpu_resources = gpu_resources(c.get("resources"), &resources, problems);
    let counts = |pred: fn(&GpuResource) -> bool| {
        gpu_resources
            .iter()
            .filter(move |g| pred(g))
            .map(GpuResource::count)
    };
    let gpus = checked_total(
        counts(GpuResource::is_whole_gpu),
        &resources,
        "the GPUs",
        problems,
    );
    let mig_slices = checked_total(
        counts(GpuResource::is_mig),
        &resources,
        "the MIG slices",
        problems,
    );
    ContainerView {
        name: optional_text(c, "name", &path, problems)
            .unwrap_or_default()
            .to_string(),
        image: optional_text(c, "image", &path, problems)
            .unwrap_or_default()
            .to_string(),
        index,
        gpus,
        mig_slices,
        gpu_resources,
        env_names: env_names(c.get("env"), &path, problems),
        path,
    }
}

/// Names of the first [`MAX_ENV`] env entries; more is a problem at `<container>/env`.
fn env_names(env: Option<&Value>, container: &str, problems: &mut Vec<Problem>) -> Vec<String> {
    let Some(env) = env.and_then(Value::as_array) else {
        return Vec::new();
    };
    if env.len() > MAX_ENV {
        problems.push(problem(
            &pointer::join(container, ["env"]),
            format!(
                "has {} env entries; gangplank reads at most {MAX_ENV} per container: put bulk settings in a ConfigMap and use envFrom",
                env.len()
            ),
        ));
    }
    env.iter()
        .take(MAX_ENV)
        .filter_map(|e| e.get("name")?.as_str().map(str::to_string))
        .collect()
}
