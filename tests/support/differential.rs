//! The differential between gangplank's capacity verdicts and what a real gang scheduler
//! does, shared by `e2e_scheduler_differential` (kube-scheduler's native gang),
//! `e2e_volcano_differential` (Volcano through `gangplank controller`'s PodGroups) and
//! `e2e_coscheduling_differential` (scheduler-plugins' Coscheduling, the same way).
//!
//! Entry point: [`run`]. From a fixed seed, [`shapes`](super::shapes) generates pairs of a
//! cluster (nodes with GPUs, MIG slices, cpu/memory, labels, taints, cordons) and a job
//! (replica counts, GPUs or MIG per pod, cpu/memory, nodeSelectors, tolerations,
//! minAvailable). For each pair:
//!
//! - gangplank's verdict: `gangplank check --cluster <the pair's nodes> -o json <the job>`:
//!   refused by the capacity policies, admitted, or *undecided* (admitted with a warning that
//!   the scheduler's order decides);
//! - the scheduler's: the pair's nodes are created on an empty control plane and the job's
//!   pods scheduled as one gang (minCount/minMember = minAvailable, else every pod): placed
//!   when at least that many pods are bound, not placed when none is and the scheduler says
//!   why. Where `check`'s mutation wrote a release order (`gangplank.dev/release-order`, a
//!   native gang whose outcome the order decides), the pods are created behind its
//!   scheduling gate and released one type after the other, as `gangplank controller` does.
//!
//! Every decided pair must agree; undecided pairs are counted by cause. Pairs run side by
//! side on disjoint nodes: every node of a pair carries `gangplank.dev/pair=<n>` and every pod
//! selects it (the same label on all the pair's nodes, so it changes nothing either side
//! decides).
//!
//! `GANGPLANK_DIFFERENTIAL_PAIRS` and `GANGPLANK_DIFFERENTIAL_SEED` change the sample,
//! `GANGPLANK_DIFFERENTIAL_ONLY=N` replays pair N alone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::{json, Value};

use gangplank::job::release_order::{self, RELEASE_GATE, RELEASE_ORDER_ANNOTATION};

use super::nodes::{create_node, delete_nodes};
use super::scheduler::{native_pod_group, wait_placement, Placement};
use super::{jobs, shapes, volcano, ControlPlane};

mod coscheduled;

/// Who schedules the gangs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// kube-scheduler with the native gang: the test writes the `scheduling.k8s.io/v1alpha2`
    /// PodGroup and the pods (as the controller would, `spec.schedulingGroup` set).
    NativeGang,
    /// Volcano: the test creates the job, `gangplank controller --gang-scheduler volcano`
    /// (running on the plane) writes the PodGroup and, once Volcano admits it, the pods.
    Volcano,
    /// scheduler-plugins' Coscheduling: the test creates the job, `gangplank controller
    /// --gang-scheduler scheduler-plugins-scheduler` writes the `scheduling.x-k8s.io`
    /// PodGroup and the pods (see `coscheduling_differential`).
    Coscheduling,
}

impl Backend {
    /// Pairs in flight at once. kube-scheduler handles one pod group at a time anyway; more
    /// only makes the apiserver the bottleneck on two cores. Volcano's queue `default` is
    /// shared by every pair, so its pairs run fewer at a time.
    fn parallel(self) -> usize {
        match self {
            Backend::NativeGang => 6,
            Backend::Volcano => 4,
            // Most of its pairs wait out the 10 s settle of a gang not placed: more at a time.
            Backend::Coscheduling => 8,
        }
    }

    fn scheduler_process(self) -> &'static str {
        match self {
            Backend::NativeGang => "kube-scheduler",
            Backend::Volcano => "vc-scheduler",
            Backend::Coscheduling => super::coscheduling::PROCESS,
        }
    }
}

/// Pair `n` is `shapes::generate(seed + n)`; 0 gives the pairs `capacity_shapes` counts.
const DEFAULT_SEED: u64 = 0;
const PAIR_LABEL: &str = "gangplank.dev/pair";
/// An unbound gang must stay unbound this long to count as "not placed" (the scheduler
/// settles a gang of a dozen pods in well under a second here).
const SETTLE: Duration = Duration::from_secs(3);
const LIMIT: Duration = Duration::from_secs(90);

/// What gangplank said of a pair.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Admitted,
    Refused(String),
    Undecided(String),
}

/// One pair's outcome.
#[derive(Debug)]
struct Outcome {
    pair: usize,
    verdict: Verdict,
    placed: bool,
    placement: String,
    aim: shapes::Aim,
    /// The generated pair, in full (to replay it).
    shape: String,
}

/// `name`'s value as a number, `default` when unset; panics on one that is not a number.
pub fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text} is not a number")),
        Err(_) => default,
    }
}

