//! Restart policies, exit codes and the backoffLimit count.
//!
//! Entry points: [`RestartPolicy`], [`on_failed_pod`], [`BackoffCount`].
//!
//! # Where restart counts live
//! A pod recreated after a failure starts with `restartCount` 0, so counting container
//! restarts (upstream's only count) misses every recreation: ExitCode retries never reach
//! backoffLimit (upstream #2045). gangplank counts recreations itself and keeps the count in
//! the job's annotation [`RESTARTS_ANNOTATION`]: the status would be the natural place, but
//! upstream's CRD schema has no field for it and the apiserver prunes unknown status fields,
//! and memory is lost when the controller restarts. An annotation survives both, is visible
//! in `kubectl get -o yaml`, and patching it does not change the job's generation.
//! [`RESTARTED_PODS_ANNOTATION`] names the pods of the last counted batch, so a plan replayed
//! before their deletion is seen (controller crash, stale cache) does not count them twice.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

/// Pod recreations counted against backoffLimit so far.
pub const RESTARTS_ANNOTATION: &str = "gangplank.dev/restarts";
/// Comma-separated uids of the pods whose recreation was counted last.
pub const RESTARTED_PODS_ANNOTATION: &str = "gangplank.dev/restarted-pods";

/// Exit code upstream assumes when the default container has no terminated state (0xbeef);
/// it is ≥ 128, so such a failure is retried.
pub const UNKNOWN_EXIT_CODE: i32 = 0xbeef;

/// A replica spec's `restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
    /// The pod runs with `Never`; the operator recreates it when the default container's
    /// exit code is retryable (≥ 128) and fails the job when it is permanent (1–127).
    ExitCode,
}

impl RestartPolicy {
    pub fn parse(s: &str) -> Option<RestartPolicy> {
        match s {
            "Always" => Some(RestartPolicy::Always),
            "OnFailure" => Some(RestartPolicy::OnFailure),
            "Never" => Some(RestartPolicy::Never),
            "ExitCode" => Some(RestartPolicy::ExitCode),
            _ => None,
        }
    }

    /// The pod's own `restartPolicy`: ExitCode is implemented by the operator, so the
    /// kubelet must not restart containers (`Never`).
    pub fn for_pod(self) -> &'static str {
        match self {
            RestartPolicy::Always => "Always",
            RestartPolicy::OnFailure => "OnFailure",
            RestartPolicy::Never | RestartPolicy::ExitCode => "Never",
        }
    }

    /// Whether the kubelet restarts containers in place (their restartCount counts too).
    pub fn restarts_in_place(self) -> bool {
        matches!(self, RestartPolicy::Always | RestartPolicy::OnFailure)
    }
}

/// What to do with a pod in phase Failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedPod {
    /// Delete it so it is recreated (OnFailure, Always, ExitCode with a retryable code).
    Recreate { exit_code: Option<i32> },
    /// ExitCode with a permanent code (1–127): the job fails.
    Permanent { exit_code: i32 },
    /// Never: the pod stays; the kind's success rules count it as failed.
    Keep,
}

/// Upstream's `IsRetryableExitCode`: 128 and above (signals, OOM kills) may succeed on retry.
pub fn is_retryable_exit_code(code: i32) -> bool {
    code >= 128
}

/// Decides what happens to a Failed pod under `policy`; `container` is the name of the
/// container whose exit code counts (the kind's default container).
pub fn on_failed_pod(policy: RestartPolicy, pod: &Pod, container: &str) -> FailedPod {
    match policy {
        RestartPolicy::Never => FailedPod::Keep,
        RestartPolicy::Always | RestartPolicy::OnFailure => FailedPod::Recreate {
            exit_code: exit_code(pod, container),
        },
        RestartPolicy::ExitCode => {
            let code = exit_code(pod, container).unwrap_or(UNKNOWN_EXIT_CODE);
            if is_retryable_exit_code(code) {
                FailedPod::Recreate {
                    exit_code: Some(code),
                }
            } else {
                FailedPod::Permanent { exit_code: code }
            }
        }
    }
}

/// Exit code of `container`'s last termination, if it has terminated.
pub fn exit_code(pod: &Pod, container: &str) -> Option<i32> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == container)?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// Container restarts the kubelet did in place, summed over containers and init containers
/// of Running pods (upstream's count).
pub fn in_place_restarts(pod: &Pod) -> i64 {
    let Some(status) = &pod.status else { return 0 };
    if status.phase.as_deref() != Some("Running") {
        return 0;
    }
    [&status.container_statuses, &status.init_container_statuses]
        .into_iter()
        .flatten()
        .flatten()
        .map(|s| i64::from(s.restart_count))
        .sum()
}

/// The restarts a job has used, against its backoffLimit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackoffCount {
    /// Pod recreations recorded in [`RESTARTS_ANNOTATION`].
    pub recorded: i64,
    /// Container restarts in Running pods whose replica restarts in place.
    pub in_place: i64,
    /// Recreations this plan wants to add.
    pub new: i64,
}

impl BackoffCount {
    /// Whether the job has used up `limit` restarts. A recreation is refused when it would
    /// exceed the limit; in-place restarts happen without asking, so (as upstream) reaching
    /// the limit with them is enough (a limit of 0 allows none).
    pub fn exceeded(&self, limit: Option<i64>) -> bool {
        let Some(limit) = limit else { return false };
        let used = self.recorded + self.in_place;
        (self.new > 0 && used + self.new > limit) || (self.in_place > 0 && used >= limit)
    }
}

/// The annotations that record `restarts` in total, the last of them recreating the pods
/// with uids `batch`.
pub fn record(restarts: i64, batch: &[String]) -> BTreeMap<String, String> {
    BTreeMap::from([
        (RESTARTS_ANNOTATION.to_string(), restarts.to_string()),
        (RESTARTED_PODS_ANNOTATION.to_string(), batch.join(",")),
    ])
}

/// Uids of the pods whose recreation was counted last.
pub fn counted_pods(annotations: &BTreeMap<String, String>) -> Vec<&str> {
    annotations
        .get(RESTARTED_PODS_ANNOTATION)
        .map(|v| v.split(',').filter(|s| !s.is_empty()).collect())
        .unwrap_or_default()
}
