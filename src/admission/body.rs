//! Reading a request body within a size limit, so that an oversized one is still answered
//! with a status.
//!
//! Answering 413 while the client is still sending used to cut the request short: on
//! HTTP/1.1 the status arrives, but on HTTP/2 the stream is reset as the unread body is
//! dropped, and clients that are still uploading (curl; the apiserver speaks HTTP/2 to
//! webhooks) report a stream error and no status at all. So the rest of an oversized body
//! is read and thrown away — never kept, and only up to [`DRAIN_MAX`] within the read
//! timeout — before the 413 goes out.
//!
//! Entry point: [`read_limited`].

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

/// The most of an oversized body that is read (and discarded) to answer it cleanly; beyond
/// that the request is refused at once, reset or not.
pub const DRAIN_MAX: u64 = 64 * 1024 * 1024;

#[derive(Debug)]
pub enum BodyError {
    /// Over the limit (the bytes past it were discarded).
    TooLarge,
    /// The transport failed mid-body.
    Unreadable(String),
}

/// The body if it has at most `limit` bytes. `declared` is its Content-Length, if given:
/// a body declared larger than [`DRAIN_MAX`] is refused without reading any of it.
pub async fn read_limited(
    body: Body,
    limit: usize,
    declared: Option<u64>,
) -> Result<Bytes, BodyError> {
    if declared.is_some_and(|n| n > DRAIN_MAX) {
        return Err(BodyError::TooLarge);
    }
    let mut body = body;
    let mut kept = BytesMut::new();
    let mut seen: u64 = 0;
    let limit_bytes = u64::try_from(limit).unwrap_or(u64::MAX);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Unreadable(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        seen = seen.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
        if seen > DRAIN_MAX {
            return Err(BodyError::TooLarge);
        }
        if seen <= limit_bytes {
            kept.extend_from_slice(&data);
        } else if !kept.is_empty() {
            kept = BytesMut::new(); // over the limit: keep nothing, read on to the end
        }
    }
    match seen > limit_bytes {
        true => Err(BodyError::TooLarge),
        false => Ok(kept.freeze()),
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
    fn a_body_over_the_limit_is_read_to_its_end_and_refused() {
        let got = run(read_limited(Body::from(vec![b'a'; 1000]), 10, None));
        assert!(matches!(got, Err(BodyError::TooLarge)));
    }

    #[test]
    fn a_body_declared_past_the_drain_bound_is_refused_unread() {
        let got = run(read_limited(Body::from("small"), 10, Some(DRAIN_MAX + 1)));
        assert!(matches!(got, Err(BodyError::TooLarge)));
    }
}