/// Runs the differential on `plane` with `backend` and fails on any decided pair where
/// gangplank and the scheduler disagree.
pub async fn run(plane: &ControlPlane, backend: Backend, default_pairs: usize) {
    let (seed, pairs) = sample(DEFAULT_SEED, default_pairs);
    let namespace = plane.namespace("differential").await;
    let started = Instant::now();
    let outcomes = side_by_side(backend.parallel(), pairs, |pair| {
        run_pair(plane, backend, &namespace, seed, pair)
    })
    .await;
    report(backend, &outcomes, seed, started.elapsed());
}

/// The seed and the pairs of a run: `GANGPLANK_DIFFERENTIAL_SEED` and
/// `GANGPLANK_DIFFERENTIAL_PAIRS` change the sample, `GANGPLANK_DIFFERENTIAL_ONLY=N` replays
/// pair N alone.
pub fn sample(default_seed: u64, default_pairs: usize) -> (u64, std::ops::Range<usize>) {
    let pairs = env_number("GANGPLANK_DIFFERENTIAL_PAIRS", default_pairs);
    let seed = env_number("GANGPLANK_DIFFERENTIAL_SEED", default_seed);
    let only: Option<usize> = std::env::var("GANGPLANK_DIFFERENTIAL_ONLY")
        .ok()
        .and_then(|n| n.parse().ok());
    (seed, only.map_or(0..pairs, |n| n..n + 1))
}

/// `one(pair)` for every pair, `parallel` at a time; the outcomes in the pairs' order.
pub async fn side_by_side<T, F, Fut>(
    parallel: usize,
    pairs: std::ops::Range<usize>,
    one: F,
) -> Vec<T>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let next = AtomicUsize::new(pairs.start);
    let outcomes = Mutex::new(Vec::new());
    let workers = (0..parallel).map(|_| async {
        loop {
            let pair = next.fetch_add(1, Ordering::Relaxed);
            if pair >= pairs.end {
                break;
            }
            let outcome = one(pair).await;
            outcomes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((pair, outcome));
        }
    });
    futures::future::join_all(workers).await;
    let mut outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    outcomes.sort_by_key(|(pair, _)| *pair);
    outcomes.into_iter().map(|(_, o)| o).collect()
}

/// Prints the counts and fails on any decided pair where gangplank and the scheduler differ.
fn report(backend: Backend, outcomes: &[Outcome], seed: u64, elapsed: Duration) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_aim: BTreeMap<String, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut undecided: BTreeMap<String, usize> = BTreeMap::new();
    let mut disagreements = Vec::new();
    let mut undecided_pairs = Vec::new();
    for o in outcomes {
        let key = match (&o.verdict, o.placed) {
            (Verdict::Admitted, true) => "admitted, placed",
            (Verdict::Refused(_), false) => "refused, not placed",
            (Verdict::Admitted, false) => "DISAGREE: admitted, never placed",
            (Verdict::Refused(_), true) => "DISAGREE: refused, placed",
            (Verdict::Undecided(_), true) => "undecided, placed",
            (Verdict::Undecided(_), false) => "undecided, not placed",
        };
        *counts.entry(key).or_default() += 1;
        *by_aim
            .entry(format!("{:?}", o.aim))
            .or_default()
            .entry(key)
            .or_default() += 1;
        if let Verdict::Undecided(why) = &o.verdict {
            *undecided.entry(undecided_reason(why)).or_default() += 1;
            undecided_pairs.push(format!("{} ({key}): {why}", o.pair));
        }
        if key.starts_with("DISAGREE") {
            disagreements.push(format!(
                "pair {} ({key}): {:?}\n  scheduler: {}\n  shape: {}",
                o.pair, o.verdict, o.placement, o.shape
            ));
        }
    }
    let decided = outcomes
        .iter()
        .filter(|o| !matches!(o.verdict, Verdict::Undecided(_)))
        .count();
    eprintln!(
        "differential against {backend:?} (seed {seed}, {} pairs, {:.0} s): {decided} decided, {} agree; {counts:?}; \
         undecided by reason: {undecided:?}",
        outcomes.len(),
        elapsed.as_secs_f64(),
        decided - disagreements.len(),
    );
    for (aim, counts) in &by_aim {
        eprintln!("  {aim}: {counts:?}");
    }
    conclude(
        &format!("{backend:?}"),
        seed,
        decided,
        &undecided_pairs,
        &disagreements,
    );
}

