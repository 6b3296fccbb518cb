//! Kubernetes' native gang (`--gang-scheduler kubernetes`, 1.36 `scheduling.k8s.io/v1alpha2`):
//! the standalone PodGroup, pods tied to it by `spec.schedulingGroup`, and the watchdog
//! reading its `PodGroupScheduled` condition.

use gangplank::controller::{Action, Config, GangScheduler, NewPod, Observed};
use serde_json::{json, Value};

use crate::fixtures::*;

fn native() -> Config {
    Config {
        gang: Some(GangScheduler::Kubernetes),
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

fn new_pods(actions: &[Action]) -> Vec<&NewPod> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod(new) => Some(&**new),
            _ => None,
        })
        .collect()
}

/// The native PodGroup as kube-apiserver returns it: spec as written, `status` as given.
fn existing(spec: Value, status: Value) -> Option<Value> {
    Some(json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "mnist-pytorchjob", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": spec,
        "status": status,
    }))
}

#[test]
fn the_flag_kubernetes_selects_the_native_gang() {
    assert_eq!(
        GangScheduler::from_flag("kubernetes"),
        Some(GangScheduler::Kubernetes)
    );
    assert_eq!(
        GangScheduler::from_flag("Kubernetes"),
        Some(GangScheduler::Kubernetes)
    );
    assert_eq!(GangScheduler::Kubernetes.scheduler_name(), None);
}

#[test]
fn native_pod_group_is_a_standalone_gang_of_every_pod_owned_by_the_job() {
    let job = pytorch_job(1, 3).with_gpus(8);
    let plan = job.plan_with(&Observed::default(), 0, &native());
    let pg = created_group(&plan.actions);
    assert_eq!(pg["apiVersion"], "scheduling.k8s.io/v1alpha2");
    assert_eq!(pg["kind"], "PodGroup");
    assert_eq!(pg["metadata"]["name"], "mnist-pytorchjob");
    assert_eq!(pg["metadata"]["namespace"], "team-a");
    assert_eq!(
        pg["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist", "uid": "uid-1",
            "controller": true, "blockOwnerDeletion": true,
        }]),
        "the garbage collector deletes it with the job"
    );
    assert_eq!(
        pg["spec"],
        json!({"schedulingPolicy": {"gang": {"minCount": 4}}}),
        "no Workload reference, no queue, no minResources"
    );
}

#[test]
fn min_count_is_min_available_else_the_elastic_minimum_and_at_least_one() {
    let elastic = pytorch_job(1, 4).set(
        "/spec/elasticPolicy",
        json!({"minReplicas": 2, "maxReplicas": 8}),
    );
    let cases = [
        ("every pod", pytorch_job(1, 4), 5),
        (
            "minAvailable",
            pytorch_job(1, 4).run_policy("schedulingPolicy", json!({"minAvailable": 2})),
            2,
        ),
        ("Master + elastic minReplicas", elastic.clone(), 3),
        (
            "minAvailable wins over elastic",
            elastic.run_policy("schedulingPolicy", json!({"minAvailable": 5})),
            5,
        ),
        (
            "the API refuses minCount 0",
            pytorch_job(1, 4).run_policy("schedulingPolicy", json!({"minAvailable": 0})),
            1,
        ),
    ];
    for (note, job, want) in cases {
        let plan = job.plan_with(&Observed::default(), 0, &native());
        let pg = created_group(&plan.actions);
        assert_eq!(
            pg["spec"]["schedulingPolicy"]["gang"]["minCount"],
            json!(want),
            "{note}"
        );
    }
}

