//! Random small clusters and training jobs, for comparing the `capacity` policy's verdict with
//! what kube-scheduler does with the job's pods (one native gang, on an empty cluster of
//! exactly those nodes).
//!
//! Entry point: [`generate`] (a seed → a [`Pair`] of [`ClusterShape`] and [`JobShape`]). A pair
//! writes itself out as `gangplank check --cluster` input ([`ClusterShape::to_nodes_yaml`],
//! [`JobShape::to_job_yaml`]) and as the pods the scheduler would see ([`JobShape::pods`]).
//!
//! # Guarantees
//! - Deterministic: the same seed gives the same pair, on every platform (a SplitMix64
//!   generator, no crate).
//! - Small: at most 8 nodes and 12 pods, so one pair schedules in about a second.
//! - Biased ([`Aim`]): a seed aims at the capacity boundary (pod counts around what the nodes
//!   hold), or at one of the policy's past blind spots: cpu/memory binding before GPUs, replica
//!   types with different selectors sharing nodes, a Master without the Workers' selector,
//!   pods of mixed sizes on the same nodes, cordoned nodes and the tolerations that reach them.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// A pinned image, so the images policy has nothing to say.
const IMAGE: &str = "registry.example.com/ml/train:1.0@sha256:0000000000000000000000000000000000000000000000000000000000000001";
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
pub const POOL_LABEL: &str = "pool";
/// The largest cluster and gang a pair has.
pub const MAX_NODES: u32 = 8;
pub const MAX_PODS: u32 = 12;

/// SplitMix64: tiny, seedable, good enough to spread test cases.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u32) -> u32 {
        u32::try_from(self.next_u64() % u64::from(n.max(1))).unwrap_or(0)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u32, den: u32) -> bool {
        self.below(den) < num
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        let len = u32::try_from(items.len()).unwrap_or(u32::MAX);
        let i = usize::try_from(self.below(len)).unwrap_or(0);
        &items[i.min(items.len().saturating_sub(1))]
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// `count` identical nodes.
#[derive(Debug, Clone)]
pub struct NodeGroup {
    pub count: u32,
    /// `nvidia.com/gpu` per node: 0, 4 or 8.
    pub gpus: u32,
    /// MIG resource (`nvidia.com/mig-1g.10gb`) → slices per node.
    pub mig: BTreeMap<String, u32>,
    pub cpu: String,
    pub memory: String,
    pub pods: u32,
    /// `nvidia.com/gpu.product` (A100, H100), for GPU and MIG nodes.
    pub product: Option<String>,
    pub pool: String,
    pub taints: Vec<Taint>,
    pub cordoned: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ClusterShape {
    pub groups: Vec<NodeGroup>,
}

/// Kubeflow kind of a generated job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    PyTorchJob,
    TfJob,
}

/// One replica type.
#[derive(Debug, Clone)]
pub struct ReplicaShape {
    /// `Master`, `Worker`, `Chief`, `PS`.
    pub replica_type: String,
    pub replicas: u32,
    /// Resource → quantity, one container's.
    pub resources: BTreeMap<String, String>,
    /// Written as limits only (the apiserver defaults the requests to them).
    pub limits_only: bool,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Value>,
}

#[derive(Debug, Clone)]
pub struct JobShape {
    pub kind: Kind,
    pub name: String,
    pub namespace: String,
    pub replicas: Vec<ReplicaShape>,
    /// `runPolicy.schedulingPolicy.minAvailable`, when set.
    pub min_available: Option<u32>,
}

/// What a seed aims at (a bias, not a promise: the verdict is the scheduler's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Aim {
    /// Pod counts around what the nodes hold.
    Boundary,
    /// cpu or memory binds before GPUs.
    CpuMemory,
    /// Replica types with different selectors share nodes.
    JointSelectors,
    /// A Master without the Workers' nodeSelector, tight on the Workers' nodes.
    GreedyOrder,
    /// Pods of different sizes on the same nodes.
    MixedSizes,
    /// Cordoned nodes, with and without tolerations that reach them.
    Cordoned,
    /// A CPU-only pool beside a (sometimes tainted or cordoned) GPU pool: a Master without
    /// GPUs, Workers of 1–4 GPUs, wildcard (`operator: Exists`) tolerations.
    MixedPools,
}

pub const AIMS: [Aim; 7] = [
    Aim::Boundary,
    Aim::CpuMemory,
    Aim::JointSelectors,
    Aim::GreedyOrder,
    Aim::MixedSizes,
    Aim::Cordoned,
    Aim::MixedPools,
];

