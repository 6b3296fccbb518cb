//! Where kube-scheduler (or Volcano) puts a gang's pods: `data.cluster.kube_scheduler`, a
//! fact the capacity policy reads when its counting cannot decide (replica types of
//! different sizes or reaches sharing nodes, where the outcome depends on the order the
//! scheduler takes the pods in and the nodes it scores highest).
//!
//! Entry point: [`kube_scheduler`]. It searches every order and tie of one pod group cycle
//! ([`search`]) with the default profile's scores ([`score`]) on the request's node classes,
//! idle (no pods of others on them, as the capacity policy counts them), and says:
//!
//! - `always`: every order and tie places the gang; `never`: none does (with one such run,
//!   for the message); `eventually`: some attempts fail, but in every order some ties place
//!   it, and a retried gang keeps its order and draws its ties anew; `either`: it depends
//!   on the order of its first attempt;
//! - `unknown` with `why`: something the search does not model (pods for another scheduler,
//!   affinities, spread constraints, volumes, priorities that differ, minAvailable below the
//!   pod count) or more states than its budget.
//!
//! A gang whose pods all name `schedulerName: volcano` is searched as Volcano v1.16's
//! allocate action places it with the chart's default tiers (`scheduler: "volcano"` in the
//! document): one job's tasks are tried in the order of the priority plugin's TaskOrderFn,
//! equal priorities by `CompareTask` (pkg/controllers/job/helpers/helpers.go:54-69): the
//! pod name's last `-` field as a number, then creation time (seconds), then UID. The
//! controller names pods `<job>-<type>-<index>` and creates a gang's pods at once
//! (controller/apply.rs), so Volcano takes every type's pod 0, then every pod 1, and so on,
//! in an order within each index that the API server's clock and the pods' random UIDs fix
//! when they are created and that every session repeats ([`Order::Rounds`], `order: index`).
//! Where a pod name carries no index (the MPI launcher `<job>-launcher`, a TrainJob's
//! JobSet pods `<…>-<index>-<random>`) those pods compare by creation time and UID, and
//! with the indexed ones in no total order (the heap's order then follows Go's map order):
//! every interleaving is searched (`order: any`). Nodes are scored by nodeorder and binpack
//! ([`score::volcano_score`]), ties at random; a job that fails allocation is tried again in
//! the next session (every second) in the same order with ties drawn anew, as
//! `eventually` says. A job in a network topology (HyperNodes) or with task priorities
//! that differ is `unknown`.
//!
//! With `reach`, the classes it found each replica type may use: the policy trusts the
//! verdict only when that is its own reach (policies/lib/nodes.rego decides it there).
//! Nothing is written when the replica types do not share a node class: the policy's counts
//! are exact then.

pub mod model;
mod release;
pub mod score;
mod search;

use std::collections::{BTreeMap, BTreeSet};

use regorus::Value as RegoValue;
use serde_json::{json, Value};

use model::{at, min_available, NodeClass, Replica};
use score::PodAsk;
use search::{Found, Kind, Order, Scorer, Search, GPU};

/// States the search visits at most per review; past it the verdict is `unknown`.
pub const BUDGET: usize = 2_000;

/// kube-scheduler's names for itself: pods naming another scheduler are not its to place.
const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Volcano's scheduler name (the chart's `vc-scheduler`).
const VOLCANO: &str = "volcano";

/// Volcano's per-task priority annotation (pkg/scheduler/api/job_info.go:204, 247-251): it
/// overrides the pod's priority in the task order.
const TASK_PRIORITY: &str = "volcano.sh/task-priority";

/// gangplank's annotation that gives a Volcano PodGroup a `networkTopology`
/// (src/job/network_topology.rs).
const NETWORK_TOPOLOGY: &str = "gangplank.dev/network-topology";

/// The scheduler the search plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    KubeScheduler,
    Volcano,
}

