//! Success rules per kind and condition bookkeeping: upstream's TF "Test Normal Path" and
//! `status_test.go` tables, with the exact condition lists instead of "a condition is
//! present".

use gangplank::controller::{Observed, ReplicaStatus};
use serde_json::json;

use crate::fixtures::*;

#[test]
fn a_new_distributed_tf_job_creates_six_pods_and_services_and_is_created() {
    let plan = tf_job(0, 4, 2).plan(&Observed::default(), 0);
    assert_eq!(created_pod_names(&plan).len(), 6);
    assert_eq!(created_service_names(&plan).len(), 6);
    assert_eq!(
        conditions(&plan),
        conds(&[("Created", "True", "TFJobCreated")])
    );
    assert_eq!(message(&plan, "Created"), "TFJob mnist is created.");
}

#[test]
fn tf_job_with_all_replicas_pending_creates_nothing_and_stays_created() {
    let job = tf_job(0, 4, 2);
    let plan = job.plan(&created(&job), 5);
    assert_eq!(created_pod_names(&plan), Vec::<String>::new());
    assert_eq!(created_service_names(&plan), Vec::<String>::new());
    assert_eq!(
        conditions(&plan),
        conds(&[("Created", "True", "TFJobCreated")])
    );
}

#[test]
fn tf_job_with_all_replicas_running_is_running() {
    let job = tf_job(0, 4, 2);
    let plan = job.plan(&running(&job), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "TFJobCreated"),
            ("Running", "True", "TFJobRunning")
        ])
    );
    assert_eq!(message(&plan, "Running"), "TFJob team-a/mnist is running.");
    let status = plan
        .status
        .as_ref()
        .map(|s| s.replica_statuses.clone())
        .unwrap_or_default();
    assert_eq!(
        status.get("Worker"),
        Some(&ReplicaStatus {
            active: 4,
            ..Default::default()
        })
    );
    assert_eq!(
        status.get("PS"),
        Some(&ReplicaStatus {
            active: 2,
            ..Default::default()
        })
    );
}

#[test]
fn tf_job_with_some_replicas_pending_and_one_worker_running_is_running() {
    let job = tf_job(0, 4, 2);
    let observed = created(&job)
        .phase("mnist-worker-0", "Running")
        .phase("mnist-ps-0", "Running");
    let plan = job.plan(&observed, 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "TFJobCreated"),
            ("Running", "True", "TFJobRunning")
        ])
    );
    let workers = plan
        .status
        .as_ref()
        .and_then(|s| s.replica_statuses.get("Worker").cloned());
    assert_eq!(
        workers,
        Some(ReplicaStatus {
            active: 1,
            ..Default::default()
        }),
        "Pending pods count nowhere"
    );
}

#[test]
fn tf_worker0_succeeded_with_three_active_succeeds_under_the_default_policy() {
    let job = tf_job(0, 4, 0);
    let plan = job.plan(&running(&job).phase("mnist-worker-0", "Succeeded"), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "TFJobCreated"),
            ("Succeeded", "True", "TFJobSucceeded")
        ])
    );
    assert_eq!(
        message(&plan, "Succeeded"),
        "TFJob team-a/mnist successfully completed."
    );
}

#[test]
fn tf_worker0_succeeded_with_three_active_keeps_running_under_all_workers() {
    let job = tf_job(0, 4, 0).set("/spec/successPolicy", json!("AllWorkers"));
    let plan = job.plan(&running(&job).phase("mnist-worker-0", "Succeeded"), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "TFJobCreated"),
            ("Running", "True", "TFJobRunning")
        ])
    );
}

#[test]
fn tf_chief_running_while_a_ps_failed_fails_the_job() {
    let job = tf_job(1, 2, 1);
    let plan = job.plan(&running(&job).phase("mnist-ps-0", "Failed"), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "TFJobCreated"),
            ("Running", "False", "TFJobRunning"),
            ("Failed", "True", "TFJobFailed"),
        ])
    );
    assert_eq!(
        message(&plan, "Failed"),
        "TFJob team-a/mnist has failed because 1 PS replica(s) failed."
    );
}

#[test]
fn tf_chief_succeeded_while_workers_failed_is_succeeded_only() {
    let job = tf_job(1, 2, 0);
    let observed = running(&job)
        .phase("mnist-chief-0", "Succeeded")
        .phase("mnist-worker-0", "Failed")
        .phase("mnist-worker-1", "Failed");
    let plan = job.plan(&observed, 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "TFJobCreated"),
            ("Succeeded", "True", "TFJobSucceeded")
        ])
    );
}

#[test]
fn tf_chief_failed_with_a_retryable_exit_code_is_restarting() {
    let job = tf_job(1, 1, 0).restart_policy("Chief", "ExitCode");
    let plan = job.plan(&running(&job).exit("mnist-chief-0", "tensorflow", 137), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "TFJobCreated"),
            ("Restarting", "True", "TFJobRestarting")
        ])
    );
    assert_eq!(
        message(&plan, "Restarting"),
        "job mnist is restarting because Chief replica(s) failed. \
         Recreating mnist-chief-0 (exit code 137)."
    );
    assert_eq!(deleted_pods(&plan), vec!["mnist-chief-0"]);
}

#[test]
fn tf_no_chief_worker_failed_under_never_fails_the_job() {
    let job = tf_job(0, 2, 0);
    let plan = job.plan(&running(&job).phase("mnist-worker-1", "Failed"), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "TFJobCreated"),
            ("Running", "False", "TFJobRunning"),
            ("Failed", "True", "TFJobFailed"),
        ])
    );
}

