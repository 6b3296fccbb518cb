//! The gang watchdog: pods Pending past the start deadline get a condition naming the cause
//! read from the cluster, and the job fails or its gang is recreated (upstream #2001, #1630).

use gangplank::controller::{Action, Config, GangScheduler, Observed, StuckAction};
use serde_json::json;

use crate::fixtures::*;

const FIFTEEN_MINUTES: i64 = 15 * 60;

#[test]
fn pending_pods_requeue_for_the_start_deadline() {
    let job = pytorch_job(1, 1);
    let plan = job.plan(&created(&job), 100);
    assert_eq!(plan.requeue_after, secs(800));
    assert_eq!(
        conditions(&plan),
        conds(&[("Created", "True", "PyTorchJobCreated")])
    );
}

#[test]
fn an_image_pull_failure_past_the_deadline_fails_the_job_naming_it() {
    let job = pytorch_job(1, 1);
    let observed = created(&job).phase("mnist-master-0", "Running").waiting(
        "mnist-worker-0",
        "ImagePullBackOff",
        "Back-off pulling image \"train:v2\"",
    );
    let plan = job.plan(&observed, FIFTEEN_MINUTES);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Running", "False", "PyTorchJobRunning"),
            ("Failed", "True", "PyTorchJobStartDeadlineExceeded"),
        ])
    );
    assert_eq!(
        message(&plan, "Failed"),
        "PyTorchJob mnist did not start within 900s: 1 pod(s) still Pending (mnist-worker-0): \
         pod mnist-worker-0: ImagePullBackOff: Back-off pulling image \"train:v2\""
    );
}

#[test]
fn schedule_timeout_seconds_is_the_jobs_own_start_deadline() {
    let job =
        pytorch_job(1, 1).run_policy("schedulingPolicy", json!({"scheduleTimeoutSeconds": 60}));
    let mut observed = created(&job);
    observed.facts.failed_scheduling.insert(
        "mnist-master-0".into(),
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.".into(),
    );
    assert_eq!(job.plan(&observed, 30).requeue_after, secs(30));
    let plan = job.plan(&observed, 60);
    assert_eq!(
        message(&plan, "Failed"),
        "PyTorchJob mnist did not start within 60s: 2 pod(s) still Pending (mnist-master-0, mnist-worker-0): \
         pod mnist-master-0 cannot be scheduled: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    );
}

#[test]
fn a_missing_claim_is_named_first() {
    let job = pytorch_job(1, 1);
    let mut observed = created(&job);
    observed.facts.missing_pvcs = vec!["datasets".into()];
    let plan = job.plan(&observed, FIFTEEN_MINUTES);
    assert!(message(&plan, "Failed").ends_with(": PersistentVolumeClaim(s) not found: datasets"));
}

#[test]
fn a_volcano_pod_group_never_admitted_is_reported_with_its_unschedulable_message() {
    let config = Config {
        gang: Some(GangScheduler::Volcano),
        ..Config::default()
    };
    let job = pytorch_job(1, 1);
    let started = job.with_status_of(&job.plan_with(&Observed::default(), 0, &config));
    let pod_group = json!({
        "metadata": {"name": "mnist-pytorchjob", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"minMember": 2, "minResources": {}, "queue": "default"},
        "status": {"phase": "Pending", "conditions": [{
            "type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
            "message": "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable"
        }]}
    });
    let observed = Observed {
        pod_group: Some(pod_group),
        ..Observed::default()
    };
    let plan = started.plan_with(&observed, FIFTEEN_MINUTES, &config);
    assert_eq!(
        message(&plan, "Failed"),
        "PyTorchJob mnist did not start within 900s: PodGroup mnist-pytorchjob was not admitted: \
         PodGroup is unschedulable: NotEnoughResources: 2/2 tasks in gang unschedulable: pod group is not ready, \
         2 Pending, 2 minAvailable"
    );
}

#[test]
fn restart_gang_recreates_every_pod_and_counts_one_restart() {
    let config = Config {
        on_stuck: StuckAction::RestartGang,
        ..Config::default()
    };
    let job = pytorch_job(1, 1);
    let observed = created(&job).phase("mnist-master-0", "Running");
    let plan = job.plan_with(&observed, FIFTEEN_MINUTES, &config);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Restarting", "True", "PyTorchJobStartDeadlineExceeded"),
        ])
    );
    assert_eq!(
        deleted_pods(&plan),
        vec!["mnist-master-0", "mnist-worker-0"]
    );
    let count = plan.actions.iter().find_map(|a| match a {
        Action::PatchJobAnnotations(m) => m.get("gangplank.dev/restarts").cloned(),
        _ => None,
    });
    assert_eq!(count.as_deref(), Some("1"));
}

#[test]
fn restart_gang_past_the_backoff_limit_fails_instead() {
    let config = Config {
        on_stuck: StuckAction::RestartGang,
        ..Config::default()
    };
    let job = pytorch_job(1, 1).run_policy("backoffLimit", json!(0));
    let plan = job.plan_with(&created(&job), FIFTEEN_MINUTES, &config);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Failed", "True", "PyTorchJobStartDeadlineExceeded"),
        ])
    );
    assert_eq!(
        deleted_pods(&plan),
        Vec::<String>::new(),
        "cleanPodPolicy None"
    );
}

#[test]
fn the_watchdog_can_be_turned_off() {
    let config = Config {
        start_deadline: None,
        ..Config::default()
    };
    let job = pytorch_job(1, 1);
    let plan = job.plan_with(&created(&job), 10 * FIFTEEN_MINUTES, &config);
    assert_eq!(plan.requeue_after, None);
    assert_eq!(
        conditions(&plan),
        conds(&[("Created", "True", "PyTorchJobCreated")])
    );
}
