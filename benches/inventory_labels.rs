//! The cluster inventory against label cardinality (issue 44), offline: the same GPU nodes
//! grouped ever more finely by their network-topology labels, what the inventory holds at
//! each grain, what holds it, and what a rolling relabel of every node costs.
//!
//! The fixture is issue 44's: Nodes shaped as p5.48xlarge nodes (tests/support/realistic.rs:
//! 18 KB each, GFD, NFD and provider labels, 50 images, managedFields), one node group in
//! four zones, an EC2 layer-3 network node per `4 × grain` nodes, so a node class per
//! `grain` nodes (`INVENTORY_GRAINS`, default 4,16,64,1: 1 is a class per node).
//! `INVENTORY_NODES` (default 10,000) Nodes per grain, each grain in a process of its own:
//! 1. the policies loaded, the platform job (benches/data/pytorchjob-9-platform.yaml)
//!    reviewed without an inventory;
//! 2. the first list, serialised as the API server sends it and decoded as the watcher does
//!    into the `NodeIndex` (the default bound, --inventory-max-mib), then summarised and
//!    published; then the job reviewed with it (its projection of `data.cluster` built and
//!    cached by the first review), the first 50 reviews timed apart and the steady state's
//!    p50/p99 after a warm-up pass, as without the inventory (`INVENTORY_REVIEWS`, 500), and
//!    the first 50 after a second publish of the same nodes;
//! 3. a rolling kernel upgrade: NFD's `kernel-version.full` changed on every node, one node
//!    after another, at `INVENTORY_CHURN_RATE` events per second (default 100), with a summary
//!    and publish on every 250 ms tick in which something changed (as the watch does) and the
//!    job reviewed after each (its projection built again).
//!
//! Bytes are counted by a counting allocator (live bytes asked for, not what the allocator
//! rounds them to), per phase: the index after the list, the published summary (with its
//! hostnames), the projection (after the reviews), the high-water mark of the list. RSS is
//! the process's. Across grains the parent fits bytes = per node × nodes + per class ×
//! classes and prints both.
//!
//! Run: `cargo bench --bench inventory_labels`. Figures: BENCHMARKS.md ("label cardinality").

#[path = "../tests/support/realistic.rs"]
mod realistic;

use std::alloc::{GlobalAlloc, Layout};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use gangplank::cluster::nodes::{NodeFacts, NodeIndex};
use gangplank::cluster::{ClusterHandle, Inventory};
use gangplank::policy::PolicySet;
use gangplank::review::{self, Input};
use realistic::rss_mib;
use serde_json::{json, Value};

/// mimalloc, counting the bytes live and their high-water mark.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size as isize - layout.size() as isize);
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn mib(bytes: isize) -> f64 {
    bytes as f64 / 1048576.0
}

/// The default bound of `serve` (--inventory-max-mib).
const MAX_BYTES: usize = gangplank::cluster::watch::DEFAULT_MAX_MIB << 20;

fn env_list(var: &str, default: &str) -> Vec<usize> {
    let text = std::env::var(var).unwrap_or_else(|_| default.into());
    text.split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn env_number(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let exe = std::env::current_exe().expect("own path");
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let at = |k: usize| args.get(i + k).and_then(|v| v.parse().ok());
        return child(at(1).unwrap_or(10_000), at(2).unwrap_or(4));
    }
    // `cargo test --all-targets` runs benches once as tests: a smoke run of 200 nodes.
    let (nodes, grains) = if args.iter().any(|a| a == "--bench") {
        (
            env_list("INVENTORY_NODES", "10000"),
            env_list("INVENTORY_GRAINS", "4,16,64,1"),
        )
    } else {
        (vec![200], vec![4])
    };
    for n in nodes {
        let results: Vec<(f64, f64, f64)> = grains
            .iter()
            .filter_map(|&grain| run_child(&exe, n, grain))
            .collect();
        fit(n, &results);
    }
}

