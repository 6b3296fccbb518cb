//! The memory budget of reviews in flight: bytes of request bodies held, from the first byte
//! buffered until the answer is encoded, counted in KiB permits of one semaphore.
//!
//! Entry points: [`Budget::new`], then [`Budget::reserve`] per request, and
//! [`Reservation::cover`] as its body arrives ([`super::body::read_limited`] calls it).
//!
//! Why before buffering: a body is memory from its first byte. When the budget was taken
//! after the body had been read, 48 clients posting 15 MiB reviews at once took the server
//! to 431–638 MiB of RSS (96: 742 MiB), past the Pod's 256 Mi limit, although at most 8 MiB of
//! them were ever judged at once. Now a body declared by its Content-Length is reserved whole
//! before a byte of it is read, and a body without one (chunked HTTP/1.1, HTTP/2 without
//! content-length) grows its reservation as its bytes arrive; what finds no room within the
//! wait is not kept (server.rs answers it 429 with its uid). Bodies not yet read stay in the
//! kernel's socket buffers (HTTP/1.1) or within the HTTP/2 flow-control window (server.rs).
//!
//! # Guarantees
//! - The bytes of bodies held by all requests together never exceed the budget, except one
//!   request that holds the whole budget (a review larger than it is judged alone).
//! - A reservation is released when dropped, however the request ends.
//! - Waiting for room ends at the request's deadline ([`Budget::reserve`] plus the wait),
//!   however many times its reservation grows.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Bytes of review bodies held at once, as KiB permits.
#[derive(Debug)]
pub struct Budget {
    permits: Arc<Semaphore>,
    /// Permits in all: what the largest review takes.
    total_kib: u32,
    /// Longest a request waits for room, in all.
    wait: Duration,
}

/// A request's share of the [`Budget`]: none at first, grown by [`Reservation::cover`].
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    held: Option<OwnedSemaphorePermit>,
    deadline: Instant,
}

/// The budget had no room for a request within its wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom;

impl Budget {
    /// `bytes` of bodies at once (at least 1 KiB); a request waits at most `wait` for room.
    pub fn new(bytes: usize, wait: Duration) -> Arc<Budget> {
        let total_kib = budget_kib(bytes);
        Arc::new(Budget {
            permits: Arc::new(Semaphore::new(total_kib as usize)),
            total_kib,
            wait,
        })
    }

    /// A reservation of nothing yet, whose waits end [`Budget::wait`] from now.
    pub fn reserve(self: &Arc<Self>) -> Reservation {
        Reservation {
            budget: self.clone(),
            held: None,
            deadline: Instant::now() + self.wait,
        }
    }

    /// The budget in bytes.
    pub fn bytes(&self) -> usize {
        usize::try_from(self.total_kib)
            .unwrap_or(usize::MAX)
            .saturating_mul(1024)
    }

    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Why a review (`what`: its size, its values) that found no room is refused.
    pub fn no_room(&self, what: &str) -> String {
        format!(
            "gangplank is judging other large reviews ({} at once at most) and this one ({what}) found no room within {}, so it is refused; retry",
            size_text(self.bytes()),
            wait_text(self.wait)
        )
    }

    /// KiB permits free now.
    pub fn available_kib(&self) -> usize {
        self.permits.available_permits()
    }
}

impl Reservation {
    /// Grows the reservation to cover `bytes` (their KiB, at least one, at most the whole
    /// budget), waiting for room until the deadline. On [`NoRoom`] everything held is
    /// released, so that the refused request holds nothing while it is answered.
    pub async fn cover(&mut self, bytes: usize) -> Result<(), NoRoom> {
        let want = kib(bytes, self.budget.total_kib);
        let held = self.held_kib();
        if want <= held {
            return Ok(());
        }
        let more = self.budget.permits.clone().acquire_many_owned(want - held);
        // `timeout_at` polls the acquisition before its timer: with no time left a request
        // that finds room still gets it.
        match tokio::time::timeout_at(self.deadline, more).await {
            Ok(Ok(permit)) => {
                match self.held.as_mut() {
                    Some(held) => held.merge(permit),
                    None => self.held = Some(permit),
                }
                Ok(())
            }
            _ => {
                self.held = None;
                Err(NoRoom)
            }
        }
    }

