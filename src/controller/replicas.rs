//! Which observed pod fills which slot: pods bucketed by replica type and index, and the
//! replicaStatuses counts upstream derives from them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::mpi;
use super::naming::{self, REPLICA_INDEX, REPLICA_TYPE};
use super::observed::phase;
use super::snapshot::{JobSnapshot, Replica};
use super::status::ReplicaStatus;

/// The observed pods of one replica type.
#[derive(Debug)]
pub struct Slots<'a> {
    pub replica: &'a Replica,
    /// Pods by index, for indices below `replicas`.
    pub pods: BTreeMap<i32, Vec<&'a Pod>>,
    /// Pods whose index is at or beyond `replicas` (scaled down) or unreadable.
    pub surplus: Vec<&'a Pod>,
}

/// Buckets `pods` (all owned by the job) per replica type of the job, by their labels.
pub fn slots<'a>(job: &'a JobSnapshot, pods: &'a [Pod]) -> Vec<Slots<'a>> {
    job.replicas
        .iter()
        .map(|replica| {
            let type_label = replica.type_label();
            let mut slots = Slots {
                replica,
                pods: BTreeMap::new(),
                surplus: Vec::new(),
            };
            let offset = mpi::index_offset(job, replica);
            for pod in pods
                .iter()
                .filter(|p| label(p, REPLICA_TYPE) == Some(&type_label))
            {
                let index = label(pod, REPLICA_INDEX).and_then(|i| i.parse::<i32>().ok());
                match index.map(|i| i - offset) {
                    Some(i) if (0..replica.replicas).contains(&i) => {
                        slots.pods.entry(i).or_default().push(pod)
                    }
                    _ => slots.surplus.push(pod),
                }
            }
            slots
        })
        .collect()
}

impl Slots<'_> {
    /// Every pod of the type, surplus included.
    pub fn all(&self) -> impl Iterator<Item = &Pod> {
        self.pods
            .values()
            .flatten()
            .chain(self.surplus.iter())
            .copied()
    }

    /// Upstream's counts: Running is active (failed if it is being deleted), Succeeded and
    /// Failed count as such, Pending counts nowhere.
    pub fn status(&self, job: &JobSnapshot) -> ReplicaStatus {
        let mut s = ReplicaStatus::default();
        for pod in self.all() {
            match phase(pod) {
                "Running" if pod.metadata.deletion_timestamp.is_some() => s.failed += 1,
                "Running" => s.active += 1,
                "Succeeded" => s.succeeded += 1,
                "Failed" => s.failed += 1,
                _ => {}
            }
        }
        if matches!(job.kind(), "PyTorchJob" | "PaddleJob" | "JAXJob") {
            s.selector = Some(naming::type_selector(job, self.replica));
        }
        s
    }
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a String> {
    pod.metadata.labels.as_ref()?.get(key)
}
