//! The differential between the `kueue_queue` policy's quota verdicts and Kueue v0.19.2
//! itself: does Kueue ever reserve quota for the job's Workload?
//!
//! From a fixed seed, [`kueue_shapes`](support::kueue_shapes) generates pairs of Kueue quota
//! shapes (resource groups, flavors, nominal quotas, borrowing and lending limits, cohorts
//! with or without Cohort objects of their own) and a queued PyTorchJob or TFJob. For each
//! pair:
//!
//! - gangplank's verdict: `gangplank check --cluster <a node + the pair's Kueue objects>
//!   -o json <the job>`, the kueue_queue policy's alone: refused, admitted, or *undecided*
//!   (admitted with its warning that Kueue's flavor order decides);
//! - Kueue's: the pair's ResourceFlavors, Cohorts, ClusterQueues and LocalQueue are created
//!   (each under the pair's prefix, so pairs share nothing Kueue's quota reads), then the
//!   job; Kueue's webhook suspends it and its scheduler either reserves quota for its
//!   Workload (QuotaReserved True: *reserved*) or says why not (QuotaReserved False, held for
//!   [`SETTLE`]: *not reserved*). Nothing else runs in the pair's cohort, so "ever" is
//!   "now": no workload of its own can finish and free quota. Kueue's quota needs no node
//!   and no pod.
//!
//! Every decided pair must agree; undecided pairs are counted. `GANGPLANK_DIFFERENTIAL_PAIRS`
//! and `GANGPLANK_DIFFERENTIAL_SEED` change the sample, `GANGPLANK_DIFFERENTIAL_ONLY=N`
//! replays pair N alone. Skipped, with the reason, without the Kueue assets.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{json, Value};
use support::differential::{check_json, sample, side_by_side};
use support::kueue::{resource, KueueOptions};
use support::kueue_shapes::{self, Pair};
use support::{jobs, ControlPlane, Crds, Scheduling};

e2e_suite!(
    "e2e_kueue_differential",
    [gangplank_and_kueue_agree_on_quota],
    support::kueue::requirement
);

/// Pair `n` is `kueue_shapes::generate(seed + n)`.
const DEFAULT_SEED: u64 = 4200;
const DEFAULT_PAIRS: usize = 200;
/// Pairs in flight at once: each is a handful of API calls and a wait on Kueue's scheduler.
const PARALLEL: usize = 8;
/// A Workload whose quota is not reserved must stay so this long to count as "not
/// reserved": Kueue's scheduler takes a new Workload within a cycle (well under a second
/// here), and nothing in the pair's cohort would make it try again.
const SETTLE: Duration = Duration::from_secs(2);
const LIMIT: Duration = Duration::from_secs(60);
/// How a kueue_queue warning that leaves the outcome to Kueue's flavor order starts.
const UNDECIDED: &str = "Kueue may not reserve";

/// What gangplank said of a pair.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Admitted,
    Refused(String),
    Undecided(String),
}

/// What Kueue did with the pair's Workload.
#[derive(Debug)]
enum Truth {
    Reserved,
    NotReserved(String),
}

#[derive(Debug)]
struct Outcome {
    pair: usize,
    verdict: Verdict,
    truth: Truth,
    shape: String,
}

fn plane() -> &'static ControlPlane {
    static KUEUE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    let assets = support::assets::get();
    let plane = ControlPlane::shared_with(&assets, Crds::TrainingV1, Scheduling::None);
    KUEUE.get_or_init(|| {
        support::on_own_runtime(
            move || async move { plane.start_kueue(&KueueOptions::default()).await },
        )
    });
    plane
}

async fn gangplank_and_kueue_agree_on_quota() {
    let plane = plane();
    let (seed, pairs) = sample(DEFAULT_SEED, DEFAULT_PAIRS);
    let namespace = plane.namespace("kueue-differential").await;
    let started = Instant::now();
    let generated: Vec<(usize, Pair)> = pairs
        .map(|pair| (pair, kueue_shapes::generate(seed.wrapping_add(pair as u64))))
        .collect();
    // gangplank's verdicts (one check of every job) while Kueue takes the pairs.
    let (verdicts, truths) = futures::join!(
        gangplank_verdicts(plane, &namespace, &generated),
        side_by_side(PARALLEL, 0..generated.len(), |i| {
            let (pair, shape) = &generated[i];
            kueue_truth(plane, *pair, &namespace, shape)
        }),
    );
    let outcomes: Vec<Outcome> = generated
        .iter()
        .zip(verdicts.into_iter().zip(truths))
        .map(|((pair, shape), (verdict, truth))| Outcome {
            pair: *pair,
            verdict,
            truth,
            shape: format!("{:?}\n  job: {:?}", shape.quotas, shape.job),
        })
        .collect();
    report(&outcomes, seed, started.elapsed());
}

