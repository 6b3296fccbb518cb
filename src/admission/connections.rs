//! Open connections, bounded in number by evicting the least recently active one.
//!
//! Entry points: [`Connections::open`] when a connection is accepted (it returns the
//! [`Slot`] the connection holds until it ends), and [`Activity`], the IO wrapper that
//! records when bytes last moved.
//!
//! Why evict instead of refusing: a client that opens idle connections up to a cap would
//! otherwise lock everyone else out (slowloris); with `failurePolicy: Fail` that is every
//! admission in the cluster. Each idle connection costs about 10 KiB (TLS state and HTTP
//! buffers; RELIABILITY.md), so without a bound 10,000 of them outgrow the Pod's memory
//! limit. At the bound, a new connection closes the one that has been quiet the longest: the
//! apiserver's connections carry requests and stay fresh, an attacker's idle ones go first.
//!
//! # Guarantees
//! - At most `max` connections are open once each new one has been counted; the one closed
//!   to make room is the one whose last read or write is the oldest.
//! - A slot is released when its connection ends however it ends ([`Slot`]'s `Drop`).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// The open connections of one server.
#[derive(Debug)]
pub struct Connections {
    max: usize,
    epoch: Instant,
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<State>>>,
}

/// One connection's activity and its eviction signal.
#[derive(Debug)]
pub struct State {
    /// Milliseconds since [`Connections::epoch`] when bytes last moved.
    last_active: AtomicU64,
    evict: Notify,
    epoch: Instant,
}

impl State {
    fn touch(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_active.store(now, Ordering::Relaxed);
    }

    /// Resolves when this connection is chosen to make room for a new one.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

/// A connection's place among the open ones; dropping it releases the place.
#[derive(Debug)]
pub struct Slot {
    id: u64,
    state: Arc<State>,
    owner: Arc<Connections>,
}

impl Slot {
    pub fn state(&self) -> &Arc<State> {
        &self.state
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.owner.open.lock() {
            open.remove(&self.id);
        }
    }
}

impl Connections {
    /// At most `max` open connections (at least 1).
    pub fn new(max: usize) -> Arc<Connections> {
        Arc::new(Connections {
            max: max.max(1),
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// Counts a new connection. At the bound, the least recently active open one is told
    /// to close first; returns whether one was.
    pub fn open(self: &Arc<Self>) -> (Slot, bool) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(State {
            last_active: AtomicU64::new(0),
            evict: Notify::new(),
            epoch: self.epoch,
        });
        state.touch();
        let mut evicted = false;
        if let Ok(mut open) = self.open.lock() {
            if open.len() >= self.max {
                // O(n) at the bound only: one scan per accepted connection while full.
                // Ties (connections active within the same millisecond) go to the oldest,
                // not to whichever the map lists first.
                let quietest = open
                    .iter()
                    .min_by_key(|(id, s)| (s.last_active.load(Ordering::Relaxed), **id))
                    .map(|(id, _)| *id);
                if let Some(victim) = quietest.and_then(|id| open.remove(&id)) {
                    victim.evict.notify_one();
                    evicted = true;
                }
            }
            open.insert(id, state.clone());
        }
        let slot = Slot {
            id,
            state,
            owner: self.clone(),
        };
        (slot, evicted)
    }

    /// Connections open now.
    pub fn len(&self) -> usize {
        self.open.lock().map_or(0, |open| open.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// IO that records, in its connection's [`State`], when bytes last moved.
#[derive(Debug)]
pub struct Activity<T> {
    inner: T,
    state: Arc<State>,
}

impl<T> Activity<T> {
    pub fn new(inner: T, state: Arc<State>) -> Activity<T> {
        Activity { inner, state }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Activity<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.state.touch();
        }
        result
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Activity<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.state.touch();
        }
        result
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.state.touch();
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_bound_the_quietest_connection_is_evicted() {
        let connections = Connections::new(2);
        let (first, evicted) = connections.open();
        assert!(!evicted);
        let (second, _) = connections.open();
        // The first connection moves bytes later than the second: the second is quieter.
        first.state.last_active.store(10, Ordering::Relaxed);
        second.state.last_active.store(5, Ordering::Relaxed);
        let (_third, evicted) = connections.open();
        assert!(evicted);
        assert_eq!(connections.len(), 2);
        let open = connections.open.lock().map(|o| o.contains_key(&second.id));
        assert_eq!(open.ok(), Some(false), "the quietest one made room");
        drop(first);
        assert_eq!(connections.len(), 1, "a dropped slot frees its place");
    }

    #[test]
    fn connections_active_in_the_same_millisecond_evict_the_oldest() {
        let connections = Connections::new(8);
        let slots: Vec<Slot> = (0..8).map(|_| connections.open().0).collect();
        for slot in &slots {
            slot.state.last_active.store(7, Ordering::Relaxed);
        }
        let (_new, evicted) = connections.open();
        assert!(evicted);
        let open = connections
            .open
            .lock()
            .map(|o| o.contains_key(&slots[0].id));
        assert_eq!(open.ok(), Some(false), "the first opened made room");
    }
}
