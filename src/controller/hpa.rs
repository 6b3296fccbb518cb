//! The HorizontalPodAutoscaler of an elastic PyTorchJob: named `<job>`, scaling the job's
//! Worker replicas through the CRD's scale subresource between the elastic bounds.
//!
//! Entry points: [`desired`], [`reconcile`].
//!
//! As upstream (`pytorch/hpa.go`): created only when `elasticPolicy.metrics` is set and the
//! job is not suspended, updated when its spec differs, deleted on suspend, left to the
//! garbage collector once the job finishes. Unlike upstream, an HPA whose job no longer sets
//! `metrics` is deleted: left alone it would keep resizing a job that asked not to be.

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::action::Action;
use super::elastic;
use super::naming;
use super::snapshot::JobSnapshot;

/// The HPA the job should have now, if any.
pub fn desired(job: &JobSnapshot) -> Option<HorizontalPodAutoscaler> {
    if job.suspended() {
        return None;
    }
    let (policy, workers) = elastic::of(job)?;
    let metrics = policy.metrics.clone()?;
    let (min, max) = policy.bounds(workers);
    Some(HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some(job.name.clone()),
            namespace: Some(job.namespace.clone()),
            owner_references: Some(vec![naming::owner_reference(job)]),
            ..ObjectMeta::default()
        },
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some(job.spec.api_version()),
                kind: job.kind().to_string(),
                name: job.name.clone(),
            },
            min_replicas: Some(min),
            max_replicas: max,
            metrics: Some(metrics),
            behavior: None,
        }),
        status: None,
    })
}

/// The action that makes the observed HPA (`existing`, one the job owns) the desired one.
pub fn reconcile(job: &JobSnapshot, existing: Option<&HorizontalPodAutoscaler>) -> Option<Action> {
    match (desired(job), existing) {
        (Some(want), None) => Some(Action::CreateHpa(Box::new(want))),
        (None, Some(_)) => Some(Action::DeleteHpa {
            name: job.name.clone(),
        }),
        (Some(want), Some(have)) => {
            let spec = want.spec.unwrap_or_default();
            differs(&spec, have.spec.as_ref()).then(|| Action::UpdateHpa {
                name: job.name.clone(),
                spec: Box::new(spec),
            })
        }
        (None, None) => None,
    }
}

/// Compares only the fields the controller sets: `behavior` is left to whoever tunes it.
fn differs(want: &HorizontalPodAutoscalerSpec, have: Option<&HorizontalPodAutoscalerSpec>) -> bool {
    let Some(have) = have else {
        return true;
    };
    want.scale_target_ref != have.scale_target_ref
        || want.min_replicas != have.min_replicas
        || want.max_replicas != have.max_replicas
        || want.metrics != have.metrics
}
