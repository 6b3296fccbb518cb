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
//!
//! Volcano v1.16's allocate, with the chart's nodeorder and binpack: [`volcano_score`] (the
//! section below says which plugin adds what, with file and line).

const MAX_NODE_SCORE: i64 = 100;
const TAINT_TOLERATION_WEIGHT: i64 = 3;

/// cpu (millicores) and memory (bytes).
pub type CpuMemory = [i64; 2];

/// One node as scored: its allocatable cpu and memory, and what its pods request (non-zero
/// and actual), before the pod being placed; Volcano's BalancedAllocation also counts
/// `nvidia.com/gpu` (allocatable and requested).
#[derive(Debug, Clone, Copy)]
pub struct NodeLoad {
    pub allocatable: CpuMemory,
    pub non_zero: CpuMemory,
    pub actual: CpuMemory,
    pub gpu_allocatable: i64,
    pub gpu: i64,
}

/// The pod being placed; `gpu` is its `nvidia.com/gpu` request (Volcano scores it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodAsk {
    pub non_zero: CpuMemory,
    pub actual: CpuMemory,
    pub gpu: i64,
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

/// kube-scheduler's BalancedAllocation: over cpu and memory.
fn balanced(pod: PodAsk, node: NodeLoad) -> i64 {
    balanced_over(pod, node, false)
}

/// BalancedAllocation's score (`balancedResourceScorer`): how much more even the requested
/// fractions become with the pod, over cpu and memory, and `nvidia.com/gpu` too when `gpus`
/// (Volcano's) and the pod asks for GPUs and the node has some; skipped (0) for a pod that
/// asks for none of the resources scored.
fn balanced_over(pod: PodAsk, node: NodeLoad, gpus: bool) -> i64 {
    if pod.actual == [0, 0] && (!gpus || pod.gpu == 0) {
        return 0;
    }
    let gpu = gpus && pod.gpu != 0 && node.gpu_allocatable != 0;
    let allocatable = [
        node.allocatable[0],
        node.allocatable[1],
        node.gpu_allocatable,
    ];
    let fractions = |requested: [i64; 3]| {
        (0..3)
            .filter(|&i| allocatable[i] != 0 && (i < 2 || gpu))
            .map(|i| (requested[i] as f64 / allocatable[i] as f64).min(1.0))
            .collect::<Vec<f64>>()
    };
    let with = spread_score(&fractions([
        node.actual[0].saturating_add(pod.actual[0]),
        node.actual[1].saturating_add(pod.actual[1]),
        node.gpu.saturating_add(pod.gpu),
    ]));
    let without = spread_score(&fractions([node.actual[0], node.actual[1], node.gpu]));
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with - without) / 2
}

// --- Volcano v1.16 (vc-scheduler), the chart's default configuration. ---
//
// Paths below are in volcano.sh/volcano (pkg/scheduler/...) and its vendored kube-scheduler
// plugins (vendor/k8s.io/kubernetes/pkg/scheduler/framework/plugins/...).
//
// allocate (actions/allocate/allocate.go:936-941) scores the feasible nodes with
// util.PrioritizeNodes (util/scheduler_helper.go:78-142): per node
// `0.0 + orderScore + batchScore`, where orderScore sums the plugins' NodeOrderFns
// (nodeorder's ImageLocality, 0 on nodes without the pod's images, then binpack) and
// batchScore the BatchNodeOrderFns (nodeorder's kube-scheduler score plugins; predicates'
// VolumeBinding and DRA scores, which skip or give 0 for pods without claims). The best
// score wins, ties at random (`rand.Intn`, scheduler_helper.go:195-209). No plugin of the
// default tiers registers a NodeMapFn or a BestNodeFn.
//
// nodeorder's weights (plugins/nodeorder/nodeorder.go:142-151, no arguments in the chart):
// leastrequested 1, mostrequested 0 (off), balancedresource 1, nodeaffinity 2,
// podaffinity 2, tainttoleration 3, imagelocality 1, podtopologyspread 2. Each batch score
// is an integer 0..=100 times its weight (plugins/util/nodescore/score_helper.go:110-119):
//
// - LeastAllocated over cpu and memory with weights 50 and 50 (nodeorder.go:213-230), on
//   non-zero requests (noderesources/resource_allocation.go:204-206, 245-250): the same
//   integer as kube-scheduler's [`least_allocated`];
// - BalancedAllocation over cpu, memory and `nvidia.com/gpu` (nodeorder.go:251-269) on
//   actual requests (balanced_allocation.go:196); the GPU counts only when the pod asks for
//   GPUs and the node has some (resource_allocation.go:180-187), and then the spread is the
//   standard deviation of three fractions (balanced_allocation.go:220-254): [`volcano_balanced`];
// - TaintToleration (weight 3): [`taint_score`], normalized over the nodes scored;
// - NodeAffinity and InterPodAffinity skip pods without preferred terms (PreScore `Skip`);
// - PodTopologySpread with the system default constraints: the controller's headless
//   Service of each pod selects that pod alone, so every node counts 0 matching pods and
//   normalizes to 100 (podtopologyspread/scoring.go:229-266): 200 on every node.
//
// binpack (plugins/binpack/binpack.go:112-116, 206-261): weight 1, cpu 1, memory 1, no other
// resource: [`binpack`], a float.

