//! The search: every order kube-scheduler may take a gang's pods in, and every node it may
//! pick for each, over node classes (identical nodes are interchangeable, so a state holds
//! how many nodes of each class carry which of the gang's pods, not which node does).
//!
//! One pod group cycle (`schedule_one_podgroup.go`): the pods are sorted by priority, then by
//! when each entered the active queue, which for a gang's pods released together by its
//! PreEnqueue gate is no order we can know; so every interleaving of the replica types is
//! searched. Each pod goes to a highest-scoring feasible node, ties broken at random; when
//! the cluster has more nodes than the scheduler scores for one pod
//! (`numFeasibleNodesToFind`), it scores only some, so any feasible node may win. A pod with
//! no feasible node is skipped and the cycle goes on; the gang is placed when at least
//! `min` pods are.
//!
//! Pods of one kind (replica types with the same requests, reach and scores) are
//! interchangeable, and so are nodes of one class with the same pods: the states are few
//! for the gangs this is asked about, and the search stops after [`Search::budget`] of them.

use std::collections::HashMap;

use super::model::NodeClass;
use super::score::{resource_score, taint_score, NodeLoad, PodAsk};

/// Pods of the same kind: interchangeable for the scheduler.
#[derive(Debug, Clone)]
pub struct Kind {
    /// The replica types of this kind, as written.
    pub types: Vec<String>,
    pub pods: u32,
    /// Per tracked resource (see [`Search::resources`]): what one pod asks for.
    pub demand: Vec<i64>,
    pub ask: PodAsk,
    /// Indices of the classes its pods may use.
    pub reach: Vec<usize>,
    /// Per class index: the PreferNoSchedule taints it does not tolerate.
    pub untolerated: Vec<i64>,
}

/// The gang's pods on one class's nodes: (pods of each kind on a node, how many nodes carry
/// exactly that), sorted; the class's other nodes are empty.
type ClassState = Vec<(Vec<u16>, u32)>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct State {
    remaining: Vec<u32>,
    failed: u32,
    classes: Vec<ClassState>,
}

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Every order and tie places at least `min` pods.
    Always,
    /// None does: one such run, as (kind, class) placements, and the kind left without a node.
    Never {
        example: Vec<(usize, usize)>,
        stuck: usize,
    },
    /// Some attempts fail, but in every order some ties place the gang. kube-scheduler
    /// keeps a gang's order from one attempt to the next (each pod's first queueing time)
    /// and breaks ties anew each time, so a retried gang is placed.
    Eventually,
    /// In some orders no tie places the gang, in others some do: it depends on the order
    /// its first attempt takes, which is not known beforehand.
    Either,
    /// More states than the budget.
    TooLarge,
}

const PLACED: u8 = 1;
const LEFT_OUT: u8 = 2;

/// Of a state: which outcomes some order and ties reach (`PLACED`, `LEFT_OUT`), and whether
/// every order, whatever comes next, has ties that place the gang (resilient).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reached {
    bits: u8,
    resilient: bool,
}

impl Reached {
    const PLACED: Reached = Reached {
        bits: PLACED,
        resilient: true,
    };
    const LEFT_OUT: Reached = Reached {
        bits: LEFT_OUT,
        resilient: false,
    };

    /// Nothing more is learnt from further branches.
    fn settled(self) -> bool {
        self.bits == PLACED | LEFT_OUT && !self.resilient
    }
}

pub struct Search<'a> {
    pub classes: &'a [NodeClass],
    /// The resources pods ask for (`pods` included), in the order of [`Kind::demand`].
    pub resources: Vec<String>,
    pub kinds: Vec<Kind>,
    /// Pods that must be placed.
    pub min: u32,
    /// How many feasible nodes the scheduler scores for one pod.
    pub window: u64,
    /// States to visit at most.
    pub budget: usize,
    memo: HashMap<State, Reached>,
    visited: usize,
}

/// A candidate node: its class, and which entry of the class state it is (`None`: empty).
#[derive(Debug, Clone, Copy)]
struct Choice {
    class: usize,
    entry: Option<usize>,
}

