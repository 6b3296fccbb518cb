//! Reading a request body within a size limit, so that an oversized one is still answered.
//!
//! Answering while the client is still sending used to cut the request short: on HTTP/1.1
//! the status arrives, but on HTTP/2 the stream is reset as the unread body is dropped, and
//! clients that are still uploading (curl; the apiserver speaks HTTP/2 to webhooks) report a
//! stream error and no answer at all. So the rest of an oversized body is read and thrown
//! away — never kept, and only up to [`DRAIN_MAX`] within the read timeout — before the
//! answer goes out. Its first [`PREFIX_KEPT`] bytes are kept: the request's uid is there,
//! and the answer must carry it (server.rs).
//!
//! Entry point: [`read_limited`].

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

/// The most of an oversized body that is read (and discarded) to answer it cleanly; beyond
/// that the request is answered at once, reset or not. Four times the default limit
/// (server.rs), and more than the apiserver ever sends.
pub const DRAIN_MAX: u64 = 64 * 1024 * 1024;

/// How much of an oversized body is kept to find the request's uid in: the apiserver writes
/// it within the first few hundred bytes.
pub const PREFIX_KEPT: usize = 64 * 1024;

#[derive(Debug)]
pub enum BodyError {
    /// Over the limit: its first bytes, and how many it has.
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
    /// Its first [`PREFIX_KEPT`] bytes (fewer if it ended or was refused sooner).
    pub prefix: Bytes,
}

/// The body if it has at most `limit` bytes. `declared` is its Content-Length, if given: a
/// body declared larger than [`DRAIN_MAX`] is refused after its first [`PREFIX_KEPT`] bytes.
///
/// Memory: at most `limit` bytes are held (reserved at once when a Content-Length within the
/// limit is declared, so a large body is not copied as its buffer grows), and after the
/// limit is crossed only [`PREFIX_KEPT`].
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
    let oversized = |seen: u64, whole: bool, kept: BytesMut| {
        BodyError::TooLarge(Oversized {
            bytes: match whole {
                true => seen,
                false => seen.max(declared.unwrap_or(0)),
            },
            whole,
            prefix: kept.freeze(),
        })
    };
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Unreadable(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        seen = seen.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
        if seen <= limit_bytes {
            kept.extend_from_slice(&data);
        } else {
            if kept.len() > PREFIX_KEPT || kept.capacity() > PREFIX_KEPT {
                // Over the limit: a fresh small buffer, so that the large one is freed.
                kept = BytesMut::from(kept.get(..PREFIX_KEPT.min(kept.len())).unwrap_or_default());
            }
            let room = PREFIX_KEPT.saturating_sub(kept.len());
            kept.extend_from_slice(data.get(..room.min(data.len())).unwrap_or_default());
        }
        if seen > DRAIN_MAX || (refuse_early && kept.len() >= PREFIX_KEPT) {
            return Err(oversized(seen, false, kept));
        }
    }
    match (refuse_early, seen > limit_bytes) {
        (true, _) => Err(oversized(seen, false, kept)),
        (false, true) => Err(oversized(seen, true, kept)),
        (false, false) => Ok(kept.freeze()),
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

    #[test]
    fn a_body_over_the_limit_is_read_to_its_end_and_refused_with_its_length_and_prefix() {
        let body = [vec![b'a'; PREFIX_KEPT], vec![b'b'; 1000]].concat();
        let got = run(read_limited(Body::from(body), 10, None));
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!(
            (o.bytes, o.whole),
            (u64::try_from(PREFIX_KEPT).unwrap() + 1000, true)
        );
        assert_eq!(o.prefix.len(), PREFIX_KEPT);
        assert!(o.prefix.iter().all(|b| *b == b'a'));
    }

    #[test]
    fn a_body_declared_past_the_drain_bound_is_refused_after_its_prefix() {
        let got = run(read_limited(Body::from("small"), 10, Some(DRAIN_MAX + 1)));
        let Err(BodyError::TooLarge(o)) = got else {
            panic!("refused for size: {got:?}");
        };
        assert_eq!((o.bytes, o.whole), (DRAIN_MAX + 1, false));
        assert_eq!(&o.prefix[..], b"small");
    }
}