/// Runs one grain in a process of its own; its (classes, index bytes, all bytes) line.
fn run_child(exe: &Path, n: usize, grain: usize) -> Option<(f64, f64, f64)> {
    let out = Command::new(exe)
        .args(["--child", &n.to_string(), &grain.to_string()])
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "grain {grain}: {}", out.status);
    let line = text.lines().find_map(|l| l.strip_prefix("RESULT "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    (v.len() == 3).then(|| (v[0], v[1], v[2]))
}

/// Bytes = per node × n + per class × classes, fitted over the grains (least squares).
fn fit(n: usize, results: &[(f64, f64, f64)]) {
    if results.len() < 2 {
        return;
    }
    let line = |pick: fn(&(f64, f64, f64)) -> f64| {
        let k = results.len() as f64;
        let mx = results.iter().map(|r| r.0).sum::<f64>() / k;
        let my = results.iter().map(pick).sum::<f64>() / k;
        let sxy: f64 = results.iter().map(|r| (r.0 - mx) * (pick(r) - my)).sum();
        let sxx: f64 = results.iter().map(|r| (r.0 - mx).powi(2)).sum();
        let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        (slope, (my - slope * mx) / n as f64)
    };
    for (what, (per_class, per_node)) in [
        ("the node index", line(|r| r.1)),
        ("index + published summary + projection", line(|r| r.2)),
    ] {
        println!(
            "== fit over {} grains at {n} nodes, {what}: {:.2} MiB per 1,000 nodes + {:.2} MiB per 1,000 classes",
            results.len(),
            per_node * 1000.0 / 1048576.0,
            per_class * 1000.0 / 1048576.0
        );
    }
}

fn policies() -> PolicySet {
    PolicySet::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
        .expect("shipped policies load")
}

fn job() -> Input {
    let text = include_str!("data/pytorchjob-9-platform.yaml");
    let job: Value = yaml_serde::from_str(text).expect("benchmark job parses");
    Input::create(job, "team-7")
}

/// p50 and the `upper` quantile of `count` reviews, µs (`P99`, or `SLOWEST`).
fn review_latency(set: &PolicySet, input: &Input, count: usize, upper: f64) -> (f64, f64) {
    let mut times: Vec<Duration> = (0..count.max(1))
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(review::review(set, input).expect("decides"));
            t.elapsed()
        })
        .collect();
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    (at(0.50).as_secs_f64() * 1e6, at(upper).as_secs_f64() * 1e6)
}

const P99: f64 = 0.99;
const SLOWEST: f64 = 1.0;

/// How many reviews right after a publish are timed apart from the steady state.
const WARM_UP: usize = 50;

fn decode(node: &Value) -> NodeFacts {
    let bytes = serde_json::to_vec(node).expect("node serialises");
    serde_json::from_slice(&bytes).expect("node decodes")
}