impl<'a> Search<'a> {
    pub fn new(
        classes: &'a [NodeClass],
        resources: Vec<String>,
        kinds: Vec<Kind>,
        min: u32,
        window: u64,
        budget: usize,
    ) -> Search<'a> {
        Search {
            classes,
            resources,
            kinds,
            min,
            window,
            budget,
            memo: HashMap::new(),
            visited: 0,
        }
    }

    /// States visited so far.
    pub fn visited(&self) -> usize {
        self.visited
    }

    pub fn run(&mut self) -> Found {
        let root = State {
            remaining: self.kinds.iter().map(|k| k.pods).collect(),
            failed: 0,
            classes: vec![Vec::new(); self.classes.len()],
        };
        match self.explore(&root) {
            None => Found::TooLarge,
            Some(Reached { bits: PLACED, .. }) => Found::Always,
            Some(Reached { bits: LEFT_OUT, .. }) => {
                let (example, stuck) = self.example(root);
                Found::Never { example, stuck }
            }
            Some(Reached {
                resilient: true, ..
            }) => Found::Eventually,
            Some(_) => Found::Either,
        }
    }

    fn total(&self) -> u32 {
        self.kinds.iter().map(|k| k.pods).sum()
    }

    /// What is reachable from `state` (`None`: over budget). The kind placed next is any
    /// with pods left (every order); its node any of [`Search::choices`] (every tie).
    fn explore(&mut self, state: &State) -> Option<Reached> {
        if let Some(&reached) = self.memo.get(state) {
            return Some(reached);
        }
        self.visited += 1;
        if self.visited > self.budget {
            return None;
        }
        let mut reached = Reached {
            bits: 0,
            resilient: true,
        };
        let mut any = false;
        for k in 0..self.kinds.len() {
            if state.remaining.get(k).copied().unwrap_or(0) == 0 {
                continue;
            }
            any = true;
            let next = self.explore_kind(state, k)?;
            reached.bits |= next.bits;
            reached.resilient &= next.resilient;
            if reached.settled() {
                break;
            }
        }
        if !any {
            reached = Reached::PLACED;
        }
        self.memo.insert(state.clone(), reached);
        Some(reached)
    }

    /// What is reachable when a pod of kind `k` goes next: resilient when some tie is.
    fn explore_kind(&mut self, state: &State, k: usize) -> Option<Reached> {
        let choices = self.choices(state, k);
        if choices.is_empty() {
            let next = self.skip(state, k);
            if next.failed > self.total().saturating_sub(self.min) {
                return Some(Reached::LEFT_OUT);
            }
            return self.explore(&next);
        }
        let mut reached = Reached {
            bits: 0,
            resilient: false,
        };
        for choice in choices {
            let next = self.place(state, k, choice);
            let after = self.explore(&next)?;
            reached.bits |= after.bits;
            reached.resilient |= after.resilient;
            if reached.bits == PLACED | LEFT_OUT && reached.resilient {
                break;
            }
        }
        Some(reached)
    }

    /// One run that leaves the gang short, taking kinds in their order and the first best
    /// node each time (every run does, when this is asked).
    fn example(&self, mut state: State) -> (Vec<(usize, usize)>, usize) {
        let mut steps = Vec::new();
        while let Some(k) = state.remaining.iter().position(|&n| n > 0) {
            match self.choices(&state, k).first() {
                Some(&choice) => {
                    steps.push((k, choice.class));
                    state = self.place(&state, k, choice);
                }
                None => return (steps, k),
            }
        }
        (steps, self.kinds.len())
    }

    /// The nodes a pod of kind `k` may be bound to next: the best-scoring feasible ones, or
    /// every feasible one when the scheduler would score only some.
    fn choices(&self, state: &State, k: usize) -> Vec<Choice> {
        let Some(kind) = self.kinds.get(k) else {
            return Vec::new();
        };
        let mut feasible = Vec::new();
        let mut nodes = 0u64;
        for &c in &kind.reach {
            let (Some(class), Some(entries)) = (self.classes.get(c), state.classes.get(c)) else {
                continue;
            };
            let used: u32 = entries.iter().map(|(_, n)| n).sum();
            let empty = vec![0u16; self.kinds.len()];
            let candidates = std::iter::once((None, &empty, class.size.saturating_sub(used)))
                .chain(
                    entries
                        .iter()
                        .enumerate()
                        .map(|(i, (p, n))| (Some(i), p, *n)),
                );
            for (entry, pods, count) in candidates {
                if count > 0 && self.fits(class, pods, kind) {
                    nodes += u64::from(count);
                    feasible.push((Choice { class: c, entry }, self.load(class, pods)));
                }
            }
        }
        if nodes > self.window {
            return feasible.into_iter().map(|(choice, _)| choice).collect();
        }
        let most = feasible
            .iter()
            .map(|(choice, _)| untolerated(kind, choice.class))
            .max()
            .unwrap_or(0);
        let scored: Vec<(Choice, i64)> = feasible
            .into_iter()
            .map(|(choice, load)| {
                let taints = taint_score(untolerated(kind, choice.class), most);
                (choice, taints + resource_score(kind.ask, load))
            })
            .collect();
        let best = scored.iter().map(|(_, s)| *s).max().unwrap_or(0);
        scored
            .into_iter()
            .filter(|(_, s)| *s == best)
            .map(|(choice, _)| choice)
            .collect()
    }

    /// Whether one more pod of `kind` fits a node of `class` that carries `pods`.
    fn fits(&self, class: &NodeClass, pods: &[u16], kind: &Kind) -> bool {
        self.resources.iter().enumerate().all(|(r, name)| {
            let asked = kind.demand.get(r).copied().unwrap_or(0);
            if asked == 0 || !class.limits(name) {
                return true;
            }
            let used: i64 = self
                .kinds
                .iter()
                .zip(pods)
                .map(|(other, &n)| i64::from(n) * other.demand.get(r).copied().unwrap_or(0))
                .sum();
            used.saturating_add(asked) <= class.amount(name)
        })
    }

    fn load(&self, class: &NodeClass, pods: &[u16]) -> NodeLoad {
        let mut load = NodeLoad {
            allocatable: [class.amount("cpu"), class.amount("memory")],
            non_zero: [0, 0],
            actual: [0, 0],
        };
        for (kind, &n) in self.kinds.iter().zip(pods) {
            for i in 0..2 {
                load.non_zero[i] += i64::from(n) * kind.ask.non_zero[i];
                load.actual[i] += i64::from(n) * kind.ask.actual[i];
            }
        }
        load
    }

    /// `state` after a pod of kind `k` found no node.
    fn skip(&self, state: &State, k: usize) -> State {
        let mut next = state.clone();
        if let Some(n) = next.remaining.get_mut(k) {
            *n -= 1;
        }
        next.failed += 1;
        next
    }

    /// `state` after a pod of kind `k` is bound to `choice`.
    fn place(&self, state: &State, k: usize, choice: Choice) -> State {
        let mut next = state.clone();
        if let Some(n) = next.remaining.get_mut(k) {
            *n -= 1;
        }
        let Some(entries) = next.classes.get_mut(choice.class) else {
            return next;
        };
        let mut pods = vec![0u16; self.kinds.len()];
        if let Some(i) = choice.entry {
            if let Some((on_node, count)) = entries.get_mut(i) {
                pods.clone_from(on_node);
                *count -= 1;
            }
        }
        entries.retain(|(_, n)| *n > 0);
        if let Some(n) = pods.get_mut(k) {
            *n += 1;
        }
        match entries.binary_search_by(|(p, _)| p.cmp(&pods)) {
            Ok(i) => {
                if let Some((_, n)) = entries.get_mut(i) {
                    *n += 1;
                }
            }
            Err(i) => entries.insert(i, (pods, 1)),
        }
        next
    }
}