/// The end of a differential's report, shared by every differential: the undecided pairs
/// listed (each replayable), then a failure naming every decided pair where gangplank and
/// `against` disagree.
pub fn conclude(
    against: &str,
    seed: u64,
    decided: usize,
    undecided: &[String],
    disagreements: &[String],
) {
    eprintln!("  undecided pairs (GANGPLANK_DIFFERENTIAL_ONLY=<pair> replays one):");
    for pair in undecided {
        eprintln!("    {pair}");
    }
    assert!(
        disagreements.is_empty(),
        "{} of {decided} decided pairs disagree with {against} (seed {seed}; replay one \
         with GANGPLANK_DIFFERENTIAL_ONLY=<pair>):\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}

/// The cause an undecided pair's warning names (policies/capacity.rego's two warnings and
/// their two fixes).
fn undecided_reason(warning: &str) -> String {
    let cause = if warning.contains("minAvailable") {
        "minAvailable pods of types sharing nodes"
    } else if warning.contains("pods of different sizes") {
        "pods of different sizes share nodes"
    } else if warning.contains("the same nodeSelector and tolerations") {
        "a type with a wider reach may take the others' nodes"
    } else {
        "other"
    };
    cause.to_string()
}

/// One pair: gangplank's verdict offline, then the scheduler's on the pair's nodes.
async fn run_pair(
    plane: &ControlPlane,
    backend: Backend,
    namespace: &str,
    seed: u64,
    pair: usize,
) -> Outcome {
    let generated = shapes::generate(seed.wrapping_add(pair as u64));
    let shape = format!("{generated:?}");
    let aim = generated.aim;
    let (nodes, mut job) = tag_with_pair(generated.cluster.nodes(), generated.job.to_json(), pair);
    let queue = match backend {
        Backend::NativeGang => None,
        Backend::Volcano => volcano_job(&mut job, seed, pair),
        Backend::Coscheduling => {
            coscheduled::name_the_scheduler(&mut job);
            None
        }
    };
    let policies = policies_for(plane, backend);
    let (verdict, release) =
        gangplank_verdict(plane, pair, &policies, &nodes, queue.as_ref(), &job).await;
    let placement = match backend {
        Backend::NativeGang => {
            let retries = if retried(&verdict) { RETRIES } else { 0 };
            let gang = Gang {
                job: &job,
                release: release.as_deref(),
            };
            schedule(plane, namespace, pair, &nodes, gang, retries).await
        }
        Backend::Volcano => {
            schedule_volcano(plane, namespace, pair, &nodes, queue.as_ref(), &job).await
        }
        Backend::Coscheduling => coscheduled::schedule(plane, namespace, pair, &nodes, &job).await,
    };
    let min_count = gang_min_count(&job);
    let placed = placement.bound.len() >= min_count;
    assert!(
        placement.bound.is_empty() || placed,
        "pair {pair}: the gang was partly bound ({} of {min_count}): {}\n{shape}\n\
         {} log tail:\n{}",
        placement.bound.len(),
        placement.summary(),
        backend.scheduler_process(),
        plane.log_tail(backend.scheduler_process(), 60)
    );
    Outcome {
        pair,
        verdict,
        placed,
        placement: placement.summary(),
        aim,
        shape,
    }
}

/// The pair's label on its nodes and in every pod's nodeSelector, and unique names.
fn tag_with_pair(mut nodes: Vec<Value>, mut job: Value, pair: usize) -> (Vec<Value>, Value) {
    let value = json!(pair.to_string());
    for node in &mut nodes {
        let name = format!(
            "p{pair}-{}",
            node["metadata"]["name"].as_str().unwrap_or("node")
        );
        node["metadata"]["name"] = json!(name);
        node["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
        node["metadata"]["labels"][PAIR_LABEL] = value.clone();
    }
    job["metadata"]["name"] = json!(format!("pair-{pair}"));
    // The run's own namespace, on both sides.
    if let Some(metadata) = job["metadata"].as_object_mut() {
        metadata.remove("namespace");
    }
    for (_, replica) in replica_specs_mut(&mut job) {
        replica["template"]["spec"]["nodeSelector"][PAIR_LABEL] = value.clone();
    }
    (nodes, job)
}

fn replica_specs_mut(job: &mut Value) -> Vec<(String, &mut Value)> {
    let Some(spec) = job["spec"].as_object_mut() else {
        return Vec::new();
    };
    spec.iter_mut()
        .filter(|(k, _)| k.ends_with("ReplicaSpecs"))
        .filter_map(|(_, v)| v.as_object_mut())
        .flat_map(|types| types.iter_mut().map(|(t, v)| (t.clone(), v)))
        .collect()
}

fn replica_specs(job: &Value) -> Vec<(String, Value)> {
    let mut job = job.clone();
    replica_specs_mut(&mut job)
        .into_iter()
        .map(|(t, v)| (t, v.clone()))
        .collect()
}

fn total_pods(job: &Value) -> usize {
    replica_specs(job)
        .iter()
        .map(|(_, r)| r["replicas"].as_u64().unwrap_or(1) as usize)
        .sum()
}

/// minAvailable when it is below the pod count, else every pod (as the controller does).
fn gang_min_count(job: &Value) -> usize {
    let total = total_pods(job);
    let min = job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"].as_u64();
    min.map_or(total, |m| (m as usize).clamp(1, total))
}

/// Verdicts that stand on kube-scheduler retrying a failed cycle (the capacity policy's
/// placement search found orders or ties that fail) or on no order succeeding: for these the
/// harness makes the scheduler try again before it counts the gang as not placed.
fn retried(verdict: &Verdict) -> bool {
    match verdict {
        Verdict::Admitted => true,
        Verdict::Refused(msg) => msg.starts_with(NEVER),
        Verdict::Undecided(_) => false,
    }
}

/// How the capacity policy starts a refusal from its placement search (no order places
/// the gang).
const NEVER: &str = "kube-scheduler never places the whole gang";

/// Further attempts the scheduler is made to take at a gang left unplaced, each after a
/// node is added (kube-scheduler requeues pods NodeResourcesFit rejected when a node that
/// fits them appears) and its backoff (1 s doubling to 10 s) has passed. A gang admitted on
/// "retried until a tie breaks its way" may need many: pair 141 of seed 0 places only when its
/// one PS pod draws the H100 node among 4 equally scored (1 in 4 per attempt), and with 6
/// retries it stayed unplaced in 2 of 3 runs (2026-12-02); 16 leave it 1 in 100.
const RETRIES: usize = 16;
/// How long each further attempt is given: past the longest backoff.
const RETRY_SETTLE: Duration = Duration::from_secs(11);

/// The policy directory `check` reads for `backend`: the shipped one for Volcano (its
/// default gang scheduler); otherwise a copy whose gang_scheduling names the backend's
/// scheduler, as a platform running it configures it: `kubernetes` for kube-scheduler's
/// native gang (pods then keep the default scheduler, which the capacity policy's placement
/// search models), `scheduler-plugins-scheduler` for Coscheduling.
fn policies_for(plane: &ControlPlane, backend: Backend) -> std::path::PathBuf {
    let scheduler = match backend {
        Backend::Volcano => {
            return std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies")
        }
        Backend::NativeGang => "kubernetes",
        Backend::Coscheduling => super::coscheduling::SCHEDULER_NAME,
    };
    super::policies::with_gang_scheduler(plane, scheduler)
}

/// `gangplank check --cluster` on the pair's nodes: the capacity policies' verdict.
async fn gangplank_verdict(
    plane: &ControlPlane,
    pair: usize,
    policies: &std::path::Path,
    nodes: &[Value],
    queue: Option<&Value>,
    job: &Value,
) -> (Verdict, Option<Vec<String>>) {
    // What `kubectl get nodes,queues -o yaml` prints: the Queue as its controller keeps it.
    let mut items = nodes.to_vec();
    items.extend(queue.cloned().map(|mut q| {
        q["status"] = json!({"state": "Open"});
        q
    }));
    let dir = format!("differential-{pair}");
    let jobs = std::slice::from_ref(job);
    let report = check_json(plane, &dir, "differential", policies, items, jobs).await;
    (verdict_of(pair, &report), release_order_of(&report, job))
}

/// `gangplank check -o json -n <namespace> --policies <policies> --cluster <items> <jobs>`,
/// the files in the plane's directory `dir`: the report, one outcome per job, in order
/// (outcome i from `job-<i>.json`).
pub async fn check_json(
    plane: &ControlPlane,
    dir: &str,
    namespace: &str,
    policies: &std::path::Path,
    items: Vec<Value>,
    jobs: &[Value],
) -> Value {
    let dir = plane.file(dir);
    std::fs::create_dir_all(&dir).expect("check dir");
    let cluster = dir.join("cluster.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&cluster, list.to_string()).expect("write the cluster");
    let mut command = tokio::process::Command::new(super::gangplank());
    command
        .args(["check", "-o", "json", "-n", namespace, "--policies"])
        .arg(policies)
        .arg("--cluster")
        .arg(&cluster);
    for (i, job) in jobs.iter().enumerate() {
        let manifest = dir.join(format!("job-{i}.json"));
        std::fs::write(&manifest, job.to_string()).expect("write job");
        command.arg(&manifest);
    }
    let output = command.output().await.expect("run gangplank check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        panic!(
            "{}: check -o json gave no JSON ({e}): {stdout}\n{stderr}",
            dir.display()
        )
    })
}

/// The release order gang_scheduling wrote on the job (`gangplank.dev/release-order`), as
/// replica types, parsed as the controller parses it: the order `gangplank controller`
/// releases the native gang's pods in.
fn release_order_of(report: &Value, job: &Value) -> Option<Vec<String>> {
    let applied = report[0]["decision"]["applied"].as_array()?;
    let path = format!(
        "/metadata/annotations/{}",
        RELEASE_ORDER_ANNOTATION.replace('/', "~1")
    );
    let value = applied
        .iter()
        .find(|a| a["path"] == path.as_str())?
        .get("value")?
        .as_str()?;
    let keys: Vec<String> = replica_specs(job).into_iter().map(|(k, _)| k).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    match release_order::parse(value, &keys) {
        Ok(order) => Some(order),
        Err(why) => panic!("check wrote a release order the controller would not read: {why}"),
    }
}

/// The policies whose verdicts are compared.
const CAPACITY_POLICIES: [&str; 3] = ["capacity", "mig_inventory", "volcano_queue"];
/// How the capacity policy starts a warning that leaves the verdict to kube-scheduler's
/// order (policies/README.md, "Capacity: what it decides"). Its other warnings (pods a
/// minAvailable gang may start without) come with an admission it stands by.
/// "Volcano may not place" when the policy's placement search played Volcano.
const UNDECIDED: [&str; 2] = ["kube-scheduler may not place", "Volcano may not place"];

fn verdict_of(pair: usize, report: &Value) -> Verdict {
    let outcome = report
        .as_array()
        .and_then(|a| a.first())
        .unwrap_or_else(|| panic!("pair {pair}: no outcome in {report}"));
    let violations = outcome["decision"]["violations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut undecided = None;
    for v in &violations {
        let policy = v["policy"].as_str().unwrap_or_default();
        let action = v["action"].as_str().unwrap_or_default();
        let msg = v["msg"].as_str().unwrap_or_default().to_string();
        let capacity = CAPACITY_POLICIES.contains(&policy);
        match action {
            "deny" if capacity => return Verdict::Refused(msg),
            // Other policies (gpu_uniformity on mixed GPU sizes, say) judge other things;
            // the capacity policies' verdict is compared whatever they say.
            _ if capacity && UNDECIDED.iter().any(|u| msg.starts_with(u)) => undecided = Some(msg),
            _ => {}
        }
    }
    undecided.map_or(Verdict::Admitted, Verdict::Undecided)
}

/// A native gang's job and the order its pods are released in, if the webhook wrote one.
struct Gang<'a> {
    job: &'a Value,
    release: Option<&'a [String]>,
}

/// Creates the pair's nodes, PodGroup and pods, waits for the scheduler, then deletes them.
/// With a release order the pods are created behind the scheduling gate and released one
/// type after the other, as `gangplank controller` does.
async fn schedule(
    plane: &ControlPlane,
    namespace: &str,
    pair: usize,
    nodes: &[Value],
    Gang { job, release }: Gang<'_>,
    retries: usize,
) -> Placement {
    let client = plane.client().await;
    for node in nodes {
        create_node(&client, node).await;
    }
    let group = format!("pair-{pair}");
    let pod_group = json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": group},
        "spec": {"schedulingPolicy": {"gang": {"minCount": gang_min_count(job)}}},
    });
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &native_pod_group());
    let typed: DynamicObject = serde_json::from_value(pod_group).expect("PodGroup");
    if let Err(e) = groups.create(&PostParams::default(), &typed).await {
        panic!("pair {pair}: create PodGroup: {e}");
    }
    // As JSON: k8s-openapi's PodSpec (the 1.33 API) has no `schedulingGroup`, and a typed
    // Pod would drop it.
    let pods: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<Pod>(&()));
    let selector = format!("{PAIR_LABEL}={pair}");
    for mut pod in pods_of(job, &group, pair) {
        if release.is_some() {
            pod["spec"]["schedulingGates"] = json!([{"name": RELEASE_GATE}]);
        }
        let typed: DynamicObject = serde_json::from_value(pod).expect("Pod");
        if let Err(e) = pods.create(&PostParams::default(), &typed).await {
            panic!("pair {pair}: create pod: {e}");
        }
    }
    if let Some(order) = release {
        release_in_order(&pods, job, &group, pair, order).await;
    }
    let expected = total_pods(job);
    let mut placement = wait_placement(plane, namespace, &selector, expected, SETTLE, LIMIT).await;
    for attempt in 0..retries {
        if placement.bound.len() >= gang_min_count(job) {
            break;
        }
        nudge(&client, pair, attempt, job).await;
        placement =
            wait_placement(plane, namespace, &selector, expected, RETRY_SETTLE, LIMIT).await;
    }
    clean_up(&client, namespace, pair, nodes, &group).await;
    placement
}