#[derive(Debug, Clone)]
pub struct Pair {
    pub seed: u64,
    pub aim: Aim,
    pub cluster: ClusterShape,
    pub job: JobShape,
}

/// One pod as the scheduler sees it.
#[derive(Debug, Clone)]
pub struct PodShape {
    /// `<job>-<type>-<index>`, as the training operator names pods.
    pub name: String,
    pub replica_type: String,
    /// The pod spec: containers with requests (defaulted from limits), nodeSelector and
    /// tolerations; no schedulerName (the default scheduler).
    pub spec: Value,
}

/// The pair of `seed`.
pub fn generate(seed: u64) -> Pair {
    let mut rng = Rng::new(seed);
    let aim = *rng.pick(&AIMS);
    let (cluster, job) = match aim {
        Aim::Boundary => boundary(&mut rng),
        Aim::CpuMemory => cpu_memory(&mut rng),
        Aim::JointSelectors => joint_selectors(&mut rng),
        Aim::GreedyOrder => greedy_order(&mut rng),
        Aim::MixedSizes => mixed_sizes(&mut rng),
        Aim::Cordoned => cordoned(&mut rng),
        Aim::MixedPools => mixed_pools(&mut rng),
    };
    let mut job = job;
    job.name = format!("shape-{seed}");
    if rng.chance(1, 6) {
        let total = job.total_pods();
        if total > 1 {
            job.min_available = Some(rng.range(1, total - 1));
        }
    }
    Pair {
        seed,
        aim,
        cluster,
        job,
    }
}

fn gpu_group(rng: &mut Rng, count: u32, gpus: u32, product: &str, pool: &str) -> NodeGroup {
    NodeGroup {
        count,
        gpus,
        mig: BTreeMap::new(),
        cpu: rng.pick(&["32", "64", "96"]).to_string(),
        memory: rng.pick(&["128Gi", "256Gi", "512Gi"]).to_string(),
        pods: 110,
        product: Some(product.to_string()),
        pool: pool.to_string(),
        taints: Vec::new(),
        cordoned: false,
    }
}

fn replica(replica_type: &str, replicas: u32, gpus: u32, cpu: &str, memory: &str) -> ReplicaShape {
    let mut resources = BTreeMap::new();
    if gpus > 0 {
        resources.insert("nvidia.com/gpu".to_string(), gpus.to_string());
    }
    resources.insert("cpu".to_string(), cpu.to_string());
    resources.insert("memory".to_string(), memory.to_string());
    ReplicaShape {
        replica_type: replica_type.to_string(),
        replicas,
        resources,
        limits_only: false,
        node_selector: BTreeMap::new(),
        tolerations: Vec::new(),
    }
}

fn selecting(mut r: ReplicaShape, key: &str, value: &str) -> ReplicaShape {
    r.node_selector.insert(key.to_string(), value.to_string());
    r
}

fn job(kind: Kind, replicas: Vec<ReplicaShape>) -> JobShape {
    JobShape {
        kind,
        name: String::new(),
        namespace: "shapes".to_string(),
        replicas,
        min_available: None,
    }
}

fn gpu_taint() -> Taint {
    Taint {
        key: "gpu".into(),
        value: "true".into(),
        effect: "NoSchedule".into(),
    }
}

fn gpu_toleration() -> Value {
    json!({"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"})
}

/// Around the boundary: a GPU pool, one pod size, pods = what the pool holds ± 1; sometimes
/// MIG slices, extra taints, limits-only resources.
fn boundary(rng: &mut Rng) -> (ClusterShape, JobShape) {
    let nodes = rng.range(1, 5);
    let gpus = *rng.pick(&[4, 8]);
    let mut pool = gpu_group(rng, nodes, gpus, "A100", "train");
    let taint = rng.chance(1, 4);
    if taint {
        pool.taints.push(gpu_taint());
    }
    let mut groups = vec![pool];
    if rng.chance(1, 3) {
        let mut cpu = gpu_group(rng, 1, 0, "", "cpu");
        cpu.product = None;
        groups.push(cpu);
    }
    let mig = rng.chance(1, 4);
    let (per_pod, per_node, resource) = if mig {
        let slices = *rng.pick(&[7, 3]);
        groups.push(NodeGroup {
            count: rng.range(1, 2),
            gpus: 0,
            mig: BTreeMap::from([("nvidia.com/mig-1g.10gb".to_string(), slices)]),
            cpu: "64".into(),
            memory: "256Gi".into(),
            pods: 110,
            product: Some("A100".into()),
            pool: "dev".into(),
            taints: Vec::new(),
            cordoned: false,
        });
        (1, slices, "nvidia.com/mig-1g.10gb")
    } else {
        let per_pod = *rng.pick(&[1, 2, 4, 8]);
        (
            per_pod.min(gpus),
            gpus / per_pod.min(gpus),
            "nvidia.com/gpu",
        )
    };
    let holds = if mig {
        groups.last().map_or(0, |g| g.count * per_node)
    } else {
        nodes * per_node
    };
    let pods = holds
        .saturating_add(rng.range(0, 2))
        .saturating_sub(1)
        .clamp(1, MAX_PODS);
    let mut worker = replica("Worker", pods, 0, "2", "8Gi");
    worker
        .resources
        .insert(resource.to_string(), per_pod.to_string());
    worker.limits_only = rng.chance(1, 4);
    if taint && !mig && rng.chance(3, 4) {
        worker.tolerations.push(gpu_toleration());
    }
    if mig {
        worker = selecting(worker, POOL_LABEL, "dev");
    } else if rng.chance(1, 2) {
        worker = selecting(worker, POOL_LABEL, "train");
    }
    let kind = if rng.chance(1, 2) {
        Kind::PyTorchJob
    } else {
        Kind::TfJob
    };
    (ClusterShape { groups }, job(kind, vec![worker]))
}

