//! One reconcile of one job: snapshot, observe, [`plan`](super::plan), apply, write status,
//! record Events, requeue. All semantics are in `plan`; this is the thin I/O around it.
//!
//! Entry points: [`reconcile`] and [`error_policy`], handed to kube-runtime's `Controller`
//! by [`runner`](super::runner).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder};
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::apply::{apply, ApplyError, FIELD_MANAGER};
use super::expectations::Expectations;
use super::managed::Managed;
use super::metrics::ControllerMetrics;
use super::observe::observe;
use super::status::{ConditionType, JobStatus};
use super::{plan, podgroup, Config, Event, EventType, GangScheduler, JobSnapshot, Timestamp};

/// A job that plans no deadline is looked at again after this long anyway: a safety net for
/// a missed watch event (the watch itself re-lists on expiry).
const RESYNC: Duration = Duration::from_secs(10 * 60);
/// When creates are still missing from the cache, look again after this long at the latest.
const CACHE_LAG: Duration = Duration::from_secs(2);
/// First retry of a failed reconcile; kube-runtime backs off further on repeated failures.
const RETRY: Duration = Duration::from_secs(5);

/// What every reconcile of one kind shares.
pub struct Context {
    pub client: kube::Client,
    pub config: Config,
    /// The kind's API resource (kubeflow.org/v1, plural).
    pub resource: ApiResource,
    pub kind: &'static str,
    pub pods: Store<Pod>,
    pub services: Store<Service>,
    pub recorder: Recorder,
    pub metrics: Arc<ControllerMetrics>,
    pub expectations: Expectations,
    /// The namespaces the controller acts in (`--namespace-selector`).
    pub managed: Managed,
}

/// Why a reconcile failed; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("reading what the job owns: {0}")]
    Observe(#[source] kube::Error),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("writing status: {0}")]
    Status(#[source] kube::Error),
}

impl ReconcileError {
    /// A fixed label per variant for the error metric (never the payload).
    pub fn stage(&self) -> &'static str {
        match self {
            ReconcileError::Observe(_) => "observe",
            ReconcileError::Apply(_) => "apply",
            ReconcileError::Status(_) => "status",
        }
    }
}