/// Lifts the pods' gate one type after the other in `order`, each awaited: the scheduler
/// sees the updates in that order (as the controller's release does).
async fn release_in_order(
    pods: &Api<DynamicObject>,
    job: &Value,
    group: &str,
    pair: usize,
    order: &[String],
) {
    for replica_type in order {
        let count = replica_specs(job)
            .into_iter()
            .find(|(t, _)| t == replica_type)
            .map_or(0, |(_, r)| r["replicas"].as_u64().unwrap_or(1));
        for index in 0..count {
            let name = pod_name(group, replica_type, index);
            // Only this gate, as the controller lifts it (a strategic merge delete).
            let patch =
                json!({"spec": {"schedulingGates": [{"name": RELEASE_GATE, "$patch": "delete"}]}});
            let params = kube::api::PatchParams::default();
            if let Err(e) = pods
                .patch(&name, &params, &kube::api::Patch::Strategic(&patch))
                .await
            {
                panic!("pair {pair}: release {name}: {e}");
            }
        }
    }
}

/// Adds and removes a node that fits any of the job's pods but is not the pair's (no pod
/// selects it): NodeResourcesFit's queueing hint sends the gang's rejected pods back to the
/// scheduler, which tries the pod group again.
async fn nudge(client: &kube::Client, pair: usize, attempt: usize, job: &Value) {
    let mut allocatable = json!({"cpu": "1000", "memory": "16Ti", "pods": "1000"});
    for (_, replica) in replica_specs(job) {
        for c in replica["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for name in c["resources"]["requests"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k)
            {
                if name.contains('/') {
                    allocatable[name] = json!("1000");
                }
            }
        }
    }
    let name = format!("p{pair}-nudge-{attempt}");
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {PAIR_LABEL: "nudge", "kubernetes.io/hostname": name}},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    });
    create_node(client, &node).await;
    delete_nodes(client, &[name]).await;
}

