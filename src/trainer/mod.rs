//! Kubeflow Trainer v2 (`trainer.kubeflow.org/v1alpha1`, as of Trainer v2.2 and v2.3):
//! TrainJobs and the TrainingRuntimes and ClusterTrainingRuntimes they name.
//!
//! A TrainJob alone says little (a runtime name, a node count, maybe an image): the pods
//! come from the runtime. So a TrainJob is judged on the pods the Trainer would render from
//! both ([`render`]), seen through the same JobView as the v1 kinds ([`view`]); the runtime
//! comes from a [`catalog`] (a watch cache in `serve`, the given files and snapshot in
//! `check`), never from a call per request. Runtimes are admitted on their own too.

// Request path: data here comes from outside (manifests, AdmissionReviews, the cluster).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod catalog;
pub mod merge;
pub mod native;
pub mod render;
pub mod view;

use serde_json::Value;

pub use catalog::{Lookup, RuntimeCatalog};

pub const GROUP: &str = "trainer.kubeflow.org";
pub const VERSION: &str = "v1alpha1";
pub const TRAINJOB: &str = "TrainJob";
pub const TRAINING_RUNTIME: &str = "TrainingRuntime";
pub const CLUSTER_TRAINING_RUNTIME: &str = "ClusterTrainingRuntime";
/// The label on each replicatedJob template naming its step.
pub const ANCESTOR_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";
pub const ANCESTOR_TRAINER: &str = "trainer";
/// The container (and MPI job) the Trainer configures.
pub const NODE: &str = "node";

/// A Trainer kind gangplank reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainerKind {
    TrainJob,
    TrainingRuntime,
    ClusterTrainingRuntime,
}

impl TrainerKind {
    /// The kind, when `apiVersion` is the one gangplank understands.
    pub fn lookup(api_version: &str, kind: &str) -> Option<TrainerKind> {
        if group_version(api_version) != Some(VERSION) {
            return None;
        }
        match kind {
            TRAINJOB => Some(TrainerKind::TrainJob),
            TRAINING_RUNTIME => Some(TrainerKind::TrainingRuntime),
            CLUSTER_TRAINING_RUNTIME => Some(TrainerKind::ClusterTrainingRuntime),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TrainerKind::TrainJob => TRAINJOB,
            TrainerKind::TrainingRuntime => TRAINING_RUNTIME,
            TrainerKind::ClusterTrainingRuntime => CLUSTER_TRAINING_RUNTIME,
        }
    }
}

/// A Trainer kind in an API version gangplank does not know (a future `v1beta1`): passed
/// with a warning, never refused.
pub fn unknown_version(api_version: &str, kind: &str) -> bool {
    group_version(api_version).is_some()
        && TrainerKind::lookup(api_version, kind).is_none()
        && [TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME].contains(&kind)
}

/// The version of a `trainer.kubeflow.org/<version>` apiVersion (checked on every request:
/// no allocation).
fn group_version(api_version: &str) -> Option<&str> {
    api_version.strip_prefix(GROUP)?.strip_prefix('/')
}

/// `spec.runtimeRef` with the CRD's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRef {
    pub api_group: String,
    pub kind: String,
    pub name: String,
}

impl RuntimeRef {
    pub fn of(trainjob: &Value) -> RuntimeRef {
        let field = |k: &str, default: &str| {
            trainjob
                .pointer(&format!("/spec/runtimeRef/{k}"))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .unwrap_or(default)
                .to_string()
        };
        RuntimeRef {
            api_group: field("apiGroup", GROUP),
            kind: field("kind", CLUSTER_TRAINING_RUNTIME),
            name: field("name", ""),
        }
    }

    /// Why no runtime can be looked up for this reference, if none can.
    pub fn invalid(&self) -> Option<String> {
        if self.api_group != GROUP
            || ![TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME].contains(&self.kind.as_str())
        {
            return Some(format!(
                "runtimeRef names {}/{}, which is not a Trainer runtime: use kind ClusterTrainingRuntime or TrainingRuntime of apiGroup {GROUP}",
                self.api_group, self.kind
            ));
        }
        if self.name.is_empty() {
            return Some("runtimeRef.name is required: name the runtime to run on".into());
        }
        None
    }
}

/// Whether a mutation intent may apply to a Trainer object at `path`. A TrainJob's pods are
/// the runtime's apart from what `spec.trainer` sets, and gangplank never writes into a
/// shared runtime on a job's behalf; a runtime's own admission may pin its images.
pub fn admits_intent(kind: TrainerKind, path: &str) -> bool {
    if path.starts_with("/metadata/annotations") || path.starts_with("/metadata/labels") {
        return true;
    }
    match kind {
        // runtimePatches: gangplank's own entry (native gangs, trainer_gang), added once.
        TrainerKind::TrainJob => {
            path == "/spec/trainer/image"
                || path.starts_with("/spec/trainer/env")
                || path == "/spec/runtimePatches"
        }
        TrainerKind::TrainingRuntime | TrainerKind::ClusterTrainingRuntime => {
            path.starts_with("/spec/template/spec/replicatedJobs/") && path.ends_with("/image")
        }
    }
}

/// The TrainJob field a path of its view names: container `node`'s resources are set by
/// `spec.trainer.resourcesPerNode` (the view gives the container the path `/spec/trainer`, so
/// that its image and env are the TrainJob's own fields).
pub fn trainjob_field(path: &str) -> String {
    match path.strip_prefix("/spec/trainer/resources") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            format!("/spec/trainer/resourcesPerNode{rest}")
        }
        _ => path.to_string(),
    }
}