pub async fn reconcile(
    job: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Requeue, ReconcileError> {
    if !ctx.managed.admits(&job.namespace().unwrap_or_default()) {
        // Not this controller's namespace (any more): nothing is read or written there, and
        // no retry; the namespace matching again brings the job back (see managed.rs).
        ctx.managed.skipped();
        return Ok(Requeue::await_change());
    }
    let _in_flight = ctx.metrics.in_flight();
    let started = Instant::now();
    let result = reconcile_job(&job, &ctx).await;
    ctx.metrics
        .reconciled(ctx.kind, started.elapsed().as_secs_f64());
    if let Err(e) = &result {
        ctx.metrics.error(ctx.kind, e.stage());
    }
    result
}

pub fn error_policy(job: Arc<DynamicObject>, error: &ReconcileError, ctx: Arc<Context>) -> Requeue {
    tracing::warn!(
        kind = ctx.kind,
        namespace = job.namespace().unwrap_or_default(),
        job = job.name_any(),
        error = %crate::error_chain(error),
        "reconcile failed; retrying"
    );
    Requeue::requeue(RETRY)
}

async fn reconcile_job(job: &DynamicObject, ctx: &Context) -> Result<Requeue, ReconcileError> {
    let object = match serde_json::to_value(job) {
        Ok(object) => object,
        Err(e) => return Ok(skip_malformed(job, ctx, &e.to_string()).await),
    };
    let snapshot = match JobSnapshot::from_value(&object) {
        Ok(snapshot) => snapshot,
        Err(e) => return Ok(skip_malformed(job, ctx, &e.to_string()).await),
    };
    if snapshot.deleting {
        ctx.expectations.forget(&snapshot.uid);
    }
    let mut observed = observe(
        &ctx.client,
        &ctx.config,
        &ctx.pods,
        &ctx.services,
        &snapshot,
    )
    .await
    .map_err(ReconcileError::Observe)?;
    if !ctx
        .expectations
        .outstanding(&snapshot.uid, &observed)
        .is_empty()
    {
        // Our own creates are still on their way to the cache; their watch events will
        // bring this job back (the requeue is the fallback).
        return Ok(Requeue::requeue(CACHE_LAG));
    }
    let now = Timestamp::now();
    let mut plan = plan(&snapshot, &observed, now, &ctx.config);
    if learned_from_apply(ctx, &snapshot, &plan, &mut observed).await? {
        // Planned again with what the API server said. This plan creates nothing that could
        // be held by another owner (it creates nothing while names are held), and a refused
        // PodGroup is not written again: nothing more to learn from this apply.
        plan = super::plan(&snapshot, &observed, now, &ctx.config);
        apply(&ctx.client, &ctx.resource, &snapshot, &plan.actions).await?;
    }
    ctx.expectations.created(&snapshot.uid, &plan.actions);
    if let Some(status) = &plan.status {
        write_status(ctx, &snapshot, &object, status).await?;
        count_transitions(ctx, &snapshot.status, status);
    }
    publish(ctx, job, &plan.events).await;
    Ok(match plan.requeue_after {
        Some(after) => Requeue::requeue(after.min(RESYNC)),
        None => Requeue::requeue(RESYNC),
    })
}

/// Applies `plan`; true when the API server said something the plan must know, now in
/// `observed`: names other owners' objects hold (see [`Foreign`](super::Foreign)), or a
/// PodGroup it refuses for good. Both are the job's problem, said on the job by the next
/// plan, not a silent retry loop. Other failures are errors, retried.
async fn learned_from_apply(
    ctx: &Context,
    snapshot: &JobSnapshot,
    plan: &super::Plan,
    observed: &mut super::Observed,
) -> Result<bool, ReconcileError> {
    match apply(&ctx.client, &ctx.resource, snapshot, &plan.actions).await {
        Ok(held) if held.is_empty() => Ok(false),
        Ok(held) => {
            for f in &held {
                tracing::warn!(
                    kind = ctx.kind,
                    namespace = %snapshot.namespace,
                    job = %snapshot.name,
                    object = %f.describe(),
                    "name held by an object the job does not control"
                );
            }
            observed.foreign.extend(held);
            Ok(true)
        }
        Err(e) => {
            let Some(refused) = pod_group_refusal(&e, ctx.config.gang.as_ref()) else {
                return Err(e.into());
            };
            tracing::warn!(
                kind = ctx.kind,
                namespace = %snapshot.namespace,
                job = %snapshot.name,
                error = %crate::error_chain(&e),
                "PodGroup refused"
            );
            observed.facts.pod_group_refused = Some(refused);
            Ok(true)
        }
    }
}

/// What to tell the user when the API server refused a PodGroup write for good (a 4xx other
/// than a conflict or throttling); `None` for other failures, which are retried.
fn pod_group_refusal(error: &ApplyError, gang: Option<&GangScheduler>) -> Option<String> {
    if !matches!(error.action, "create podgroup" | "update podgroup") {
        return None;
    }
    let kube::Error::Api(status) = &error.source else {
        return None;
    };
    if !(400..500).contains(&status.code) || matches!(status.code, 409 | 429) {
        return None;
    }
    Some(match (status.code, gang) {
        (404, Some(gang)) => podgroup::not_served(gang, &status.message),
        (code, _) => format!("{code} {}: {}", status.reason, status.message),
    })
}

/// A job that cannot even be read as its kind: said in an Event, then left alone until it
/// changes. Never a crash of the loop, never a half-created gang.
async fn skip_malformed(job: &DynamicObject, ctx: &Context, why: &str) -> Requeue {
    ctx.metrics.error(ctx.kind, "snapshot");
    tracing::warn!(
        kind = ctx.kind,
        namespace = job.namespace().unwrap_or_default(),
        job = job.name_any(),
        error = why,
        "malformed job skipped"
    );
    let event = Event::warning(
        format!("{}InvalidSpec", ctx.kind),
        format!("gangplank cannot read this job: {why}"),
    );
    publish(ctx, job, &[event]).await;
    Requeue::await_change()
}

/// Writes `status` through the status subresource, only when it differs from the stored one.
async fn write_status(
    ctx: &Context,
    job: &JobSnapshot,
    object: &Value,
    status: &JobStatus,
) -> Result<(), ReconcileError> {
    let desired = serde_json::to_value(status)
        .map_err(|e| ReconcileError::Status(kube::Error::SerdeError(e)))?;
    if object.get("status") == Some(&desired) {
        return Ok(());
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &job.namespace, &ctx.resource);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    // The whole status replaced, as the planner computed it. Not a merge patch: that merges
    // objects key by key, so a count the planner dropped (zero counts are omitted) would
    // stay stored; a finished job then folded the stale `active` into `succeeded` again on
    // every reconcile, and each write woke the next one. `add` replaces a member that exists.
    let patch = json_patch::Patch(vec![json_patch::PatchOperation::Add(
        json_patch::AddOperation {
            path: jsonptr::PointerBuf::from_tokens(["status"]),
            value: desired,
        },
    )]);
    api.patch_status(&job.name, &params, &Patch::<()>::Json(patch))
        .await
        .map(drop)
        .map_err(ReconcileError::Status)
}

/// Counts conditions that became True in this reconcile.
fn count_transitions(ctx: &Context, before: &JobStatus, after: &JobStatus) {
    let types = [
        (ConditionType::Created, "created"),
        (ConditionType::Running, "running"),
        (ConditionType::Restarting, "restarting"),
        (ConditionType::Succeeded, "succeeded"),
        (ConditionType::Failed, "failed"),
        (ConditionType::Suspended, "suspended"),
    ];
    for (t, label) in types {
        if after.is(t.clone()) && !before.is(t) {
            ctx.metrics.transition(ctx.kind, label);
        }
    }
    let stuck = |s: &JobStatus| {
        s.conditions
            .iter()
            .any(|c| c.reason.ends_with("StartDeadlineExceeded"))
    };
    if stuck(after) && !stuck(before) {
        ctx.metrics.watchdog_fired(ctx.kind);
    }
}

async fn publish(ctx: &Context, job: &DynamicObject, events: &[Event]) {
    let reference = job.object_ref(&ctx.resource);
    for event in events {
        let kube_event = KubeEvent {
            type_: match event.type_ {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: event.reason.clone(),
            note: Some(event.message.clone()),
            action: "Reconcile".to_string(),
            secondary: None,
        };
        // An Event that cannot be written is not worth failing the reconcile for.
        if let Err(e) = ctx.recorder.publish(&kube_event, &reference).await {
            tracing::debug!(error = %e, reason = %event.reason, "event not recorded");
        }
    }
}