/// The name of pod `index` of `replica_type` in the pair's gang `group`.
fn pod_name(group: &str, replica_type: &str, index: u64) -> String {
    format!("{group}-{}-{index}", replica_type.to_lowercase())
}

/// The job's pods as the controller creates them: each replica's template spec, in the
/// gang, with no scheduler named (the default one).
fn pods_of(job: &Value, group: &str, pair: usize) -> Vec<Value> {
    let mut pods = Vec::new();
    for (replica_type, replica) in replica_specs(job) {
        let count = replica["replicas"].as_u64().unwrap_or(1);
        for index in 0..count {
            let mut spec = replica["template"]["spec"].clone();
            if let Some(spec) = spec.as_object_mut() {
                spec.remove("schedulerName");
            }
            spec["schedulingGroup"] = json!({"podGroupName": group});
            spec["restartPolicy"] = json!("Never");
            let name = pod_name(group, &replica_type, index);
            pods.push(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {PAIR_LABEL: pair.to_string()}},
                "spec": spec,
            }));
        }
    }
    pods
}

async fn clean_up(
    client: &kube::Client,
    namespace: &str,
    pair: usize,
    nodes: &[Value],
    group: &str,
) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{PAIR_LABEL}={pair}");
    let params = kube::api::ListParams::default().labels(&selector);
    let now = DeleteParams::default().grace_period(0);
    if let Err(e) = pods.delete_collection(&now, &params).await {
        panic!("pair {pair}: delete pods: {e}");
    }
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &native_pod_group());
    let _ = groups.delete(group, &DeleteParams::default()).await;
    delete_nodes(client, &node_names(nodes)).await;
}

