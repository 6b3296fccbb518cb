//! Reading a request body within a size limit and the memory budget ([`super::budget`]), so
//! that a body over the limit, or one the budget has no room for, is still answered.
//!
//! Answering while the client is still sending used to cut the request short: on HTTP/1.1
//! the status arrives, but on HTTP/2 the stream is reset as the unread body is dropped, and
//! clients that are still uploading (curl; the apiserver speaks HTTP/2 to webhooks) report a
//! stream error and no answer at all. So the rest of a body not kept (over the limit, or with
//! no room in the budget) is read and thrown away — never kept, and only up to [`DRAIN_MAX`]
//! within the read timeout — before the answer goes out. The answer must carry the request's
//! uid (server.rs), so what is read is searched for it as it goes by ([`UidScanner`]:
//! constant memory), wherever in the body it is: the apiserver writes it first, but a
//! hand-written review may put it after a large object, and the bytes are read anyway.
//!
//! Entry point: [`read_limited`].

use std::time::Duration;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::budget::Reservation;
use super::tokens::Tokens;
use super::uid::UidScanner;

/// The most of an oversized body that is read (and discarded) to answer it cleanly; beyond
/// that the request is answered at once, reset or not. Four times the default limit
/// (server.rs), and more than the apiserver ever sends.
pub const DRAIN_MAX: u64 = 64 * 1024 * 1024;

/// How much of a body declared larger than [`DRAIN_MAX`] is read, for its uid, before it is
/// refused: the apiserver writes the uid within the first few hundred bytes, and never sends
/// such a body.
pub const EARLY_REFUSAL_READ: u64 = 64 * 1024;

/// Time a body that is not kept (over the limit, or with no room) has, from when that is
/// known, to be read to its end: reading it costs no memory, and many drained at once on a
/// busy machine took longer than the 5 s a kept body has (server.rs `BODY_READ_TIMEOUT`).
/// Below the shutdown grace (15 s).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub enum BodyError {
    /// Over the limit: how many bytes it has, and its uid.
    TooLarge(Oversized),
    /// No room in the memory budget within its wait: read (not kept) for its uid.
    NoRoom(Oversized),
    /// Not received by its deadline: what was read was searched for its uid.
    Slow(Oversized),
    /// More JSON values than `max_values` ([`Tokens`]): read (not kept) for its uid.
    TooManyValues(Oversized),
    /// The transport failed mid-body.
    Unreadable(String),
}

/// What is known of a body that was not kept (over the limit, or no room for it).
#[derive(Debug)]
pub struct Oversized {
    /// Its length: counted to the end, or at least this many when `whole` is false (past
    /// [`DRAIN_MAX`], or from a Content-Length larger than that, not read).
    pub bytes: u64,
    pub whole: bool,
    /// Bytes read, all of which were searched for the uid.
    pub read: u64,
    /// Its `request.uid`, when the bytes read hold one.
    pub uid: Option<String>,
}

/// Why a body is read without being kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unkept {
    OverLimit,
    NoRoom,
    Slow,
    TooManyValues,
}

