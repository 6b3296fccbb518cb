//! Whether a job can run: [`JobSnapshot::from_value`] parses a job object
//! ([`super::snapshot`]) and adds every problem the rules find in it: the structural checks
//! here (the controller must be able to build every pod), then [`elastic::problems`] and
//! [`mpi::problems`].
//!
//! The snapshot is the leaf the rules read, and this is where they are called, so the
//! dependency goes one way: checks → elastic, mpi → snapshot.
//!
//! # Guarantees
//! Building fails only for objects that are not a kind this controller runs. Anything
//! malformed inside a runnable kind becomes a [`Problem`](crate::job::problem::Problem) in
//! `problems`, and `plan` fails such a job with a condition naming it instead of creating
//! half a gang.

use serde_json::Value;

use super::snapshot::{JobSnapshot, SnapshotError};
use super::{elastic, mpi};
use crate::job::kinds::Role;
use crate::job::naming::MAX_LABEL_LEN;
use crate::job::problem::problem;

impl JobSnapshot {
    /// Parses a job object of one of the [`RUNNABLE_KINDS`], or an MPIJob (v2beta1 or v1; not
    /// in `RUNNABLE_KINDS` because the controller runs it only when asked to).
    ///
    /// [`RUNNABLE_KINDS`]: super::snapshot::RUNNABLE_KINDS
    pub fn from_value(object: &Value) -> Result<JobSnapshot, SnapshotError> {
        Ok(JobSnapshot::parse(object)?.checked())
    }

    /// Structural checks beyond the view's: the controller must be able to build every pod.
    fn checked(mut self) -> JobSnapshot {
        let mut found = Vec::new();
        if self.name.is_empty() {
            found.push(problem("/metadata/name", "is required".into()));
        }
        for r in &self.view.replicas {
            if !r.known {
                let allowed = self.view.allowed_types.join(", ");
                found.push(problem(
                    &r.path,
                    format!(
                        "unknown replica type {}; {} allows {allowed}",
                        r.key,
                        self.kind()
                    ),
                ));
            }
            if r.replicas < 1 {
                found.push(problem(&r.path, "replicas must be at least 1".into()));
            } else if r.coordinator && r.replicas > 1 {
                found.push(problem(
                    &r.path,
                    format!("{} must have exactly 1 replica", r.replica_type),
                ));
            }
            if r.known && r.containers.is_empty() {
                found.push(problem(
                    &r.pod_spec_path,
                    "needs at least one container".into(),
                ));
            }
            if r.last_pod_name.len() > MAX_LABEL_LEN {
                found.push(problem(
                    "/metadata/name",
                    format!(
                        "pod name {} is longer than {MAX_LABEL_LEN} characters",
                        r.last_pod_name
                    ),
                ));
            }
        }
        if self
            .replicas
            .iter()
            .filter(|r| r.role() == Role::Coordinator)
            .count()
            > 1
        {
            found.push(problem(
                &self.view.replica_specs_path,
                "Chief and Master cannot both be set".into(),
            ));
        }
        if self.view.replicas.is_empty() && self.view.problems.is_empty() {
            found.push(problem(
                &self.view.replica_specs_path,
                "has no replica specs".into(),
            ));
        }
        found.extend(elastic::problems(&self));
        found.extend(mpi::problems(&self));
        self.problems.extend(found);
        self
    }
}
