//! Random small Kueue quota shapes and queued training jobs, for comparing the `kueue_queue`
//! policy's verdict with whether Kueue v0.19.2 reserves quota for the job's Workload.
//!
//! Entry point: [`generate`] (a seed → a [`Pair`] of [`Quotas`] and [`QueuedJob`]). A pair
//! writes itself out as Kueue objects under a per-pair prefix ([`Pair::objects`]) and as the
//! job ([`Pair::job`]), so pairs run side by side on one Kueue without sharing a flavor, a
//! ClusterQueue or a cohort.
//!
//! # Shapes
//! - 1–2 resource groups (one covering cpu and `nvidia.com/gpu`, or one each), 1–3 flavors
//!   per group, shared by every ClusterQueue and Cohort of the pair;
//! - the job's ClusterQueue alone, or in a cohort of 1–3 ClusterQueues; in a cohort each
//!   quota may have a borrowingLimit and a lendingLimit (at most the nominal quota); the
//!   cohort is implicit, or a Cohort object with quota of its own, under a parent Cohort
//!   with quota of its own or not;
//! - a PyTorchJob (Master, Worker) or a TFJob (Chief, PS, Worker): 1–3 pod sets, each pod
//!   asking for GPUs, cpu or both, sized around what the job's queue can reach so that
//!   reserved and never-reserved jobs are both common.
//!
//! Deterministic: the same seed gives the same pair ([`Rng`](super::shapes::Rng)).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::shapes::Rng;

pub const GPU: &str = "nvidia.com/gpu";
pub const CPU: &str = "cpu";
/// A pinned image, so the images policy has nothing to say.
const IMAGE: &str = "registry.example.com/ml/train:1.0@sha256:0000000000000000000000000000000000000000000000000000000000000001";
const API: &str = "kueue.x-k8s.io/v1beta2";

/// One (flavor, resource) quota: GPUs in units, cpu in millicores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quota {
    pub nominal: u32,
    pub borrowing_limit: Option<u32>,
    pub lending_limit: Option<u32>,
}

/// A resource group: the resources it covers and its flavors (their names' suffixes).
#[derive(Debug, Clone)]
pub struct Group {
    pub resources: Vec<&'static str>,
    pub flavors: Vec<String>,
}

