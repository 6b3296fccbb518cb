//! The per-kind rules that turn replicaStatuses counts into Running, Restarting, Succeeded
//! and Failed, with upstream's messages (which differ between kinds and are kept as they are,
//! since tools match on them).
//!
//! Entry point: [`apply`].
//! - PyTorch, Paddle: with a Master, judged on it (success ends the evaluation); without, on
//!   the Workers (PyTorch elastic: one succeeded Worker is enough).
//! - JAX: all Workers.
//! - TF: Chief/Master if present, else Workers (worker-0 done is enough unless
//!   `successPolicy: AllWorkers`); any failure fails the job unless it is already restarting.
//! - XGBoost: the Master; a failure restarts only under ExitCode.
//! - All kinds: a type with failures and fewer than `replicas` pods running or done restarts
//!   unless its restartPolicy is Never, which fails the job.
//! - Not upstream's: while the job restarts (`recreating`), Running does not replace
//!   Restarting; see [`apply`].

use super::action::{Event, EventType};
use super::restart::RestartPolicy;
use super::snapshot::{JobSnapshot, Replica};
use super::status::{reason, ConditionType, JobStatus, ReplicaStatus};
use super::Timestamp;
use crate::job::kinds::Role;

/// Applies `job`'s success rules to the counts in `status`. `worker0_succeeded` is TF's
/// "worker-0 exited 0" shortcut.
///
/// `recreating`: a replica failed and is being recreated, and not every replica runs again
/// yet. The rules then leave a Restarting=True condition in place instead of replacing it
/// with Running as soon as one pod runs, which upstream does (kubeflow/training-operator
/// #1711: the condition said Running while a worker was still being recreated, and only an
/// Event told). Success and failure are judged as always.
pub fn apply(
    job: &JobSnapshot,
    status: &mut JobStatus,
    worker0_succeeded: bool,
    recreating: bool,
    now: Timestamp,
    events: &mut Vec<Event>,
) {
    let mut rules = Rules {
        job,
        status,
        recreating,
        now,
        events,
    };
    match job.kind() {
        "TFJob" => rules.tf(worker0_succeeded),
        "XGBoostJob" => rules.xgboost(),
        "MPIJob" => rules.mpi(),
        _ => rules.generic(),
    }
}

struct Rules<'a> {
    job: &'a JobSnapshot,
    status: &'a mut JobStatus,
    /// See [`apply`].
    recreating: bool,
    now: Timestamp,
    events: &'a mut Vec<Event>,
}

/// One replica type's numbers, as upstream names them.
struct Counts {
    expected: i32,
    running: i32,
    succeeded: i32,
    failed: i32,
}

