//! The gang watchdog: a job whose pods stay Pending past a start deadline gets a verdict
//! naming why, read from the cluster, instead of sitting in `Created` forever (upstream
//! #2001, #1630, #1729).
//!
//! Entry point: [`check`]. The deadline is `schedulingPolicy.scheduleTimeoutSeconds`, else
//! [`Config::start_deadline`]. The clock starts at the oldest Pending pod's creation, so a
//! recreated gang gets a fresh deadline; while a Volcano job waits for its PodGroup (no pods
//! yet) it starts at the PodGroup's creation, else at the job's startTime. Pods the
//! controller holds behind its release gate ([`release`]) are not the cluster's to place
//! yet: they are not counted as Pending, and a released pod's clock starts at its release
//! (a release stamp outside the pod's creation and now is not believed).
//!
//! [`launcher_failed_early`] explains an MPI launcher that failed before any worker ran with
//! the same [`cause`].

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde_json::Value;

use super::config::Config;
use super::deadlines::Deadline;
use super::mpi;
use super::observed::{name, phase, Observed};
use super::podgroup;
use super::release;
use super::snapshot::JobSnapshot;
use super::Timestamp;

/// Waiting reasons that mean the image will not arrive without a change.
const IMAGE_PULL_FAILURES: &[&str] = &[
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "ErrImageNeverPull",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing stuck (yet); look again after `recheck` if set.
    Quiet { recheck: Option<Duration> },
    /// The deadline has passed; `message` names the pods or PodGroup and the cause.
    Stuck { message: String },
}

/// Looks at the job's Pending pods (or, with `waiting_for_group`, at its PodGroup).
pub fn check(
    job: &JobSnapshot,
    observed: &Observed,
    waiting_for_group: bool,
    now: Timestamp,
    config: &Config,
) -> Verdict {
    let Some(limit) = start_deadline(job, config) else {
        return Verdict::Quiet { recheck: None };
    };
    let pending: Vec<&Pod> = observed
        .pods
        .iter()
        .filter(|p| phase(p) == "Pending" && p.metadata.deletion_timestamp.is_none())
        // Held back by the controller itself until the gang is whole, not by the cluster.
        .filter(|p| !release::is_gated(p))
        .collect();
    let since = if !pending.is_empty() {
        pending.iter().filter_map(|p| waiting_since(p, now)).min()
    } else if waiting_for_group {
        observed
            .pod_group
            .as_ref()
            .and_then(|pg| pg.pointer("/metadata/creationTimestamp"))
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok())
            .or(job.status.start_time.as_ref().map(|t| t.0))
    } else {
        None
    };
    let Some(since) = since else {
        return Verdict::Quiet { recheck: None };
    };
    match Deadline::at(since, limit, now) {
        Deadline::Passed => Verdict::Stuck {
            message: message(job, observed, &pending, limit),
        },
        other => Verdict::Quiet {
            recheck: other.remaining(),
        },
    }
}

/// Since when `pod` has been the cluster's to place: its creation, or its release from the
/// controller's gate when later.
///
/// The release stamp is believed only between the pod's creation and `now`, where the
/// controller's own stamp always is. One outside was not written by the release (forged in a
/// template, or on the pod by someone else): from the future it would restart the clock at
/// every look and switch the watchdog off for good, from before the creation start it early.
fn waiting_since(pod: &Pod, now: Timestamp) -> Option<Timestamp> {
    let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let released =
        release::released_at(pod).filter(|at| *at <= now && created.is_none_or(|c| *at >= c));
    released.or(created)
}

fn start_deadline(job: &JobSnapshot, config: &Config) -> Option<Duration> {
    let from_job = job
        .run_policy
        .scheduling_policy
        .as_ref()
        .and_then(|p| p.schedule_timeout_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs);
    from_job.or(config.start_deadline)
}

fn message(job: &JobSnapshot, observed: &Observed, pending: &[&Pod], limit: Duration) -> String {
    let what = if pending.is_empty() {
        format!(
            "PodGroup {} was not admitted",
            super::naming::pod_group_name(job)
        )
    } else {
        let names: Vec<&str> = pending.iter().map(|p| name(p)).collect();
        format!(
            "{} pod(s) still Pending ({})",
            names.len(),
            names.join(", ")
        )
    };
    format!(
        "{} {} did not start within {}s: {what}: {}",
        job.kind(),
        job.name,
        limit.as_secs(),
        cause(observed, pending)
    )
}