/// `data.cluster.kube_scheduler` for the policy input `input` on `classes` (the request's
/// projection) of a cluster of `node_count` nodes; `None` when the policy needs none.
pub fn kube_scheduler(classes: &[NodeClass], node_count: u64, input: &RegoValue) -> Option<Value> {
    let all = Replica::all_of(input)?;
    let all_keys: Vec<String> = all.iter().map(|r| r.key.clone()).collect();
    let replicas: Vec<Replica> = all.into_iter().filter(|r| r.replicas > 0).collect();
    if replicas.is_empty() || classes.is_empty() {
        return None;
    }
    let reach: BTreeMap<String, Vec<usize>> = replicas
        .iter()
        .map(|r| (r.key.clone(), reach_of(r, classes)))
        .collect();
    let (kinds, kind_of_replica) = kinds_of(&replicas, classes, &reach);
    if !shared(&kinds) {
        return None;
    }
    let mut doc = json!({"reach": reach});
    let model = model_of(&replicas);
    if model == Ok(Model::Volcano) {
        // Said even when not searched: the policy's messages name the scheduler.
        doc["scheduler"] = json!(VOLCANO);
    }
    let verdict =
        match model.and_then(|model| unmodelled(&replicas, input, model).map_or(Ok(model), Err)) {
            Err(why) => json!({"outcome": "unknown", "why": why}),
            Ok(Model::KubeScheduler) => release::native(
                classes,
                node_count,
                release::Gang {
                    min: gang_min(input, kinds.1.iter().map(|k| k.pods).sum()),
                    kinds,
                    replicas: &replicas,
                    kind_of_replica: &kind_of_replica,
                    all_keys,
                },
                input,
            ),
            Ok(Model::Volcano) => {
                let pods: u32 = kinds.1.iter().map(|k| k.pods).sum();
                let order = volcano_order(&replicas, &kind_of_replica, kinds.1.len(), pods);
                let named = if order == Order::Any { "any" } else { "index" };
                let mut found = search(classes, node_count, kinds, pods, order, Scorer::Volcano);
                if let Some(found) = found.as_object_mut() {
                    found.insert("order".into(), json!(named));
                }
                found
            }
        };
    if let (Some(doc), Some(verdict)) = (doc.as_object_mut(), verdict.as_object()) {
        doc.extend(verdict.clone());
    }
    Some(doc)
}

/// The scheduler of the gang's pods: kube-scheduler when none names another, Volcano when
/// all name it; else why the search cannot tell.
fn model_of(replicas: &[Replica]) -> Result<Model, String> {
    fn scheduler(r: &Replica) -> &str {
        r.scheduler_name.as_deref().unwrap_or(DEFAULT_SCHEDULER)
    }
    if let Some(r) = replicas
        .iter()
        .find(|r| ![DEFAULT_SCHEDULER, VOLCANO].contains(&scheduler(r)))
    {
        return Err(format!(
            "{} pods go to scheduler {}",
            r.replica_type,
            scheduler(r)
        ));
    }
    let volcano: Vec<&Replica> = replicas
        .iter()
        .filter(|r| scheduler(r) == VOLCANO)
        .collect();
    let others: Vec<&Replica> = replicas
        .iter()
        .filter(|r| scheduler(r) != VOLCANO)
        .collect();
    match (volcano.as_slice(), others.as_slice()) {
        ([], _) => Ok(Model::KubeScheduler),
        (_, []) => Ok(Model::Volcano),
        ([v, ..], [k, ..]) => Err(format!(
            "{} pods go to scheduler {VOLCANO}, {} pods to {DEFAULT_SCHEDULER}",
            v.replica_type, k.replica_type
        )),
    }
}

