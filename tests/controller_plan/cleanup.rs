//! cleanPodPolicy on a finished job (upstream `TestDeletePodsAndServices` and TF
//! "Delete Pods/Services by clean policy"): 4 workers and 2 PS, the chief done.

use gangplank::controller::{Action, Observed};
use serde_json::json;

use crate::fixtures::*;

/// A TF job whose Chief has succeeded, with 4 Running workers, 1 Running and 1 Succeeded PS.
fn finished(policy: Option<&str>) -> (Job, Observed) {
    let mut job = tf_job(1, 4, 2);
    if let Some(p) = policy {
        job = job.run_policy("cleanPodPolicy", json!(p));
    }
    let observed = running(&job)
        .phase("mnist-chief-0", "Succeeded")
        .phase("mnist-ps-1", "Succeeded");
    (job, observed)
}

fn all_but(names: &[&str]) -> Vec<String> {
    let all = [
        "mnist-chief-0",
        "mnist-worker-0",
        "mnist-worker-1",
        "mnist-worker-2",
        "mnist-worker-3",
        "mnist-ps-0",
        "mnist-ps-1",
    ];
    all.iter()
        .filter(|n| !names.contains(n))
        .map(|n| n.to_string())
        .collect()
}

#[test]
fn clean_pod_policy_all_deletes_every_pod_and_its_service() {
    let (job, observed) = finished(Some("All"));
    let plan = job.plan(&observed, 5);
    let mut pods = deleted_pods(&plan);
    pods.sort();
    let mut want = all_but(&[]);
    want.sort();
    assert_eq!(pods, want);
    let mut services = deleted_services(&plan);
    services.sort();
    assert_eq!(services, want);
}

#[test]
fn clean_pod_policy_running_keeps_finished_pods() {
    let (job, observed) = finished(Some("Running"));
    let plan = job.plan(&observed, 5);
    let mut pods = deleted_pods(&plan);
    pods.sort();
    let mut want = all_but(&["mnist-chief-0", "mnist-ps-1"]);
    want.sort();
    assert_eq!(pods, want);
}

#[test]
fn clean_pod_policy_none_is_the_default_and_deletes_nothing() {
    let (job, observed) = finished(None);
    let plan = job.plan(&observed, 5);
    assert_eq!(deleted_pods(&plan), Vec::<String>::new());
    assert_eq!(deleted_services(&plan), Vec::<String>::new());
    assert_eq!(
        created_pod_names(&plan),
        Vec::<String>::new(),
        "a finished job creates nothing"
    );
}

#[test]
fn an_already_finished_job_is_cleaned_up_again_without_new_pods() {
    let (job, observed) = finished(Some("Running"));
    let done = job.with_status_of(&job.plan(&observed, 5));
    let plan = done.plan(&observed.without_pod("mnist-worker-0"), 9);
    assert!(!deleted_pods(&plan).contains(&"mnist-worker-0".to_string()));
    assert_eq!(created_pod_names(&plan), Vec::<String>::new());
    assert_eq!(
        plan.status,
        done.snapshot().status.clone().into(),
        "status untouched"
    );
}

#[test]
fn pods_already_being_deleted_are_not_deleted_again() {
    let (job, mut observed) = finished(Some("All"));
    observed
        .pod_mut("mnist-worker-0")
        .metadata
        .deletion_timestamp = Some(time(4));
    let plan = job.plan(&observed, 5);
    assert!(!deleted_pods(&plan).contains(&"mnist-worker-0".to_string()));
    assert!(plan
        .actions
        .iter()
        .all(|a| !matches!(a, Action::CreatePod(_))));
}
