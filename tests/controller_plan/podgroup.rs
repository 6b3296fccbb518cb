//! PodGroups for Volcano and scheduler-plugins (upstream `TestNewPodGroup`,
//! `TestCalculatePGMinResources`, `TestDecoratePodTemplateSpec`), Volcano's wait for
//! admission, and names that cannot collide across kinds.

use gangplank::controller::{Action, Config, GangScheduler, Observed};
use serde_json::{json, Value};

use crate::fixtures::*;

fn volcano() -> Config {
    Config {
        gang: Some(GangScheduler::Volcano),
        ..Config::default()
    }
}

fn scheduler_plugins() -> Config {
    Config {
        gang: GangScheduler::from_flag("scheduler-plugins-scheduler"),
        ..Config::default()
    }
}

fn created_group(actions: &[Action]) -> Value {
    let found = actions.iter().find_map(|a| match a {
        Action::CreatePodGroup(pg) => Some(pg.clone()),
        _ => None,
    });
    found.unwrap_or_else(|| panic!("no PodGroup created: {actions:?}"))
}

fn group(phase: &str, spec: Value) -> Option<Value> {
    Some(
        json!({"metadata": {"name": "mnist-pytorchjob"}, "spec": spec, "status": {"phase": phase}}),
    )
}

#[test]
fn volcano_pod_group_sums_the_gangs_requests_and_takes_queue_and_priority() {
    let job = pytorch_job(1, 3).with_gpus(8).run_policy(
        "schedulingPolicy",
        json!({"queue": "research", "priorityClass": "high"}),
    );
    let plan = job.plan_with(&Observed::default(), 0, &volcano());
    let pg = created_group(&plan.actions);
    assert_eq!(pg["apiVersion"], "scheduling.volcano.sh/v1beta1");
    assert_eq!(pg["metadata"]["name"], "mnist-pytorchjob");
    assert_eq!(pg["metadata"]["ownerReferences"][0]["uid"], "uid-1");
    assert_eq!(
        pg["spec"],
        json!({
            "minMember": 4,
            "minResources": {"cpu": "16", "memory": "68719476736", "nvidia.com/gpu": "32"},
            "queue": "research",
            "priorityClassName": "high",
        })
    );
}

#[test]
fn volcano_holds_pods_back_until_the_pod_group_is_admitted() {
    let job = pytorch_job(1, 1);
    let first = job.plan_with(&Observed::default(), 0, &volcano());
    assert_eq!(created_pod_names(&first), Vec::<String>::new());
    assert_eq!(created_service_names(&first), Vec::<String>::new());
    let spec = created_group(&first.actions)["spec"].clone();

    let pending = Observed {
        pod_group: group("Pending", spec.clone()),
        ..Observed::default()
    };
    let still = job.plan_with(&pending, 5, &volcano());
    assert_eq!(
        still.actions,
        vec![],
        "same spec: no update, and no pods while Pending"
    );

    let admitted = Observed {
        pod_group: group("Inqueue", spec),
        ..Observed::default()
    };
    let go = job.plan_with(&admitted, 6, &volcano());
    assert_eq!(
        created_pod_names(&go),
        vec!["mnist-master-0", "mnist-worker-0"]
    );
    let pod = created_pod(&go, "mnist-worker-0");
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("scheduling.k8s.io/group-name")
            .map(String::as_str),
        Some("mnist-pytorchjob")
    );
    assert_eq!(
        annotations.get("volcano.sh/task-spec").map(String::as_str),
        Some("worker")
    );
    assert_eq!(
        pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()),
        Some("volcano")
    );
}

#[test]
fn an_existing_volcano_pod_group_keeps_its_queue_and_is_updated_when_the_gang_changes() {
    let job = pytorch_job(1, 1).run_policy("schedulingPolicy", json!({"queue": "new"}));
    let existing = group(
        "Running",
        json!({"minMember": 1, "minResources": {}, "queue": "old"}),
    );
    let plan = job.plan_with(
        &Observed {
            pod_group: existing,
            ..Observed::default()
        },
        5,
        &volcano(),
    );
    let update = plan.actions.iter().find_map(|a| match a {
        Action::UpdatePodGroup { name, spec, .. } => Some((name.clone(), spec.clone())),
        _ => None,
    });
    assert_eq!(
        update,
        Some((
            "mnist-pytorchjob".to_string(),
            json!({"minMember": 2, "minResources": {}, "queue": "old"})
        ))
    );
}

#[test]
fn scheduler_plugins_pod_group_has_the_timeout_and_pods_are_labelled_without_waiting() {
    let job = pytorch_job(1, 1).run_policy(
        "schedulingPolicy",
        json!({"minAvailable": 1, "scheduleTimeoutSeconds": 120, "minResources": {"cpu": "2"}}),
    );
    let plan = job.plan_with(&Observed::default(), 0, &scheduler_plugins());
    let pg = created_group(&plan.actions);
    assert_eq!(pg["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
    assert_eq!(
        pg["spec"],
        json!({"minMember": 1, "minResources": {"cpu": "2"}, "scheduleTimeoutSeconds": 120})
    );
    let pod = created_pod(&plan, "mnist-master-0");
    let label = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("scheduling.x-k8s.io/pod-group").cloned());
    assert_eq!(label.as_deref(), Some("mnist-pytorchjob"));
    assert_eq!(
        pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()),
        Some("scheduler-plugins-scheduler")
    );
}

#[test]
fn a_users_scheduler_name_is_kept() {
    let job = pytorch_job(1, 1).set(
        "/spec/pytorchReplicaSpecs/Master/template/spec/schedulerName",
        json!("mine"),
    );
    let plan = job.plan_with(&Observed::default(), 0, &scheduler_plugins());
    let pod = created_pod(&plan, "mnist-master-0");
    assert_eq!(
        pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()),
        Some("mine")
    );
}

#[test]
fn pod_group_names_do_not_collide_across_kinds() {
    let pytorch = created_group(
        &pytorch_job(0, 1)
            .plan_with(&Observed::default(), 0, &volcano())
            .actions,
    );
    let jax = created_group(
        &jax_job(1)
            .plan_with(&Observed::default(), 0, &volcano())
            .actions,
    );
    assert_eq!(pytorch["metadata"]["name"], "mnist-pytorchjob");
    assert_eq!(jax["metadata"]["name"], "mnist-jaxjob");
}

#[test]
fn a_finished_job_deletes_its_pod_group() {
    let job = pytorch_job(1, 1);
    let mut observed = running(&job).phase("mnist-master-0", "Succeeded");
    observed.pod_group = group("Running", json!({}));
    let plan = job.plan_with(&observed, 5, &scheduler_plugins());
    assert_eq!(
        plan.actions.last(),
        Some(&Action::DeletePodGroup {
            api_version: "scheduling.x-k8s.io/v1alpha1".into(),
            name: "mnist-pytorchjob".into()
        })
    );
}
