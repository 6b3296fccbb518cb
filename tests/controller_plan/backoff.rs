//! Restarts and backoffLimit: upstream "Backoff For OnFailure", `TestPastBackoffLimit`, the
//! ExitCode cases of `pod_test.go`, and the defects to beat: ExitCode recreations count
//! against backoffLimit (#2045) and reaching it honours cleanPodPolicy (#3419).

use gangplank::controller::restart::{RESTARTED_PODS_ANNOTATION, RESTARTS_ANNOTATION};
use gangplank::controller::{Action, DeleteReason, Event, EventType};
use serde_json::json;
use std::collections::BTreeMap;

use crate::fixtures::*;

#[test]
fn on_failure_restarts_up_to_the_backoff_limit_fail_the_job_and_clean_all() {
    let job = tf_job(0, 4, 2)
        .restart_policy("Worker", "OnFailure")
        .run_policy("backoffLimit", json!(4))
        .run_policy("cleanPodPolicy", json!("All"));
    let mut observed = running(&job);
    for i in 0..4 {
        observed = observed.restarts(&format!("mnist-worker-{i}"), "tensorflow", 1);
    }
    let plan = job.plan(&observed, 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "TFJobCreated"),
            ("Failed", "True", "TFJobFailed"),
        ])
    );
    assert_eq!(
        message(&plan, "Failed"),
        "Job mnist has failed because it has reached the specified backoff limit"
    );
    assert_eq!(
        deleted_pods(&plan).len(),
        6,
        "cleanPodPolicy All: every pod"
    );
    assert_eq!(deleted_services(&plan).len(), 6);
}

#[test]
fn a_backoff_limit_of_zero_allows_no_restart() {
    let job = pytorch_job(1, 1).run_policy("backoffLimit", json!(0));
    let plan = job.plan(&running(&job).restarts("mnist-worker-0", "pytorch", 1), 5);
    assert_eq!(
        message(&plan, "Failed"),
        "Job mnist has failed because it has reached the specified backoff limit"
    );
}

#[test]
fn restarts_below_the_limit_keep_the_job_going() {
    let job = pytorch_job(1, 1).run_policy("backoffLimit", json!(3));
    let plan = job.plan(&running(&job).restarts("mnist-worker-0", "pytorch", 2), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Running", "True", "PyTorchJobRunning")
        ])
    );
}

#[test]
fn a_retryable_exit_code_recreates_the_pod_and_records_the_restart() {
    let job = pytorch_job(1, 2).restart_policy("Worker", "ExitCode");
    let plan = job.plan(&running(&job).exit("mnist-worker-1", "pytorch", 137), 5);
    assert_eq!(
        plan.actions,
        vec![
            Action::PatchJobAnnotations(BTreeMap::from([
                (RESTARTS_ANNOTATION.to_string(), "1".to_string()),
                (
                    RESTARTED_PODS_ANNOTATION.to_string(),
                    "uid-mnist-worker-1".to_string()
                ),
            ])),
            Action::DeletePod {
                name: "mnist-worker-1".into(),
                reason: DeleteReason::Restart
            },
        ],
        "annotation first, so a crash between the two never loses a count; the Service stays"
    );
    assert!(plan.events.contains(&Event {
        type_: EventType::Normal,
        reason: "ExitedWithCode".into(),
        message: "Pod: team-a.mnist-worker-1 exited with code 137".into(),
    }));
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Restarting", "True", "PyTorchJobRestarting")
        ])
    );
}

#[test]
fn a_permanent_exit_code_fails_the_job_with_upstreams_message() {
    let job = pytorch_job(1, 2).restart_policy("Worker", "ExitCode");
    let plan = job.plan(&running(&job).exit("mnist-worker-0", "pytorch", 1), 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Failed", "True", "PyTorchJobFailed")
        ])
    );
    assert_eq!(
        message(&plan, "Failed"),
        r#"job "mnist" is failing because "Worker" replica(s) failed."#
    );
    assert_eq!(
        deleted_pods(&plan),
        Vec::<String>::new(),
        "cleanPodPolicy None keeps the pods"
    );
}

#[test]
fn exit_code_recreations_count_against_the_backoff_limit() {
    let job = pytorch_job(1, 1)
        .restart_policy("Worker", "ExitCode")
        .run_policy("backoffLimit", json!(2));
    let mut job = job;
    for round in 1..=2 {
        let plan = job.plan(
            &running(&job).exit("mnist-worker-0", "pytorch", 137),
            round * 10,
        );
        assert_eq!(
            deleted_pods(&plan),
            vec!["mnist-worker-0"],
            "restart {round} is allowed"
        );
        job = job.with_annotations_of(&plan);
        // The recreated pod has a new uid.
        job = job.annotation(RESTARTED_PODS_ANNOTATION, "uid-of-an-older-pod");
    }
    let plan = job.plan(&running(&job).exit("mnist-worker-0", "pytorch", 137), 30);
    assert_eq!(
        message(&plan, "Failed"),
        "Job mnist has failed because it has reached the specified backoff limit"
    );
    assert_eq!(
        deleted_pods(&plan),
        Vec::<String>::new(),
        "no third recreation; cleanPodPolicy None"
    );
}

#[test]
fn a_replayed_restart_is_not_counted_twice() {
    let job = pytorch_job(1, 1).restart_policy("Worker", "ExitCode");
    let observed = running(&job).exit("mnist-worker-0", "pytorch", 143);
    let first = job.plan(&observed, 5);
    // The annotation patch landed, the pod deletion did not (crash, or a stale cache).
    let replay = job.with_annotations_of(&first).plan(&observed, 6);
    assert_eq!(
        replay.actions,
        vec![Action::DeletePod {
            name: "mnist-worker-0".into(),
            reason: DeleteReason::Restart
        }]
    );
}

#[test]
fn reaching_the_backoff_limit_honours_clean_pod_policy_running() {
    let job = pytorch_job(1, 2)
        .run_policy("backoffLimit", json!(1))
        .run_policy("cleanPodPolicy", json!("Running"));
    let observed = running(&job)
        .restarts("mnist-worker-0", "pytorch", 1)
        .phase("mnist-worker-1", "Succeeded");
    let plan = job.plan(&observed, 5);
    assert_eq!(
        message(&plan, "Failed"),
        "Job mnist has failed because it has reached the specified backoff limit"
    );
    let mut deleted = deleted_pods(&plan);
    deleted.sort();
    assert_eq!(
        deleted,
        vec!["mnist-master-0", "mnist-worker-0"],
        "the Succeeded pod stays"
    );
}

#[test]
fn never_keeps_a_failed_pod_in_place() {
    let job = pytorch_job(1, 2).restart_policy("Worker", "Never");
    let plan = job.plan(&running(&job).exit("mnist-worker-0", "pytorch", 137), 5);
    assert_eq!(deleted_pods(&plan), Vec::<String>::new());
}

#[test]
fn exit_code_pods_run_with_restart_policy_never() {
    let job = pytorch_job(1, 1).restart_policy("Worker", "ExitCode");
    let plan = job.plan(&Default::default(), 0);
    let policy = |name| {
        created_pod(&plan, name)
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
    };
    assert_eq!(policy("mnist-worker-0").as_deref(), Some("Never"));
    assert_eq!(policy("mnist-master-0").as_deref(), Some("OnFailure"));
}