#[test]
fn the_jobs_priority_class_becomes_the_pod_groups() {
    let job = pytorch_job(1, 1).run_policy(
        "schedulingPolicy",
        json!({"priorityClass": "high", "queue": "ignored"}),
    );
    let plan = job.plan_with(&Observed::default(), 0, &native());
    assert_eq!(
        created_group(&plan.actions)["spec"],
        json!({"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "high"})
    );
}

#[test]
fn pods_follow_the_pod_group_at_once_and_name_it_in_scheduling_group() {
    let job = pytorch_job(1, 1);
    let plan = job.plan_with(&Observed::default(), 0, &native());
    let list = action_list(&plan.actions);
    let group_at = list.iter().position(|a| a.starts_with("CreatePodGroup"));
    let first_pod = list.iter().position(|a| a.starts_with("pod "));
    assert!(
        group_at.is_some() && group_at < first_pod,
        "PodGroup first, then pods in the same plan (kube-scheduler holds them until the gang is whole): {list:?}"
    );
    let pods = new_pods(&plan.actions);
    assert_eq!(pods.len(), 2);
    for new in pods {
        assert_eq!(new.scheduling_group.as_deref(), Some("mnist-pytorchjob"));
        let spec = new.pod.spec.clone().unwrap_or_default();
        assert_eq!(spec.scheduler_name, None, "the default scheduler");
        let meta = &new.pod.metadata;
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert!(!annotations.contains_key("scheduling.k8s.io/group-name"));
        let labels = meta.labels.clone().unwrap_or_default();
        assert!(!labels.contains_key("scheduling.x-k8s.io/pod-group"));
        let sent = new.to_json().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            sent["spec"]["schedulingGroup"],
            json!({"podGroupName": "mnist-pytorchjob"})
        );
        assert_eq!(sent["metadata"]["name"], json!(meta.name));
    }
}

#[test]
fn a_users_scheduler_name_is_kept_and_other_gangs_set_no_scheduling_group() {
    let job = pytorch_job(1, 1).set(
        "/spec/pytorchReplicaSpecs/Master/template/spec/schedulerName",
        json!("mine"),
    );
    let plan = job.plan_with(&Observed::default(), 0, &native());
    let pod = created_pod(&plan, "mnist-master-0");
    assert_eq!(
        pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()),
        Some("mine")
    );
    let volcano = Config {
        gang: Some(GangScheduler::Volcano),
        ..Config::default()
    };
    let admitted = Observed {
        pod_group: Some(json!({"spec": {}, "status": {"phase": "Inqueue"}})),
        ..Observed::default()
    };
    for config in [Config::default(), volcano] {
        let plan = job.plan_with(&admitted, 0, &config);
        let pods = new_pods(&plan.actions);
        assert!(!pods.is_empty());
        assert!(pods.iter().all(|p| p.scheduling_group.is_none()));
        let sent = pods[0].to_json().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sent["spec"].get("schedulingGroup"), None);
    }
}

#[test]
fn an_existing_native_pod_group_is_never_updated_its_spec_is_immutable() {
    let job = pytorch_job(1, 3).run_policy(
        "schedulingPolicy",
        json!({"minAvailable": 3, "priorityClass": "high"}),
    );
    // Written with minCount 4 before minAvailable changed; the Priority admission plugin
    // filled in `priority`.
    let observed = Observed {
        pod_group: existing(
            json!({"schedulingPolicy": {"gang": {"minCount": 4}}, "priority": 1000}),
            json!({}),
        ),
        ..Observed::default()
    };
    let plan = job.plan_with(&observed, 0, &native());
    assert!(
        plan.actions
            .iter()
            .all(|a| !matches!(a, Action::CreatePodGroup(_) | Action::UpdatePodGroup { .. })),
        "{:?}",
        plan.actions
    );
    assert_eq!(created_pod_names(&plan).len(), 4);
}

#[test]
fn a_finished_job_deletes_its_native_pod_group() {
    let job = pytorch_job(1, 1);
    let mut observed = running(&job).phase("mnist-master-0", "Succeeded");
    observed.pod_group = existing(json!({}), json!({}));
    let plan = job.plan_with(&observed, 5, &native());
    assert_eq!(
        plan.actions.last(),
        Some(&Action::DeletePodGroup {
            api_version: "scheduling.k8s.io/v1alpha2".into(),
            name: "mnist-pytorchjob".into()
        })
    );
}

const FIFTEEN_MINUTES: i64 = 15 * 60;

fn scheduled(status: &str, reason: &str, message: &str) -> Value {
    json!({"conditions": [{
        "type": "PodGroupScheduled", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": "2023-11-14T22:13:30Z", "observedGeneration": 1,
    }]})
}