impl Rules<'_> {
    fn counts(&self, r: &Replica) -> Counts {
        let s = self
            .status
            .replica_statuses
            .get(r.rtype.name)
            .cloned()
            .unwrap_or_else(ReplicaStatus::default);
        Counts {
            expected: r.replicas - s.succeeded,
            running: s.active,
            succeeded: s.succeeded,
            failed: s.failed,
        }
    }

    /// PyTorch, Paddle, JAX.
    fn generic(&mut self) {
        let job = self.job;
        let has_master = job.coordinator().is_some();
        let elastic = job.kind() == "PyTorchJob" && job.extras.elastic_policy.is_some();
        for r in &job.replicas {
            let c = self.counts(r);
            if has_master && r.role() == Role::Coordinator {
                if c.running > 0 {
                    self.running(self.short("is running."));
                }
                if c.expected == 0 {
                    self.succeeded(self.short("is successfully completed."));
                    return;
                }
            } else if !has_master && r.role() == Role::Worker {
                if c.expected == 0 || (elastic && c.succeeded > 0) {
                    self.succeeded(self.long("successfully completed."));
                } else if c.running > 0 {
                    self.running(self.long("is running."));
                }
            }
            self.failure_rule(r);
        }
    }

    /// A type with failures and fewer than `replicas` pods running or done restarts unless
    /// its restartPolicy is Never, which fails the job.
    fn failure_rule(&mut self, r: &Replica) {
        let c = self.counts(r);
        if c.failed > 0 && r.replicas > c.succeeded + c.running {
            if r.restart_policy == RestartPolicy::Never {
                self.failed(self.replicas_failed("is failed", &c, r));
            } else {
                self.restarting(self.replicas_failed("is restarting", &c, r));
            }
        }
    }

    /// MPIJob v2beta1: the launcher decides. Running once the launcher runs and every worker
    /// does; Succeeded when the launcher succeeds (workers run sshd until deleted);
    /// failures follow the per-type rule (an OnFailure launcher restarts, counted).
    fn mpi(&mut self) {
        let job = self.job;
        let workers_running = job
            .replica("Worker")
            .is_none_or(|w| self.counts(w).running >= w.replicas);
        if let Some(launcher) = job.replica("Launcher") {
            let c = self.counts(launcher);
            if c.running > 0 && workers_running {
                self.running(self.long("is running."));
            }
            if c.succeeded > 0 {
                self.succeeded(self.long("successfully completed."));
                return;
            }
        }
        for r in &job.replicas {
            self.failure_rule(r);
        }
    }

    fn xgboost(&mut self) {
        for r in &self.job.replicas {
            let c = self.counts(r);
            if r.role() == Role::Coordinator {
                if c.running > 0 || c.expected == 0 {
                    self.running(self.short("is running."));
                }
                if c.expected == 0 {
                    self.succeeded(self.short("is successfully completed."));
                    return;
                }
            }
            if c.failed > 0 {
                // Upstream sets Running before judging the failure; kept for identical lists.
                self.running(self.short("is running."));
                if r.restart_policy == RestartPolicy::ExitCode {
                    self.restarting(self.replicas_failed("is restarting", &c, r));
                } else {
                    self.failed(self.replicas_failed("is failed", &c, r));
                }
            }
        }
    }

    fn tf(&mut self, worker0_succeeded: bool) {
        let job = self.job;
        let restarting = self
            .status
            .condition(ConditionType::Restarting)
            .map(|c| (c.reason.clone(), c.message.clone()));
        let has_chief = job.coordinator().is_some();
        let all_workers = job.extras.success_policy.as_deref() == Some("AllWorkers");
        // Upstream's fixed order; it decides which type a failure message names.
        for name in ["Chief", "Evaluator", "Master", "PS", "Worker"] {
            let Some(r) = job.replica(name) else { continue };
            let c = self.counts(r);
            if has_chief && r.role() == Role::Coordinator {
                if c.running > 0 {
                    self.running(self.long("is running."));
                }
                if c.expected == 0 {
                    self.succeeded(self.long("successfully completed."));
                }
            } else if !has_chief && r.role() == Role::Worker {
                if c.expected == 0 || (worker0_succeeded && !all_workers) {
                    self.succeeded(self.long("successfully completed."));
                } else if c.running > 0 {
                    self.running(self.long("is running."));
                }
            }
            if c.failed > 0 {
                if let Some((reason, message)) = &restarting {
                    let (reason, message) = (reason.clone(), message.clone());
                    self.status.set_condition(
                        ConditionType::Restarting,
                        true,
                        reason,
                        message,
                        self.now,
                    );
                } else if !(job.extras.enable_dynamic_worker && r.role() == Role::Worker) {
                    self.failed(format!(
                        "TFJob {}/{} has failed because {} {} replica(s) failed.",
                        job.namespace, job.name, c.failed, r.rtype.name
                    ));
                }
            }
        }
    }

    /// `<Kind> <name> <text>`.
    fn short(&self, text: &str) -> String {
        format!("{} {} {text}", self.job.kind(), self.job.name)
    }

    /// `<Kind> <namespace>/<name> <text>`.
    fn long(&self, text: &str) -> String {
        format!(
            "{} {}/{} {text}",
            self.job.kind(),
            self.job.namespace,
            self.job.name
        )
    }

    fn replicas_failed(&self, verb: &str, c: &Counts, r: &Replica) -> String {
        self.short(&format!(
            "{verb} because {} {} replica(s) failed.",
            c.failed, r.rtype.name
        ))
    }

    fn running(&mut self, msg: String) {
        if self.recreating && self.status.is(ConditionType::Restarting) {
            return;
        }
        self.set(ConditionType::Running, "Running", msg, None);
    }

    fn restarting(&mut self, msg: String) {
        self.set(
            ConditionType::Restarting,
            "Restarting",
            msg,
            Some(EventType::Warning),
        );
    }

    fn succeeded(&mut self, msg: String) {
        self.status.complete_at(self.now);
        self.set(
            ConditionType::Succeeded,
            "Succeeded",
            msg,
            Some(EventType::Normal),
        );
    }

    /// A job that has just succeeded is not also failed in the same pass (upstream sets
    /// both when, e.g., a TF Chief succeeds while a Worker has failed).
    fn failed(&mut self, msg: String) {
        if self.status.is(ConditionType::Succeeded) {
            return;
        }
        self.status.complete_at(self.now);
        self.set(
            ConditionType::Failed,
            "Failed",
            msg,
            Some(EventType::Normal),
        );
    }

    /// Sets a condition True and records an Event when it changed (upstream records one on
    /// every reconcile).
    fn set(&mut self, t: ConditionType, what: &str, msg: String, event: Option<EventType>) {
        let reason = reason(self.job.kind(), what);
        let changed = self
            .status
            .set_condition(t, true, reason.clone(), msg.clone(), self.now);
        if let (true, Some(type_)) = (changed, event) {
            self.events.push(Event {
                type_,
                reason,
                message: msg,
            });
        }
    }
}