/// How long a Volcano PodGroup must stay Unschedulable (or Pending, see [`is_unschedulable`])
/// with no pod bound to count as "not placed": vc-scheduler runs every second here and the
/// controller creates pods within one. (Pairs 129 and 134, left Pending past 4 s and past
/// 10 s in full runs, were held back by another pair's reservation, not by their cordoned
/// nodes: see [`is_unschedulable`].)
const VOLCANO_SETTLE: Duration = Duration::from_secs(10);

/// The job as the webhook leaves it for Volcano (`schedulerName: volcano` on every template)
/// and, for half the pairs that ask for GPUs, a Queue of its own whose GPU capability is
/// drawn around the gang's GPUs (below, at, above), named in the job's schedulingPolicy.
fn volcano_job(job: &mut Value, seed: u64, pair: usize) -> Option<Value> {
    for (_, replica) in replica_specs_mut(job) {
        replica["template"]["spec"]["schedulerName"] = json!(volcano::SCHEDULER_NAME);
    }
    let mut rng = shapes::Rng::new(seed.wrapping_add(pair as u64) ^ 0x51_7cc1_b727_220a);
    let gpus = total_gpus(job);
    if gpus == 0 || !rng.chance(1, 2) {
        return None;
    }
    let offsets: [i64; 6] = [-8, -4, -1, 0, 0, 4];
    let capability = (gpus + *rng.pick(&offsets)).max(1);
    let name = format!("pair-{pair}");
    job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = json!(name);
    Some(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": false,
                 "capability": {"nvidia.com/gpu": capability.to_string()}},
    }))
}