/// cpu or memory decides: GPU nodes with little cpu, pods asking for a good share of it.
fn cpu_memory(rng: &mut Rng) -> (ClusterShape, JobShape) {
    let nodes = rng.range(1, 4);
    let mut pool = gpu_group(rng, nodes, 8, "H100", "train");
    pool.cpu = rng.pick(&["32", "64"]).to_string();
    pool.memory = rng.pick(&["128Gi", "256Gi"]).to_string();
    let cpu = *rng.pick(&["10", "15", "17", "30", "33"]);
    let memory = *rng.pick(&["30Gi", "60Gi", "100Gi", "130Gi"]);
    let gpus = *rng.pick(&[1, 2, 4]);
    let per_node = 2 + rng.below(2);
    let pods = (nodes * per_node + rng.below(3))
        .saturating_sub(1)
        .clamp(1, MAX_PODS - 1);
    let mut worker = replica("Worker", pods, gpus, cpu, memory);
    worker.limits_only = rng.chance(1, 3);
    let mut replicas = vec![worker];
    if rng.chance(1, 2) {
        // A cpu-only Master that may land on the GPU nodes too.
        replicas.insert(0, replica("Master", 1, 0, cpu, memory));
    }
    (
        ClusterShape { groups: vec![pool] },
        job(Kind::PyTorchJob, replicas),
    )
}

/// TFJob PS and Worker with different selectors (pool, product) that overlap.
fn joint_selectors(rng: &mut Rng) -> (ClusterShape, JobShape) {
    let a = rng.range(1, 3);
    let b = rng.range(1, 3);
    let c = rng.range(0, 2);
    let groups = vec![
        gpu_group(rng, a, 8, "A100", "train"),
        gpu_group(rng, b, 8, "H100", "train"),
        gpu_group(rng, c, 8, "A100", "dev"),
    ];
    let gpus = *rng.pick(&[4, 5, 8]);
    let ps = rng.range(1, 4);
    let workers = rng.range(1, 6);
    let ps = selecting(replica("PS", ps, gpus, "4", "16Gi"), POOL_LABEL, "train");
    let worker = selecting(
        replica("Worker", workers, gpus, "4", "16Gi"),
        PRODUCT_LABEL,
        "A100",
    );
    let groups = groups.into_iter().filter(|g| g.count > 0).collect();
    (ClusterShape { groups }, job(Kind::TfJob, vec![ps, worker]))
}

/// PyTorchJob: Workers select A100 and fill it; the Master selects nothing and may take an
/// A100 node before them.
fn greedy_order(rng: &mut Rng) -> (ClusterShape, JobShape) {
    let a100 = rng.range(1, 5);
    let h100 = rng.range(1, 2);
    let groups = vec![
        gpu_group(rng, a100, 8, "A100", "train"),
        gpu_group(rng, h100, 8, "H100", "train"),
    ];
    let workers = (a100 + rng.range(0, 1)).saturating_sub(rng.below(2)).max(1);
    let master_gpus = *rng.pick(&[8, 8, 4, 0]);
    let master = replica("Master", 1, master_gpus, "8", "32Gi");
    let worker = selecting(
        replica("Worker", workers, 8, "8", "32Gi"),
        PRODUCT_LABEL,
        "A100",
    );
    (
        ClusterShape { groups },
        job(Kind::PyTorchJob, vec![master, worker]),
    )
}

