//! Image digest pinning: what it adds to a review when the digests are cached, what a cold
//! lookup against a loopback registry costs, and reviews per second with pinning on.
//! Figures and the command are in BENCHMARKS.md ("Image digest pinning").
//!
//! The registry is Debian's docker-registry (tests/support/registry.rs); without it the
//! bench prints why and measures nothing.

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, BatchSize, Criterion};
use gangplank::images::{Pinner, Settings};
use gangplank::review::{self, Input};
use serde_json::Value;
use support::registry::{self, Auth, Registry, OCI_INDEX, OCI_MANIFEST};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// benches/data/pytorchjob-9.yaml (1 Master + 8 Workers, the admission bench's job) with
/// `master` and `worker` as the images of its two templates.
fn job(master: &str, worker: &str) -> Value {
    let mut job: Value =
        yaml_serde::from_str(include_str!("data/pytorchjob-9.yaml")).expect("job parses");
    for (replica, image) in [("Master", master), ("Worker", worker)] {
        let pointer =
            format!("/spec/pytorchReplicaSpecs/{replica}/template/spec/containers/0/image");
        *job.pointer_mut(&pointer).expect("image field") = image.into();
    }
    job
}

fn images(c: &mut Criterion) {
    if let Err(why) = registry::binary() {
        eprintln!("images bench skipped: {why}");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let registry = runtime.block_on(Registry::start(Auth::Open));
    runtime.block_on(async {
        registry
            .push_image("bench/train", "v1", OCI_MANIFEST, "train")
            .await;
        registry
            .push_multi_arch("bench/eval", "v1", OCI_INDEX)
            .await;
    });
    let set = registry::policies_with(Settings {
        cache_ttl: Duration::from_secs(3600),
        ..registry::settings_for_host(&registry.host)
    });
    let (train, eval) = (
        registry.image("bench/train", "v1"),
        registry.image("bench/eval", "v1"),
    );
    let tagged = Input::create(job(&train, &eval), "default");
    let pinner = Pinner::default();
    // Warm the cache, and check the bench measures a pinning that works.
    let mut warm = tagged.clone();
    let pinning = runtime.block_on(pinner.pin(&set, &mut warm));
    assert_eq!(pinning.resolved.len(), 2);
    assert!(pinning.failures().next().is_none(), "{pinning:?}");
    let pinned_by_hand = Input::create(
        job(
            &format!(
                "{train}@{}",
                warm.images[&train].as_str().unwrap_or_default()
            ),
            &format!("{eval}@{}", warm.images[&eval].as_str().unwrap_or_default()),
        ),
        "default",
    );

    let mut g = c.benchmark_group("images");
    g.bench_function("pin, 2 images cached", |b| {
        b.iter_batched(
            || tagged.clone(),
            // The input is returned, so that dropping it is not measured.
            |mut input| {
                let pinning = runtime.block_on(pinner.pin(black_box(&set), &mut input));
                (input, pinning)
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("pin, 0 images to resolve (pinned by hand)", |b| {
        b.iter_batched(
            || pinned_by_hand.clone(),
            |mut input| {
                let pinning = runtime.block_on(pinner.pin(black_box(&set), &mut input));
                (input, pinning)
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("mutate+validate, images pinned by hand", |b| {
        b.iter(|| review::review(black_box(&set), black_box(&pinned_by_hand)))
    });
    g.bench_function("pin (2 cached) + mutate+validate", |b| {
        b.iter_batched(
            || tagged.clone(),
            |mut input| {
                runtime.block_on(pinner.pin(&set, &mut input));
                let decision = review::review(black_box(&set), &input);
                (input, decision)
            },
            BatchSize::SmallInput,
        )
    });
    // A new resolver per iteration: empty cache and token cache, new connections.
    g.bench_function(
        "cold resolution, 2 images (OCI manifest + OCI index), loopback registry",
        |b| {
            b.iter_batched(
                || (Pinner::default(), tagged.clone()),
                |(cold, mut input)| {
                    let pinning = runtime.block_on(cold.pin(&set, &mut input));
                    (cold, input, pinning)
                },
                BatchSize::SmallInput,
            )
        },
    );
    g.finish();
}

criterion_group!(benches, images);

fn main() {
    gangplank::no_library_backtraces();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