/// The body if it has at most `limit` bytes and `max_values` JSON values (counted as it
/// arrives: [`Tokens`]), and `budget` finds room for it. `declared` is its
/// Content-Length, if given: a body declared larger than [`DRAIN_MAX`] is refused after its
/// first [`EARLY_REFUSAL_READ`] bytes.
///
/// Memory: every byte kept is covered by `budget` before it is kept — the whole declared
/// length before the first byte is read, or each piece as it arrives when no length is
/// declared. A body the budget finds no room for, or that crosses the limit, is not kept: the
/// reservation is released and the rest is only searched for the uid, in constant memory.
/// At most `limit` bytes are held (reserved at once when a Content-Length within the limit is
/// declared, so a large body is not copied as its buffer grows).
///
/// Time: searching costs one pass over the bytes of a body not kept, and ends at its uid
/// (for the apiserver's reviews, in the first few hundred bytes); a kept body is not searched
/// (it is parsed whole). A body must arrive by `deadline`, or it is refused as
/// [`BodyError::Slow`] with the uid of what was read; one that is not kept has
/// [`DRAIN_TIMEOUT`] more to be read to its end, so that its refusal is answered cleanly even
/// when many are drained at once.
pub async fn read_limited(
    body: Body,
    limit: usize,
    declared: Option<u64>,
    budget: &mut Reservation,
    deadline: Instant,
    max_values: u64,
) -> Result<Bytes, BodyError> {
    let limit_bytes = u64::try_from(limit).unwrap_or(u64::MAX);
    let refuse_early = declared.is_some_and(|n| n > DRAIN_MAX);
    let reserve = declared
        .filter(|n| *n <= limit_bytes)
        .and_then(|n| usize::try_from(n).ok());
    let mut body = body;
    let mut kept = BytesMut::new();
    let mut seen: u64 = 0;
    // Set when the body is not kept: from then on bytes are searched, not kept.
    let mut unkept: Option<(Unkept, UidScanner)> = None;
    let mut tokens = Tokens::default();
    let mut deadline = deadline;
    // A body not kept is read to its end for a clean answer, with time of its own for that.
    let drain_by = |deadline: Instant| deadline.max(Instant::now() + DRAIN_TIMEOUT);
    match reserve {
        Some(n) if budget.cover(n).await.is_ok() => kept.reserve(n),
        Some(_) => {
            unkept = Some((Unkept::NoRoom, UidScanner::default()));
            deadline = drain_by(deadline);
        }
        None => {}
    }
    // `kept_why`: why a body refused while still kept is refused.
    let refused = |seen: u64,
                   whole: bool,
                   unkept: Option<(Unkept, UidScanner)>,
                   kept: &[u8],
                   kept_why: Unkept| {
        // Refused while kept: what was kept is all that was read.
        let (why, scanner) = unkept.unwrap_or_else(|| {
            let mut scanner = UidScanner::default();
            scanner.feed(kept);
            (kept_why, scanner)
        });
        let body = Oversized {
            bytes: match whole {
                true => seen,
                false => seen.max(declared.unwrap_or(0)),
            },
            whole,
            read: seen,
            uid: scanner.into_uid(),
        };
        match why {
            Unkept::OverLimit => BodyError::TooLarge(body),
            Unkept::NoRoom => BodyError::NoRoom(body),
            Unkept::Slow => BodyError::Slow(body),
            Unkept::TooManyValues => BodyError::TooManyValues(body),
        }
    };
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(_) => return Err(refused(seen, false, unkept, &kept, Unkept::Slow)),
        };
        let frame = frame.map_err(|e| BodyError::Unreadable(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        seen = seen.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
        if unkept.is_none() {
            tokens.feed(&data);
            let why = if seen > limit_bytes {
                Some(Unkept::OverLimit)
            } else if tokens.values_at_most() > max_values {
                Some(Unkept::TooManyValues)
            } else {
                let want = usize::try_from(seen).unwrap_or(usize::MAX);
                budget.cover(want).await.err().map(|_| Unkept::NoRoom)
            };
            if let Some(why) = why {
                let mut scanner = UidScanner::default();
                scanner.feed(&kept);
                // Not kept: the buffer and its share of the budget are freed.
                kept = BytesMut::new();
                budget.release();
                unkept = Some((why, scanner));
                deadline = drain_by(deadline);
            }
        }
        match unkept.as_mut() {
            Some((_, scanner)) => scanner.feed(&data),
            None => kept.extend_from_slice(&data),
        }
        if seen > DRAIN_MAX || (refuse_early && seen >= EARLY_REFUSAL_READ) {
            return Err(refused(seen, false, unkept, &kept, Unkept::OverLimit));
        }
    }
    match (refuse_early, unkept) {
        (true, unkept) => Err(refused(seen, false, unkept, &kept, Unkept::OverLimit)),
        (false, Some(unkept)) => Err(refused(seen, true, Some(unkept), &kept, Unkept::OverLimit)),
        (false, None) => Ok(kept.freeze()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::admission::budget::Budget;

    /// A deadline no test reaches.
    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map(|rt| rt.block_on(f))
            .unwrap_or_else(|e| panic!("runtime: {e}"))
    }

    /// [`read_limited`] with a budget of 64 MiB that nothing else holds.
    fn read(body: Body, limit: usize, declared: Option<u64>) -> Result<Bytes, BodyError> {
        run(async {
            let mut reservation = Budget::new(64 << 20, Duration::ZERO).reserve();
            read_limited(body, limit, declared, &mut reservation, far(), u64::MAX).await
        })
    }

    #[test]
    fn a_body_within_the_limit_is_kept_whole() {
        let got = read(Body::from("0123456789"), 10, Some(10));
        assert_eq!(got.ok().as_deref(), Some(&b"0123456789"[..]));
    }

    /// A review with `padding` bytes of object before its uid, in pieces of 1000 bytes, and
    /// its length.
    fn late_uid_review(padding: usize) -> (Body, u64) {
        let text = format!(
            r#"{{"request":{{"object":{{"blob":"{}"}},"uid":"late"}}}}"#,
            "a".repeat(padding)
        );
        let pieces: Vec<Result<Bytes, std::io::Error>> = text
            .as_bytes()
            .chunks(1000)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let length = u64::try_from(text.len()).unwrap();
        (Body::from_stream(futures::stream::iter(pieces)), length)
    }

    #[test]
    fn a_body_over_the_limit_is_read_to_its_end_and_refused_with_its_length_and_uid() {
        let (body, length) = late_uid_review(200 * 1024);
        let got = read(body, 10, None);
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!((o.bytes, o.whole, o.read), (length, true, length));
        assert_eq!(o.uid.as_deref(), Some("late"));
    }

    #[test]
    fn a_body_without_a_uid_is_refused_without_one() {
        let got = read(Body::from(vec![b'a'; 100_000]), 10, None);
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!((o.bytes, o.whole, o.uid), (100_000, true, None));
    }

    #[test]
    fn a_body_declared_past_the_drain_bound_is_refused_after_its_first_bytes() {
        let got = read(
            Body::from(r#"{"request":{"uid":"u"}}"#),
            10,
            Some(DRAIN_MAX + 1),
        );
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!((o.bytes, o.whole, o.read), (DRAIN_MAX + 1, false, 23));
        assert_eq!(o.uid.as_deref(), Some("u"));
        // Within the limit so far, and refused early all the same.
        let (body, _) = late_uid_review(10);
        let got = read(body, 1 << 20, Some(DRAIN_MAX + 1));
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!(o.uid.as_deref(), Some("late"));
    }

    #[test]
    fn a_body_the_budget_has_no_room_for_is_not_kept_and_refused_with_its_uid() {
        let text = format!(
            r#"{{"request":{{"uid":"full","object":"{}"}}}}"#,
            "a".repeat(8192)
        );
        let length = u64::try_from(text.len()).unwrap();
        for declared in [Some(length), None] {
            let got = run(async {
                let budget = Budget::new(16 * 1024, Duration::ZERO);
                let mut other = budget.reserve();
                other.cover(10 * 1024).await.unwrap();
                let mut reservation = budget.reserve();
                let got = read_limited(
                    Body::from(text.clone()),
                    1 << 20,
                    declared,
                    &mut reservation,
                    far(),
                    u64::MAX,
                )
                .await;
                assert_eq!(
                    reservation.held_kib(),
                    0,
                    "nothing held by the refused body"
                );
                got
            });
            let Err(BodyError::NoRoom(o)) = got else {
                panic!("refused for room ({declared:?}): {got:?}");
            };
            assert_eq!((o.bytes, o.whole, o.read), (length, true, length));
            assert_eq!(o.uid.as_deref(), Some("full"));
        }
    }

    #[test]
    fn a_body_without_a_length_takes_the_budget_as_its_pieces_arrive() {
        let (body, length) = late_uid_review(20 * 1024);
        let held = run(async {
            let budget = Budget::new(64 * 1024, Duration::ZERO);
            let mut reservation = budget.reserve();
            let got = read_limited(body, 1 << 20, None, &mut reservation, far(), u64::MAX).await;
            assert_eq!(got.map(|b| b.len() as u64).ok(), Some(length));
            reservation.held_kib()
        });
        assert_eq!(u64::from(held), length.div_ceil(1024));
    }

    #[test]
    fn a_body_that_stops_arriving_is_refused_at_its_deadline_with_its_uid() {
        let first: Result<Bytes, std::io::Error> = Ok(Bytes::from(r#"{"request":{"uid":"slow","#));
        let stalled =
            futures::StreamExt::chain(futures::stream::iter([first]), futures::stream::pending());
        let got = run(async {
            let mut reservation = Budget::new(64 << 20, Duration::ZERO).reserve();
            let deadline = Instant::now() + Duration::from_millis(50);
            read_limited(
                Body::from_stream(stalled),
                1 << 20,
                None,
                &mut reservation,
                deadline,
                u64::MAX,
            )
            .await
        });
        let Err(BodyError::Slow(o)) = got else {
            panic!("refused as slow: {got:?}");
        };
        assert_eq!((o.read, o.whole), (25, false));
        assert_eq!(o.uid.as_deref(), Some("slow"));
    }

    #[test]
    fn a_body_of_more_values_than_allowed_is_not_kept_and_refused_with_its_uid() {
        let text = format!(
            r#"{{"request":{{"uid":"tiny","object":[{}]}}}}"#,
            ["{}"; 1000].join(",")
        );
        let got = run(async {
            let mut reservation = Budget::new(64 << 20, Duration::ZERO).reserve();
            read_limited(
                Body::from(text.clone()),
                1 << 20,
                None,
                &mut reservation,
                far(),
                500,
            )
            .await
        });
        let Err(BodyError::TooManyValues(o)) = got else {
            panic!("refused for its values: {got:?}");
        };
        assert_eq!(o.uid.as_deref(), Some("tiny"));
        assert_eq!(o.bytes, u64::try_from(text.len()).unwrap());
    }
}
