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
//! Volcano's allocate ([`Scorer::Volcano`]) differs in two ways: it tries a job's pods in the
//! order of their names' replica indices, one round per index in an order within the round
//! fixed when the pods were created ([`Order::Rounds`]), and scores nodes with nodeorder and
//! binpack ([`volcano_score`]); ties are random too, every feasible node is scored below 100
//! nodes (`CalculateNumOfFeasibleNodesToFind`, the same window), and with minAvailable equal
//! to the pod count a pod without a node ends the attempt (`NeedContinueAllocating`).
//!
//! Pods of one kind (replica types with the same requests, reach and scores) are
//! interchangeable, and so are nodes of one class with the same pods: the states are few
//! for the gangs this is asked about, and the search stops after [`Search::budget`] of them.

use std::collections::HashMap;

use super::model::NodeClass;
use super::score::{resource_score, taint_score, volcano_score, NodeLoad, PodAsk};

/// The orders the scheduler may take the gang's pods in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Order {
    /// Any interleaving of the kinds (kube-scheduler's pod group cycle).
    #[default]
    Any,
    /// Rounds taken one after the other, each so many pods of each kind (indexed like
    /// [`Search::kinds`]) in any order within the round: Volcano's task order, where pods of
    /// one replica index come before those of the next (see `mod.rs`). One pod a round is
    /// one fixed order ([`Order::fixed`]).
    Rounds(Vec<Vec<u32>>),
}

impl Order {
    /// One fixed order: the kind of each pod, in the order they are tried.
    pub fn fixed(kinds_in_order: &[usize], kinds: usize) -> Order {
        Order::Rounds(
            kinds_in_order
                .iter()
                .map(|&k| (0..kinds).map(|i| u32::from(i == k)).collect())
                .collect(),
        )
    }
}

/// Whose scores pick the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scorer {
    /// kube-scheduler's default profile ([`resource_score`] and [`taint_score`]).
    #[default]
    KubeScheduler,
    /// Volcano's allocate with nodeorder and binpack ([`volcano_score`]).
    Volcano,
}