/// A ClusterQueue or a Cohort: its parent (a cohort) and its quota per (flavor, resource).
#[derive(Debug, Clone)]
pub struct QuotaNode {
    pub name: String,
    pub parent: Option<String>,
    pub quotas: BTreeMap<(String, &'static str), Quota>,
}

/// The pair's Kueue objects: the groups every node shares, the ClusterQueues (the job's
/// first) and the Cohort objects (none: the cohort, if any, is implicit).
#[derive(Debug, Clone)]
pub struct Quotas {
    pub groups: Vec<Group>,
    pub queues: Vec<QuotaNode>,
    pub cohorts: Vec<QuotaNode>,
}

/// One replica type: `replicas` pods of `gpus` GPUs and `cpu` millicores each.
#[derive(Debug, Clone)]
pub struct PodSet {
    pub replica_type: &'static str,
    pub replicas: u32,
    pub gpus: u32,
    pub cpu: u32,
}

#[derive(Debug, Clone)]
pub struct QueuedJob {
    pub kind: &'static str,
    pub pod_sets: Vec<PodSet>,
}

#[derive(Debug, Clone)]
pub struct Pair {
    pub quotas: Quotas,
    pub job: QueuedJob,
}

pub fn generate(seed: u64) -> Pair {
    let mut rng = Rng::new(seed);
    let quotas = quotas(&mut rng);
    let job = job(&mut rng, &quotas);
    Pair { quotas, job }
}

fn quotas(rng: &mut Rng) -> Quotas {
    let flavors = |rng: &mut Rng, prefix: &str| -> Vec<String> {
        (0..rng.range(1, 3))
            .map(|i| format!("{prefix}{i}"))
            .collect()
    };
    let groups = if rng.chance(1, 2) {
        vec![Group {
            resources: vec![CPU, GPU],
            flavors: flavors(rng, "f"),
        }]
    } else {
        vec![
            Group {
                resources: vec![GPU],
                flavors: flavors(rng, "g"),
            },
            Group {
                resources: vec![CPU],
                flavors: flavors(rng, "c"),
            },
        ]
    };
    let in_cohort = rng.chance(1, 2);
    let cohort = in_cohort.then(|| "team".to_string());
    let queue_count = if in_cohort { rng.range(1, 3) } else { 1 };
    let queues = (0..queue_count)
        .map(|i| node(rng, &groups, format!("q{i}"), cohort.clone(), in_cohort))
        .collect();
    let mut cohorts = Vec::new();
    if in_cohort && rng.chance(1, 2) {
        let parent = rng.chance(1, 2).then(|| "org".to_string());
        let limits = parent.is_some();
        cohorts.push(node(rng, &groups, "team".into(), parent.clone(), limits));
        if let Some(parent) = parent {
            cohorts.push(node(rng, &groups, parent, None, false));
        }
    }
    Quotas {
        groups,
        queues,
        cohorts,
    }
}

/// A node with a quota for every (flavor, resource) of `groups`; borrowing and lending
/// limits only where `limits` (Kueue refuses them outside a cohort).
fn node(
    rng: &mut Rng,
    groups: &[Group],
    name: String,
    parent: Option<String>,
    limits: bool,
) -> QuotaNode {
    let mut quotas = BTreeMap::new();
    for g in groups {
        for f in &g.flavors {
            for &r in &g.resources {
                let nominal = amount(rng, r);
                let borrowing_limit = (limits && rng.chance(1, 2)).then(|| amount(rng, r));
                let lending_limit =
                    (limits && rng.chance(1, 3)).then(|| rng.range(0, nominal / unit(r)) * unit(r));
                let quota = Quota {
                    nominal,
                    borrowing_limit,
                    lending_limit,
                };
                quotas.insert((f.clone(), r), quota);
            }
        }
    }
    QuotaNode {
        name,
        parent,
        quotas,
    }
}

/// The step amounts of `r` are drawn in: one GPU, half a cpu.
fn unit(r: &str) -> u32 {
    if r == CPU {
        500
    } else {
        1
    }
}

fn amount(rng: &mut Rng, r: &str) -> u32 {
    let steps: [u32; 8] = [0, 2, 4, 4, 8, 8, 12, 16];
    *rng.pick(&steps) * if r == CPU { 1000 } else { 1 }
}

/// What the job's queue can roughly reach of `r`: its nominal quota plus half of what the
/// rest of the cohort holds, over the flavors. Only a target to size jobs around.
fn reach(quotas: &Quotas, r: &str) -> u32 {
    let total = |nodes: &[QuotaNode]| -> u32 {
        nodes
            .iter()
            .flat_map(|n| n.quotas.iter())
            .filter(|((_, res), _)| *res == r)
            .map(|(_, q)| q.nominal)
            .sum()
    };
    let own = total(&quotas.queues[..1]);
    let rest = total(&quotas.queues[1..]) + total(&quotas.cohorts);
    own + rest / 2
}

fn job(rng: &mut Rng, quotas: &Quotas) -> QueuedJob {
    let count = rng.range(1, 3);
    let (kind, types): (&'static str, &[&'static str]) = if count == 3 || rng.chance(1, 2) {
        ("TFJob", &["Chief", "PS", "Worker"])
    } else {
        ("PyTorchJob", &["Master", "Worker"])
    };
    let skip = types.len() - count as usize;
    let chosen: Vec<&'static str> = if skip == 0 {
        types.to_vec()
    } else {
        let keep = rng.below(types.len() as u32) as usize;
        match count {
            1 => vec![types[keep]],
            _ => types
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != keep)
                .map(|(_, t)| *t)
                .collect(),
        }
    };
    // The whole gang aims at a fraction of the reach: 0.5 to 1.5.
    let scale = *rng.pick(&[2u32, 3, 4, 4, 5, 6]);
    let gpu_target = (reach(quotas, GPU) * scale / 4).max(1);
    let cpu_target = (reach(quotas, CPU) * scale / 4).max(500);
    let mut pod_sets = Vec::new();
    let share = chosen.len() as u32;
    for t in chosen {
        let replicas = if matches!(t, "Chief" | "Master") {
            1
        } else {
            rng.range(1, 4)
        };
        let per_pod = |target: u32, step: u32| (target / share / replicas / step).max(1) * step;
        let (gpus, cpu) = match rng.below(4) {
            0 => (0, per_pod(cpu_target, 500)),
            1 => (per_pod(gpu_target, 1), 0),
            _ => (per_pod(gpu_target, 1), per_pod(cpu_target, 500)),
        };
        pod_sets.push(PodSet {
            replica_type: t,
            replicas,
            gpus,
            cpu,
        });
    }
    QueuedJob { kind, pod_sets }
}

