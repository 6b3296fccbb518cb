//! Periodic file checks for hot reload (policies, serving certificate).
//!
//! Entry point: [`every`]. Polling by content rather than inotify: Secret and ConfigMap
//! volumes are updated by swapping a `..data` symlink, which file-level watches miss, and the
//! kubelet's own propagation delay dwarfs any polling interval.

use std::future::Future;
use std::time::Duration;

/// Runs `check` on the blocking pool every `interval` (file reads may block on network
/// volumes, so they stay off the reactor) until `shutdown` resolves.
pub async fn every<F>(interval: Duration, shutdown: impl Future<Output = ()>, check: F)
where
    F: Fn() + Clone + Send + 'static,
{
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = ticks.tick() => {}
        }
        let _ = tokio::task::spawn_blocking(check.clone()).await;
    }
}
