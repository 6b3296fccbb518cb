//! `gangplank check --cluster` over generated clusters and jobs (tests/support/shapes.rs),
//! offline: every pair's files parse, the check never fails to decide, and the capacity
//! policy's verdicts (admitted, refused, undecided = warned) are counted per aim. The counts
//! are printed (`cargo test --test capacity_shapes -- --nocapture`); comparing them with
//! kube-scheduler is the differential test's business, not this one's.
//! `GANGPLANK_SHAPES_DIR=DIR` keeps each pair as `DIR/nodes-<seed>.yaml` and `DIR/job-<seed>.yaml`.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;
use support::shapes::{generate, Aim, Pair, MAX_NODES, MAX_PODS};

const PAIRS: u64 = 300;
/// Checks running at once: the machine has two cores.
const WORKERS: u64 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    Admitted,
    Refused,
    Undecided,
}

/// The capacity policy's verdict on `pair`, from `check -o json`; panics with the pair's seed
/// on anything but a decision.
fn check(dir: &Path, pair: &Pair) -> Verdict {
    let seed = pair.seed;
    let nodes = dir.join(format!("nodes-{seed}.yaml"));
    let job = dir.join(format!("job-{seed}.yaml"));
    std::fs::write(&nodes, pair.cluster.to_nodes_yaml()).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&job, pair.job.to_job_yaml()).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(support::gangplank())
        .arg("check")
        .arg("-o")
        .arg("json")
        .arg("--policies")
        .arg(support::repo().join("policies"))
        .arg("--cluster")
        .arg(&nodes)
        .arg(&job)
        .output()
        .unwrap_or_else(|e| panic!("gangplank check: {e}"));
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "seed {seed}: check exited {code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("seed {seed}: check output is not JSON: {e}"));
    let outcome = &report[0];
    assert_eq!(
        outcome["result"],
        "decided",
        "seed {seed}: {outcome}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let capacity: Vec<&Value> = outcome["decision"]["violations"]
        .as_array()
        .map(|v| v.iter().filter(|v| v["policy"] == "capacity").collect())
        .unwrap_or_default();
    if capacity.iter().any(|v| v["action"] == "deny") {
        Verdict::Refused
    } else if capacity.iter().any(|v| v["action"] == "warn") {
        Verdict::Undecided
    } else {
        Verdict::Admitted
    }
}

/// What the generator writes reads back as what it meant, within the size limits.
fn assert_well_formed(pair: &Pair) {
    let seed = pair.seed;
    assert!(pair.cluster.node_count() <= MAX_NODES, "seed {seed}");
    assert!(pair.job.total_pods() <= MAX_PODS, "seed {seed}");
    let job: Value = yaml_serde::from_str(&pair.job.to_job_yaml())
        .unwrap_or_else(|e| panic!("seed {seed}: job YAML: {e}"));
    assert_eq!(job, pair.job.to_json(), "seed {seed}");
    let nodes: Value = yaml_serde::from_str(&pair.cluster.to_nodes_yaml())
        .unwrap_or_else(|e| panic!("seed {seed}: nodes YAML: {e}"));
    let items = nodes["items"].as_array().map_or(0, Vec::len);
    assert_eq!(
        u32::try_from(items).ok(),
        Some(pair.cluster.node_count()),
        "seed {seed}"
    );
    let pods = pair.job.pods();
    assert_eq!(
        u32::try_from(pods.len()).ok(),
        Some(pair.job.total_pods()),
        "seed {seed}"
    );
    for pod in &pods {
        let requests = &pod.spec["containers"][0]["resources"]["requests"];
        assert!(requests.is_object(), "seed {seed}: {}", pod.spec);
    }
    assert_eq!(
        format!("{pair:?}"),
        format!("{:?}", generate(seed)),
        "seed {seed}: same seed, same pair"
    );
}

#[test]
fn generated_pairs_check_without_error_and_cover_every_verdict() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // GANGPLANK_SHAPES_DIR keeps the pairs' files, to look at or to feed a scheduler.
    let kept = std::env::var_os("GANGPLANK_SHAPES_DIR").map(std::path::PathBuf::from);
    let dir_path = kept.as_deref().unwrap_or(dir.path());
    let counts: Mutex<BTreeMap<(Aim, Verdict), u32>> = Mutex::default();
    std::thread::scope(|s| {
        for worker in 0..WORKERS {
            let (dir, counts) = (dir_path, &counts);
            s.spawn(move || {
                for seed in (0..PAIRS).filter(|seed| seed % WORKERS == worker) {
                    let pair = generate(seed);
                    assert_well_formed(&pair);
                    let verdict = check(dir, &pair);
                    let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
                    *counts.entry((pair.aim, verdict)).or_default() += 1;
                }
            });
        }
    });
    let counts = counts.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut totals: BTreeMap<Verdict, u32> = BTreeMap::new();
    for ((aim, verdict), n) in &counts {
        println!("{aim:?} {verdict:?}: {n}");
        *totals.entry(*verdict).or_default() += n;
    }
    println!("{PAIRS} pairs: {totals:?}");
    for verdict in [Verdict::Admitted, Verdict::Refused, Verdict::Undecided] {
        assert!(
            totals.get(&verdict).copied().unwrap_or(0) > 0,
            "no pair was {verdict:?}: the generator lost its spread ({totals:?})"
        );
    }
}
