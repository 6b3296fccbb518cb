//! Restarting lasts as long as the restart: a replica that failed with a retryable exit code
//! keeps the job `Restarting=True` while its pod is deleted, recreated and Pending, and
//! Running replaces it only once every replica runs again. Upstream flips back to Running on
//! the first pass that no longer sees the failed pod, so only an Event tells
//! (kubeflow/training-operator #1711).

use gangplank::controller::Plan;

use crate::fixtures::*;

/// One restart, pass by pass, as the I/O shell applies each plan: the status written back
/// and the restart count patched.
struct Restart {
    job: Job,
}

impl Restart {
    fn next(&mut self, observed: &gangplank::controller::Observed, now: i64) -> Plan {
        let plan = self.job.plan(observed, now);
        self.job = self.job.with_status_of(&plan).with_annotations_of(&plan);
        plan
    }
}

/// `(kind, job, the pod that fails, its container)` for every kind whose failure restarts
/// under ExitCode.
fn exit_code_jobs() -> Vec<(&'static str, Job, &'static str, &'static str)> {
    vec![
        (
            "PyTorchJob",
            pytorch_job(1, 2).restart_policy("Worker", "ExitCode"),
            "mnist-worker-1",
            "pytorch",
        ),
        (
            "TFJob",
            tf_job(1, 2, 1).restart_policy("Worker", "ExitCode"),
            "mnist-worker-1",
            "tensorflow",
        ),
        (
            "XGBoostJob",
            xgboost_job(1, 2).restart_policy("Master", "ExitCode"),
            "mnist-master-0",
            "xgboost",
        ),
        (
            "PaddleJob",
            paddle_job(1, 2).restart_policy("Worker", "ExitCode"),
            "mnist-worker-1",
            "paddle",
        ),
        (
            "JAXJob",
            jax_job(3).restart_policy("Worker", "ExitCode"),
            "mnist-worker-1",
            "jax",
        ),
    ]
}

fn running_job(kind: &str) -> Vec<(String, String, String)> {
    conds(&[
        ("Created", "True", &format!("{kind}Created")),
        ("Running", "True", &format!("{kind}Running")),
    ])
}

fn restarting_job(kind: &str) -> Vec<(String, String, String)> {
    conds(&[
        ("Created", "True", &format!("{kind}Created")),
        ("Restarting", "True", &format!("{kind}Restarting")),
    ])
}

#[test]
fn a_retryable_exit_code_makes_the_job_restarting_naming_the_pod_and_the_code() {
    let job = pytorch_job(1, 2).restart_policy("Worker", "ExitCode");
    let plan = job.plan(&running(&job).exit("mnist-worker-1", "pytorch", 137), 5);
    assert_eq!(conditions(&plan), restarting_job("PyTorchJob"));
    assert_eq!(
        message(&plan, "Restarting"),
        "PyTorchJob mnist is restarting because 1 Worker replica(s) failed. \
         Recreating mnist-worker-1 (exit code 137)."
    );
    assert_eq!(deleted_pods(&plan), vec!["mnist-worker-1"]);
}

#[test]
fn a_restarting_job_stays_restarting_until_every_replica_runs_again() {
    for (kind, job, pod, container) in exit_code_jobs() {
        let mut restart = Restart {
            job: job.clone().with_status_of(&job.plan(&running(&job), 1)),
        };
        assert_eq!(
            conditions(&restart.next(&running(&job), 2)),
            running_job(kind),
            "{kind}: running before the failure"
        );

        let failed = restart.next(&running(&job).exit(pod, container, 137), 5);
        assert_eq!(
            conditions(&failed),
            restarting_job(kind),
            "{kind}: the failure"
        );
        let why = message(&failed, "Restarting");
        assert!(
            why.ends_with(&format!("Recreating {pod} (exit code 137).")),
            "{kind}: {why}"
        );

        // Deleted, not yet recreated: the plan creates it, and the job still restarts.
        let gone = restart.next(&running(&job).without_pod(pod), 6);
        assert_eq!(created_pod_names(&gone), vec![pod], "{kind}");
        assert_eq!(conditions(&gone), restarting_job(kind), "{kind}: deleted");
        assert_eq!(
            message(&gone, "Restarting"),
            why,
            "{kind}: the message stays"
        );

        // Recreated and Pending: still restarting, and nothing to write.
        let pending = running(&job).phase(pod, "Pending");
        let plan = restart.next(&pending, 7);
        assert_eq!(conditions(&plan), restarting_job(kind), "{kind}: Pending");
        assert_eq!(message(&plan, "Restarting"), why, "{kind}");
        let conditions_of = |p: &Plan| p.status.as_ref().map(|s| s.conditions.clone());
        assert_eq!(
            conditions_of(&plan),
            conditions_of(&gone),
            "{kind}: the condition keeps its times"
        );

        // Every replica runs: Running replaces Restarting, as upstream's condition list has it.
        let plan = restart.next(&running(&job), 9);
        assert_eq!(conditions(&plan), running_job(kind), "{kind}: all running");
    }
}

#[test]
fn one_replica_still_pending_after_a_restart_keeps_the_job_restarting() {
    let job = pytorch_job(1, 3).restart_policy("Worker", "ExitCode");
    let mut restart = Restart {
        job: job.clone().with_status_of(&job.plan(&running(&job), 1)),
    };
    let observed =
        running(&job)
            .exit("mnist-worker-0", "pytorch", 143)
            .exit("mnist-worker-2", "pytorch", 137);
    let failed = restart.next(&observed, 5);
    assert_eq!(
        message(&failed, "Restarting"),
        "PyTorchJob mnist is restarting because 2 Worker replica(s) failed. \
         Recreating mnist-worker-0 (exit code 143), mnist-worker-2 (exit code 137)."
    );
    let one_back = running(&job).phase("mnist-worker-2", "Pending");
    let plan = restart.next(&one_back, 8);
    assert_eq!(conditions(&plan), restarting_job("PyTorchJob"));
    let plan = restart.next(&running(&job), 9);
    assert_eq!(conditions(&plan), running_job("PyTorchJob"));
}

#[test]
fn a_gang_restart_by_the_watchdog_stays_restarting_until_the_gang_runs() {
    let config = gangplank::controller::Config {
        on_stuck: gangplank::controller::StuckAction::RestartGang,
        ..gangplank::controller::Config::default()
    };
    let job = pytorch_job(1, 1);
    let stuck = created(&job).phase("mnist-master-0", "Running");
    let plan = job.plan_with(&stuck, 15 * 60, &config);
    let job = job.with_status_of(&plan).with_annotations_of(&plan);
    let reason = conds(&[
        ("Created", "True", "PyTorchJobCreated"),
        ("Restarting", "True", "PyTorchJobStartDeadlineExceeded"),
    ]);
    assert_eq!(conditions(&plan), reason);
    // The new gang (the watchdog's clock aside): the master runs, the worker is Pending.
    let config = gangplank::controller::Config {
        start_deadline: None,
        ..config
    };
    let half = created(&job).phase("mnist-master-0", "Running");
    let plan = job.plan_with(&half, 15 * 60 + 5, &config);
    assert_eq!(conditions(&plan), reason);
    let plan = job.plan_with(&running(&job), 15 * 60 + 6, &config);
    assert_eq!(conditions(&plan), running_job("PyTorchJob"));
}