    /// The budget this reservation is a share of.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// KiB held now.
    pub fn held_kib(&self) -> u32 {
        self.held
            .as_ref()
            .map_or(0, |p| u32::try_from(p.num_permits()).unwrap_or(u32::MAX))
    }

    /// Gives back everything held (a body over the limit is not kept).
    pub fn release(&mut self) {
        self.held = None;
    }
}

/// `bytes` as people read it: `8 MiB`, `64 KiB`, `1000 bytes`.
fn size_text(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    match bytes {
        0 => "0 bytes".to_string(),
        b if b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b % KIB == 0 => format!("{} KiB", b / KIB),
        b => format!("{b} bytes"),
    }
}

/// `2 s`, `500 ms`.
fn wait_text(wait: Duration) -> String {
    match wait.subsec_millis() {
        0 => format!("{} s", wait.as_secs()),
        _ => format!("{} ms", wait.as_millis()),
    }
}

/// The budget's permits: `bytes` in KiB, at least one; at most what tokio's semaphore holds
/// (`u32` permits are far more than memory: 4 TiB).
fn budget_kib(bytes: usize) -> u32 {
    u32::try_from(bytes / 1024)
        .unwrap_or(u32::MAX)
        .clamp(1, u32::try_from(Semaphore::MAX_PERMITS).unwrap_or(u32::MAX))
}

/// The permits `len` bytes take: their KiB, at least one, at most the budget.
fn kib(len: usize, budget_kib: u32) -> u32 {
    u32::try_from(len.div_ceil(1024))
        .unwrap_or(u32::MAX)
        .clamp(1, budget_kib)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_takes_its_kib_of_the_budget_at_least_one_at_most_all() {
        let budget = budget_kib(8 * 1024 * 1024);
        assert_eq!(budget, 8 * 1024);
        assert_eq!(kib(0, budget), 1);
        assert_eq!(kib(1, budget), 1);
        assert_eq!(kib(11 * 1024 + 1, budget), 12);
        assert_eq!(kib(16 * 1024 * 1024, budget), budget);
    }

    #[test]
    fn a_budget_under_one_kib_is_one_permit() {
        assert_eq!(budget_kib(0), 1);
        assert_eq!(budget_kib(1023), 1);
        assert_eq!(budget_kib(64 * 1024), 64);
    }

    #[test]
    fn sizes_and_waits_read_as_written_in_flags() {
        assert_eq!(size_text(8 * 1024 * 1024), "8 MiB");
        assert_eq!(size_text(64 * 1024), "64 KiB");
        assert_eq!(size_text(1000), "1000 bytes");
        assert_eq!(wait_text(Duration::from_secs(2)), "2 s");
        assert_eq!(wait_text(Duration::from_millis(250)), "250 ms");
        assert_eq!(wait_text(Duration::ZERO), "0 s");
    }

    #[tokio::test]
    async fn a_reservation_grows_and_one_that_finds_no_room_releases_what_it_held() {
        // No wait: a request that finds no room is refused at once.
        let budget = Budget::new(8 * 1024, Duration::ZERO);
        let mut first = budget.reserve();
        assert_eq!(first.cover(3 * 1024).await, Ok(()));
        assert_eq!(first.cover(6 * 1024).await, Ok(()));
        assert_eq!((first.held_kib(), budget.available_kib()), (6, 2));
        let mut second = budget.reserve();
        assert_eq!(second.cover(2 * 1024).await, Ok(()));
        assert_eq!(second.cover(3 * 1024).await, Err(NoRoom));
        assert_eq!((second.held_kib(), budget.available_kib()), (0, 2));
        drop(first);
        assert_eq!(budget.available_kib(), 8);
    }

    #[tokio::test]
    async fn a_body_larger_than_the_budget_takes_all_of_it_once_the_others_are_done() {
        // A deadline, not a measure: the release below comes long before it.
        let budget = Budget::new(4 * 1024, Duration::from_secs(60));
        let mut small = budget.reserve();
        assert_eq!(small.cover(1024).await, Ok(()));
        let mut large = budget.reserve();
        let released = async {
            tokio::task::yield_now().await;
            drop(small);
        };
        let (got, ()) = tokio::join!(large.cover(100 * 1024), released);
        assert_eq!(got, Ok(()));
        assert_eq!((large.held_kib(), budget.available_kib()), (4, 0));
    }
}