fn untolerated(kind: &Kind, class: usize) -> i64 {
    kind.untolerated.get(class).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(gpus: i64, size: u32) -> NodeClass {
        serde_json::from_value(json!({"size": size,
            "allocatable": {"cpu": 64_000, "memory": 256_i64 << 30, "pods": 110, "nvidia.com/gpu": gpus}}))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn kind(name: &str, pods: u32, gpus: i64, reach: Vec<usize>) -> Kind {
        Kind {
            types: vec![name.into()],
            pods,
            demand: vec![gpus, 1],
            ask: PodAsk {
                non_zero: [1000, 1 << 30],
                actual: [1000, 1 << 30],
            },
            reach,
            untolerated: vec![0; 4],
        }
    }

    fn search<'a>(classes: &'a [NodeClass], kinds: Vec<Kind>, budget: usize) -> Search<'a> {
        let total = kinds.iter().map(|k| k.pods).sum();
        let resources = vec!["nvidia.com/gpu".to_string(), "pods".to_string()];
        Search::new(classes, resources, kinds, total, 100, budget)
    }

    #[test]
    fn pods_of_different_sizes_packed_only_in_some_orders() {
        // 3 PS of 4 GPUs and 2 Workers of 2 GPUs on two 8-GPU nodes (16 asked, 16 held):
        // LeastAllocated puts each pod on the node with fewer pods. PS first: 4+4 | 4+2+2,
        // placed. Workers first: 2 | 2, then the PS spread 2+4 | 2+4 and the third has no
        // node, whatever the ties: the order decides.
        let classes = [class(8, 2)];
        let kinds = vec![kind("PS", 3, 4, vec![0]), kind("Worker", 2, 2, vec![0])];
        assert_eq!(search(&classes, kinds, 100_000).run(), Found::Either);
        // Alone, the PS kind is placed in any order.
        let kinds = vec![kind("PS", 3, 4, vec![0])];
        assert_eq!(search(&classes, kinds, 100_000).run(), Found::Always);
    }

    #[test]
    fn past_the_budget_the_search_says_so() {
        let classes = [class(8, 4), class(4, 4), class(2, 4)];
        let kinds = vec![
            kind("A", 6, 1, vec![0, 1, 2]),
            kind("B", 6, 2, vec![0, 1, 2]),
            kind("C", 4, 4, vec![0, 1]),
        ];
        let mut small = search(&classes, kinds, 10);
        assert_eq!(small.run(), Found::TooLarge);
        assert!(small.visited() > 10);
    }
}
