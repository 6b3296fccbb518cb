//! PyTorch `spec.elasticPolicy`: the typed policy, upstream's in-memory defaulting of its
//! bounds, the checks upstream's webhook makes, and what the bounds mean for the gang.
//!
//! Entry points: [`ElasticPolicy`] and [`ElasticPolicy::bounds`] (parsed with the job, in
//! [`super::snapshot`]), [`problems`], [`min_member`].
//! The torchrun variables it produces live in `env/pytorch.rs`, the HPA in [`super::hpa`].

use super::snapshot::{ElasticPolicy, JobSnapshot};
use crate::job::problem::Problem;

/// The job's elastic policy with its Worker count, when it has both.
pub fn of(job: &JobSnapshot) -> Option<(&ElasticPolicy, i32)> {
    let policy = job.extras.elastic_policy.as_ref()?;
    Some((policy, job.replica("Worker")?.replicas))
}

/// What upstream's webhook refuses about an elastic policy, for jobs that reached the store
/// without it, plus bounds no HPA or rendezvous could honour.
pub fn problems(job: &JobSnapshot) -> Vec<Problem> {
    let Some(policy) = &job.extras.elastic_policy else {
        return Vec::new();
    };
    let specs = &job.view.replica_specs_path;
    let mut found = Vec::new();
    let Some(workers) = job.replica("Worker").map(|w| w.replicas) else {
        found.push(problem(
            &format!("{specs}/Worker"),
            "must be configured if elastic policy is used",
        ));
        return found;
    };
    if policy.n_proc_per_node.is_some() && job.extras.nproc_per_node.is_some() {
        found.push(problem(
            "/spec/elasticPolicy/nProcPerNode",
            "must not be used with spec.nprocPerNode",
        ));
    }
    let (min, max) = policy.bounds(workers);
    if min < 1 || min > max {
        found.push(problem(
            "/spec/elasticPolicy",
            &format!(
                "minReplicas {min} and maxReplicas {max} need 1 <= minReplicas <= maxReplicas"
            ),
        ));
    }
    found
}

/// PodGroup minMember of an elastic job: the gang can start with `minReplicas` Workers, so
/// asking the scheduler for all of them would hold back a job torchrun could already run.
pub fn min_member(job: &JobSnapshot) -> Option<i32> {
    let (policy, workers) = of(job)?;
    let (min, _) = policy.bounds(workers);
    Some(job.total_replicas() - workers + min.min(workers))
}

fn problem(path: &str, msg: &str) -> Problem {
    Problem {
        path: path.to_string(),
        msg: msg.to_string(),
    }
}