/// nodeorder's weights (nodeorder.go:142-151).
const VOLCANO_LEAST_REQUESTED_WEIGHT: i64 = 1;
const VOLCANO_BALANCED_RESOURCE_WEIGHT: i64 = 1;
const VOLCANO_POD_TOPOLOGY_SPREAD_WEIGHT: i64 = 2;
/// binpack's weights (binpack.go:112-116).
const BINPACK_WEIGHT: i64 = 1;
const BINPACK_CPU: i64 = 1;
const BINPACK_MEMORY: i64 = 1;

/// The score Volcano's allocate compares for `pod` on `node`: binpack plus nodeorder's
/// batch scores; `taints` is [`taint_score`] of the node among the nodes scored (weight 3,
/// as kube-scheduler's). Added in Volcano's order (`score += orderScore; score +=
/// batchScore`, scheduler_helper.go:123-132), so equal scores are equal here too.
pub fn volcano_score(pod: PodAsk, node: NodeLoad, taints: i64) -> f64 {
    let batch = least_allocated(pod, node) * VOLCANO_LEAST_REQUESTED_WEIGHT
        + volcano_balanced(pod, node) * VOLCANO_BALANCED_RESOURCE_WEIGHT
        + taints
        + MAX_NODE_SCORE * VOLCANO_POD_TOPOLOGY_SPREAD_WEIGHT;
    // orderScore is `0.0 + ImageLocality (0) + binpack`: binpack's float exactly.
    binpack(pod, node) + batch as f64
}

/// binpack's `BinPackingScore` (binpack.go:206-246): per requested resource with a weight
/// (cpu, memory), `(request + used) * weight / allocatable` (`ResourceBinPackingScore`,
/// binpack.go:249-261), averaged over the weights and scaled to 100. `used` is the node's
/// `Used`, the actual requests of its pods (api/node_info.go:471); a resource past the
/// node's allocatable scores the node 0.
fn binpack(pod: PodAsk, node: NodeLoad) -> f64 {
    let mut score = 0.0;
    let mut weights = 0;
    for (i, weight) in [BINPACK_CPU, BINPACK_MEMORY].into_iter().enumerate() {
        let request = pod.actual[i] as f64;
        if request == 0.0 {
            continue;
        }
        let capacity = node.allocatable[i] as f64;
        if capacity != 0.0 && weight != 0 {
            let used = request + node.actual[i] as f64;
            if used > capacity {
                return 0.0;
            }
            score += used * weight as f64 / capacity;
        }
        weights += weight;
    }
    if weights > 0 {
        score /= weights as f64;
    }
    score * (MAX_NODE_SCORE * BINPACK_WEIGHT) as f64
}

/// Volcano's BalancedAllocation: kube-scheduler's with `nvidia.com/gpu` as a third resource
/// when the pod asks for GPUs and the node has some; skipped for a pod that asks for none
/// of the three (balanced_allocation.go:78-85).
fn volcano_balanced(pod: PodAsk, node: NodeLoad) -> i64 {
    balanced_over(pod, node, true)
}