/// One `check --cluster` of every pair's job, on one node that holds any pod (Kueue's
/// quota is the question, not the nodes) and every pair's Kueue objects (kept apart by
/// their prefixes, as on the API server); the kueue_queue policy's verdicts, in order.
async fn gangplank_verdicts(
    plane: &ControlPlane,
    namespace: &str,
    generated: &[(usize, Pair)],
) -> Vec<Verdict> {
    let big =
        json!({"cpu": "10000", "memory": "100Ti", "pods": "10000", kueue_shapes::GPU: "10000"});
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "big", "labels": {"kubernetes.io/hostname": "big"}},
        "status": {"allocatable": big, "capacity": big,
            "conditions": [{"type": "Ready", "status": "True"}]}});
    let mut items = vec![node];
    let mut jobs = Vec::new();
    for (pair, shape) in generated {
        let prefix = format!("p{pair}");
        items.extend(shape.objects(&prefix, namespace));
        let mut job = shape.job(&prefix, &prefix);
        job["metadata"]["namespace"] = json!(namespace);
        jobs.push(job);
    }
    let policies = support::repo().join("policies");
    let report = check_json(
        plane,
        "kueue-differential",
        namespace,
        &policies,
        items,
        &jobs,
    )
    .await;
    let outcomes = report.as_array().cloned().unwrap_or_default();
    assert_eq!(outcomes.len(), jobs.len(), "one outcome per job: {report}");
    outcomes.iter().map(verdict_of).collect()
}