/// The most specific cause the cluster reports, most actionable first: a missing claim or
/// image is the user's to fix; an unschedulable gang is capacity or quota.
pub fn cause(observed: &Observed, pending: &[&Pod]) -> String {
    if !observed.facts.missing_pvcs.is_empty() {
        return format!(
            "PersistentVolumeClaim(s) not found: {}",
            observed.facts.missing_pvcs.join(", ")
        );
    }
    if let Some(refused) = &observed.facts.pod_group_refused {
        return format!("the PodGroup could not be written: {refused}");
    }
    if let Some(pull) = pending.iter().find_map(|p| image_pull_failure(p)) {
        return pull;
    }
    if let Some(msg) = gang_reason(observed) {
        return format!("PodGroup is unschedulable: {msg}");
    }
    if let Some(unseen) = podgroup::never_seen(observed.pod_group.as_ref()) {
        return unseen;
    }
    if let Some((pod, msg)) = pending
        .iter()
        .find_map(|p| observed.facts.failed_scheduling.get_key_value(name(p)))
    {
        return format!("pod {pod} cannot be scheduled: {msg}");
    }
    "the cluster reports no cause (no scheduling or image events)".to_string()
}

/// The gang scheduler's reason for not placing the gang, if it gave one, with the scheduler's
/// reason for one of its pods: kube-scheduler's native gang says only "pod group is
/// unschedulable" on the PodGroup, while each pod's PodScheduled condition says why ("0/6
/// nodes are available: 6 Insufficient nvidia.com/gpu").
///
/// scheduler-plugins' Coscheduling plugin writes nothing on its PodGroup (its status is
/// scheduler-plugins' controller's, which may not run) and records no Event on it: its
/// reason is only on the pods (PreFilter's "resource gap", PostFilter's "PodGroup ... gets
/// rejected"), so for its PodGroups a pod's reason alone is the gang's.
pub fn gang_reason(observed: &Observed) -> Option<String> {
    if let Some(problem) = &observed.facts.queue_problem {
        return Some(podgroup::queue_problem(problem));
    }
    let warnings = &observed.facts.pod_group_warnings;
    let pod_group = observed.pod_group.as_ref();
    let failure = pod_scheduling_failure(&observed.pods);
    let Some(group) = podgroup::unschedulable_message(pod_group, warnings) else {
        let coscheduling = pod_group.is_some_and(podgroup::is_scheduler_plugins);
        let (pod, why) = failure.filter(|_| coscheduling)?;
        let stale = podgroup::stale_sibling_wait(pod_group?, why, observed.pods.len());
        return (!stale).then(|| format!("pod {pod}: {why}"));
    };
    Some(match failure {
        Some((pod, why)) if !group.contains(why) => format!("{group}; pod {pod}: {why}"),
        _ => group,
    })
}

/// A Pending pod's PodScheduled=False message, preferring the scheduler's per-node summary
/// ("0/6 nodes are available: …") over gang bookkeeping ("waiting for the pod group").
fn pod_scheduling_failure(pods: &[Pod]) -> Option<(&str, &str)> {
    let failures: Vec<(&str, &str)> = pods
        .iter()
        .filter(|p| phase(p) == "Pending")
        .filter_map(|p| Some((name(p), unscheduled_message(p)?)))
        .collect();
    let per_node = failures.iter().find(|(_, m)| m.contains("nodes are"));
    per_node.or(failures.first()).copied()
}

fn unscheduled_message(pod: &Pod) -> Option<&str> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let scheduled = conditions.iter().find(|c| c.type_ == "PodScheduled")?;
    let message = scheduled.message.as_deref()?;
    (scheduled.status == "False" && !message.is_empty()).then_some(message)
}

/// A launcher that failed before any worker ran most likely could not reach them: the
/// sentence that says so, with the workers' phases and the cluster's cause for the wait
/// (the gang watchdog's), appended to the Restarting message.
pub fn launcher_failed_early(
    job: &JobSnapshot,
    failed_type: &str,
    workers: &[&Pod],
    observed: &Observed,
) -> Option<String> {
    if !mpi::is_mpi(job)
        || failed_type != "Launcher"
        || workers.iter().any(|p| phase(p) == "Running")
    {
        return None;
    }
    let states: Vec<String> = workers
        .iter()
        .map(|p| format!("{} {}", name(p), phase(p)))
        .collect();
    let pending: Vec<&Pod> = workers.to_vec();
    Some(format!(
        " No worker was Running yet ({}): {}",
        states.join(", "),
        cause(observed, &pending)
    ))
}

/// `pod <name>: <reason>: <message>` for a container stuck pulling its image.
fn image_pull_failure(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let statuses: Vec<&ContainerStatus> =
        [&status.init_container_statuses, &status.container_statuses]
            .into_iter()
            .flatten()
            .flatten()
            .collect();
    statuses.iter().find_map(|s| {
        let waiting = s.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        IMAGE_PULL_FAILURES.contains(&reason).then(|| {
            let detail = waiting.message.as_deref().unwrap_or(&s.image);
            format!("pod {}: {reason}: {detail}", name(pod))
        })
    })
}