/// Whole GPUs the job's pods ask for, all together.
fn total_gpus(job: &Value) -> i64 {
    let per_pod = |spec: &Value| -> i64 {
        let containers = spec["containers"].as_array().cloned().unwrap_or_default();
        containers
            .iter()
            .map(|c| {
                let resources = &c["resources"];
                let amount = resources["requests"]["nvidia.com/gpu"]
                    .as_str()
                    .or(resources["limits"]["nvidia.com/gpu"].as_str());
                amount.and_then(|a| a.parse::<i64>().ok()).unwrap_or(0)
            })
            .sum()
    };
    replica_specs(job)
        .iter()
        .map(|(_, r)| r["replicas"].as_i64().unwrap_or(1) * per_pod(&r["template"]["spec"]))
        .sum()
}

/// Creates the pair's nodes, its Queue (once Volcano's queue controller has opened it) and
/// the job, waits until the gang is bound or Volcano reports it unschedulable, then deletes
/// it all.
async fn schedule_volcano(
    plane: &ControlPlane,
    namespace: &str,
    pair: usize,
    nodes: &[Value],
    queue: Option<&Value>,
    job: &Value,
) -> Placement {
    let client = plane.client().await;
    for node in nodes {
        create_node(&client, node).await;
    }
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &volcano::queue());
    if let Some(queue) = queue {
        create_open_queue(&queues, pair, queue).await;
    }
    if let Err(e) = jobs::create(&client, namespace, job, false).await {
        panic!("pair {pair}: create the job: {e}");
    }
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    let kind = job["kind"].as_str().unwrap_or_default().to_lowercase();
    let group = format!("{name}-{kind}");
    let alone = Alone { nodes, queue };
    let placement = wait_volcano(
        plane,
        namespace,
        pair,
        name,
        &group,
        gang_min_count(job),
        &alone,
    )
    .await;
    clean_up_job(
        &client,
        namespace,
        pair,
        job,
        (&group, &volcano::pod_group()),
    )
    .await;
    if let Some(queue) = queue.and_then(|q| q["metadata"]["name"].as_str()) {
        if let Err(e) = queues.delete(queue, &DeleteParams::default()).await {
            panic!("pair {pair}: delete Queue {queue}: {e}");
        }
    }
    delete_nodes(&client, &node_names(nodes)).await;
    placement
}

async fn create_open_queue(queues: &Api<DynamicObject>, pair: usize, queue: &Value) {
    let name = queue["metadata"]["name"].as_str().unwrap_or_default();
    let typed: DynamicObject = serde_json::from_value(queue.clone()).expect("a Queue");
    if let Err(e) = queues.create(&PostParams::default(), &typed).await {
        panic!("pair {pair}: create Queue {name}: {e}");
    }
    let what = format!("pair {pair}: Queue {name} Open");
    super::wait_for(&what, Duration::from_secs(30), || async {
        let queue = queues.get(name).await.map_err(|e| e.to_string())?;
        let state = queue.data["status"]["state"].clone();
        (state == "Open")
            .then_some(())
            .ok_or(format!("state {state}"))
    })
    .await;
}

