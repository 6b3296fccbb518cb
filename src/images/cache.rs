//! Digests remembered per (registry, repository, tag, credential), and lookups shared while
//! they run.
//!
//! Entry point: [`Cache::resolve`]. Tags move, so a digest is kept only for the positive
//! TTL; a failure only for the (short) negative TTL. Concurrent requests for one key share
//! one lookup (single flight). The lookup runs as a task of its own: a request that stops
//! waiting (its budget ran out) does not cancel it, and its outcome still fills the cache for
//! the next request.

use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt, Shared};
use lru::LruCache;

use super::error::ResolveError;

/// A digest, or why there is none (shared by every request that asked).
pub type Outcome = Result<String, Arc<ResolveError>>;

type Flight = Shared<BoxFuture<'static, Outcome>>;

#[derive(Debug, Clone, Copy)]
pub struct Ttls {
    pub positive: Duration,
    pub negative: Duration,
}

pub struct Cache {
    entries: Mutex<LruCache<String, (Outcome, Instant)>>,
    flights: Mutex<HashMap<String, Flight>>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.entries.lock().map(|e| e.len()).unwrap_or_default();
        f.debug_struct("Cache")
            .field("entries", &len)
            .finish_non_exhaustive()
    }
}

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache {
            entries: Mutex::new(LruCache::new(non_zero(capacity))),
            flights: Mutex::new(HashMap::new()),
        }
    }

    pub fn resize(&self, capacity: usize) {
        if let Ok(mut entries) = self.entries.lock() {
            if entries.cap() != non_zero(capacity) {
                entries.resize(non_zero(capacity));
            }
        }
    }

    /// Entries held now (fresh or not yet evicted).
    pub fn entries(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or_default()
    }

    /// The cached outcome of `key` while it is fresh.
    pub fn get(&self, key: &str) -> Option<Outcome> {
        let mut entries = self.entries.lock().ok()?;
        match entries.get(key) {
            Some((outcome, expires)) if Instant::now() < *expires => Some(outcome.clone()),
            Some(_) => {
                entries.pop(key);
                None
            }
            None => None,
        }
    }

    fn put(&self, key: String, outcome: Outcome, ttls: Ttls) {
        let ttl = match &outcome {
            Ok(_) => ttls.positive,
            Err(e) if e.cacheable() => ttls.negative,
            Err(_) => return,
        };
        if ttl.is_zero() {
            return;
        }
        if let Ok(mut entries) = self.entries.lock() {
            entries.put(key, (outcome, Instant::now() + ttl));
        }
    }

    /// The outcome for `key`: cached, or shared with a lookup already running, or from
    /// `lookup` started now on a task of its own. `lookup` must end by itself (it carries its
    /// own timeout); `on_crash` says what a panicked lookup means.
    pub async fn resolve<F>(
        self: &Arc<Self>,
        key: &str,
        ttls: Ttls,
        lookup: F,
        on_crash: impl FnOnce() -> ResolveError,
    ) -> Outcome
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        if let Some(outcome) = self.get(key) {
            return outcome;
        }
        let flight = {
            let Ok(mut flights) = self.flights.lock() else {
                return Err(Arc::new(on_crash()));
            };
            // Checked again under the lock: a flight may have landed in between.
            if let Some(outcome) = self.get(key) {
                return outcome;
            }
            match flights.get(key) {
                Some(flight) => flight.clone(),
                None => {
                    let flight = self.start(key.to_string(), ttls, lookup, on_crash());
                    flights.insert(key.to_string(), flight.clone());
                    flight
                }
            }
        };
        flight.await
    }

    fn start<F>(
        self: &Arc<Self>,
        key: String,
        ttls: Ttls,
        lookup: F,
        crashed: ResolveError,
    ) -> Flight
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let cache = Arc::clone(self);
        let task = tokio::spawn(async move {
            let outcome = lookup.await;
            // Cache first, then retire the flight: a request arriving in between finds
            // one or the other.
            cache.put(key.clone(), outcome.clone(), ttls);
            if let Ok(mut flights) = cache.flights.lock() {
                flights.remove(&key);
            }
            outcome
        });
        let crashed = Arc::new(crashed);
        task.map(move |joined| joined.unwrap_or(Err(crashed)))
            .boxed()
            .shared()
    }
}

fn non_zero(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const TTLS: Ttls = Ttls {
        positive: Duration::from_secs(60),
        negative: Duration::from_secs(60),
    };

    fn crashed() -> ResolveError {
        ResolveError::Timeout {
            image: "i".into(),
            registry: "r".into(),
            budget: Duration::ZERO,
        }
    }

    #[tokio::test]
    async fn concurrent_lookups_of_one_key_share_one_request() {
        let cache = Arc::new(Cache::new(10));
        let calls = Arc::new(AtomicUsize::new(0));
        let (release, gate) = tokio::sync::watch::channel(false);
        let lookup = |calls: Arc<AtomicUsize>, mut gate: tokio::sync::watch::Receiver<bool>| async move {
            calls.fetch_add(1, Ordering::SeqCst);
            let _ = gate.wait_for(|open| *open).await;
            Ok("sha256:x".to_string())
        };
        let waiters: Vec<_> = (0..5)
            .map(|_| {
                let cache = Arc::clone(&cache);
                let l = lookup(Arc::clone(&calls), gate.clone());
                tokio::spawn(async move { cache.resolve("k", TTLS, l, crashed).await })
            })
            .collect();
        tokio::task::yield_now().await;
        let _ = release.send(true);
        for w in waiters {
            let outcome = w.await.ok().and_then(Result::ok);
            assert_eq!(outcome.as_deref(), Some("sha256:x"));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // And the outcome is cached now: no new lookup.
        let again = cache
            .resolve("k", TTLS, lookup(Arc::clone(&calls), gate.clone()), crashed)
            .await;
        assert!(again.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn least_recently_used_entries_go_first() {
        let cache = Arc::new(Cache::new(2));
        for key in ["a", "b"] {
            let _ = cache
                .resolve(key, TTLS, async { Ok(String::new()) }, crashed)
                .await;
        }
        assert!(cache.get("a").is_some());
        let _ = cache
            .resolve("c", TTLS, async { Ok(String::new()) }, crashed)
            .await;
        assert!(cache.get("a").is_some() && cache.get("c").is_some());
        assert!(cache.get("b").is_none());
    }

    #[tokio::test]
    async fn uncacheable_failures_are_not_remembered() {
        let cache = Arc::new(Cache::new(2));
        let bad = || {
            Err(Arc::new(ResolveError::Reference {
                image: "A".into(),
                source: super::super::reference::ReferenceError::Empty,
            }))
        };
        let _ = cache
            .resolve("k", TTLS, async move { bad() }, crashed)
            .await;
        assert!(cache.get("k").is_none());
    }
}