/// Two pod sizes on the same nodes, their GPUs adding up to about what the nodes have.
fn mixed_sizes(rng: &mut Rng) -> (ClusterShape, JobShape) {
    let nodes = rng.range(1, 4);
    let groups = vec![gpu_group(rng, nodes, 8, "A100", "train")];
    let (big, small) = *rng.pick(&[(5, 3), (6, 2), (4, 2), (3, 2)]);
    let bigs = rng.range(1, nodes + 1);
    let smalls =
        ((nodes * 8).saturating_sub(bigs * big) / small + rng.below(2)).clamp(1, MAX_PODS - bigs);
    let ps = replica("PS", bigs, big, "4", "16Gi");
    let worker = replica("Worker", smalls, small, "2", "8Gi");
    (ClusterShape { groups }, job(Kind::TfJob, vec![ps, worker]))
}

/// Some nodes cordoned; pods tolerate the cordon (Exists-all, or the unschedulable key) or not.
fn cordoned(rng: &mut Rng) -> (ClusterShape, JobShape) {
    let up = rng.range(0, 3);
    let down = rng.range(1, 3);
    let mut off = gpu_group(rng, down, 8, "A100", "train");
    off.cordoned = true;
    let mut groups = vec![off];
    if up > 0 {
        groups.push(gpu_group(rng, up, 8, "A100", "train"));
    }
    let workers = (up + rng.range(0, down)).clamp(1, MAX_PODS);
    let mut worker = replica("Worker", workers, 8, "8", "32Gi");
    match rng.below(3) {
        0 => worker.tolerations.push(json!({"operator": "Exists"})),
        1 => worker.tolerations.push(json!({
            "key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"})),
        _ => {}
    }
    (ClusterShape { groups }, job(Kind::PyTorchJob, vec![worker]))
}

/// A CPU pool and a GPU pool of 4- or 8-GPU nodes (tainted, or with a cordoned node, at
/// times); a PyTorchJob whose Master asks for no GPU (selecting the CPU pool or nothing) and
/// whose Workers ask for 1–4 GPUs each, around what the GPU pool holds; wildcard tolerations
/// on some replica types.
fn mixed_pools(rng: &mut Rng) -> (ClusterShape, JobShape) {
    let cpu_nodes = rng.range(1, 2);
    let mut cpu = gpu_group(rng, cpu_nodes, 0, "", "cpu");
    cpu.product = None;
    let gpus = *rng.pick(&[4, 8]);
    let nodes = rng.range(1, 3);
    let mut pool = gpu_group(rng, nodes, gpus, "A100", "train");
    let tainted = rng.chance(1, 3);
    if tainted {
        pool.taints.push(gpu_taint());
    }
    let mut groups = vec![cpu, pool];
    if rng.chance(1, 4) {
        let mut off = gpu_group(rng, 1, gpus, "A100", "train");
        off.cordoned = true;
        groups.push(off);
    }
    let per_pod = *rng.pick(&[1, 2, 4]);
    let holds = nodes * (gpus / per_pod);
    let workers = (holds + rng.range(0, 2))
        .saturating_sub(1)
        .clamp(1, MAX_PODS - 1);
    let cpu_request = *rng.pick(&["4", "8", "16"]);
    let mut master = replica("Master", 1, 0, cpu_request, "16Gi");
    let mut worker = replica("Worker", workers, per_pod, cpu_request, "16Gi");
    if rng.chance(1, 2) {
        master = selecting(master, POOL_LABEL, "cpu");
    }
    if rng.chance(1, 2) {
        worker = selecting(worker, POOL_LABEL, "train");
    }
    let wildcard = json!({"operator": "Exists"});
    for r in [&mut master, &mut worker] {
        match rng.below(3) {
            0 => r.tolerations.push(wildcard.clone()),
            1 if tainted => r.tolerations.push(gpu_toleration()),
            _ => {}
        }
    }
    (
        ClusterShape { groups },
        job(Kind::PyTorchJob, vec![master, worker]),
    )
}

impl ClusterShape {
    pub fn node_count(&self) -> u32 {
        self.groups.iter().map(|g| g.count).sum()
    }

    /// The Node objects, as a kubelet reports them (capacity = allocatable), each with a
    /// Ready condition; cordoned ones with `spec.unschedulable` and the taint node-lifecycle
    /// adds.
    pub fn nodes(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for (g, group) in self.groups.iter().enumerate() {
            for i in 0..group.count {
                out.push(group.node(&format!("node-{g}-{i}")));
            }
        }
        out
    }

