//! The native gang's release order (annotation [`RELEASE_ORDER_ANNOTATION`](crate::job::release_order::RELEASE_ORDER_ANNOTATION), parsed by
//! [`crate::job::release_order`]): the job's pods are created behind the scheduling gate
//! [`RELEASE_GATE`], and once the gang is whole the gate is lifted type by type, in the
//! annotation's order ([`Action::ReleasePods`]).
//!
//! Entry points: [`order`], [`gate`], [`is_gated`], [`release`], [`released_at`].
//!
//! Why: kube-scheduler 1.36's pod group cycle takes a gang's pods by the time each first
//! entered its active queue. Released together by the gang's PreEnqueue gate, they enter in
//! Go's map order, random per gang; lifted one type after the other, once every pod exists
//! (so that the gang's own gate no longer holds any), they enter in the order lifted.
//!
//! # Guarantees
//! - Only a native gang's pods (`--gang-scheduler kubernetes`) are gated, and never an
//!   MPIJob's: its launcher is created only once its workers run, which gated workers never
//!   would.
//! - A pod stays gated only while the job's annotation is a valid order and some pod of the
//!   gang is missing or being deleted: an annotation made invalid or removed releases the
//!   gated pods at once, in the kind's replica order.
//! - A released pod carries [`RELEASED_AT_ANNOTATION`]: the gang watchdog's clock starts
//!   there, not at the pod's creation, so a release delayed (a controller restart while the
//!   gang was gated) does not eat into the time the scheduler gets.

use k8s_openapi::api::core::v1::{Pod, PodSchedulingGate, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::action::Action;
use super::config::GangScheduler;
use super::mpi;
use super::observed::name;
use super::replicas::Slots;
use super::snapshot::JobSnapshot;
use super::Timestamp;
use crate::job::release_order::RELEASE_GATE;

/// When the controller lifted the release gate from the pod (RFC 3339), written with the
/// lift itself.
pub const RELEASED_AT_ANNOTATION: &str = "gangplank.dev/released-at";

/// The job's release order as replica types (canonical names), first released first, or why
/// its annotation is not one; `None` when the controller does not gate the job's pods (no
/// annotation, another gang scheduler, an MPIJob).
pub fn order(
    job: &JobSnapshot,
    gang: Option<&GangScheduler>,
) -> Option<Result<Vec<&'static str>, String>> {
    // Parsed once, with the job's view (crate::job::view::ReleaseOrderView).
    let parsed = job.view.release_order.as_ref()?;
    if gang != Some(&GangScheduler::Kubernetes) || mpi::is_mpi(job) {
        return None;
    }
    Some(match &parsed.error {
        Some(why) => Err(why.clone()),
        None => Ok(parsed
            .types
            .iter()
            .filter_map(|key| replica_type(job, key))
            .collect()),
    })
}

/// The canonical type of replicaSpecs key `key`, when the controller runs it.
fn replica_type(job: &JobSnapshot, key: &str) -> Option<&'static str> {
    let view = job.view.replicas.iter().find(|r| r.key == key)?;
    let replica = job
        .replicas
        .iter()
        .find(|r| r.rtype.name == view.replica_type)?;
    Some(replica.rtype.name)
}

/// Puts [`RELEASE_GATE`] on a pod about to be created (after the template's own gates).
pub fn gate(spec: &mut PodSpec) {
    let gates = spec.scheduling_gates.get_or_insert_with(Vec::new);
    if !gates.iter().any(|g| g.name == RELEASE_GATE) {
        gates.push(PodSchedulingGate {
            name: RELEASE_GATE.to_string(),
        });
    }
}

/// Whether `pod` still carries [`RELEASE_GATE`]: kube-scheduler does not look at it yet.
pub fn is_gated(pod: &Pod) -> bool {
    let gates = pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref());
    gates.into_iter().flatten().any(|g| g.name == RELEASE_GATE)
}

/// The [`Action::ReleasePods`] at `now` for the gated pods among `slots`, by type in
/// `order`, then by index. With `order` (a valid annotation), only once every index of every type has a
/// pod and none is being deleted; without (annotation invalid or gone, gang scheduler
/// changed), at once, in the kind's replica order. `None` when no pod is gated.
pub fn release(slots: &[Slots], order: Option<&[&str]>, now: Timestamp) -> Option<Action> {
    if order.is_some() && !whole(slots) {
        return None;
    }
    let rank = |s: &Slots| {
        order
            .and_then(|o| o.iter().position(|t| *t == s.replica.rtype.name))
            .unwrap_or(usize::MAX)
    };
    let mut by_order: Vec<&Slots> = slots.iter().collect();
    // Stable: types the order does not name keep the kind's order, after those it names.
    by_order.sort_by_key(|s| rank(s));
    let names: Vec<String> = by_order
        .into_iter()
        .flat_map(|s| s.pods.values().flatten())
        .filter(|p| is_gated(p) && p.metadata.deletion_timestamp.is_none())
        .map(|p| name(p).to_string())
        .collect();
    (!names.is_empty()).then_some(Action::ReleasePods {
        names,
        at: Time(now),
    })
}

/// When the controller released `pod` ([`RELEASED_AT_ANNOTATION`]), if it did and the value
/// reads as a time.
pub fn released_at(pod: &Pod) -> Option<Timestamp> {
    let annotations = pod.metadata.annotations.as_ref()?;
    annotations.get(RELEASED_AT_ANNOTATION)?.parse().ok()
}

/// Every index of every type has a pod, and none of them is being deleted.
fn whole(slots: &[Slots]) -> bool {
    slots.iter().all(|s| {
        (0..s.replica.replicas).all(|index| {
            s.pods.get(&index).is_some_and(|pods| {
                !pods.is_empty() && pods.iter().all(|p| p.metadata.deletion_timestamp.is_none())
            })
        })
    })
}
