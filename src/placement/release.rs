//! kube-scheduler's native gang when `gangplank controller` fixes its order: the job's
//! `gangplank.dev/release-order` (src/job/release_order.rs) makes the controller release the
//! pods to the scheduler one replica type after the other, and the pod group cycle then
//! takes them in that order. Without the annotation every order is searched, and for a gang
//! that some orders place and others never do (`either`), one release order that places it
//! is named (`placingOrder`) for the mutation to write (policies/gang_scheduling.rego).
//!
//! Entry point: [`native`].

use regorus::Value as RegoValue;
use serde_json::{json, Value};

use super::model::{at, NodeClass, Replica};
use super::search::{Found, Kind, Order, Scorer, Search};
use super::{feasible_nodes_to_find, search, BUDGET, MAX_PODS};

/// Replica types past which no release order is looked for (4! = 24 orders at most).
const MAX_TYPES_ORDERED: usize = 4;

/// The gang's replica types in one job: the kinds the search merges them into, and each
/// type's kind.
pub(super) struct Gang<'a> {
    pub kinds: (Vec<String>, Vec<Kind>),
    /// Pods that must be placed (minAvailable, else all).
    pub min: u32,
    pub replicas: &'a [Replica],
    pub kind_of_replica: &'a [usize],
    /// Every replicaSpecs key, zero replicas included: a release order names them all.
    pub all_keys: Vec<String>,
}

/// `data.cluster.kube_scheduler`'s verdict for the native gang (see the module doc).
pub(super) fn native(
    classes: &[NodeClass],
    node_count: u64,
    gang: Gang,
    input: &RegoValue,
) -> Value {
    let written = match written_order(input) {
        Some(Err(why)) => return json!({"outcome": "unknown", "why": why}),
        Some(Ok(types)) => Some(types),
        None => None,
    };
    let order = match &written {
        Some(types) => released(types, &gang),
        None => Order::Any,
    };
    let mut found = search(
        classes,
        node_count,
        gang.kinds.clone(),
        gang.min,
        order,
        Scorer::KubeScheduler,
    );
    let outcome = found["outcome"].as_str().unwrap_or_default().to_string();
    let ordered_may_help = match written {
        Some(_) => matches!(outcome.as_str(), "never" | "eventually"),
        None => outcome == "either",
    };
    let placing = ordered_may_help
        .then(|| placing_order(classes, node_count, &gang))
        .flatten();
    if let Some(found) = found.as_object_mut() {
        if let Some(types) = written {
            found.insert("release".into(), json!(types));
        }
        if let Some((types, outcome)) = placing {
            found.insert(
                "placingOrder".into(),
                json!({"types": types, "outcome": outcome}),
            );
        }
    }
    found
}

/// The job's release order as the job view parsed it (`input.job.releaseOrder`), or why the
/// annotation names none; `None` without the annotation.
fn written_order(input: &RegoValue) -> Option<Result<Vec<String>, String>> {
    let view = at(input, &["job", "releaseOrder"])?;
    if let Some(error) = at(view, &["error"]).and_then(|e| e.as_string().ok()) {
        return Some(Err(error.to_string()));
    }
    let types = at(view, &["types"])?.as_array().ok()?;
    Some(Ok(types
        .iter()
        .filter_map(|t| t.as_string().ok().map(|s| s.to_string()))
        .collect()))
}

/// The one order the pods are taken in when released type after type in `types`.
fn released(types: &[String], gang: &Gang) -> Order {
    let pods: u32 = gang.kinds.1.iter().map(|k| k.pods).sum();
    if pods > MAX_PODS {
        return Order::Any; // the search answers `unknown` without searching
    }
    let sequence: Vec<usize> = types
        .iter()
        .flat_map(|t| {
            gang.replicas
                .iter()
                .zip(gang.kind_of_replica)
                .filter(move |(r, _)| &r.key == t)
                .flat_map(|(r, &k)| {
                    std::iter::repeat_n(k, usize::try_from(r.replicas).unwrap_or(0))
                })
        })
        .collect();
    Order::fixed(&sequence, gang.kinds.1.len())
}

/// A release order that places the gang on every attempt (`always`), else one that places
/// it within retries (`eventually`), searched over every order of the replica types within
/// one budget; `None` when none does or there are too many types.
fn placing_order(
    classes: &[NodeClass],
    node_count: u64,
    gang: &Gang,
) -> Option<(Vec<String>, &'static str)> {
    if gang.replicas.len() > MAX_TYPES_ORDERED {
        return None;
    }
    let mut budget = BUDGET;
    let mut eventually = None;
    let mut tried: Vec<Vec<usize>> = Vec::new();
    for permutation in permutations(gang.replicas.len()) {
        let keys: Vec<String> = permutation
            .iter()
            .filter_map(|&i| gang.replicas.get(i).map(|r| r.key.clone()))
            .collect();
        let kinds_in_order = kind_blocks(&permutation, gang.kind_of_replica);
        if tried.contains(&kinds_in_order) {
            continue; // types of one kind swapped: the same search
        }
        tried.push(kinds_in_order);
        let mut search = Search::new(
            classes,
            gang.kinds.0.clone(),
            gang.kinds.1.clone(),
            gang.min,
            feasible_nodes_to_find(node_count),
            budget,
        )
        .with_order(released(&keys, gang));
        let found = search.run();
        budget = budget.saturating_sub(search.visited());
        match found {
            Found::Always => return Some((with_empty_types(keys, gang), "always")),
            Found::Eventually if eventually.is_none() => eventually = Some(keys),
            Found::TooLarge => break,
            _ => {}
        }
    }
    eventually.map(|keys| (with_empty_types(keys, gang), "eventually"))
}

/// `keys` followed by the replica types with no pods, which a release order names too.
fn with_empty_types(mut keys: Vec<String>, gang: &Gang) -> Vec<String> {
    for key in &gang.all_keys {
        if !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    keys
}

/// The kinds a permutation of replica types releases, adjacent repeats merged.
fn kind_blocks(permutation: &[usize], kind_of_replica: &[usize]) -> Vec<usize> {
    let mut kinds: Vec<usize> = permutation
        .iter()
        .filter_map(|&i| kind_of_replica.get(i).copied())
        .collect();
    kinds.dedup();
    kinds
}

/// Every order of `0..n`, the identity first.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for rest in permutations(n - 1) {
        for at in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(at, n - 1);
            out.push(p);
        }
    }
    out.sort();
    out
}
