//! The cluster inventory at 10,000 to 100,000 GPU nodes, offline: what `serve`'s watch
//! holds and what each event costs, fed the same objects a watch of a real cluster sends.
//!
//! Each size runs in a child process of its own (so RSS is that size's alone):
//! 1. the policies are loaded and the platform job (benches/data/pytorchjob-9-platform.yaml)
//!    is reviewed `INVENTORY_REVIEWS` (2,000) times without an inventory (p50, p99);
//! 2. the first list: N realistic Nodes (tests/support/realistic.rs: 18 KB each, 53 labels,
//!    50 images, managedFields) are serialised as the API server sends them and decoded as
//!    the watcher decodes them ([`NodeFacts`]) into the [`NodeIndex`], then summarised and
//!    published as the watch does; then 50,000 claims, 10,000 NetworkPolicies and 1,000
//!    Namespaces are kept stripped ([`Cache`]) in the caches and indexed ([`Incremental`]);
//! 3. the review again, with that inventory (p50, p99);
//! 4. churn: every Node's heartbeat once (what the kubelets send in 5 minutes at the
//!    defaults of `nodeStatusReportFrequency`), decoded and applied: the changes seen (0
//!    expected: nothing read changed) and the CPU per event; then a node group of 2,000 new
//!    Nodes added at once and drained at once, with the publishes they cause.
//!
//! `--whole N` measures what the watch held before this change instead: whole `Node`
//! objects, as kube-runtime's reflector kept them (N = 10,000 and 30,000 by default: 100,000
//! would need 6.5 GB).
//!
//! `INVENTORY_NODES_FILE=nodes.ndjson` reads Nodes from a file (one JSON object per line,
//! e.g. `kubectl get nodes -o json | jq -c '.items[]'`) instead of generating them: a
//! platform team can measure its own nodes.
//!
//! Run: `cargo bench --bench inventory_scale` (sizes: `INVENTORY_SIZES=10000,30000,100000`).
//! Figures: BENCHMARKS.md.

