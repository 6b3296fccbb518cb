//! What a Kueue ClusterQueue can ever reserve of one resource in one flavor: Kueue's
//! `potentialAvailable` (pkg/cache/scheduler/resource_node.go, v0.19.2), the bound its flavor
//! assigner compares a pod set with before anything else (`fitsResourceQuota`: above it the
//! workload is `ExceedsMaxQuota` and waits forever, whatever finishes).
//!
//! Entry point: [`Tree::can_reserve`]. The tree is ClusterQueues and Cohorts, each with a
//! quota per (flavor, resource): nominal, borrowingLimit, lendingLimit. Kueue's arithmetic:
//!
//! - a node's *subtree quota*: a ClusterQueue's nominal; a Cohort's own nominal plus, per
//!   child, the child's subtree quota less what the child keeps to itself;
//! - what a node keeps to itself (`localQuota`): with a lendingLimit, subtree − lendingLimit
//!   (at least 0); without one, nothing;
//! - what a node can ever reach: at a root its subtree quota; below one, what it keeps plus
//!   what its parent can reach, capped at subtree + borrowingLimit when it has one.
//!
//! Amounts follow Kueue's `resources.Amount`: `i64::MAX` is unlimited and sticks through
//! addition; bounded sums saturate.
//!
//! Guarantees: with every Cohort known the answer is Kueue's number. Without the Cohort
//! objects ([`Tree::cohorts`] `None`: not listed), a Cohort could add quota, so only the
//! ClusterQueue's own cap is sure: nominal + borrowingLimit (unbounded without one).

use std::collections::{BTreeMap, BTreeSet};

/// A (flavor, resource) pair.
pub type FlavorResource = (String, String);

/// A quota amount in Kueue's units (cpu in millicores, others in whole units rounded up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Amount(pub i64);

impl Amount {
    pub const UNLIMITED: Amount = Amount(i64::MAX);
    pub const ZERO: Amount = Amount(0);

    pub fn is_unlimited(self) -> bool {
        self == Amount::UNLIMITED
    }

    fn add(self, other: Amount) -> Amount {
        if self.is_unlimited() || other.is_unlimited() {
            return Amount::UNLIMITED;
        }
        Amount(self.0.saturating_add(other.0))
    }

    /// As Kueue's `Sub`: unlimited − unlimited is 0, unlimited − n stays unlimited,
    /// n − unlimited is the lowest number (no capacity).
    fn sub(self, other: Amount) -> Amount {
        match (self.is_unlimited(), other.is_unlimited()) {
            (true, true) => Amount::ZERO,
            (true, false) => Amount::UNLIMITED,
            (false, true) => Amount(i64::MIN),
            (false, false) => Amount(self.0.saturating_sub(other.0)),
        }
    }
}

/// One (flavor, resource) quota of a ClusterQueue or Cohort.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Quota {
    pub nominal: Amount,
    pub borrowing_limit: Option<Amount>,
    pub lending_limit: Option<Amount>,
}

impl Default for Amount {
    fn default() -> Amount {
        Amount::ZERO
    }
}

/// A ClusterQueue or a Cohort: its parent Cohort and its quotas.
#[derive(Debug, Clone, Default)]
pub struct QuotaNode {
    pub parent: Option<String>,
    pub quotas: BTreeMap<FlavorResource, Quota>,
    /// The (flavor, resource) pairs whose quota could not be read; `all_unreadable` when
    /// the node's quotas as a whole could not be.
    pub unreadable: BTreeSet<FlavorResource>,
    pub all_unreadable: bool,
}

impl QuotaNode {
    fn quota(&self, fr: &FlavorResource) -> Quota {
        self.quotas.get(fr).copied().unwrap_or_default()
    }

    fn unreadable(&self, fr: &FlavorResource) -> bool {
        self.all_unreadable || self.unreadable.contains(fr)
    }
}

/// What a ClusterQueue can ever reserve of one (flavor, resource).
#[derive(Debug, Clone, PartialEq)]
pub enum Reserve {
    /// At most this much (unlimited: no bound).
    AtMost(Amount),
    /// Not known: a quota of the tree could not be read.
    Unreadable,
    /// Its Cohort chain loops back on itself (the Cohorts named, in order): Kueue keeps the
    /// ClusterQueue inactive.
    Cycle(Vec<String>),
}

/// ClusterQueues and Cohorts by name. A Cohort named as a parent without an object of its
/// own is an implicit one: no quota, no parent (as Kueue creates it).
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub cluster_queues: BTreeMap<String, QuotaNode>,
    /// `None`: the Cohort objects are unknown (not listed).
    pub cohorts: Option<BTreeMap<String, QuotaNode>>,
}