#[test]
fn pytorch_master_succeeded_succeeds_the_job_and_counts_running_workers_as_succeeded() {
    let job = pytorch_job(1, 2);
    let first = job.plan(&running(&job), 5);
    let job = job.with_status_of(&first);
    let plan = job.plan(&running(&job).phase("mnist-master-0", "Succeeded"), 10);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Running", "False", "PyTorchJobRunning"),
            ("Succeeded", "True", "PyTorchJobSucceeded"),
        ])
    );
    assert_eq!(
        message(&plan, "Succeeded"),
        "PyTorchJob mnist is successfully completed."
    );
    let status = plan.status.clone().unwrap_or_default();
    assert_eq!(status.completion_time, Some(time(10)));
    assert_eq!(status.start_time, Some(time(5)));
    let worker = status
        .replica_statuses
        .get("Worker")
        .cloned()
        .unwrap_or_default();
    assert_eq!((worker.active, worker.succeeded), (0, 2));
    assert_eq!(
        worker.selector.as_deref(),
        Some("training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=worker")
    );
}

#[test]
fn pytorch_worker_failed_under_on_failure_is_restarting_with_upstreams_message() {
    let job = pytorch_job(1, 2);
    let plan = job.plan(&running(&job).exit("mnist-worker-1", "pytorch", 1), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Restarting", "True", "PyTorchJobRestarting")
        ])
    );
    assert_eq!(
        message(&plan, "Restarting"),
        "PyTorchJob mnist is restarting because 1 Worker replica(s) failed. \
         Recreating mnist-worker-1 (exit code 1)."
    );
}

#[test]
fn pytorch_worker_failed_under_never_fails_the_job() {
    let job = pytorch_job(1, 2).restart_policy("Worker", "Never");
    let plan = job.plan(&running(&job).phase("mnist-worker-0", "Failed"), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Running", "False", "PyTorchJobRunning"),
            ("Failed", "True", "PyTorchJobFailed"),
        ])
    );
    assert_eq!(
        message(&plan, "Failed"),
        "PyTorchJob mnist is failed because 1 Worker replica(s) failed."
    );
}

#[test]
fn jax_succeeds_only_when_every_worker_has() {
    let job = jax_job(2);
    let one = job.plan(&running(&job).phase("mnist-worker-0", "Succeeded"), 5);
    assert_eq!(
        conditions(&one),
        conds(&[
            ("Created", "True", "JAXJobCreated"),
            ("Running", "True", "JAXJobRunning")
        ])
    );
    let both = job.plan(
        &running(&job)
            .phase("mnist-worker-0", "Succeeded")
            .phase("mnist-worker-1", "Succeeded"),
        5,
    );
    assert_eq!(
        conditions(&both),
        conds(&[
            ("Created", "True", "JAXJobCreated"),
            ("Succeeded", "True", "JAXJobSucceeded")
        ])
    );
    assert_eq!(
        message(&both, "Succeeded"),
        "JAXJob team-a/mnist successfully completed."
    );
}

#[test]
fn xgboost_master_succeeded_succeeds_the_job() {
    let job = xgboost_job(1, 2);
    let plan = job.plan(&running(&job).phase("mnist-master-0", "Succeeded"), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "XGBoostJobCreated"),
            ("Running", "False", "XGBoostJobRunning"),
            ("Succeeded", "True", "XGBoostJobSucceeded"),
        ])
    );
}

#[test]
fn paddle_without_master_runs_on_workers() {
    let job = paddle_job(0, 2);
    let plan = job.plan(&running(&job), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PaddleJobCreated"),
            ("Running", "True", "PaddleJobRunning")
        ])
    );
    assert_eq!(
        message(&plan, "Running"),
        "PaddleJob team-a/mnist is running."
    );
}

#[test]
fn an_unchanged_status_keeps_its_timestamps() {
    let job = pytorch_job(1, 1);
    let first = job.plan(&running(&job), 5);
    let again = job.with_status_of(&first).plan(&running(&job), 50);
    assert_eq!(
        again.status, first.status,
        "nothing changed, so nothing to write"
    );
}

#[test]
fn a_failed_job_takes_no_further_condition_changes() {
    let job = pytorch_job(1, 1).restart_policy("Worker", "Never");
    let failed = job.plan(&running(&job).phase("mnist-worker-0", "Failed"), 5);
    let later = job
        .with_status_of(&failed)
        .plan(&running(&job).phase("mnist-master-0", "Succeeded"), 9);
    assert_eq!(conditions(&later), conditions(&failed));
}

/// A finished job planned again with the status it wrote is stable: the running workers were
/// folded into `succeeded` once, and the next reconcile (woken by that very write) neither
/// counts them again nor asks for another write.
#[test]
fn a_succeeded_job_replanned_with_its_own_status_is_unchanged() {
    let job = tf_job(1, 2, 0);
    let observed = running(&job).phase("mnist-chief-0", "Succeeded");
    let first = job.plan(&observed, 5);
    let counts = |plan: &gangplank::controller::Plan, rtype: &str| {
        let status = plan.status.as_ref().expect("a status");
        let rs = &status.replica_statuses[rtype];
        (rs.active, rs.succeeded)
    };
    assert_eq!(counts(&first, "Worker"), (0, 2));
    let again = job.with_status_of(&first).plan(&observed, 6);
    assert_eq!(again.status, first.status);
}