#[path = "../tests/support/realistic.rs"]
mod realistic;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gangplank::cluster::cache::{Cache, Kept};
use gangplank::cluster::nodes::{NodeFacts, NodeIndex};
use gangplank::cluster::objects::{Cached, Incremental};
use gangplank::cluster::{ClusterHandle, Inventory};
use gangplank::policy::PolicySet;
use gangplank::review::{self, Input};
use kube::api::DynamicObject;
use realistic::rss_mib;
use serde_json::Value;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Reviews per latency measurement (`INVENTORY_REVIEWS`, default 2,000).
fn reviews() -> usize {
    std::env::var("INVENTORY_REVIEWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}
/// Objects besides the Nodes (`INVENTORY_OBJECTS=claims,networkpolicies,namespaces`).
fn object_counts() -> (usize, usize, usize) {
    let text = std::env::var("INVENTORY_OBJECTS").unwrap_or_else(|_| "50000,10000,1000".into());
    let n: Vec<usize> = text
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    match n[..] {
        [claims, policies, namespaces] => (claims, policies, namespaces.max(1)),
        _ => (50_000, 10_000, 1_000),
    }
}
const POOL: usize = 2_000;
/// The default bound of `serve` (--inventory-max-mib), so a run shows what is left out.
const MAX_BYTES: usize = gangplank::cluster::watch::DEFAULT_MAX_MIB << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let exe = std::env::current_exe().expect("own path");
    // `cargo test --all-targets` runs benches once as tests: then a smoke run of 200 nodes
    // and a few objects, so the code path is exercised without the hours a debug build of
    // 100,000 nodes would take.
    let measuring = args.iter().any(|a| a == "--bench" || a.ends_with("-child"));
    if !measuring {
        let smoke = [
            ("INVENTORY_OBJECTS", "500,100,10"),
            ("INVENTORY_REVIEWS", "20"),
        ];
        return run_child(&exe, "--child", 200, &smoke);
    }
    if let Some(n) = size_after(&args, "--child") {
        return child(n);
    }
    if let Some(n) = size_after(&args, "--whole-child") {
        return whole_child(n);
    }
    for n in sizes("INVENTORY_SIZES", "10000,30000,100000") {
        run_child(&exe, "--child", n, &[]);
    }
    for n in sizes("INVENTORY_WHOLE_SIZES", "10000,30000") {
        run_child(&exe, "--whole-child", n, &[]);
    }
}

/// The node count after `flag` (10,000 when it is missing or not a number), if `flag` is
/// among `args`.
fn size_after(args: &[String], flag: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == flag)?;
    Some(
        args.get(i + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(10_000),
    )
}

/// The node counts listed in the environment variable `var` (comma-separated), or `default`.
fn sizes(var: &str, default: &str) -> Vec<usize> {
    let text = std::env::var(var).unwrap_or_else(|_| default.into());
    text.split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// Runs this bench again as `mode n` in a process of its own, with `env` added.
fn run_child(exe: &Path, mode: &str, n: usize, env: &[(&str, &str)]) {
    let status = Command::new(exe)
        .args([mode, &n.to_string()])
        .envs(env.iter().copied())
        .status()
        .expect("child runs");
    assert!(status.success(), "{mode} {n}: {status}");
}

/// CPU time of this process so far.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of /proc/PID/stat; 12 and 13 after ")".
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// Nodes as the API server sends them: from INVENTORY_NODES_FILE, or generated.
fn node_bytes(n: usize) -> Box<dyn Iterator<Item = Vec<u8>>> {
    if let Ok(path) = std::env::var("INVENTORY_NODES_FILE") {
        let text = std::fs::read_to_string(&path).expect("INVENTORY_NODES_FILE reads");
        let lines: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
        return Box::new(lines.into_iter().cycle().take(n));
    }
    let template = realistic::node_template();
    Box::new(
        (0..n).map(move |i| {
            serde_json::to_vec(&realistic::node(&template, i)).expect("node serialises")
        }),
    )
}

fn job() -> Input {
    let text = include_str!("data/pytorchjob-9-platform.yaml");
    let job: Value = yaml_serde::from_str(text).expect("benchmark job parses");
    Input::create(job, "team-7")
}

fn policies() -> PolicySet {
    PolicySet::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
        .expect("shipped policies load")
}

/// p50 and p99 of [`reviews`] reviews, µs.
fn review_latency(set: &PolicySet, input: &Input) -> (f64, f64) {
    let mut times: Vec<Duration> = (0..reviews())
        .map(|_| {
            let t = Instant::now();
            let decision = review::review(set, input).expect("decides");
            std::hint::black_box(decision);
            t.elapsed()
        })
        .collect();
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    (at(0.50).as_secs_f64() * 1e6, at(0.99).as_secs_f64() * 1e6)
}

fn child(n: usize) {
    let handle = ClusterHandle::default();
    let set = policies().with_cluster(handle.clone());
    let input = job();
    review_latency(&set, &input);
    let (p50_without, p99_without) = review_latency(&set, &input);
    let base = rss_mib();

    // The first list, decoded as the watcher decodes it, into the index.
    let mut index = NodeIndex::new(MAX_BYTES);
    let mut decode = Duration::ZERO;
    let mut bytes_sent = 0usize;
    let started = Instant::now();
    index.begin_relist();
    for bytes in node_bytes(n) {
        bytes_sent += bytes.len();
        let t = Instant::now();
        let node: NodeFacts = serde_json::from_slice(&bytes).expect("node decodes");
        index.apply(&node);
        decode += t.elapsed();
    }
    index.end_relist();
    let indexed_nodes = rss_mib();
    let t = Instant::now();
    handle.publish_summary(index.summary(Inventory::default()));
    let publish = t.elapsed();
    let listed = started.elapsed();
    let after_nodes = rss_mib();
    let sizes = index.sizes();

    // Claims, NetworkPolicies, Namespaces: stripped into the caches, then indexed.
    // Streamed, as a watch receives them: one object decoded at a time.
    let cache = |kind: &'static str, items: &mut dyn Iterator<Item = Value>| -> Cache {
        let mut cache = Cache::new(kind);
        cache.begin_relist();
        for item in items {
            let bytes = serde_json::to_vec(&item).expect("serialises");
            let object: DynamicObject = serde_json::from_slice(&bytes).expect("decodes");
            cache.apply(object);
        }
        cache.end_relist();
        cache
    };
    let (claim_count, policy_count, namespace_count) = object_counts();
    let namespaces = cache(
        "Namespace",
        &mut (0..namespace_count).map(realistic::namespace),
    );
    let claims = cache(
        "PersistentVolumeClaim",
        &mut (0..claim_count).map(|i| realistic::claim(i, namespace_count)),
    );
    let policies_cached = cache(
        "NetworkPolicy",
        &mut (0..policy_count).map(|i| realistic::network_policy(i, namespace_count)),
    );
    let objects_of = |c: &Cache| -> Vec<Arc<Kept>> { c.objects().unwrap_or_default() };
    let (namespace_list, claim_list, policy_list) = (
        objects_of(&namespaces),
        objects_of(&claims),
        objects_of(&policies_cached),
    );
    let cached_objects = rss_mib();
    let mut incremental = Incremental::default();
    let t = Instant::now();
    let objects = incremental.update(
        &Cached {
            claims: Some(&claim_list),
            network_policies: Some(&policy_list),
            namespaces: Some(&namespace_list),
        },
        MAX_BYTES.saturating_sub(sizes.bytes),
    );
    let object_sizes = objects.sizes();
    handle.publish_objects(objects);
    let index_objects = t.elapsed();
    let after_objects = rss_mib();

    review_latency(&set, &input);
    let (p50_with, p99_with) = review_latency(&set, &input);
    let after_reviews = rss_mib();

    // Churn: every node's heartbeat once.
    let template = realistic::node_template();
    let mut changes = 0usize;
    let cpu_before = cpu();
    let mut beat_time = Duration::ZERO;
    for i in 0..n {
        let mut node = realistic::node(&template, i);
        realistic::heartbeat(&mut node, i as u64);
        let bytes = serde_json::to_vec(&node).expect("serialises");
        let t = Instant::now();
        let facts: NodeFacts = serde_json::from_slice(&bytes).expect("decodes");
        changes += usize::from(index.apply(&facts));
        beat_time += t.elapsed();
    }
    let _ = cpu_before;
    let per_beat = beat_time / n.max(1) as u32;
    let share = beat_time.as_secs_f64() / 300.0 * 100.0;

    // A node group of 2,000 added at once, then drained: publishes at most every 250 ms,
    // so count the summary builds a burst needs as the watch would (one per tick).
    let t = Instant::now();
    let mut added = 0usize;
    for i in n..n + POOL {
        let bytes = serde_json::to_vec(&realistic::node(&template, i)).expect("serialises");
        let facts: NodeFacts = serde_json::from_slice(&bytes).expect("decodes");
        added += usize::from(index.apply(&facts));
    }
    let apply_pool = t.elapsed();
    let t = Instant::now();
    handle.publish_summary(index.summary(Inventory::default()));
    let publish_after_pool = t.elapsed();
    let t = Instant::now();
    for i in n..n + POOL {
        let name = realistic::node(&template, i)["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        index.delete(&name);
    }
    let drain_pool = t.elapsed();

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "== {n} nodes (realistic, {} bytes as sent on average)",
        bytes_sent / n.max(1)
    );
    println!(
        "   index: {} nodes in {} classes, {} left out, {:.1} MiB estimated",
        sizes.nodes,
        sizes.classes,
        sizes.left_out,
        sizes.bytes as f64 / 1048576.0
    );
    println!(
        "   RSS: {base:.1} MiB policies only -> {indexed_nodes:.1} with the node index -> {after_nodes:.1} with the nodes published (+{:.1}) -> {cached_objects:.1} with {} claims, {} NetworkPolicies, {} Namespaces cached -> {after_objects:.1} indexed (+{:.1} in all; {:.1} MiB estimated) -> {after_reviews:.1} after reviews",
        after_nodes - base,
        object_sizes.claims,
        object_sizes.network_policies,
        object_sizes.namespaces,
        after_objects - after_nodes,
        object_sizes.bytes as f64 / 1048576.0,
    );
    println!(
        "   first list: {:.2} s in all ({:.2} s decoding and indexing, {:.1} µs per node); summary + publish {:.1} ms; objects indexed in {:.0} ms",
        listed.as_secs_f64(),
        decode.as_secs_f64(),
        decode.as_secs_f64() * 1e6 / n.max(1) as f64,
        publish.as_secs_f64() * 1e3,
        index_objects.as_secs_f64() * 1e3
    );
    println!(
        "   review p50/p99: {p50_without:.0}/{p99_without:.0} µs without inventory, {p50_with:.0}/{p99_with:.0} µs with it ({:.2}x at p99)",
        p99_with / p99_without
    );
    println!(
        "   heartbeat of every node: {changes} changes seen; {:.1} µs per event; {:.2} s in all = {share:.2} % of one core over 5 minutes",
        per_beat.as_secs_f64() * 1e6,
        beat_time.as_secs_f64()
    );
    println!(
        "   node group of {POOL}: {added} changes applied in {:.0} ms, one summary + publish {:.1} ms; drained in {:.0} ms",
        apply_pool.as_secs_f64() * 1e3,
        publish_after_pool.as_secs_f64() * 1e3,
        drain_pool.as_secs_f64() * 1e3
    );
    println!("   load average: {}", load.trim());
    // The caches live as long as the watch's do.
    std::hint::black_box((namespaces, claims, policies_cached));
}

/// Before: whole Nodes kept, as the reflector's store did.
fn whole_child(n: usize) {
    let base = rss_mib();
    let mut kept: Vec<Arc<k8s_openapi::api::core::v1::Node>> = Vec::with_capacity(n);
    for bytes in node_bytes(n) {
        kept.push(Arc::new(
            serde_json::from_slice(&bytes).expect("node decodes"),
        ));
    }
    let after = rss_mib();
    println!(
        "== before (whole Nodes, as the reflector kept them): {n} nodes: RSS +{:.1} MiB ({:.1} MiB per 1,000)",
        after - base,
        (after - base) / n as f64 * 1000.0
    );
    std::hint::black_box(kept);
}