/// Why the search cannot stand for the scheduler `model` on this job, if it cannot.
fn unmodelled(replicas: &[Replica], input: &RegoValue, model: Model) -> Option<String> {
    if model == Model::Volcano {
        if let Some(why) = volcano_unmodelled(replicas, input) {
            return Some(why);
        }
    }
    if let Some(kind) = spread_by_a_service(input) {
        return Some(format!(
            "{kind} pods share a Service, whose default topology spreading the search does not score"
        ));
    }
    if let Some(r) = replicas.iter().find(|r| !r.placement.unmodelled.is_empty()) {
        return Some(format!(
            "{} pods set {}, which the search does not evaluate",
            r.replica_type,
            r.placement.unmodelled.join(", ")
        ));
    }
    let priorities: BTreeSet<_> = replicas
        .iter()
        .map(|r| &r.placement.priority_class_name)
        .collect();
    if priorities.len() > 1 {
        return Some("the replica types have different priorityClassNames".into());
    }
    // kube-scheduler's cycle tries every queued pod of the gang in order, skipping those that
    // find no node, and places it when minCount did (Permit): the search plays that with any
    // minimum. A cycle begun before every pod exists (the gang gate opens at minCount) takes
    // them in an order the search's `any` includes. Volcano's allocate with a minimum below
    // the pod count is not played.
    let total: i64 = replicas.iter().map(|r| r.replicas).sum();
    if model == Model::Volcano && min_available(input).is_some_and(|m| m < total) {
        return Some(
            "minAvailable is below the pod count: which pods Volcano's allocate takes is not searched"
                .into(),
        );
    }
    None
}

/// How many of the gang's `total` pods must be placed: minAvailable, within 1 and the total.
fn gang_min(input: &RegoValue, total: u32) -> u32 {
    min_available(input)
        .and_then(|m| u32::try_from(m.max(1)).ok())
        .map_or(total, |m| m.min(total))
}

/// What Volcano's allocate does differently for this job that the search does not play.
fn volcano_unmodelled(replicas: &[Replica], input: &RegoValue) -> Option<String> {
    let topology = at(
        input,
        &["object", "metadata", "annotations", NETWORK_TOPOLOGY],
    )
    .or_else(|| at(input, &["job", "trainer", "networkTopology"]))
    .is_some_and(|v| *v != RegoValue::Null);
    if topology {
        return Some(
            "Volcano keeps the gang in a network topology (HyperNodes), which the search does not model"
                .into(),
        );
    }
    let priorities: BTreeSet<Option<String>> = replicas
        .iter()
        .map(|r| r.annotations.get(TASK_PRIORITY).map(Value::to_string))
        .collect();
    if priorities.len() > 1 {
        return Some(format!(
            "the replica types have different {TASK_PRIORITY} annotations"
        ));
    }
    None
}

/// The orders Volcano's allocate takes the gang's pods in: by replica index (see the module
/// documentation) when every replica type's pods are named `<job>-<type>-<index>`; else any.
/// `kind_of_replica[i]` is the kind of `replicas[i]`, `pods` the gang's pods.
fn volcano_order(
    replicas: &[Replica],
    kind_of_replica: &[usize],
    kinds: usize,
    pods: u32,
) -> Order {
    let indexed = |r: &Replica| {
        let fields: Vec<&str> = r.last_pod_name.split('-').collect();
        r.step.is_none()
            && fields.len() >= 3
            && fields.last() == Some(&(r.replicas - 1).to_string().as_str())
    };
    if !replicas.iter().all(indexed) {
        return Order::Any;
    }
    if pods > MAX_PODS {
        return Order::Any; // the search answers `unknown` without searching
    }
    let most = replicas.iter().map(|r| r.replicas).max().unwrap_or(0);
    let rounds = (0..most)
        .map(|index| {
            let mut round = vec![0u32; kinds];
            for (r, &k) in replicas.iter().zip(kind_of_replica) {
                if let Some(n) = round.get_mut(k).filter(|_| r.replicas > index) {
                    *n += 1;
                }
            }
            round
        })
        .collect();
    Order::Rounds(rounds)
}

/// Kinds whose pods one Service selects together (the MPIJob's headless `<job>` Service, a
/// TrainJob's JobSet Services): PodTopologySpread's system default constraints then spread
/// them by hostname and zone, a score the search leaves out. The other kinds get a Service
/// per pod, which spreads nothing.
fn spread_by_a_service(input: &RegoValue) -> Option<String> {
    const SHARED_SERVICE: [&str; 2] = ["MPIJob", "TrainJob"];
    let kind = at(input, &["job", "kind"])?.as_string().ok()?.to_string();
    SHARED_SERVICE.contains(&kind.as_str()).then_some(kind)
}