    /// `kind: List` of the nodes, for `gangplank check --cluster FILE`.
    pub fn to_nodes_yaml(&self) -> String {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": self.nodes()});
        yaml_serde::to_string(&list).unwrap_or_else(|e| panic!("nodes as YAML: {e}"))
    }
}

impl NodeGroup {
    fn node(&self, name: &str) -> Value {
        let mut resources = json!({
            "cpu": self.cpu, "memory": self.memory, "pods": self.pods.to_string(),
            "ephemeral-storage": "500Gi",
        });
        if self.gpus > 0 {
            resources["nvidia.com/gpu"] = json!(self.gpus.to_string());
        }
        for (name, n) in &self.mig {
            resources[name] = json!(n.to_string());
        }
        let mut labels = json!({
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", POOL_LABEL: self.pool,
        });
        if let Some(product) = &self.product {
            labels[PRODUCT_LABEL] = json!(product);
        }
        if !self.mig.is_empty() {
            labels["nvidia.com/mig.strategy"] = json!("mixed");
        }
        let mut taints: Vec<Value> = self
            .taints
            .iter()
            .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
            .collect();
        let mut spec = json!({});
        if self.cordoned {
            spec["unschedulable"] = json!(true);
            taints.push(json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}));
        }
        if !taints.is_empty() {
            spec["taints"] = json!(taints);
        }
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {
                "capacity": resources, "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        })
    }
}

impl JobShape {
    pub fn total_pods(&self) -> u32 {
        self.replicas.iter().map(|r| r.replicas).sum()
    }

    fn field(&self) -> (&'static str, &'static str) {
        match self.kind {
            Kind::PyTorchJob => ("pytorchReplicaSpecs", "pytorch"),
            Kind::TfJob => ("tfReplicaSpecs", "tensorflow"),
        }
    }

    /// The pod template spec of `r`, as the job writes it.
    fn template_spec(&self, r: &ReplicaShape) -> Value {
        let resources: Value = r
            .resources
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        // Extended resources need request == limit; cpu/memory get limits only when written
        // as limits only.
        let limits: Value = r
            .resources
            .iter()
            .filter(|(k, _)| r.limits_only || k.contains('/'))
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let mut container =
            json!({"name": self.field().1, "image": IMAGE, "resources": {"limits": limits}});
        if !r.limits_only {
            container["resources"]["requests"] = resources;
        }
        let mut spec = json!({"containers": [container]});
        if !r.node_selector.is_empty() {
            spec["nodeSelector"] = json!(r.node_selector);
        }
        if !r.tolerations.is_empty() {
            spec["tolerations"] = json!(r.tolerations);
        }
        spec
    }

    pub fn to_json(&self) -> Value {
        let (field, _) = self.field();
        let specs: serde_json::Map<String, Value> = self
            .replicas
            .iter()
            .map(|r| {
                let spec = json!({
                    "replicas": r.replicas, "restartPolicy": "OnFailure",
                    "template": {"spec": self.template_spec(r)},
                });
                (r.replica_type.clone(), spec)
            })
            .collect();
        let mut job = json!({
            "apiVersion": "kubeflow.org/v1",
            "kind": match self.kind { Kind::PyTorchJob => "PyTorchJob", Kind::TfJob => "TFJob" },
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {field: specs},
        });
        if self.kind == Kind::PyTorchJob {
            let gpus = self
                .replicas
                .iter()
                .filter_map(|r| r.resources.get("nvidia.com/gpu"))
                .next()
                .cloned()
                .unwrap_or_else(|| "1".into());
            job["spec"]["nprocPerNode"] = json!(gpus);
        }
        if let Some(n) = self.min_available {
            job["spec"]["runPolicy"] = json!({"schedulingPolicy": {"minAvailable": n}});
        }
        job
    }

    pub fn to_job_yaml(&self) -> String {
        yaml_serde::to_string(&self.to_json()).unwrap_or_else(|e| panic!("job as YAML: {e}"))
    }

    /// Every pod of the gang as the scheduler sees it: the template with requests defaulted
    /// from limits (as the apiserver does), no schedulerName.
    pub fn pods(&self) -> Vec<PodShape> {
        let mut out = Vec::new();
        for r in &self.replicas {
            let mut spec = self.template_spec(r);
            let defaulted: Value = r
                .resources
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            spec["containers"][0]["resources"]["requests"] = defaulted;
            for i in 0..r.replicas {
                out.push(PodShape {
                    name: format!("{}-{}-{i}", self.name, r.replica_type.to_lowercase()),
                    replica_type: r.replica_type.clone(),
                    spec: spec.clone(),
                });
            }
        }
        out
    }
}