/// `balancedResourceScore` (balanced_allocation.go:220-254): 100 × (1 − the standard
/// deviation of the fractions), `|a − b| / 2` for two.
fn spread_score(fractions: &[f64]) -> i64 {
    let std = match fractions {
        [a, b] => ((a - b) / 2.0).abs(),
        [_, _, _, ..] => {
            let n = fractions.len() as f64;
            let mut total = 0.0;
            for f in fractions {
                total += f;
            }
            let mean = total / n;
            let mut sum = 0.0;
            for f in fractions {
                sum += (f - mean) * (f - mean);
            }
            (sum / n).sqrt()
        }
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
            gpu_allocatable: 0,
            gpu: 0,
        }
    }

    fn pod(cpu: i64, memory: i64) -> PodAsk {
        PodAsk {
            non_zero: [cpu, memory],
            actual: [cpu, memory],
            gpu: 0,
        }
    }

    /// A node of `gpus` GPUs already holding `pods` pods of `each`.
    fn gpu_node(cpu: i64, memory: i64, gpus: i64, pods: i64, each: PodAsk) -> NodeLoad {
        NodeLoad {
            allocatable: [cpu, memory],
            non_zero: [pods * each.non_zero[0], pods * each.non_zero[1]],
            actual: [pods * each.actual[0], pods * each.actual[1]],
            gpu_allocatable: gpus,
            gpu: pods * each.gpu,
        }
    }

    fn gpu_pod(cpu: i64, memory: i64, gpus: i64) -> PodAsk {
        PodAsk {
            gpu: gpus,
            ..pod(cpu, memory)
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

    #[test]
    fn binpack_averages_the_filled_fractions_of_cpu_and_memory() {
        // binpack.go:249-261 and 239-243: 8 of 32 cpu = 0.25, 64Gi of 128Gi = 0.5;
        // (0.25 + 0.5) / 2 * 100 = 37.5. With a like pod already there: (0.5 + 1.0) / 2.
        let ask = pod(8000, 64 * GI);
        assert_eq!(binpack(ask, gpu_node(32_000, 128 * GI, 0, 0, ask)), 37.5);
        assert_eq!(binpack(ask, gpu_node(32_000, 128 * GI, 0, 1, ask)), 75.0);
        // GPUs are not among binpack's default resources; a pod asking for neither cpu nor
        // memory scores 0 (weightSum 0).
        let gpus = gpu_pod(8000, 64 * GI, 8);
        assert_eq!(binpack(gpus, gpu_node(32_000, 128 * GI, 8, 0, gpus)), 37.5);
        assert_eq!(
            binpack(gpu_pod(0, 0, 1), gpu_node(32_000, 128 * GI, 8, 0, ask)),
            0.0
        );
        // A third of each: (1/3 + 1/3) / 2 * 100 rounds to 33.33333333333333, one ulp below
        // 100/3: float steps in Volcano's order, not the exact fraction.
        let third = pod(1000, GI);
        let score = binpack(third, node(3000, 3 * GI));
        assert_eq!(score, 33.333_333_333_333_33);
        assert_ne!(score, 100.0 / 3.0);
    }

    #[test]
    fn volcano_balances_gpus_as_a_third_resource() {
        // 8 GPUs, 8 cpu, 64Gi on an empty 8-GPU, 32 cpu, 128Gi node: fractions 0.25, 0.5,
        // 1.0; mean 0.5833, variance (0.1111 + 0.0069 + 0.1736) / 3 = 0.0972, std 0.3118:
        // 68 (truncated); without the pod all 0: 100. 50 + (50 + 68 - 100) / 2 = 59.
        // kube-scheduler's two resources give 68 (see above).
        let ask = gpu_pod(8000, 64 * GI, 8);
        let empty = gpu_node(32_000, 128 * GI, 8, 0, ask);
        assert_eq!(volcano_balanced(ask, empty), 59);
        assert_eq!(balanced(ask, empty), 68);
        // 0.25, 0.25, 1.0: mean 0.5, variance 0.375 / 3 = 0.125, std 0.3536: 64; 50 + 14 / 2.
        let wide = gpu_node(32_000, 256 * GI, 8, 0, ask);
        assert_eq!(volcano_balanced(ask, wide), 57);
        // Without GPUs asked, cpu and memory only, as kube-scheduler's.
        let cpu_only = pod(8000, 64 * GI);
        assert_eq!(volcano_balanced(cpu_only, empty), balanced(cpu_only, empty));
        assert_eq!(volcano_balanced(pod(0, 0), empty), 0);
    }

    #[test]
    fn volcano_adds_binpack_to_nodeorders_integer_scores() {
        // A100-like node (8 GPUs, 32 cpu, 256Gi), empty: LeastAllocated (75*50 + 75*50)/100
        // = 75, BalancedAllocation 57, TaintToleration 300, PodTopologySpread 200, binpack
        // (0.25 + 0.25) / 2 * 100 = 25: 25 + 632 = 657.
        let ask = gpu_pod(8000, 64 * GI, 8);
        let a100 = gpu_node(32_000, 256 * GI, 8, 0, ask);
        assert_eq!(volcano_score(ask, a100, taint_score(0, 0)), 657.0);
        // H100-like node with half the cpu: LeastAllocated (50*50 + 75*50)/100 = 62,
        // BalancedAllocation (0.5, 0.25, 1.0) 59, binpack (0.5 + 0.25) / 2 * 100 = 37.5:
        // 37.5 + 621 = 658.5, above the A100 (kube-scheduler ranks it below: 130 < 150).
        let h100 = gpu_node(16_000, 256 * GI, 8, 0, ask);
        assert_eq!(volcano_score(ask, h100, taint_score(0, 0)), 658.5);
        assert!(resource_score(ask, h100) < resource_score(ask, a100));
        // An untolerated PreferNoSchedule taint on it (the most among the nodes) costs 300.
        assert_eq!(volcano_score(ask, h100, taint_score(1, 1)), 358.5);
    }

    #[test]
    fn volcano_leastrequested_and_binpack_cancel_on_even_nodes() {
        // 8 cpu and 64Gi on 32 cpu / 256Gi: empty, LeastAllocated 75, Balanced 75 (even
        // before and after), binpack 25: 675; holding one such pod, 50, 75 and 50: 675 too,
        // a tie Volcano breaks at random where kube-scheduler picks the empty node.
        let ask = pod(8000, 64 * GI);
        let empty = gpu_node(32_000, 256 * GI, 0, 0, ask);
        let one = gpu_node(32_000, 256 * GI, 0, 1, ask);
        assert_eq!(volcano_score(ask, empty, 300), 675.0);
        assert_eq!(volcano_score(ask, one, 300), 675.0);
        assert!(resource_score(ask, empty) > resource_score(ask, one));
    }
}