#[derive(Clone, Copy)]
enum Id<'a> {
    Queue(&'a str),
    Cohort(&'a str),
}

/// A Cohort that has no object: implicit.
static IMPLICIT: std::sync::LazyLock<QuotaNode> = std::sync::LazyLock::new(QuotaNode::default);

impl Tree {
    /// The most ClusterQueue `queue` can ever reserve of `fr`; `None` for an unknown queue.
    pub fn can_reserve(&self, queue: &str, fr: &FlavorResource) -> Option<Reserve> {
        let node = self.cluster_queues.get(queue)?;
        let Some(cohorts) = &self.cohorts else {
            return Some(self.own_cap(node, fr));
        };
        let Some(parent) = &node.parent else {
            return Some(self.own_cap(node, fr));
        };
        let root = match root_of(cohorts, parent) {
            Ok(root) => root,
            Err(cycle) => return Some(Reserve::Cycle(cycle)),
        };
        if self.unreadable_under(Id::Cohort(&root), fr) {
            return Some(Reserve::Unreadable);
        }
        Some(Reserve::AtMost(self.potential(Id::Queue(queue), fr)))
    }

    /// Without the tree: nominal, plus the borrowing limit in a cohort (unbounded without one).
    fn own_cap(&self, node: &QuotaNode, fr: &FlavorResource) -> Reserve {
        if node.unreadable(fr) {
            return Reserve::Unreadable;
        }
        let quota = node.quota(fr);
        let cap = match (&node.parent, quota.borrowing_limit) {
            (None, _) => quota.nominal,
            (Some(_), Some(limit)) => quota.nominal.add(limit),
            (Some(_), None) => Amount::UNLIMITED,
        };
        Reserve::AtMost(cap)
    }

    fn node(&self, id: Id) -> &QuotaNode {
        match id {
            Id::Queue(name) => &self.cluster_queues[name],
            Id::Cohort(name) => self
                .cohorts
                .as_ref()
                .and_then(|c| c.get(name))
                .unwrap_or(&IMPLICIT),
        }
    }

    /// The children of Cohort `name`: Cohorts first, then ClusterQueues, by name.
    fn children<'a>(&'a self, name: &'a str) -> impl Iterator<Item = Id<'a>> + 'a {
        let cohorts = self.cohorts.iter().flatten();
        let child_cohorts = cohorts
            .filter(move |(_, c)| c.parent.as_deref() == Some(name))
            .map(|(n, _)| Id::Cohort(n));
        let queues = self.cluster_queues.iter();
        let child_queues = queues
            .filter(move |(_, q)| q.parent.as_deref() == Some(name))
            .map(|(n, _)| Id::Queue(n));
        child_cohorts.chain(child_queues)
    }

    fn unreadable_under(&self, id: Id, fr: &FlavorResource) -> bool {
        if self.node(id).unreadable(fr) {
            return true;
        }
        match id {
            Id::Queue(_) => false,
            Id::Cohort(name) => self.children(name).any(|c| self.unreadable_under(c, fr)),
        }
    }

    /// Kueue's SubtreeQuota.
    fn subtree(&self, id: Id, fr: &FlavorResource) -> Amount {
        let own = self.node(id).quota(fr).nominal;
        match id {
            Id::Queue(_) => own,
            Id::Cohort(name) => self.children(name).fold(own, |sum, child| {
                let child_quota = self.subtree(child, fr);
                sum.add(child_quota.sub(self.local(child, child_quota, fr)))
            }),
        }
    }

    /// Kueue's localQuota: what the node keeps from its parent (given its subtree quota).
    fn local(&self, id: Id, subtree: Amount, fr: &FlavorResource) -> Amount {
        match self.node(id).quota(fr).lending_limit {
            Some(limit) => subtree.sub(limit).max(Amount::ZERO),
            None => Amount::ZERO,
        }
    }

    /// Kueue's potentialAvailable.
    fn potential(&self, id: Id, fr: &FlavorResource) -> Amount {
        let node = self.node(id);
        let subtree = self.subtree(id, fr);
        let Some(parent) = &node.parent else {
            return subtree;
        };
        let reach = self
            .local(id, subtree, fr)
            .add(self.potential(Id::Cohort(parent), fr));
        match node.quota(fr).borrowing_limit {
            Some(limit) => subtree.add(limit).min(reach),
            None => reach,
        }
    }
}

/// The root of Cohort `start`'s chain, or the Cohorts of the cycle it runs into (from the
/// least name, back to it).
fn root_of(cohorts: &BTreeMap<String, QuotaNode>, start: &str) -> Result<String, Vec<String>> {
    let mut chain: Vec<String> = vec![start.to_string()];
    loop {
        let last = chain.last().map(String::as_str).unwrap_or(start);
        let Some(parent) = cohorts.get(last).and_then(|c| c.parent.clone()) else {
            return Ok(last.to_string());
        };
        if let Some(at) = chain.iter().position(|c| *c == parent) {
            // From its least name, so the cycle reads alike from wherever it is met.
            let mut cycle = chain.split_off(at);
            let least = (0..cycle.len()).min_by_key(|&i| &cycle[i]).unwrap_or(0);
            cycle.rotate_left(least);
            cycle.push(cycle[0].clone());
            return Err(cycle);
        }
        chain.push(parent);
    }
}

#[cfg(test)]
mod tests;