/// The kueue_queue policy's verdict in one outcome of `check -o json`.
fn verdict_of(outcome: &Value) -> Verdict {
    let violations = outcome["decision"]["violations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut verdict = Verdict::Admitted;
    for v in violations.iter().filter(|v| v["policy"] == "kueue_queue") {
        let msg = v["msg"].as_str().unwrap_or_default().to_string();
        match v["action"].as_str() {
            Some("deny") => return Verdict::Refused(msg),
            _ if msg.starts_with(UNDECIDED) => verdict = Verdict::Undecided(msg),
            _ => {}
        }
    }
    verdict
}

/// Creates the pair's Kueue objects (waiting until its ClusterQueues and LocalQueue are
/// active) and the job; whether Kueue reserves quota for its Workload.
async fn kueue_truth(plane: &ControlPlane, pair: usize, namespace: &str, shape: &Pair) -> Truth {
    let prefix = format!("p{pair}");
    let objects = shape.objects(&prefix, namespace);
    let client = plane.client().await;
    for object in &objects {
        create(&client, pair, object).await;
    }
    for object in &objects {
        if matches!(object["kind"].as_str(), Some("ClusterQueue" | "LocalQueue")) {
            wait_active(&client, pair, object).await;
        }
    }
    let created = jobs::create(&client, namespace, &shape.job(&prefix, &prefix), false)
        .await
        .unwrap_or_else(|e| panic!("pair {pair}: create the job: {e}"));
    let uid = created["metadata"]["uid"].as_str().unwrap_or_default();
    wait_quota(&client, pair, namespace, uid).await
}

fn api(client: &kube::Client, object: &Value) -> Api<DynamicObject> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let plural = format!("{}s", kind.to_lowercase());
    let resource = resource(kind, &plural);
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn create(client: &kube::Client, pair: usize, object: &Value) {
    let typed: DynamicObject = serde_json::from_value(object.clone()).expect("a Kueue object");
    if let Err(e) = api(client, object)
        .create(&PostParams::default(), &typed)
        .await
    {
        panic!("pair {pair}: create {object}: {e}");
    }
}

async fn wait_active(client: &kube::Client, pair: usize, object: &Value) {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api = api(client, object);
    let what = format!("pair {pair}: {} {name} Active", object["kind"]);
    support::wait_for(&what, LIMIT, || async {
        let stored = api.get(name).await.map_err(|e| e.to_string())?;
        let stored = serde_json::to_value(stored).map_err(|e| e.to_string())?;
        jobs::true_condition(&stored, "Active")
            .map(drop)
            .ok_or(format!("{}", stored["status"]))
    })
    .await;
}

/// The Workload of the job with `uid` (Kueue labels it `kueue.x-k8s.io/job-uid`): reserved
/// as soon as QuotaReserved is True; not reserved once it has been False for [`SETTLE`].
async fn wait_quota(client: &kube::Client, pair: usize, namespace: &str, uid: &str) -> Truth {
    let workloads: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &resource("Workload", "workloads"),
    );
    let params = ListParams::default().labels(&format!("kueue.x-k8s.io/job-uid={uid}"));
    let started = Instant::now();
    let mut pending_since: Option<Instant> = None;
    loop {
        let list = workloads.list(&params).await;
        let workload = list.ok().and_then(|l| l.items.into_iter().next());
        let workload = workload.and_then(|w| serde_json::to_value(w).ok());
        let reserved = workload.as_ref().and_then(quota_condition);
        match reserved {
            Some((true, _)) => return Truth::Reserved,
            Some((false, message)) => {
                let since = *pending_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= SETTLE {
                    return Truth::NotReserved(message);
                }
            }
            None => pending_since = None,
        }
        if started.elapsed() >= LIMIT {
            panic!(
                "pair {pair}: Kueue neither reserved nor refused quota within {LIMIT:?}: {}",
                workload.unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The Workload's QuotaReserved condition: its status and message.
fn quota_condition(workload: &Value) -> Option<(bool, String)> {
    let conditions = workload["status"]["conditions"].as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "QuotaReserved")?;
    let message = c["message"].as_str().unwrap_or_default().to_string();
    Some((c["status"] == "True", message))
}

/// Prints the counts and fails on any decided pair where gangplank and Kueue differ.
fn report(outcomes: &[Outcome], seed: u64, elapsed: Duration) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut disagreements = Vec::new();
    let mut undecided = Vec::new();
    for o in outcomes {
        let reserved = matches!(o.truth, Truth::Reserved);
        let key = match (&o.verdict, reserved) {
            (Verdict::Admitted, true) => "admitted, reserved",
            (Verdict::Refused(_), false) => "refused, never reserved",
            (Verdict::Admitted, false) => "DISAGREE: admitted, never reserved",
            (Verdict::Refused(_), true) => "DISAGREE: refused, reserved",
            (Verdict::Undecided(_), true) => "undecided, reserved",
            (Verdict::Undecided(_), false) => "undecided, not reserved",
        };
        *counts.entry(key).or_default() += 1;
        if let Truth::NotReserved(why) = &o.truth {
            *reasons.entry(kueue_reason(why)).or_default() += 1;
        }
        if let Verdict::Undecided(why) = &o.verdict {
            undecided.push(format!("{} ({key}): {why}", o.pair));
        }
        if key.starts_with("DISAGREE") {
            disagreements.push(format!(
                "pair {} ({key}): {:?}\n  Kueue: {:?}\n  shape: {}",
                o.pair, o.verdict, o.truth, o.shape
            ));
        }
    }
    let decided = outcomes.len() - undecided.len();
    eprintln!(
        "differential against Kueue v0.19.2 (seed {seed}, {} pairs, {:.0} s): {decided} decided, \
         {} agree; {counts:?}; Kueue's reasons for not reserving: {reasons:?}",
        outcomes.len(),
        elapsed.as_secs_f64(),
        decided - disagreements.len(),
    );
    support::differential::conclude("Kueue", seed, decided, &undecided, &disagreements);
}

/// Kueue's reason in a few words: the quota a pod set exceeds for good, or the unused quota
/// it waits for.
fn kueue_reason(message: &str) -> String {
    let reason = if message.contains("maximum capacity") {
        "exceeds what a flavor can ever reserve"
    } else if message.contains("insufficient unused quota") {
        "waits for unused quota"
    } else {
        "other"
    };
    reason.to_string()
}