/// The classes whose nodes replica `r`'s pods may use.
fn reach_of(r: &Replica, classes: &[NodeClass]) -> Vec<usize> {
    let tolerations = r.parsed_tolerations();
    (0..classes.len())
        .filter(|&i| classes.get(i).is_some_and(|c| r.admits(&tolerations, c)))
        .collect()
}

/// The replica types merged into kinds of interchangeable pods, and each one's kind.
fn kinds_of(
    replicas: &[Replica],
    classes: &[NodeClass],
    reach: &BTreeMap<String, Vec<usize>>,
) -> ((Vec<String>, Vec<Kind>), Vec<usize>) {
    let resources: Vec<String> = replicas
        .iter()
        .flat_map(|r| r.pod_requests.keys().cloned())
        .chain(["pods".to_string()])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut kinds: Vec<Kind> = Vec::new();
    let mut kind_of_replica = Vec::with_capacity(replicas.len());
    for r in replicas {
        let kind = kind_of(r, classes, &resources, reach);
        let same = kinds.iter_mut().enumerate().find(|(_, k)| {
            k.demand == kind.demand
                && k.reach == kind.reach
                && k.untolerated == kind.untolerated
                && k.ask == kind.ask
        });
        match same {
            Some((i, k)) => {
                k.types.push(r.replica_type.clone());
                k.pods += kind.pods;
                kind_of_replica.push(i);
            }
            None => {
                kind_of_replica.push(kinds.len());
                kinds.push(kind);
            }
        }
    }
    ((resources, kinds), kind_of_replica)
}

