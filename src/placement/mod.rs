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
mod tests;