#[test]
fn the_watchdog_reports_a_native_gang_the_scheduler_could_not_place_with_its_reason() {
    let cases = [
        (
            "Unschedulable",
            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        ),
        (
            "SchedulerError",
            "failed to list node infos: snapshot is stale",
        ),
    ];
    for (reason, detail) in cases {
        let job = pytorch_job(1, 1).with_gpus(8);
        let mut observed = created(&job);
        observed.pod_group = existing(
            json!({"schedulingPolicy": {"gang": {"minCount": 2}}}),
            scheduled("False", reason, detail),
        );
        // The pods' own FailedScheduling events come second to the gang's verdict.
        observed.facts.failed_scheduling.insert(
            "mnist-master-0".into(),
            "pod group mnist-pytorchjob is unschedulable".into(),
        );
        let plan = job.plan_with(&observed, FIFTEEN_MINUTES, &native());
        assert_eq!(
            conditions(&plan).last(),
            Some(&(
                "Failed".to_string(),
                "True".to_string(),
                "PyTorchJobStartDeadlineExceeded".to_string()
            ))
        );
        assert_eq!(
            message(&plan, "Failed"),
            format!(
                "PyTorchJob mnist did not start within 900s: 2 pod(s) still Pending \
                 (mnist-master-0, mnist-worker-0): PodGroup is unschedulable: {reason}: {detail}"
            )
        );
    }
}

/// kube-scheduler's native gang says only "pod group is unschedulable" on the PodGroup; each
/// pod's PodScheduled condition says why. Both the Created condition and the deadline's
/// failure carry the pod's reason.
#[test]
fn a_stuck_native_gang_is_told_the_schedulers_reason_for_its_pods() {
    let job = pytorch_job(1, 1).with_gpus(8);
    let mut observed = created(&job);
    observed.pod_group = existing(
        json!({"schedulingPolicy": {"gang": {"minCount": 2}}}),
        scheduled("False", "Unschedulable", "pod group is unschedulable"),
    );
    let per_node = "0/6 nodes are available: 6 Insufficient nvidia.com/gpu.";
    for (pod, message) in observed
        .pods
        .iter_mut()
        .zip(["waiting for the pod group", per_node])
    {
        pod.status = Some(serde_json::from_value(json!({"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
        }]})).expect("pod status"));
    }
    let plan = job.plan_with(&observed, 100, &native());
    assert_eq!(
        message(&plan, "Created"),
        format!(
            "PyTorchJob mnist is waiting for its gang: PodGroup mnist-pytorchjob is unschedulable: \
             Unschedulable: pod group is unschedulable; pod mnist-worker-0: {per_node}"
        )
    );
    let plan = job.plan_with(&observed, FIFTEEN_MINUTES, &native());
    assert!(
        message(&plan, "Failed").ends_with(&format!(
            "PodGroup is unschedulable: Unschedulable: pod group is unschedulable; pod mnist-worker-0: {per_node}"
        )),
        "{}",
        message(&plan, "Failed")
    );
}

#[test]
fn a_scheduled_native_gang_is_not_blamed_and_the_deadline_still_applies() {
    let job = pytorch_job(1, 1);
    let mut observed = created(&job);
    observed.pod_group = existing(
        json!({"schedulingPolicy": {"gang": {"minCount": 2}}}),
        scheduled("True", "Scheduled", ""),
    );
    let before = job.plan_with(&observed, 100, &native());
    assert_eq!(before.requeue_after, secs(800));
    let plan = job.plan_with(&observed, FIFTEEN_MINUTES, &native());
    assert_eq!(
        message(&plan, "Failed"),
        "PyTorchJob mnist did not start within 900s: 2 pod(s) still Pending \
         (mnist-master-0, mnist-worker-0): the cluster reports no cause (no scheduling or image events)"
    );
}

#[test]
fn the_topology_key_annotation_confines_the_gang_to_one_domain() {
    let job = pytorch_job(1, 2)
        .with_gpus(8)
        .annotation("gangplank.dev/topology-key", "example.com/nvlink-domain");
    let plan = job.plan_with(&Observed::default(), 0, &native());
    let pg = created_group(&plan.actions);
    assert_eq!(
        pg["spec"],
        json!({
            "schedulingPolicy": {"gang": {"minCount": 3}},
            "schedulingConstraints": {"topology": [{"key": "example.com/nvlink-domain"}]},
        })
    );
}