fn kind_of(
    r: &Replica,
    classes: &[NodeClass],
    resources: &[String],
    reach: &BTreeMap<String, Vec<usize>>,
) -> Kind {
    let amount = |m: &BTreeMap<String, i64>, name: &str| m.get(name).copied().unwrap_or(0);
    let tolerations = r.parsed_tolerations();
    let demand = resources
        .iter()
        .map(|name| match name.as_str() {
            "pods" => 1,
            _ => amount(&r.pod_requests, name),
        })
        .collect();
    let non_zero = &r.placement.non_zero_requests;
    Kind {
        types: vec![r.replica_type.clone()],
        // Capped past what the search takes, so that adding kinds up cannot overflow.
        pods: u32::try_from(r.replicas.min(i64::from(MAX_PODS) + 1)).unwrap_or(0),
        demand,
        ask: PodAsk {
            non_zero: [amount(non_zero, "cpu"), amount(non_zero, "memory")],
            actual: [
                amount(&r.pod_requests, "cpu"),
                amount(&r.pod_requests, "memory"),
            ],
            gpu: amount(&r.pod_requests, GPU),
        },
        reach: reach.get(&r.key).cloned().unwrap_or_default(),
        untolerated: classes
            .iter()
            .map(|c| {
                let n = c
                    .preferred_taints
                    .iter()
                    .filter(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
                    .count();
                i64::try_from(n).unwrap_or(i64::MAX)
            })
            .collect(),
    }
}

/// Whether two kinds may use nodes of one class: only then does the order matter.
fn shared((_, kinds): &(Vec<String>, Vec<Kind>)) -> bool {
    kinds.iter().enumerate().any(|(i, a)| {
        kinds
            .iter()
            .skip(i + 1)
            .any(|b| a.reach.iter().any(|c| b.reach.contains(c)))
    })
}

/// Most pods the search takes on: a node holds counts of each kind as 16-bit numbers.
const MAX_PODS: u32 = u16::MAX as u32;

/// Searches `order` until at least `min` of the gang's pods are placed.
fn search(
    classes: &[NodeClass],
    node_count: u64,
    (resources, kinds): (Vec<String>, Vec<Kind>),
    min: u32,
    order: Order,
    scorer: Scorer,
) -> Value {
    let total: u32 = kinds.iter().map(|k| k.pods).sum();
    if total > MAX_PODS {
        return json!({"outcome": "unknown", "why": format!("{total} pods are more than the search takes")});
    }
    let names: Vec<String> = kinds.iter().map(|k| k.types.join(" and ")).collect();
    let mut search = Search::new(
        classes,
        resources,
        kinds,
        min.min(total),
        feasible_nodes_to_find(node_count),
        BUDGET,
    )
    .with_order(order)
    .with_scorer(scorer);
    let found = search.run();
    let states = search.visited();
    let name = |k: usize| names.get(k).cloned().unwrap_or_default();
    match found {
        Found::Always => json!({"outcome": "always", "states": states}),
        Found::Eventually => json!({"outcome": "eventually", "states": states}),
        Found::Either => json!({"outcome": "either", "states": states}),
        Found::TooLarge => json!({"outcome": "unknown", "states": states,
            "why": format!("the orders and ties to search are more than {BUDGET} states")}),
        Found::Never { example, stuck } => json!({
            "outcome": "never",
            "states": states,
            "example": example.iter().map(|&(k, class)| json!({"types": name(k), "class": class})).collect::<Vec<_>>(),
            "stuck": name(stuck),
        }),
    }
}

/// How many feasible nodes kube-scheduler scores for one pod (`numFeasibleNodesToFind` with
/// the default `percentageOfNodesToScore`): all of them below 100 nodes. Volcano's
/// `CalculateNumOfFeasibleNodesToFind` (pkg/scheduler/util/scheduler_helper.go:56-75, with
/// cmd/scheduler/app/options/options.go:49-51's defaults) finds as many.
pub fn feasible_nodes_to_find(nodes: u64) -> u64 {
    const MIN: u64 = 100;
    if nodes < MIN {
        return nodes;
    }
    let percentage = 50u64.saturating_sub(nodes / 125).max(5);
    (nodes * percentage / 100).max(MIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::to_rego::to_rego;

    /// Nodes of 8 GPUs: (product, cpu cores, memory GiB, how many).
    fn classes(nodes: &[(&str, i64, i64, u32)]) -> Vec<NodeClass> {
        let doc = json!({"node_classes": nodes.iter().map(|(product, cpu, gib, size)| json!({
            "size": size,
            "labels": {"nvidia.com/gpu.product": product},
            "taints": [],
            "allocatable": {"cpu": cpu * 1000, "memory": gib << 30, "pods": 110, "nvidia.com/gpu": 8},
        })).collect::<Vec<_>>()});
        NodeClass::all_of(&doc)
    }

    /// A replica of `n` pods asking `gpus` GPUs, 8 cpu and 64Gi each, selecting `product`.
    fn replica(name: &str, n: i64, gpus: i64, product: Option<&str>) -> Value {
        let requests = json!({"cpu": 8000, "memory": 64_i64 << 30, "nvidia.com/gpu": gpus});
        json!({
            "key": name, "type": name, "replicas": n, "podRequests": requests,
            "nodeSelector": product.map_or(json!({}), |p| json!({"nvidia.com/gpu.product": p})),
            "tolerations": [],
            "placement": {"nonZeroRequests": {"cpu": 8000, "memory": 64_i64 << 30}, "unmodelled": []},
        })
    }

    fn input(replicas: Vec<Value>) -> RegoValue {
        to_rego(&json!({"job": {"replicas": replicas}, "object": {"spec": {}}}))
    }

    /// One Master of 8 GPUs without a nodeSelector, two Workers of 8 GPUs on the A100s.
    fn gang() -> RegoValue {
        input(vec![
            replica("Master", 1, 8, None),
            replica("Worker", 2, 8, Some("A100")),
        ])
    }

    fn outcome(nodes: &[(&str, i64, i64, u32)], input: &RegoValue) -> String {
        let found = kube_scheduler(&classes(nodes), 3, input).unwrap_or_default();
        found["outcome"].as_str().unwrap_or("none").to_string()
    }

    #[test]
    fn ties_the_master_may_lose_are_drawn_again_on_a_retry() {
        // Three identical nodes: a Master taken first ties between all three.
        let nodes = [("A100", 32, 256, 2), ("H100", 32, 256, 1)];
        assert_eq!(outcome(&nodes, &gang()), "eventually");
    }

    #[test]
    fn a_master_that_prefers_the_workers_nodes_depends_on_the_order() {
        // The H100 has less cpu: a Master taken first always picks an A100.
        let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
        assert_eq!(outcome(&nodes, &gang()), "either");
    }

    /// `gang()` with the job view's parse of a `gangplank.dev/release-order`.
    fn released(release_order: Value) -> RegoValue {
        to_rego(&json!({"job": {
            "replicas": [replica("Master", 1, 8, None), replica("Worker", 2, 8, Some("A100"))],
            "releaseOrder": release_order,
        }, "object": {"spec": {}}}))
    }

    #[test]
    fn a_gang_the_order_decides_is_given_the_release_order_that_places_it() {
        let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
        let found = kube_scheduler(&classes(&nodes), 3, &gang()).unwrap_or_default();
        assert_eq!(found["outcome"], "either", "{found}");
        // Workers first take both A100s; the Master then finds only the H100.
        assert_eq!(
            found["placingOrder"],
            json!({"types": ["Worker", "Master"], "outcome": "always"})
        );
    }

    #[test]
    fn a_release_order_is_the_only_order_searched() {
        let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
        let search = |order: Value| {
            kube_scheduler(&classes(&nodes), 3, &released(order)).unwrap_or_default()
        };
        let placing = search(json!({"types": ["Worker", "Master"]}));
        assert_eq!(placing["outcome"], "always", "{placing}");
        assert_eq!(placing["release"], json!(["Worker", "Master"]));
        assert!(placing.get("placingOrder").is_none(), "{placing}");
        // The Master first takes an A100 (more cpu left than the H100): a Worker is stuck,
        // and the order that places the gang is named.
        let failing = search(json!({"types": ["Master", "Worker"]}));
        assert_eq!(failing["outcome"], "never", "{failing}");
        assert_eq!(failing["stuck"], "Worker", "{failing}");
        assert_eq!(
            failing["placingOrder"]["types"],
            json!(["Worker", "Master"])
        );
        // An annotation the job view could not parse: not searched, the view's words kept.
        let bad = search(json!({"types": [], "error": "names \"Chief\""}));
        assert_eq!(bad["outcome"], "unknown", "{bad}");
        assert_eq!(bad["why"], "names \"Chief\"");
    }

    #[test]
    fn a_release_order_names_the_types_without_pods_too() {
        let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
        let job = input(vec![
            replica("Master", 1, 8, None),
            replica("Worker", 2, 8, Some("A100")),
            replica("Evaluator", 0, 8, None),
        ]);
        let found = kube_scheduler(&classes(&nodes), 3, &job).unwrap_or_default();
        assert_eq!(
            found["placingOrder"]["types"],
            json!(["Worker", "Master", "Evaluator"])
        );
    }

    #[test]
    fn a_minimum_below_the_pod_count_is_searched_for_kube_scheduler() {
        // The gang the order decides in full: with minAvailable 2 any two of its three pods
        // find a node in every order (the Master on an A100 leaves one A100 for a Worker).
        let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
        let with_min = |min: i64| {
            to_rego(&json!({"job": {"replicas": [
                replica("Master", 1, 8, None), replica("Worker", 2, 8, Some("A100")),
            ]}, "object": {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": min}}}}}))
        };
        assert_eq!(outcome(&nodes, &with_min(2)), "always");
        assert_eq!(outcome(&nodes, &with_min(3)), "either");
        // Only one A100 for two Workers: the Master and one Worker always fit (2), never 3.
        let small = [("A100", 32, 256, 1), ("H100", 32, 256, 1)];
        assert_eq!(outcome(&small, &with_min(2)), "eventually");
        assert_eq!(outcome(&small, &with_min(3)), "never");
    }

    #[test]
    fn a_master_that_prefers_its_own_node_is_always_placed() {
        let nodes = [("A100", 32, 256, 2), ("H100", 64, 512, 1)];
        assert_eq!(outcome(&nodes, &gang()), "always");
    }

    #[test]
    fn a_gang_no_order_places_is_never_placed_and_one_run_is_named() {
        // Only one A100 for two Workers: no order helps.
        let nodes = [("A100", 32, 256, 1), ("H100", 32, 256, 1)];
        let found = kube_scheduler(&classes(&nodes), 2, &gang()).unwrap_or_default();
        assert_eq!(found["outcome"], "never", "{found}");
        assert_eq!(found["stuck"], "Worker", "{found}");
        assert_eq!(found["reach"], json!({"Master": [0, 1], "Worker": [0]}));
    }

    #[test]
    fn types_that_share_no_node_need_no_search() {
        let job = input(vec![
            replica("Master", 1, 8, Some("H100")),
            replica("Worker", 2, 8, Some("A100")),
        ]);
        assert!(kube_scheduler(
            &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
            3,
            &job
        )
        .is_none());
    }

    #[test]
    fn what_the_search_does_not_model_is_named_not_guessed() {
        let mut master = replica("Master", 1, 8, None);
        master["placement"]["unmodelled"] = json!(["affinity"]);
        let job = input(vec![master, replica("Worker", 2, 8, Some("A100"))]);
        let found = kube_scheduler(
            &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
            3,
            &job,
        )
        .unwrap_or_default();
        assert_eq!(found["outcome"], "unknown");
        assert_eq!(
            found["why"],
            "Master pods set affinity, which the search does not evaluate"
        );
        let mut other = replica("Master", 1, 8, None);
        other["schedulerName"] = json!("my-scheduler");
        let job = input(vec![other, replica("Worker", 2, 8, Some("A100"))]);
        let found = kube_scheduler(
            &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
            3,
            &job,
        )
        .unwrap_or_default();
        assert_eq!(found["why"], "Master pods go to scheduler my-scheduler");
    }

    #[test]
    fn pods_one_service_spreads_are_not_searched() {
        let job = to_rego(&json!({"job": {"kind": "MPIJob", "replicas": [
            replica("Launcher", 1, 8, None), replica("Worker", 2, 8, Some("A100")),
        ]}, "object": {"spec": {}}}));
        let found = kube_scheduler(
            &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
            3,
            &job,
        )
        .unwrap_or_default();
        assert_eq!(found["outcome"], "unknown");
        assert_eq!(
            found["why"],
            "MPIJob pods share a Service, whose default topology spreading the search does not score"
        );
    }

    #[test]
    fn a_gang_of_billions_of_pods_is_not_searched_and_does_not_overflow() {
        let job = input(vec![
            replica("Master", 5_000_000_000, 8, None),
            replica("Worker", 5_000_000_000, 8, Some("A100")),
        ]);
        let found = kube_scheduler(
            &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
            3,
            &job,
        )
        .unwrap_or_default();
        assert_eq!(found["outcome"], "unknown");
        assert_eq!(found["why"], "131072 pods are more than the search takes");
    }

    #[test]
    fn large_clusters_score_only_some_nodes() {
        assert_eq!(feasible_nodes_to_find(50), 50);
        assert_eq!(feasible_nodes_to_find(100), 100);
        assert_eq!(feasible_nodes_to_find(1000), 420);
        assert_eq!(feasible_nodes_to_find(5000), 500);
        assert_eq!(feasible_nodes_to_find(100_000), 5000);
    }

    /// `r` as the controller creates it for Volcano: `schedulerName: volcano`, pods named
    /// `job-<type>-<index>`.
    fn volcano(mut r: Value) -> Value {
        let last = r["replicas"].as_i64().unwrap_or(1) - 1;
        let name = r["type"].as_str().unwrap_or_default().to_lowercase();
        r["schedulerName"] = json!("volcano");
        r["lastPodName"] = json!(format!("job-{name}-{last}"));
        r
    }

    fn volcano_gang() -> RegoValue {
        input(vec![
            volcano(replica("Master", 1, 8, None)),
            volcano(replica("Worker", 2, 8, Some("A100"))),
        ])
    }

    #[test]
    fn volcano_gangs_are_searched_in_index_order_with_volcanos_scores() {
        // kube-scheduler's Master prefers an A100 (more cpu left): either. Volcano's scores
        // the H100 658.5 and an A100 657 (score.rs's tests): the Master takes the H100
        // whether it goes before or after Worker 0, and Worker 1 comes last: always.
        let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
        assert_eq!(outcome(&nodes, &gang()), "either");
        let found = kube_scheduler(&classes(&nodes), 3, &volcano_gang()).unwrap_or_default();
        assert_eq!(found["outcome"], "always", "{found}");
        assert_eq!(found["scheduler"], "volcano");
        assert_eq!(found["order"], "index");
        assert_eq!(found["reach"], json!({"Master": [0, 1], "Worker": [0]}));
    }

    #[test]
    fn volcano_draws_ties_anew_each_session() {
        // Three identical nodes: the Master, first or second, ties between an A100 and the
        // H100; a failed session is retried in the same order: eventually.
        let nodes = [("A100", 32, 256, 2), ("H100", 32, 256, 1)];
        assert_eq!(outcome(&nodes, &volcano_gang()), "eventually");
        // One A100 for two Workers: never, whatever Volcano does.
        let nodes = [("A100", 32, 256, 1), ("H100", 32, 256, 1)];
        let found = kube_scheduler(&classes(&nodes), 2, &volcano_gang()).unwrap_or_default();
        assert_eq!(found["outcome"], "never", "{found}");
        assert_eq!(found["stuck"], "Worker", "{found}");
    }

    #[test]
    fn pods_without_an_index_in_their_name_are_searched_in_every_order() {
        let mut launcher = volcano(replica("Launcher", 1, 8, None));
        launcher["lastPodName"] = json!("job-launcher");
        let job = input(vec![
            launcher,
            volcano(replica("Worker", 2, 8, Some("A100"))),
        ]);
        let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
        let found = kube_scheduler(&classes(&nodes), 3, &job).unwrap_or_default();
        assert_eq!(found["order"], "any", "{found}");
        assert_eq!(found["outcome"], "always", "{found}");
    }

    #[test]
    fn what_volcano_does_that_the_search_does_not_play_is_named() {
        let nodes = [("A100", 32, 256, 2), ("H100", 32, 256, 1)];
        let why = |job: &RegoValue| {
            let found = kube_scheduler(&classes(&nodes), 3, job).unwrap_or_default();
            found["why"].as_str().unwrap_or("none").to_string()
        };
        let job = input(vec![
            volcano(replica("Master", 1, 8, None)),
            replica("Worker", 2, 8, Some("A100")),
        ]);
        assert_eq!(
            why(&job),
            "Master pods go to scheduler volcano, Worker pods to default-scheduler"
        );
        let mut master = volcano(replica("Master", 1, 8, None));
        master["annotations"] = json!({"volcano.sh/task-priority": "10"});
        let job = input(vec![master, volcano(replica("Worker", 2, 8, Some("A100")))]);
        assert_eq!(
            why(&job),
            "the replica types have different volcano.sh/task-priority annotations"
        );
        let job = to_rego(&json!({
            "job": {"replicas": [
                volcano(replica("Master", 1, 8, None)),
                volcano(replica("Worker", 2, 8, Some("A100"))),
            ]},
            "object": {"spec": {}, "metadata": {"annotations":
                {"gangplank.dev/network-topology": "mode=hard,highestTierAllowed=1"}}},
        }));
        assert!(why(&job).contains("network topology"), "{}", why(&job));
        let mut job = json!({"job": {"replicas": [
            volcano(replica("Master", 1, 8, None)),
            volcano(replica("Worker", 2, 8, Some("A100"))),
        ]}, "object": {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}}});
        assert!(why(&to_rego(&job)).starts_with("minAvailable is below"));
        job["object"]["spec"] = json!({});
        job["job"]["replicas"][0]["placement"]["unmodelled"] = json!(["affinity"]);
        assert_eq!(
            why(&to_rego(&job)),
            "Master pods set affinity, which the search does not evaluate"
        );
    }
}