impl Pair {
    /// The pair's ResourceFlavors, Cohorts, ClusterQueues (names `<prefix>-…`) and the
    /// LocalQueue `<prefix>` in `namespace`, which points at the job's ClusterQueue: in the
    /// order they are created.
    pub fn objects(&self, prefix: &str, namespace: &str) -> Vec<Value> {
        let named = |n: &str| format!("{prefix}-{n}");
        let mut out: Vec<Value> = Vec::new();
        for g in &self.quotas.groups {
            for f in &g.flavors {
                out.push(json!({"apiVersion": API, "kind": "ResourceFlavor",
                    "metadata": {"name": named(f)}, "spec": {}}));
            }
        }
        for c in &self.quotas.cohorts {
            let mut spec = json!({"resourceGroups": self.groups(c, prefix)});
            if let Some(parent) = &c.parent {
                spec["parentName"] = json!(named(parent));
            }
            out.push(json!({"apiVersion": API, "kind": "Cohort",
                "metadata": {"name": named(&c.name)}, "spec": spec}));
        }
        for q in &self.quotas.queues {
            let mut spec =
                json!({"namespaceSelector": {}, "resourceGroups": self.groups(q, prefix)});
            if let Some(parent) = &q.parent {
                spec["cohortName"] = json!(named(parent));
            }
            out.push(json!({"apiVersion": API, "kind": "ClusterQueue",
                "metadata": {"name": named(&q.name)}, "spec": spec}));
        }
        out.push(json!({"apiVersion": API, "kind": "LocalQueue",
            "metadata": {"name": prefix, "namespace": namespace},
            "spec": {"clusterQueue": named(&self.quotas.queues[0].name)}}));
        out
    }

    fn groups(&self, node: &QuotaNode, prefix: &str) -> Value {
        let groups: Vec<Value> = self
            .quotas
            .groups
            .iter()
            .map(|g| {
                let flavors: Vec<Value> = g
                    .flavors
                    .iter()
                    .map(|f| {
                        let resources: Vec<Value> = g
                            .resources
                            .iter()
                            .map(|&r| quota_json(r, &node.quotas[&(f.clone(), r)]))
                            .collect();
                        json!({"name": format!("{prefix}-{f}"), "resources": resources})
                    })
                    .collect();
                json!({"coveredResources": g.resources, "flavors": flavors})
            })
            .collect();
        json!(groups)
    }

    /// The job `name` in LocalQueue `queue`, its pods asking exactly for their amounts.
    pub fn job(&self, name: &str, queue: &str) -> Value {
        let (field, container) = match self.job.kind {
            "TFJob" => ("tfReplicaSpecs", "tensorflow"),
            _ => ("pytorchReplicaSpecs", "pytorch"),
        };
        let specs: serde_json::Map<String, Value> = self
            .job
            .pod_sets
            .iter()
            .map(|p| {
                let mut requests = json!({});
                if p.gpus > 0 {
                    requests[GPU] = json!(p.gpus.to_string());
                }
                if p.cpu > 0 {
                    requests[CPU] = json!(format!("{}m", p.cpu));
                }
                let limits = if p.gpus > 0 {
                    json!({GPU: p.gpus.to_string()})
                } else {
                    json!({})
                };
                let spec = json!({"replicas": p.replicas, "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [{"name": container, "image": IMAGE,
                        "resources": {"requests": requests, "limits": limits}}]}}});
                (p.replica_type.to_string(), spec)
            })
            .collect();
        json!({
            "apiVersion": "kubeflow.org/v1", "kind": self.job.kind,
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {field: specs},
        })
    }
}

fn quota_json(r: &str, q: &Quota) -> Value {
    let amount = |n: u32| {
        if r == CPU {
            json!(format!("{n}m"))
        } else {
            json!(n)
        }
    };
    let mut out = json!({"name": r, "nominalQuota": amount(q.nominal)});
    if let Some(b) = q.borrowing_limit {
        out["borrowingLimit"] = amount(b);
    }
    if let Some(l) = q.lending_limit {
        out["lendingLimit"] = amount(l);
    }
    out
}
