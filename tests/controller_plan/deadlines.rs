//! activeDeadlineSeconds and ttlSecondsAfterFinished (upstream `TestPastActiveDeadline`, TF
//! "Active Deadline Seconds", "TTL" and the "is created and is cleaned up" table), and the
//! defect to beat: every pending deadline is a requeue, so it fires with no other event
//! (#3358).

use gangplank::controller::{Action, Observed};
use serde_json::json;

use crate::fixtures::*;

#[test]
fn a_running_job_requeues_for_its_active_deadline() {
    let job = pytorch_job(1, 1).run_policy("activeDeadlineSeconds", json!(100));
    let started = job.with_status_of(&job.plan(&running(&job), 0));
    let plan = started.plan(&running(&job), 30);
    assert_eq!(plan.requeue_after, secs(70));
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Running", "True", "PyTorchJobRunning")
        ])
    );
}

#[test]
fn the_active_deadline_fails_the_job_when_the_requeue_fires() {
    let job = pytorch_job(1, 1)
        .run_policy("activeDeadlineSeconds", json!(100))
        .run_policy("cleanPodPolicy", json!("Running"));
    let started = job.with_status_of(&job.plan(&running(&job), 0));
    let plan = started.plan(&running(&job), 100);
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
        "Job mnist has failed because it was active longer than specified deadline"
    );
    assert_eq!(
        deleted_pods(&plan),
        vec!["mnist-master-0", "mnist-worker-0"]
    );
    assert_eq!(plan.status.and_then(|s| s.completion_time), Some(time(100)));
}

#[test]
fn an_active_deadline_of_zero_fails_at_once() {
    let job = pytorch_job(1, 1).run_policy("activeDeadlineSeconds", json!(0));
    let plan = job.plan(&Observed::default(), 0);
    assert_eq!(
        message(&plan, "Failed"),
        "Job mnist has failed because it was active longer than specified deadline"
    );
    assert_eq!(created_pod_names(&plan), Vec::<String>::new());
}

#[test]
fn a_finished_job_requeues_for_its_ttl_and_is_deleted_after_it() {
    let job = pytorch_job(1, 1).run_policy("ttlSecondsAfterFinished", json!(180));
    let observed = running(&job).phase("mnist-master-0", "Succeeded");
    let done = job.plan(&observed, 10);
    assert_eq!(done.requeue_after, secs(180));
    let job = job.with_status_of(&done);
    assert_eq!(job.plan(&observed, 100).requeue_after, secs(90));
    let expired = job.plan(&observed, 190);
    assert_eq!(expired.actions.last(), Some(&Action::DeleteJob));
}

#[test]
fn a_ttl_of_zero_deletes_the_job_as_soon_as_it_finishes() {
    let job = pytorch_job(1, 1).run_policy("ttlSecondsAfterFinished", json!(0));
    let plan = job.plan(&running(&job).phase("mnist-master-0", "Succeeded"), 10);
    assert_eq!(plan.actions.last(), Some(&Action::DeleteJob));
}

#[test]
fn without_a_ttl_a_finished_job_stays() {
    let job = pytorch_job(1, 1);
    let plan = job.plan(&running(&job).phase("mnist-master-0", "Succeeded"), 10);
    assert_eq!(plan.requeue_after, None);
    assert!(!plan.actions.contains(&Action::DeleteJob));
}

#[test]
fn a_suspended_job_never_reaches_its_ttl_or_deadline() {
    let job = pytorch_job(1, 1)
        .suspended(true)
        .run_policy("ttlSecondsAfterFinished", json!(0))
        .run_policy("activeDeadlineSeconds", json!(0));
    let plan = job.plan(&Observed::default(), 10);
    assert_eq!(plan.requeue_after, None);
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.and_then(|s| s.completion_time), None);
}
