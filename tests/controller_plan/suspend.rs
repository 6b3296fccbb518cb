//! Suspend and resume (upstream "Shouldn't create resources if suspended", "Should delete
//! resources after suspended; Should resume after unsuspended") and managedBy
//! (`TestManagedByExternalController`).

use gangplank::controller::{Action, Observed};
use serde_json::json;

use crate::fixtures::*;

#[test]
fn a_job_created_suspended_gets_no_pods_and_no_start_time() {
    let job = pytorch_job(1, 1).suspended(true);
    let plan = job.plan(&Observed::default(), 0);
    assert!(plan.actions.is_empty());
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Suspended", "True", "PyTorchJobSuspended")
        ])
    );
    assert_eq!(
        message(&plan, "Suspended"),
        "PyTorchJob mnist is suspended."
    );
    assert_eq!(plan.status.and_then(|s| s.start_time), None);
}

#[test]
fn suspending_deletes_every_pod_and_service_whatever_the_clean_policy_and_resume_recreates_them() {
    let job = pytorch_job(1, 1);
    let first = job.plan(&running(&job), 0);
    let suspended = job.with_status_of(&first).suspended(true);
    let plan = suspended.plan(&running(&job), 10);
    assert_eq!(
        deleted_pods(&plan),
        vec!["mnist-master-0", "mnist-worker-0"]
    );
    assert_eq!(
        deleted_services(&plan),
        vec!["mnist-master-0", "mnist-worker-0"]
    );
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Running", "False", "PyTorchJobSuspended"),
            ("Suspended", "True", "PyTorchJobSuspended"),
        ])
    );
    let active: Vec<i32> = plan
        .status
        .iter()
        .flat_map(|s| s.replica_statuses.values().map(|r| r.active))
        .collect();
    assert_eq!(active, vec![0, 0]);

    let resumed = suspended.with_status_of(&plan).suspended(false);
    let back = resumed.plan(&Observed::default(), 50);
    assert_eq!(
        created_pod_names(&back),
        vec!["mnist-master-0", "mnist-worker-0"]
    );
    assert_eq!(
        conditions(&back),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Running", "False", "PyTorchJobSuspended"),
            ("Suspended", "False", "PyTorchJobResumed"),
        ])
    );
    assert_eq!(message(&back, "Suspended"), "PyTorchJob mnist is resumed.");
    assert_eq!(
        back.status.as_ref().and_then(|s| s.start_time.clone()),
        Some(time(50)),
        "startTime reset"
    );

    let running_again = resumed.with_status_of(&back).plan(&running(&job), 60);
    assert_eq!(
        conditions(&running_again),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Suspended", "False", "PyTorchJobResumed"),
            ("Running", "True", "PyTorchJobRunning"),
        ])
    );
}

#[test]
fn suspend_works_the_same_for_every_kind() {
    for (job, kind) in [
        (tf_job(0, 2, 1), "TFJob"),
        (xgboost_job(1, 1), "XGBoostJob"),
        (paddle_job(1, 1), "PaddleJob"),
        (jax_job(2), "JAXJob"),
    ] {
        let plan = job.clone().suspended(true).plan(&running(&job), 5);
        assert_eq!(
            deleted_pods(&plan).len(),
            created(&job).pods.len(),
            "{kind}"
        );
        assert_eq!(
            conditions(&plan),
            conds(&[
                ("Created", "True", &format!("{kind}Created")),
                ("Suspended", "True", &format!("{kind}Suspended")),
            ]),
            "{kind}"
        );
    }
}

#[test]
fn only_unset_or_the_training_operator_means_ours() {
    let cases = [
        (None, true),
        (Some("kubeflow.org/training-operator"), true),
        (Some("kueue.x-k8s.io/multikueue"), false),
        (Some("example.com/other"), false),
    ];
    for (managed_by, ours) in cases {
        let mut job = pytorch_job(1, 1);
        if let Some(m) = managed_by {
            job = job.run_policy("managedBy", json!(m));
        }
        let plan = job.plan(&Observed::default(), 0);
        assert_eq!(!plan.actions.is_empty(), ours, "{managed_by:?}");
        assert_eq!(
            plan.status.is_some(),
            ours,
            "{managed_by:?}: status left to its manager"
        );
    }
}

#[test]
fn a_job_being_deleted_is_left_to_the_garbage_collector() {
    let job = pytorch_job(1, 1).set("/metadata/deletionTimestamp", json!("2023-11-14T22:13:20Z"));
    let plan = job.plan(&Observed::default(), 0);
    assert_eq!(plan, Default::default());
}

#[test]
fn an_invalid_job_fails_naming_the_problem_and_creates_nothing() {
    let job = pytorch_job(2, 1).set("/spec/pytorchReplicaSpecs/Launcher", json!({"replicas": 1}));
    let plan = job.plan(&Observed::default(), 0);
    assert!(plan
        .actions
        .iter()
        .all(|a| !matches!(a, Action::CreatePod(_) | Action::CreateService(_))));
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Failed", "True", "PyTorchJobFailedValidation")
        ])
    );
    assert_eq!(
        message(&plan, "Failed"),
        "PyTorchJob mnist is invalid: /spec/pytorchReplicaSpecs/Master: Master must have exactly 1 replica; \
         /spec/pytorchReplicaSpecs/Launcher: unknown replica type Launcher; PyTorchJob allows Master, Worker"
    );
}