/// The GPU resource Volcano's BalancedAllocation counts (nodeorder.go:257).
pub const GPU: &str = "nvidia.com/gpu";

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
    pub scorer: Scorer,
    /// With [`Order::Rounds`]: where each round ends (pods taken by then), and how many pods
    /// of each kind are taken by the end of each round; empty with [`Order::Any`].
    round_ends: Vec<u32>,
    taken_by: Vec<Vec<u32>>,
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
            scorer: Scorer::KubeScheduler,
            round_ends: Vec::new(),
            taken_by: Vec::new(),
            memo: HashMap::new(),
            visited: 0,
        }
    }

    /// Searches only the orders `order` allows. Rounds that do not take every pod of every
    /// kind exactly are not an order of these pods: then every order is searched.
    pub fn with_order(mut self, order: Order) -> Search<'a> {
        self.round_ends.clear();
        self.taken_by.clear();
        let Order::Rounds(rounds) = order else {
            return self;
        };
        let mut taken = vec![0u32; self.kinds.len()];
        let mut end = 0u32;
        for round in &rounds {
            if round.len() != taken.len() {
                return self;
            }
            for (t, n) in taken.iter_mut().zip(round) {
                *t = t.saturating_add(*n);
                end = end.saturating_add(*n);
            }
            self.round_ends.push(end);
            self.taken_by.push(taken.clone());
        }
        if self.kinds.iter().map(|k| k.pods).ne(taken.iter().copied()) {
            self.round_ends.clear();
            self.taken_by.clear();
        }
        self
    }

    pub fn with_scorer(mut self, scorer: Scorer) -> Search<'a> {
        self.scorer = scorer;
        self
    }

    /// Whether a pod of kind `k` may go next from `state`: it has pods left and, with
    /// rounds, the current round has one of it left.
    fn may_go_next(&self, state: &State, k: usize) -> bool {
        let left = state.remaining.get(k).copied().unwrap_or(0);
        if left == 0 {
            return false;
        }
        if self.round_ends.is_empty() {
            return true;
        }
        let taken_of = |k: usize| {
            let pods = self.kinds.get(k).map_or(0, |kind| kind.pods);
            pods - state.remaining.get(k).copied().unwrap_or(0).min(pods)
        };
        let taken: u32 = (0..self.kinds.len()).map(taken_of).sum();
        let round = self.round_ends.partition_point(|&end| end <= taken);
        self.taken_by
            .get(round)
            .and_then(|by| by.get(k))
            .is_some_and(|&by| taken_of(k) < by)
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
    /// the order allows ([`Search::may_go_next`]); its node any of [`Search::choices`] (every
    /// tie).
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
            if !self.may_go_next(state, k) {
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

    /// One run that leaves the gang short, taking the first kind the order allows and the
    /// first best node each time (every run does, when this is asked).
    fn example(&self, mut state: State) -> (Vec<(usize, usize)>, usize) {
        let mut steps = Vec::new();
        while let Some(k) = (0..self.kinds.len()).find(|&k| self.may_go_next(&state, k)) {
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
        let scored: Vec<(Choice, f64)> = feasible
            .into_iter()
            .map(|(choice, load)| {
                let taints = taint_score(untolerated(kind, choice.class), most);
                let score = match self.scorer {
                    Scorer::KubeScheduler => (taints + resource_score(kind.ask, load)) as f64,
                    Scorer::Volcano => volcano_score(kind.ask, load, taints),
                };
                (choice, score)
            })
            .collect();
        let best = scored
            .iter()
            .map(|(_, s)| *s)
            .fold(f64::NEG_INFINITY, f64::max);
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
            gpu_allocatable: class.amount(GPU),
            gpu: 0,
        };
        for (kind, &n) in self.kinds.iter().zip(pods) {
            for i in 0..2 {
                load.non_zero[i] += i64::from(n) * kind.ask.non_zero[i];
                load.actual[i] += i64::from(n) * kind.ask.actual[i];
            }
            load.gpu += i64::from(n) * kind.ask.gpu;
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
                gpu: 0,
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

    #[test]
    fn a_fixed_order_decides_what_every_order_leaves_open() {
        // The PS and Workers above: PS first packs 4+4 | 4+2+2, Workers first strand a PS.
        let classes = [class(8, 2)];
        let kinds = || vec![kind("PS", 3, 4, vec![0]), kind("Worker", 2, 2, vec![0])];
        let run = |order: &[usize]| {
            search(&classes, kinds(), 100_000)
                .with_order(Order::fixed(order, 2))
                .run()
        };
        assert_eq!(run(&[0, 0, 0, 1, 1]), Found::Always);
        assert!(matches!(
            run(&[1, 1, 0, 0, 0]),
            Found::Never { stuck: 0, .. }
        ));
        // Rounds: a PS and a Worker in either order, twice, then the last PS. The second
        // round's pods land on nodes with one pod each, a tie: PS W | PS W | PS puts the
        // second PS by the first (4+4 | 2, then 2+2 and the PS: placed) or by the Worker
        // (4 | 2+4, the Worker next to the first PS: 4+2 | 2+4, the third PS stranded); every
        // order of the rounds has a placing tie and a failing one, where every interleaving
        // (Workers first) had orders with no placing tie: eventually, not either.
        let rounds = Order::Rounds(vec![vec![1, 1], vec![1, 1], vec![1, 0]]);
        let found = search(&classes, kinds(), 100_000).with_order(rounds).run();
        assert_eq!(found, Found::Eventually);
        // Rounds that are not an order of these pods are ignored: every order is searched.
        let wrong = Order::Rounds(vec![vec![1, 1]]);
        let found = search(&classes, kinds(), 100_000).with_order(wrong).run();
        assert_eq!(found, Found::Either);
    }

    #[test]
    fn volcano_scores_pick_other_nodes_than_kube_schedulers() {
        // One pod of 8 GPUs, 8 cpu and 64Gi; an 8-GPU node of 32 cpu (class 0) or of 16 cpu
        // (class 1), 256Gi each. kube-scheduler: 75 + 75 + 300 against 62 + 68 + 300, the
        // 32-cpu node. Volcano (score.rs's tests): 657 against 658.5, the 16-cpu node, whose
        // binpack (37.5 against 25) and three-resource balance (59 against 57) outweigh
        // LeastAllocated (62 against 75).
        let node = |cpu: i64| -> NodeClass {
            serde_json::from_value(json!({"size": 1, "allocatable":
                {"cpu": cpu, "memory": 256_i64 << 30, "pods": 110, "nvidia.com/gpu": 8}}))
            .unwrap_or_else(|e| panic!("{e}"))
        };
        let classes = [node(32_000), node(16_000)];
        let mut pod = kind("Master", 1, 8, vec![0, 1]);
        pod.ask = PodAsk {
            non_zero: [8000, 64 << 30],
            actual: [8000, 64 << 30],
            gpu: 8,
        };
        let root = State {
            remaining: vec![1],
            failed: 0,
            classes: vec![Vec::new(), Vec::new()],
        };
        let picked = |scorer: Scorer| {
            let search = search(&classes, vec![pod.clone()], 100).with_scorer(scorer);
            search
                .choices(&root, 0)
                .iter()
                .map(|c| c.class)
                .collect::<Vec<_>>()
        };
        assert_eq!(picked(Scorer::KubeScheduler), vec![0]);
        assert_eq!(picked(Scorer::Volcano), vec![1]);
    }
}