#[test]
fn an_empty_topology_key_or_another_gang_scheduler_writes_no_constraint() {
    let empty = pytorch_job(1, 2).annotation("gangplank.dev/topology-key", "");
    let pg = created_group(&empty.plan_with(&Observed::default(), 0, &native()).actions);
    assert_eq!(pg["spec"].get("schedulingConstraints"), None);
    let volcano = Config {
        gang: Some(GangScheduler::Volcano),
        ..Config::default()
    };
    let keyed = pytorch_job(1, 2).annotation("gangplank.dev/topology-key", "rack");
    let pg = created_group(&keyed.plan_with(&Observed::default(), 0, &volcano).actions);
    assert_eq!(pg["spec"].get("schedulingConstraints"), None);
}

#[test]
fn valid_label_keys_are_written_as_topology_keys() {
    for key in [
        "rack",
        "topology.kubernetes.io/rack",
        "example.com/nvlink-domain",
        "a/B_c.d-9",
        "x",
    ] {
        let job = pytorch_job(1, 1).annotation("gangplank.dev/topology-key", key);
        let plan = job.plan_with(&Observed::default(), 0, &native());
        let pg = created_group(&plan.actions);
        assert_eq!(
            pg["spec"]["schedulingConstraints"]["topology"],
            json!([{"key": key}]),
            "{key}"
        );
    }
}

#[test]
fn an_invalid_topology_key_is_said_on_the_job_and_no_pod_group_is_written() {
    let too_long = "n".repeat(64);
    let cases = [
        ("two slashes", "a/b/c", "at most one /"),
        (
            "empty prefix",
            "/rack",
            "the prefix before / must have 1 to 253 characters",
        ),
        (
            "upper-case prefix",
            "Example.com/rack",
            "lowercase DNS subdomain",
        ),
        (
            "empty name",
            "example.com/",
            "the name must have 1 to 63 characters",
        ),
        ("name too long", too_long.as_str(), "1 to 63 characters"),
        ("space", "nvlink domain", "only alphanumerics"),
        ("ends with a dash", "rack-", "ending alphanumeric"),
    ];
    for (note, key, says) in cases {
        let job = pytorch_job(1, 1).annotation("gangplank.dev/topology-key", key);
        let plan = job.plan_with(&Observed::default(), 0, &native());
        assert!(
            !plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::CreatePodGroup(_))),
            "{note}: {:?}",
            action_list(&plan.actions)
        );
        let created = conditions(&plan)
            .into_iter()
            .find(|(ty, _, _)| ty == "Created")
            .unwrap_or_else(|| panic!("{note}: no Created condition"));
        assert_eq!(created.2, "PyTorchJobPodGroupRefused", "{note}");
        let message = message(&plan, "Created");
        assert!(
            message.contains(&format!(
                "annotation gangplank.dev/topology-key is {key:?}, which is not a node label key"
            )) && message.contains(says),
            "{note}: {message}"
        );
        assert!(
            plan.events
                .iter()
                .any(|e| e.reason == "PyTorchJobPodGroupRefused"),
            "{note}: a Warning Event says it"
        );
        assert_eq!(plan.requeue_after, secs(10), "{note}: no tight loop");
    }
}

#[test]
fn an_existing_native_pod_group_keeps_its_spec_when_the_topology_key_changes() {
    let job = pytorch_job(1, 1).annotation("gangplank.dev/topology-key", "rack");
    let observed = Observed {
        pod_group: existing(
            json!({"schedulingPolicy": {"gang": {"minCount": 2}}}),
            json!({}),
        ),
        ..Observed::default()
    };
    let plan = job.plan_with(&observed, 0, &native());
    assert!(
        !action_list(&plan.actions)
            .iter()
            .any(|a| a.contains("PodGroup")),
        "{:?}",
        action_list(&plan.actions)
    );
}

#[test]
fn the_start_deadline_names_an_invalid_topology_key() {
    let job = pytorch_job(1, 1)
        .with_gpus(8)
        .annotation("gangplank.dev/topology-key", "rack-")
        .run_policy("schedulingPolicy", json!({"scheduleTimeoutSeconds": 60}));
    let first = job.plan_with(&Observed::default(), 0, &native());
    let started = job.with_status_of(&first);
    let plan = started.plan_with(&created(&job), 60, &native());
    let failed = message(&plan, "Failed");
    assert!(
        failed.contains(
            "the PodGroup could not be written: annotation gangplank.dev/topology-key is \"rack-\""
        ),
        "{failed}"
    );
}
