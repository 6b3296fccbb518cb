//! kube-scheduler's default profile scores (v1.36), for what the search sees of a node: its
//! class and the gang's pods already on it. Pods carry no affinity, spread constraints,
//! volumes or images the nodes hold (the search refuses to model those), so of the score
//! plugins only these tell nodes apart:
//!
//! - TaintToleration (weight 3): PreferNoSchedule taints the pod does not tolerate, fewer is
//!   better, normalized over the nodes scored;
//! - NodeResourcesFit (weight 1), LeastAllocated over cpu and memory with the scheduler's
//!   non-zero requests (100m and 200Mi for a container that asks for none);
//! - NodeResourcesBalancedAllocation (weight 1): how much more even cpu and memory become,
//!   with the actual requests, skipped for a pod that asks for neither.
//!
//! NodeAffinity, PodTopologySpread, InterPodAffinity and ImageLocality score every such node
//! alike. Integer and floating-point steps are those of upstream's code
//! (`least_allocated.go`, `balanced_allocation.go`), so equal scores are equal here too.

const MAX_NODE_SCORE: i64 = 100;
const TAINT_TOLERATION_WEIGHT: i64 = 3;

/// cpu (millicores) and memory (bytes).
pub type CpuMemory = [i64; 2];

/// One node as scored: its allocatable cpu and memory, and what its pods request (non-zero
/// and actual), before the pod being placed.
#[derive(Debug, Clone, Copy)]
pub struct NodeLoad {
    pub allocatable: CpuMemory,
    pub non_zero: CpuMemory,
    pub actual: CpuMemory,
}

/// The pod being placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodAsk {
    pub non_zero: CpuMemory,
    pub actual: CpuMemory,
}

/// NodeResourcesFit + BalancedAllocation for `pod` on `node` (weights 1 and 1).
pub fn resource_score(pod: PodAsk, node: NodeLoad) -> i64 {
    least_allocated(pod, node) + balanced(pod, node)
}

/// TaintToleration's normalized score times its weight: `count` is the node's untolerated
/// PreferNoSchedule taints, `most` the largest such count over the nodes scored.
pub fn taint_score(count: i64, most: i64) -> i64 {
    let score = if most == 0 {
        MAX_NODE_SCORE
    } else {
        MAX_NODE_SCORE - count * MAX_NODE_SCORE / most
    };
    score * TAINT_TOLERATION_WEIGHT
}

fn least_allocated(pod: PodAsk, node: NodeLoad) -> i64 {
    let (mut sum, mut weights) = (0, 0);
    for i in 0..2 {
        let capacity = node.allocatable[i];
        if capacity == 0 {
            continue;
        }
        let requested = node.non_zero[i].saturating_add(pod.non_zero[i]);
        sum += if requested > capacity {
            0
        } else {
            (capacity - requested) * MAX_NODE_SCORE / capacity
        };
        weights += 1;
    }
    if weights == 0 {
        0
    } else {
        sum / weights
    }
}

fn balanced(pod: PodAsk, node: NodeLoad) -> i64 {
    if pod.actual == [0, 0] {
        return 0;
    }
    let with_pod = [
        node.actual[0].saturating_add(pod.actual[0]),
        node.actual[1].saturating_add(pod.actual[1]),
    ];
    let with = balance(with_pod, node.allocatable);
    let without = balance(node.actual, node.allocatable);
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with - without) / 2
}

/// `balancedResourceScore`: 100 × (1 − the spread of the requested fractions).
fn balance(requested: CpuMemory, allocatable: CpuMemory) -> i64 {
    let fractions: Vec<f64> = (0..2)
        .filter(|&i| allocatable[i] != 0)
        .map(|i| (requested[i] as f64 / allocatable[i] as f64).min(1.0))
        .collect();
    let std = match fractions.as_slice() {
        [a, b] => ((a - b) / 2.0).abs(),
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: i64 = 1 << 30;

    fn node(cpu: i64, memory: i64) -> NodeLoad {
        NodeLoad {
            allocatable: [cpu, memory],
            non_zero: [0, 0],
            actual: [0, 0],
        }
    }

    fn pod(cpu: i64, memory: i64) -> PodAsk {
        PodAsk {
            non_zero: [cpu, memory],
            actual: [cpu, memory],
        }
    }

    #[test]
    fn least_allocated_prefers_the_emptier_node() {
        // 8 of 96 cpu and 64Gi of 512Gi: (91 + 87) / 2 = 89; on 32 cpu / 128Gi: (75 + 50) / 2.
        assert_eq!(
            least_allocated(pod(8000, 64 * GI), node(96_000, 512 * GI)),
            89
        );
        assert_eq!(
            least_allocated(pod(8000, 64 * GI), node(32_000, 128 * GI)),
            62
        );
    }

    #[test]
    fn balanced_allocation_scores_the_change_in_balance() {
        // An empty node: without the pod the fractions are even (100); with it, 1/4 cpu and
        // 1/2 memory spread by 1/8: 87. 50 + (50 + 87 - 100) / 2 = 68 (Go truncates).
        assert_eq!(balanced(pod(8000, 64 * GI), node(32_000, 128 * GI)), 68);
        assert_eq!(balanced(pod(0, 0), node(32_000, 128 * GI)), 0);
    }

    #[test]
    fn untolerated_preferred_taints_lower_the_score() {
        assert_eq!(taint_score(0, 0), 300);
        assert_eq!(taint_score(1, 2), 150);
        assert_eq!(taint_score(2, 2), 0);
    }
}
