//! Reading a request body within a size limit, so that an oversized one is still answered.
//!
//! Answering while the client is still sending used to cut the request short: on HTTP/1.1
//! the status arrives, but on HTTP/2 the stream is reset as the unread body is dropped, and
//! clients that are still uploading (curl; the apiserver speaks HTTP/2 to webhooks) report a
//! stream error and no answer at all. So the rest of an oversized body is read and thrown
//! away — never kept, and only up to [`DRAIN_MAX`] within the read timeout — before the
//! answer goes out. The answer must carry the request's uid (server.rs), so what is read is
//! searched for it as it goes by ([`UidScanner`]: constant memory), wherever in the body it
//! is: the apiserver writes it first, but a hand-written review may put it after a large
//! object, and the bytes are read anyway.
//!
//! Entry point: [`read_limited`].

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

use super::uid::UidScanner;

/// The most of an oversized body that is read (and discarded) to answer it cleanly; beyond
/// that the request is answered at once, reset or not. Four times the default limit
/// (server.rs), and more than the apiserver ever sends.
pub const DRAIN_MAX: u64 = 64 * 1024 * 1024;

/// How much of a body declared larger than [`DRAIN_MAX`] is read, for its uid, before it is
/// refused: the apiserver writes the uid within the first few hundred bytes, and never sends
/// such a body.
pub const EARLY_REFUSAL_READ: u64 = 64 * 1024;

#[derive(Debug)]
pub enum BodyError {
    /// Over the limit: how many bytes it has, and its uid.
    TooLarge(Oversized),
    /// The transport failed mid-body.
    Unreadable(String),
}

/// What is known of a body over the limit.
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

/// The body if it has at most `limit` bytes. `declared` is its Content-Length, if given: a
/// body declared larger than [`DRAIN_MAX`] is refused after its first [`EARLY_REFUSAL_READ`]
/// bytes.
///
/// Memory: at most `limit` bytes are held (reserved at once when a Content-Length within the
/// limit is declared, so a large body is not copied as its buffer grows), and none once the
/// limit is crossed: the rest is only searched for the uid, in constant memory.
///
/// Time: searching costs one pass over the bytes of an oversized body, and ends at its uid
/// (for the apiserver's reviews, in the first few hundred bytes); a body within the limit is
/// not searched (it is parsed whole).
pub async fn read_limited(
    body: Body,
    limit: usize,
    declared: Option<u64>,
) -> Result<Bytes, BodyError> {
    let limit_bytes = u64::try_from(limit).unwrap_or(u64::MAX);
    let refuse_early = declared.is_some_and(|n| n > DRAIN_MAX);
    let reserve = declared
        .filter(|n| *n <= limit_bytes)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0);
    let mut body = body;
    let mut kept = BytesMut::with_capacity(reserve);
    let mut seen: u64 = 0;
    // Set when the body crosses the limit: from then on bytes are searched, not kept.
    let mut over: Option<UidScanner> = None;
    let oversized = |seen: u64, whole: bool, over: Option<UidScanner>, kept: &[u8]| {
        // Refused early within the limit: what was kept is all that was read.
        let scanner = over.unwrap_or_else(|| {
            let mut scanner = UidScanner::default();
            scanner.feed(kept);
            scanner
        });
        BodyError::TooLarge(Oversized {
            bytes: match whole {
                true => seen,
                false => seen.max(declared.unwrap_or(0)),
            },
            whole,
            read: seen,
            uid: scanner.into_uid(),
        })
    };
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Unreadable(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        seen = seen.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
        match over.as_mut() {
            Some(scanner) => scanner.feed(&data),
            None if seen <= limit_bytes => kept.extend_from_slice(&data),
            None => {
                let mut scanner = UidScanner::default();
                scanner.feed(&kept);
                scanner.feed(&data);
                // Over the limit: the large buffer is freed.
                kept = BytesMut::new();
                over = Some(scanner);
            }
        }
        if seen > DRAIN_MAX || (refuse_early && seen >= EARLY_REFUSAL_READ) {
            return Err(oversized(seen, false, over, &kept));
        }
    }
    match (refuse_early, over) {
        (true, over) => Err(oversized(seen, false, over, &kept)),
        (false, Some(scanner)) => Err(oversized(seen, true, Some(scanner), &kept)),
        (false, None) => Ok(kept.freeze()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| rt.block_on(f))
            .unwrap_or_else(|e| panic!("runtime: {e}"))
    }

    #[test]
    fn a_body_within_the_limit_is_kept_whole() {
        let got = run(read_limited(Body::from("0123456789"), 10, Some(10)));
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
        let got = run(read_limited(body, 10, None));
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!((o.bytes, o.whole, o.read), (length, true, length));
        assert_eq!(o.uid.as_deref(), Some("late"));
    }

    #[test]
    fn a_body_without_a_uid_is_refused_without_one() {
        let got = run(read_limited(Body::from(vec![b'a'; 100_000]), 10, None));
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!((o.bytes, o.whole, o.uid), (100_000, true, None));
    }

    #[test]
    fn a_body_declared_past_the_drain_bound_is_refused_after_its_first_bytes() {
        let got = run(read_limited(
            Body::from(r#"{"request":{"uid":"u"}}"#),
            10,
            Some(DRAIN_MAX + 1),
        ));
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!((o.bytes, o.whole, o.read), (DRAIN_MAX + 1, false, 23));
        assert_eq!(o.uid.as_deref(), Some("u"));
        // Within the limit so far, and refused early all the same.
        let (body, _) = late_uid_review(10);
        let got = run(read_limited(body, 1 << 20, Some(DRAIN_MAX + 1)));
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!(o.uid.as_deref(), Some("late"));
    }
}