fn child(n: usize, grain: usize) {
    let reviews = env_number("INVENTORY_REVIEWS", 500);
    let handle = ClusterHandle::default();
    let set = policies().with_cluster(handle.clone());
    let input = job();
    review_latency(&set, &input, reviews, P99);
    let (p50_without, p99_without) = review_latency(&set, &input, reviews, P99);
    let template = realistic::node_template();
    let (rss0, live0) = (rss_mib(), live());

    // The first list.
    let mut index = NodeIndex::new(MAX_BYTES);
    PEAK.store(live(), Ordering::Relaxed);
    let started = Instant::now();
    index.begin_relist();
    for i in 0..n {
        index.apply(&decode(&realistic::node_grained(&template, i, grain)));
    }
    index.end_relist();
    let list_time = started.elapsed();
    let (rss_index, live_index, peak_list) = (rss_mib(), live(), PEAK.load(Ordering::Relaxed));
    let t = Instant::now();
    let summary = index.summary(Inventory::default());
    let summary_time = t.elapsed();
    let live_summary = live();
    handle.publish_summary(summary);
    let (rss_published, live_published) = (rss_mib(), live());
    let t = Instant::now();
    review::review(&set, &input).expect("decides");
    let first_review = t.elapsed();
    // As without the inventory, a pass of warm-up first. With the inventory the job is a new
    // request class, whose program compiles beside the first ~25 reviews (src/policy/
    // classes.rs), as at the process's first reviews: those are timed on their own.
    let (warm_p50, warm_max) = review_latency(&set, &input, WARM_UP, SLOWEST);
    review_latency(&set, &input, reviews, P99);
    let (p50_with, p99_with) = review_latency(&set, &input, reviews, P99);
    let (rss_reviewed, live_reviewed) = (rss_mib(), live());
    let sizes = index.sizes();
    // A second publish of the same nodes: a new view and projection, the same request class.
    handle.publish_summary(index.summary(Inventory::default()));
    let (again_p50, again_max) = review_latency(&set, &input, WARM_UP, SLOWEST);

    // A rolling kernel upgrade, a node after another.
    let rate = env_number("INVENTORY_CHURN_RATE", 100).max(1);
    let per_tick = (rate / 4).max(1);
    let (mut changes, mut publishes, mut pending) = (0usize, 0usize, false);
    let (mut apply_time, mut publish_time) = (Duration::ZERO, Duration::ZERO);
    let mut high_classes = 0usize;
    for i in 0..n {
        let mut node = realistic::node_grained(&template, i, grain);
        node["metadata"]["labels"][realistic::KERNEL_LABEL] =
            json!("6.1.115-126.197.amzn2023.x86_64");
        realistic::heartbeat(&mut node, i as u64);
        let facts = decode(&node);
        let t = Instant::now();
        let changed = index.apply(&facts);
        apply_time += t.elapsed();
        changes += usize::from(changed);
        pending |= changed;
        if (i + 1) % per_tick == 0 || i + 1 == n {
            high_classes = high_classes.max(index.sizes().classes);
            if std::mem::take(&mut pending) {
                let t = Instant::now();
                handle.publish_summary(index.summary(Inventory::default()));
                review::review(&set, &input).expect("decides");
                publish_time += t.elapsed();
                publishes += 1;
            }
        }
    }
    let (rss_churned, live_churned) = (rss_mib(), live());
    let rollout = n as f64 / rate as f64;
    let cpu = apply_time + publish_time;

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let index_bytes = live_index - live0;
    let all_bytes = live_reviewed - live0;
    println!(
        "== {n} nodes, a class per {grain}: {} classes, {} left out; {:.1} MiB estimated (bound {} MiB){}",
        sizes.classes,
        sizes.left_out,
        sizes.bytes as f64 / 1048576.0,
        MAX_BYTES >> 20,
        index
            .incomplete()
            .map(|why| format!("\n   says: {why}"))
            .unwrap_or_default()
    );
    println!(
        "   live bytes: index {:.1} MiB (list high-water +{:.1}), summary + hostnames {:.1}, projection and reviews {:.1}: {:.1} MiB in all",
        mib(index_bytes),
        mib(peak_list - live_index),
        mib(live_summary - live_index),
        mib(live_reviewed - live_published),
        mib(all_bytes)
    );
    println!(
        "   per 1,000 nodes {:.2} MiB, per 1,000 classes {:.2} MiB (all of it over nodes, over classes)",
        mib(all_bytes) * 1000.0 / n as f64,
        mib(all_bytes) * 1000.0 / sizes.classes.max(1) as f64
    );
    println!(
        "   RSS: {rss0:.1} policies only -> {rss_index:.1} index -> {rss_published:.1} published -> {rss_reviewed:.1} reviewed (+{:.1} MiB)",
        rss_reviewed - rss0
    );
    println!(
        "   first list {:.2} s; summary {:.1} ms; first review (projection) {:.1} ms; review p50/p99 {p50_without:.0}/{p99_without:.0} µs without inventory, {p50_with:.0}/{p99_with:.0} µs with it ({:.2}x at p99)",
        list_time.as_secs_f64(),
        summary_time.as_secs_f64() * 1e3,
        first_review.as_secs_f64() * 1e3,
        p99_with / p99_without
    );
    println!(
        "   the first {WARM_UP} reviews after the publish (before the steady state above): p50 {warm_p50:.0} µs, slowest {warm_max:.0} µs; after a second publish: p50 {again_p50:.0} µs, slowest {again_max:.0} µs (the first builds the projection)"
    );
    println!(
        "   rolling kernel upgrade at {rate}/s: {changes} changes, {publishes} publishes, up to {high_classes} classes; apply {:.1} µs per event, summary + publish + projection {:.1} ms each; {:.2} s CPU = {:.2} % of a core over the {:.0} s rollout; live after {:.1} MiB, RSS {rss_churned:.1}",
        apply_time.as_secs_f64() * 1e6 / n.max(1) as f64,
        publish_time.as_secs_f64() * 1e3 / publishes.max(1) as f64,
        cpu.as_secs_f64(),
        cpu.as_secs_f64() / rollout * 100.0,
        rollout,
        mib(live_churned - live0)
    );
    println!("   load average: {}", load.trim());
    println!("RESULT {} {} {}", sizes.classes, index_bytes, all_bytes);
}
