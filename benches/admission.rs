//! Admission hot path on the shipped policy set: a 1 Master + 8 Worker PyTorchJob through
//! mutation then validation (what the apiserver's two webhook calls add up to), and the
//! pieces of it. Figures and the command are in BENCHMARKS.md.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, Criterion};
use gangplank::job::{lookup, JobView};
use gangplank::policy::PolicySet;
use gangplank::review::{self, decide, Input};
use serde_json::Value;

// The allocator the binary uses (src/main.rs), so the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn job() -> Value {
    parse(include_str!("data/pytorchjob-9.yaml"))
}

/// The same 1 Master + 8 Workers as platform teams write it: ~11 KB, 30 env entries per
/// container, volume mounts, an init container, a sidecar, probes, affinity, annotations.
fn platform_job() -> Value {
    parse(include_str!("data/pytorchjob-9-platform.yaml"))
}

/// [`job`] with 63 Workers: the cost must not grow with the pod count.
fn job_64() -> Value {
    let mut job = job();
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 63.into();
    job
}

fn parse(text: &str) -> Value {
    yaml_serde::from_str(text).expect("benchmark job parses")
}

fn policies() -> PolicySet {
    PolicySet::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
        .expect("shipped policies load")
}

fn admission(c: &mut Criterion) {
    let set = policies();
    let input = Input::create(job(), "default");
    let decision = review::review(&set, &input).expect("decides");
    assert!(
        decision.allowed(),
        "benchmark job must be allowed: {:?}",
        decision.violations
    );
    let mutated = decision.mutated.clone();

    let mut g = c.benchmark_group("admission");
    g.bench_function("mutate+validate (1 master + 8 workers)", |b| {
        b.iter(|| review::review(black_box(&set), black_box(&input)))
    });
    for (name, job) in [
        ("mutate+validate (platform job, 1 + 8)", platform_job()),
        ("mutate+validate (1 master + 63 workers)", job_64()),
    ] {
        let input = Input::create(job, "default");
        let decision = review::review(&set, &input).expect("decides");
        assert!(
            decision.allowed(),
            "{name} must be allowed: {:?}",
            decision.violations
        );
        g.bench_function(name, |b| {
            b.iter(|| review::review(black_box(&set), black_box(&input)))
        });
    }
    g.bench_function("mutate", |b| {
        b.iter(|| decide::mutate(black_box(&set), black_box(&input)))
    });
    g.bench_function("validate", |b| {
        b.iter(|| decide::validate(black_box(&set), black_box(&input), black_box(&mutated)))
    });
    g.bench_function("job view", |b| {
        let kind = lookup("kubeflow.org/v1", "PyTorchJob").expect("kind");
        b.iter(|| JobView::build(kind, black_box(&input.object)))
    });
    g.bench_function("rego input", |b| {
        b.iter(|| black_box(&input).build_rego_input())
    });
    g.finish();
}

criterion_group!(benches, admission);

fn main() {
    // As the binary does: no backtrace capture for regorus's internal errors.
    gangplank::no_library_backtraces();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
