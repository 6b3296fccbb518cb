//! How lookups are scheduled: the images of one job at once, and one request per tag however
//! many reviews ask for it at the same time. The registry is a small server in the test that
//! counts what it is asked.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gangplank::images::{Pinner, Settings};
use serde_json::Value;
use support::held_registry::{held_registry, DIGEST};
use support::registry::{image_findings, job_running, policies_with, review_pinned};
use tokio::sync::Notify;

/// A registry that holds every manifest request until `wait_for` of them have arrived (or
/// the test's guard fires), then answers each with [`DIGEST`]; counts requests.
struct Gate {
    arrived: AtomicUsize,
    wait_for: usize,
    open: Notify,
}

async fn gated_registry(gate: Arc<Gate>) -> String {
    held_registry(move |_path| {
        let gate = Arc::clone(&gate);
        async move {
            let opened = gate.open.notified();
            if gate.arrived.fetch_add(1, Ordering::SeqCst) + 1 >= gate.wait_for {
                gate.open.notify_waiters();
            } else {
                // Never longer than the test's own guard.
                let _ = tokio::time::timeout(Duration::from_secs(30), opened).await;
            }
        }
    })
    .await
}

fn settings(host: &str) -> Settings {
    Settings {
        // Longer than the gate's guard: only concurrency can open the gate in time.
        budget: Duration::from_secs(60),
        ..support::registry::settings_for_host(host)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_image_of_a_job_is_looked_up_at_once() {
    let gate = Arc::new(Gate {
        arrived: AtomicUsize::new(0),
        wait_for: 4,
        open: Notify::new(),
    });
    let host = gated_registry(Arc::clone(&gate)).await;
    let images: Vec<String> = (0..4).map(|i| format!("{host}/ml/part-{i}:v1")).collect();
    let set = policies_with(settings(&host));
    let mut input = gangplank::review::Input::create(job_running(&images), "default");
    let pinner = Pinner::default();
    // Looked up one after another, the first request would wait at the gate for the guard's
    // 30 s and this would time out first.
    let pinned = tokio::time::timeout(Duration::from_secs(20), pinner.pin(&set, &mut input)).await;
    let pinning = pinned.expect("the four lookups ran at once and opened the gate");
    assert!(pinning.failures().next().is_none(), "{pinning:?}");
    for image in &images {
        assert_eq!(
            input.images.get(image).and_then(Value::as_str),
            Some(DIGEST)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reviews_of_one_tag_share_one_registry_request() {
    // The gate opens at the first request: answers come at once, counted.
    let gate = Arc::new(Gate {
        arrived: AtomicUsize::new(0),
        wait_for: 1,
        open: Notify::new(),
    });
    let host = gated_registry(Arc::clone(&gate)).await;
    let image = format!("{host}/ml/train:v1");
    let set = Arc::new(policies_with(settings(&host)));
    let pinner = Arc::new(Pinner::default());
    let reviews: Vec<_> = (0..8)
        .map(|_| {
            let (set, pinner, image) = (Arc::clone(&set), Arc::clone(&pinner), image.clone());
            tokio::spawn(async move {
                let job = job_running(std::slice::from_ref(&image));
                review_pinned(&set, &pinner, job).await
            })
        })
        .collect();
    for review in reviews {
        let decision = review.await.expect("review");
        assert!(
            image_findings(&decision).is_empty(),
            "{:?}",
            image_findings(&decision)
        );
    }
    assert_eq!(
        gate.arrived.load(Ordering::SeqCst),
        1,
        "one HEAD for eight reviews"
    );
}
