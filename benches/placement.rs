//! What the placement search (src/placement) costs a review: where kube-scheduler's order
//! decides, `data.cluster.kube_scheduler` is computed on every review of the job. Three
//! shapes: the reviewer's 1 + 4 gang (Master of the Workers' size without their
//! nodeSelector) on 3 nodes; a 1 + 63 platform gang on a 5,000-node inventory of three
//! pools (the scheduler scores only some nodes there, so every feasible class is a choice);
//! and a shape that exhausts the search's budget ([`gangplank::placement::BUDGET`] states),
//! the most one review can spend. Figures and the command are in BENCHMARKS.md.

use std::hint::black_box;

use criterion::{criterion_group, Criterion};
use gangplank::placement::{kube_scheduler, model::NodeClass};
use gangplank::policy::to_rego::to_rego;
use regorus::Value as RegoValue;
use serde_json::{json, Value};

/// Node classes: (product, cpu cores, memory GiB, GPUs, how many).
fn classes(nodes: &[(&str, i64, i64, i64, u32)]) -> Vec<NodeClass> {
    let doc = json!({"node_classes": nodes.iter().map(|(product, cpu, gib, gpus, size)| json!({
        "size": size,
        "labels": {"nvidia.com/gpu.product": product},
        "taints": [],
        "allocatable": {"cpu": cpu * 1000, "memory": gib << 30, "pods": 110, "nvidia.com/gpu": gpus},
    })).collect::<Vec<_>>()});
    NodeClass::all_of(&doc)
}

/// `n` pods of `gpus` GPUs, `cpu` cores and 64Gi each, selecting `product` (or nothing).
fn replica(name: &str, n: i64, gpus: i64, cpu: i64, product: Option<&str>) -> Value {
    let requests = json!({"cpu": cpu * 1000, "memory": 64_i64 << 30, "nvidia.com/gpu": gpus});
    json!({
        "key": name, "type": name, "replicas": n, "podRequests": requests,
        "nodeSelector": product.map_or(json!({}), |p| json!({"nvidia.com/gpu.product": p})),
        "tolerations": [],
        "placement": {"nonZeroRequests": {"cpu": cpu * 1000, "memory": 64_i64 << 30}, "unmodelled": []},
    })
}

fn input(replicas: Vec<Value>) -> RegoValue {
    to_rego(&json!({"job": {"replicas": replicas}, "object": {"spec": {}}}))
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("placement");
    let small = classes(&[("A100", 32, 256, 8, 4), ("H100", 16, 256, 8, 1)]);
    let reviewer = input(vec![
        replica("Master", 1, 8, 8, None),
        replica("Worker", 4, 8, 8, Some("A100")),
    ]);
    let found = kube_scheduler(&small, 5, &reviewer).unwrap_or_default();
    eprintln!(
        "1+4: {} (placing order {})",
        found["outcome"], found["placingOrder"]
    );
    group.bench_function("1+4 gang, 5 nodes", |b| {
        b.iter(|| black_box(kube_scheduler(&small, 5, &reviewer)))
    });
    // The validation pass of the same job once the mutation wrote its release order: that
    // one order is searched.
    let mut released = serde_json::to_value(&reviewer).expect("input as JSON");
    released["job"]["releaseOrder"] = json!({"types": ["Worker", "Master"]});
    let released = to_rego(&released);
    let found = kube_scheduler(&small, 5, &released).unwrap_or_default();
    eprintln!("1+4 released Worker,Master: {}", found["outcome"]);
    group.bench_function("1+4 gang released Worker,Master, 5 nodes", |b| {
        b.iter(|| black_box(kube_scheduler(&small, 5, &released)))
    });
    // The largest `either` found over 1–6 wide pods of 4 GPUs beside 2–32 on 32-cpu nodes
    // with smaller 16-cpu ones: every order searched, then the orders of the two types for
    // one that places the gang (the mutation pass).
    let wide = classes(&[("A100", 32, 256, 8, 16), ("H100", 16, 256, 8, 8)]);
    let many = input(vec![
        replica("Master", 6, 4, 8, None),
        replica("Worker", 32, 4, 8, Some("A100")),
    ]);
    let found = kube_scheduler(&wide, 24, &many).unwrap_or_default();
    eprintln!(
        "6+32: {} in {} states (placing order {})",
        found["outcome"], found["states"], found["placingOrder"]
    );
    group.bench_function("6+32 either, 24 nodes", |b| {
        b.iter(|| black_box(kube_scheduler(&wide, 24, &many)))
    });
    let pools = classes(&[
        ("H100", 192, 2048, 8, 4000),
        ("A100", 96, 1024, 8, 900),
        ("L4", 48, 192, 4, 100),
    ]);
    let platform = input(vec![
        replica("Master", 1, 8, 16, None),
        replica("Worker", 63, 8, 16, Some("H100")),
    ]);
    group.bench_function("1+63 gang, 5,000 nodes", |b| {
        b.iter(|| black_box(kube_scheduler(&pools, 5_000, &platform)))
    });
    let volcano = |job: &RegoValue| {
        let mut doc = serde_json::to_value(job).expect("input as JSON");
        for r in doc["job"]["replicas"].as_array_mut().into_iter().flatten() {
            r["schedulerName"] = json!("volcano");
            r["lastPodName"] = json!(format!(
                "job-{}-{}",
                r["type"].as_str().unwrap_or("x").to_lowercase(),
                r["replicas"].as_i64().unwrap_or(1) - 1
            ));
        }
        to_rego(&doc)
    };
    let reviewer_volcano = volcano(&reviewer);
    let found = kube_scheduler(&small, 5, &reviewer_volcano).unwrap_or_default();
    eprintln!("volcano 1+4: {} ({})", found["outcome"], found["order"]);
    group.bench_function("Volcano: 1+4 gang, 5 nodes", |b| {
        b.iter(|| black_box(kube_scheduler(&small, 5, &reviewer_volcano)))
    });
    let platform_volcano = volcano(&platform);
    group.bench_function("Volcano: 1+63 gang, 5,000 nodes", |b| {
        b.iter(|| black_box(kube_scheduler(&pools, 5_000, &platform_volcano)))
    });
    let mixed = classes(&[
        ("A100", 64, 512, 8, 6),
        ("A100", 32, 256, 8, 6),
        ("A100", 96, 512, 8, 4),
    ]);
    let budget = input(vec![
        replica("PS", 12, 3, 4, None),
        replica("Worker", 16, 2, 2, None),
        replica("Evaluator", 6, 1, 8, None),
    ]);
    let found = kube_scheduler(&mixed, 16, &budget).unwrap_or_default();
    eprintln!("budget shape: {}", found["outcome"]);
    group.bench_function("mixed sizes past the budget", |b| {
        b.iter(|| black_box(kube_scheduler(&mixed, 16, &budget)))
    });
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
