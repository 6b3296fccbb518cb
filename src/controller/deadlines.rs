//! Time limits: activeDeadlineSeconds while the job runs, ttlSecondsAfterFinished once it is
//! done, and the requeue delay that makes each fire on time.
//!
//! Upstream's timers are no-ops (a fake work queue), so its deadlines fire only when some
//! other event happens to reconcile the job (#3358). Here every pending deadline becomes
//! [`Plan::requeue_after`](super::Plan::requeue_after).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::Timestamp;

/// Where a deadline stands at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// No limit set, or its clock has not started.
    None,
    Passed,
    /// Look again after this long.
    In(Duration),
}

impl Deadline {
    /// `start + seconds` against `now`; a negative or absent limit is no limit.
    pub fn after(start: Option<&Time>, seconds: Option<i64>, now: Timestamp) -> Deadline {
        let (Some(start), Some(seconds)) = (start, seconds) else {
            return Deadline::None;
        };
        let Ok(limit) = u64::try_from(seconds) else {
            return Deadline::None;
        };
        Deadline::at(start.0, Duration::from_secs(limit), now)
    }

    /// `start + limit` against `now`.
    pub fn at(start: Timestamp, limit: Duration, now: Timestamp) -> Deadline {
        let elapsed = Duration::try_from(now.duration_since(start)).unwrap_or(Duration::ZERO);
        match limit.checked_sub(elapsed) {
            Some(left) if !left.is_zero() => Deadline::In(left),
            _ => Deadline::Passed,
        }
    }

    pub fn passed(self) -> bool {
        self == Deadline::Passed
    }

    pub fn remaining(self) -> Option<Duration> {
        match self {
            Deadline::In(d) => Some(d),
            _ => None,
        }
    }
}

/// activeDeadlineSeconds, counted from startTime (reset on resume).
pub fn active(start_time: Option<&Time>, seconds: Option<i64>, now: Timestamp) -> Deadline {
    Deadline::after(start_time, seconds, now)
}

/// ttlSecondsAfterFinished, counted from completionTime.
pub fn ttl(completion_time: Option<&Time>, seconds: Option<i64>, now: Timestamp) -> Deadline {
    Deadline::after(completion_time, seconds, now)
}

/// The earliest of several requeue delays.
pub fn earliest(delays: impl IntoIterator<Item = Option<Duration>>) -> Option<Duration> {
    delays.into_iter().flatten().min()
}
