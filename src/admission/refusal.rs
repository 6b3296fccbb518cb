//! Reviews refused before they are judged (over the body limit, no room in flight, too many
//! JSON values, too slow): an AdmissionReview that says why, with the request's uid when the
//! bytes read hold it.

#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "request data must never panic the server"
)]

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tracing::warn;

use super::body::Oversized;
use super::budget::Budget;
use super::limits::{BODY_READ_TIMEOUT, PARSED_VALUES_PER_JUDGED_VALUE};
use super::metrics::Endpoint;
use super::review::Verdict;

/// Why a review that was not kept is refused: its AdmissionReview status.
pub(super) struct Refusal {
    pub(super) code: u16,
    reason: &'static str,
    message: String,
    /// For the log line.
    what: &'static str,
}

/// Answers a review that was not kept (read only for its uid) with an AdmissionReview that
/// refuses it, with its uid when the bytes read hold it (the apiserver requires the answer's
/// uid to be the request's; without it the apiserver reports the answer as invalid, and the
/// message is in gangplank's log only). HTTP 200: a bare error status would reach the user as
/// "failed calling webhook", without the message.
pub(super) fn refuse(endpoint: Endpoint, body: &Oversized, refusal: Refusal) -> Response {
    let uid = body.uid.as_deref();
    let mut message = refusal.message;
    if uid.is_none() {
        message.push_str(&format!(
            "; no request.uid in the {} bytes read, so this answer cannot name the request",
            body.read
        ));
    }
    warn!(
        endpoint = endpoint.as_str(),
        uid = uid.unwrap_or_default(),
        bytes = body.bytes,
        code = refusal.code,
        "review refused before it was judged: {}",
        refusal.what
    );
    let verdict = Verdict::refuse(refusal.code, refusal.reason, message);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        verdict.encode(uid.unwrap_or_default()),
    )
        .into_response()
}

/// "at least " when only part of a body was read.
fn at_least(body: &Oversized) -> &'static str {
    if body.whole {
        ""
    } else {
        "at least "
    }
}

/// A review that found no room among the reviews in flight (large ones, together over
/// `--review-bytes-in-flight`) within `--review-budget-wait`.
pub(super) fn busy(budget: &Budget, body: &Oversized) -> Refusal {
    Refusal {
        code: 429,
        reason: "TooManyRequests",
        message: budget.no_room(&format!("{}{} bytes", at_least(body), body.bytes)),
        what: "no room among the reviews in flight",
    }
}

/// A review over `--max-body-bytes`.
pub(super) fn too_large(limit: usize, body: &Oversized) -> Refusal {
    let limit_bytes = u64::try_from(limit).unwrap_or(u64::MAX);
    let over = body.bytes.saturating_sub(limit_bytes);
    let at_least = at_least(body);
    Refusal {
        code: 413,
        reason: "RequestEntityTooLarge",
        message: format!(
            "the AdmissionReview is {at_least}{over} bytes over gangplank's limit of {limit} bytes ({at_least}{} bytes), so the request cannot be judged and is refused; the limit is the gangplank webhook's --max-body-bytes flag (GANGPLANK_MAX_BODY_BYTES)",
            body.bytes
        ),
        what: "over the body limit",
    }
}

/// A review of more JSON values than are parsed ([`PARSED_VALUES_PER_JUDGED_VALUE`]).
pub(super) fn too_many_values(max: u64) -> Refusal {
    Refusal {
        code: 413,
        reason: "RequestEntityTooLarge",
        message: format!(
            "the AdmissionReview holds more than {max} JSON values (managedFields included), so it is not parsed and is refused; the limit is {PARSED_VALUES_PER_JUDGED_VALUE} times the gangplank webhook's --max-review-values flag (GANGPLANK_MAX_REVIEW_VALUES), to raise together with its Pod's memory limit"
        ),
        what: "too many JSON values to parse",
    }
}

/// A review whose body did not arrive within [`BODY_READ_TIMEOUT`].
pub(super) fn slow(body: &Oversized) -> Refusal {
    Refusal {
        code: 408,
        reason: "Timeout",
        message: format!(
            "the AdmissionReview did not arrive within {} s ({} bytes received), so it is refused; retry, and check the network between the apiserver and the gangplank webhook",
            BODY_READ_TIMEOUT.as_secs(),
            body.read
        ),
        what: "body not received in time",
    }
}