/// Bound at least `min` pods: placed. The PodGroup Unschedulable for [`VOLCANO_SETTLE`] with
/// no pod bound: not placed. Pending counts the same only when Volcano would not enqueue
/// the gang on the pair's nodes alone ([`Alone::enqueues`]); otherwise it is another pair's
/// reservation and the wait goes on. Neither within [`LIMIT`]: a broken set-up, with the
/// PodGroup and the scheduler's log in the panic.
async fn wait_volcano(
    plane: &ControlPlane,
    namespace: &str,
    pair: usize,
    job: &str,
    group: &str,
    min: usize,
    alone: &Alone<'_>,
) -> Placement {
    let client = plane.client().await;
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &volcano::pod_group());
    let selector = format!("training.kubeflow.org/job-name={job}");
    let started = Instant::now();
    let mut unschedulable_since: Option<Instant> = None;
    loop {
        let placement = Placement::read(&client, namespace, &selector).await;
        if placement.bound.len() >= min {
            return placement;
        }
        let pod_group = groups.get_opt(group).await.ok().flatten();
        let pod_group = pod_group.and_then(|g| serde_json::to_value(g).ok());
        let unschedulable = pod_group
            .as_ref()
            .is_some_and(|g| is_unschedulable(g, alone));
        unschedulable_since = match (
            unschedulable && placement.bound.is_empty(),
            unschedulable_since,
        ) {
            (true, Some(since)) if since.elapsed() >= VOLCANO_SETTLE => return placement,
            (true, since) => Some(since.unwrap_or_else(Instant::now)),
            (false, _) => None,
        };
        if started.elapsed() >= LIMIT {
            panic!(
                "pair {pair}: Volcano neither bound {min} pods of {job} nor called its PodGroup \
                 unschedulable within {LIMIT:?} (a PodGroup still Pending whose minResources \
                 fit the pair's nodes and queue was held back by other pairs' reservations \
                 all that time): {}\nPodGroup: {}\nvc-scheduler log tail:\n{}",
                placement.summary(),
                pod_group.unwrap_or_default(),
                plane.log_tail("vc-scheduler", 30)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Volcano's verdict on a gang it cannot place: condition `Unschedulable=True` (pods made,
/// no room for the gang), or phase `Pending` (not enqueued: the queue's capability or the
/// cluster's idle resources are below minResources; Volcano records that only as an Event,
/// and the controller makes no pods). Both count only once they have held for
/// [`VOLCANO_SETTLE`]: a gang that fits leaves Pending within a scheduling period.
///
/// Pending counts only when the pair's own nodes and queue could not enqueue the gang
/// ([`Alone::enqueues`]). Volcano's enqueue is cluster-wide, not per pair: the overcommit
/// plugin compares minResources plus every Inqueue PodGroup's minResources with 1.2 × all
/// nodes' allocatable minus what is bound, and the proportion plugin compares it plus the
/// queue's allocated and Inqueue resources with the queue's capability capped at all nodes'
/// allocatable. A pair whose gang asks for more than its own nodes (refused, never placed)
/// can be enqueued on the other pairs' nodes and then holds that reservation, Inqueue and
/// Unschedulable, until the harness deletes it; meanwhile a pair beside it that needs all
/// of its own nodes stays Pending ("queue resource quota insufficient" or "resource in
/// cluster is overused"), and is enqueued and placed within a second of the deletion.
fn is_unschedulable(pod_group: &Value, alone: &Alone) -> bool {
    if pod_group["status"]["phase"] == "Pending" {
        return !alone.enqueues(pod_group);
    }
    let conditions = pod_group["status"]["conditions"].as_array();
    conditions
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Unschedulable" && c["status"] == "True")
}

/// What Volcano's enqueue would see if the pair ran alone: its nodes and its Queue (none:
/// the `default` Queue, no capability).
struct Alone<'a> {
    nodes: &'a [Value],
    queue: Option<&'a Value>,
}

impl Alone<'_> {
    /// Volcano would enqueue the PodGroup with only the pair's nodes in the cluster: every
    /// resource of its minResources at most what the pair's nodes hold (overcommit permits
    /// up to 1.2 ×, proportion up to the total; cordoned nodes count, as Volcano counts
    /// them) and at most the Queue's capability (proportion's realCapability). No
    /// minResources: Volcano enqueues without asking the plugins.
    fn enqueues(&self, pod_group: &Value) -> bool {
        let Some(min) = pod_group["spec"]["minResources"].as_object() else {
            return true;
        };
        let capability = self.queue.map(|q| &q["spec"]["capability"]);
        min.iter().all(|(name, need)| {
            let Some(need) = nanos(need) else {
                return true;
            };
            let held: i128 = self
                .nodes
                .iter()
                .filter_map(|n| nanos(&n["status"]["allocatable"][name]))
                .sum();
            let cap = capability.and_then(|c| nanos(&c[name]));
            need <= held && cap.is_none_or(|cap| need <= cap)
        })
    }
}

/// A quantity (`"8"`, `"32Gi"`, `"500m"`) in nano-units.
fn nanos(value: &Value) -> Option<i128> {
    let text = value.as_str()?;
    let quantity = k8s_openapi::apimachinery::pkg::api::resource::Quantity(text.to_string());
    gangplank::job::quantity::Nanos::parse(&quantity).map(|n| n.0)
}

/// Deletes the job, its pods (forcibly: no kubelet ends them) and its PodGroup (`group` of
/// `resource`), and waits until the PodGroup is gone, so that no reservation of it is left
/// in Volcano's queue.
async fn clean_up_job(
    client: &kube::Client,
    namespace: &str,
    pair: usize,
    job: &Value,
    (group, resource): (&str, &ApiResource),
) {
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    let jobs_api = jobs::api_for(client, namespace, job);
    if let Err(e) = jobs_api.delete(name, &DeleteParams::default()).await {
        panic!("pair {pair}: delete the job: {e}");
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(&format!("training.kubeflow.org/job-name={name}"));
    let now = DeleteParams::default().grace_period(0);
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
    super::wait_for(
        &format!("pair {pair}: pods and PodGroup gone"),
        LIMIT,
        || async {
            // The controller may still create a pod it had planned: delete until none is left.
            pods.delete_collection(&now, &params)
                .await
                .map_err(|e| e.to_string())?;
            let _ = groups.delete(group, &DeleteParams::default()).await;
            let left = pods
                .list(&params)
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            let group_left = groups
                .get_opt(group)
                .await
                .map_err(|e| e.to_string())?
                .is_some();
            (left == 0 && !group_left)
                .then_some(())
                .ok_or(format!("{left} pods, PodGroup left: {group_left}"))
        },
    )
    .await;
}

fn node_names(nodes: &[Value]) -> Vec<String> {
    nodes
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}
