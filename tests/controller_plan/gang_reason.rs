//! The gang scheduler's reason for a gang it does not place, on the job at once: Volcano
//! records it as Warning Events on a PodGroup it keeps Pending (no condition: the controller
//! creates no pods before admission), or as the PodGroup's `Unschedulable` condition once
//! pods exist. The Created condition carries it (reason `<Kind>Unschedulable`) with one
//! Warning Event, and the start deadline's message names it instead of "no cause".

use gangplank::controller::{Config, Event, GangScheduler, Observed, QueueProblem};
use serde_json::{json, Value};

use crate::fixtures::*;

const OVERUSED: &str = "Unschedulable: resource in cluster is overused: overused nvidia.com/gpu";
const QUOTA: &str = "Unschedulable: queue resource quota insufficient: insufficient nvidia.com/gpu";

fn volcano() -> Config {
    Config {
        gang: Some(GangScheduler::Volcano),
        ..Config::default()
    }
}

fn pod_group(phase: &str, conditions: Value) -> Value {
    json!({
        "metadata": {"name": "mnist-pytorchjob", "uid": "pg-uid",
                     "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"minMember": 9, "minResources": {"nvidia.com/gpu": "72"}, "queue": "default"},
        "status": {"phase": phase, "conditions": conditions},
    })
}

/// Volcano keeps the PodGroup Pending and says why in an Event; no pods exist.
fn held_back(warning: &str) -> Observed {
    let mut observed = Observed {
        pod_group: Some(pod_group("Pending", json!([]))),
        ..Observed::default()
    };
    observed.facts.pod_group_warnings = vec![warning.to_string()];
    observed
}

fn created_condition(plan: &gangplank::controller::Plan) -> (String, String) {
    let status = plan.status.as_ref().expect("a status");
    let created = status
        .conditions
        .iter()
        .find(|c| c.type_ == gangplank::controller::ConditionType::Created)
        .expect("Created");
    (created.reason.clone(), created.message.clone())
}

fn warnings(plan: &gangplank::controller::Plan) -> Vec<&Event> {
    plan.events
        .iter()
        .filter(|e| e.type_ == gangplank::controller::EventType::Warning)
        .collect()
}

#[test]
fn a_pod_group_volcano_holds_back_puts_its_reason_on_created_and_in_an_event_at_once() {
    let job = pytorch_job(1, 8).with_gpus(8);
    let started = job.with_status_of(&job.plan_with(&Observed::default(), 0, &volcano()));
    let plan = started.plan_with(&held_back(OVERUSED), 5, &volcano());
    let want = format!(
        "PyTorchJob mnist is waiting for its gang: PodGroup mnist-pytorchjob is unschedulable: \
         {OVERUSED}"
    );
    assert_eq!(
        created_condition(&plan),
        ("PyTorchJobUnschedulable".to_string(), want.clone())
    );
    assert_eq!(
        warnings(&plan),
        vec![&Event::warning("PyTorchJobUnschedulable", want)]
    );
    assert!(created_pods(&plan).is_empty(), "no pods before admission");
    assert_eq!(
        plan.requeue_after,
        secs(10),
        "Volcano's Events are read again in 10 s (they are not watched)"
    );
}

#[test]
fn the_same_reason_again_records_no_second_event() {
    let job = pytorch_job(1, 8).with_gpus(8);
    let started = job.with_status_of(&job.plan_with(&Observed::default(), 0, &volcano()));
    let first = started.plan_with(&held_back(OVERUSED), 5, &volcano());
    let again = started
        .with_status_of(&first)
        .plan_with(&held_back(OVERUSED), 10, &volcano());
    assert!(warnings(&again).is_empty(), "{:?}", again.events);
    assert_eq!(
        again.status,
        first.status.map(|mut s| {
            s.last_reconcile_time = again
                .status
                .as_ref()
                .and_then(|a| a.last_reconcile_time.clone());
            s
        })
    );
}

#[test]
fn a_new_reason_replaces_the_old_one_with_its_own_event() {
    let job = pytorch_job(1, 8).with_gpus(8);
    let started = job.with_status_of(&job.plan_with(&Observed::default(), 0, &volcano()));
    let first = started.plan_with(&held_back(OVERUSED), 5, &volcano());
    let second = started
        .with_status_of(&first)
        .plan_with(&held_back(QUOTA), 10, &volcano());
    let (reason, message) = created_condition(&second);
    assert_eq!(reason, "PyTorchJobUnschedulable");
    assert!(message.ends_with(QUOTA), "{message}");
    assert_eq!(warnings(&second).len(), 1, "{:?}", second.events);
}

#[test]
fn the_start_deadline_names_volcanos_reason_instead_of_no_cause() {
    let job = pytorch_job(1, 8)
        .with_gpus(8)
        .run_policy("schedulingPolicy", json!({"scheduleTimeoutSeconds": 60}));
    let started = job.with_status_of(&job.plan_with(&Observed::default(), 0, &volcano()));
    let plan = started.plan_with(&held_back(OVERUSED), 60, &volcano());
    assert_eq!(
        message(&plan, "Failed"),
        format!(
            "PyTorchJob mnist did not start within 60s: PodGroup mnist-pytorchjob was not \
             admitted: PodGroup is unschedulable: {OVERUSED}"
        )
    );
}

#[test]
fn the_pod_groups_unschedulable_condition_comes_before_its_events() {
    let job = pytorch_job(1, 1).with_gpus(8);
    let condition = json!([{
        "type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
        "message": "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable",
    }]);
    let mut observed = created(&job);
    observed.pod_group = Some(pod_group("Inqueue", condition));
    observed.facts.pod_group_warnings = vec![OVERUSED.to_string()];
    let plan = job.plan_with(&observed, 5, &volcano());
    let (reason, message) = created_condition(&plan);
    assert_eq!(reason, "PyTorchJobUnschedulable");
    assert!(
        message.ends_with("NotEnoughResources: 2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable"),
        "{message}"
    );
}

#[test]
fn an_old_warning_on_an_admitted_pod_group_is_not_blamed() {
    let job = pytorch_job(1, 1).with_gpus(8);
    let mut observed = created(&job);
    observed.pod_group = Some(pod_group("Inqueue", json!([])));
    observed.facts.pod_group_warnings = vec![OVERUSED.to_string()];
    let plan = job.plan_with(&observed, 5, &volcano());
    assert_eq!(created_condition(&plan).0, "PyTorchJobCreated");
    assert!(warnings(&plan).is_empty(), "{:?}", plan.events);
}

#[test]
fn once_the_gang_runs_created_gets_its_own_reason_back_and_running_is_last() {
    let job = pytorch_job(1, 1).with_gpus(8);
    let started = job.with_status_of(&job.plan_with(&Observed::default(), 0, &volcano()));
    let waiting = started.with_status_of(&started.plan_with(&held_back(OVERUSED), 5, &volcano()));
    let mut observed = running(&job);
    observed.pod_group = Some(pod_group("Running", json!([])));
    let plan = waiting.plan_with(&observed, 20, &volcano());
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Running", "True", "PyTorchJobRunning"),
        ])
    );
    assert_eq!(created_condition(&plan).1, "PyTorchJob mnist is created.");
}

#[test]
fn a_job_that_has_run_keeps_its_conditions_when_its_gang_waits_again() {
    let job = pytorch_job(1, 1).with_gpus(8);
    let ran = job.with_status_of(&job.plan_with(&running(&job), 5, &volcano()));
    let plan = ran.plan_with(&held_back(OVERUSED), 10, &volcano());
    assert_eq!(created_condition(&plan).0, "PyTorchJobCreated");
}

#[test]
fn without_a_gang_scheduler_nothing_is_read_into_created() {
    let job = pytorch_job(1, 1);
    let mut observed = created(&job);
    observed.facts.pod_group_warnings = vec![OVERUSED.to_string()];
    let plan = job.plan(&observed, 5);
    assert_eq!(created_condition(&plan).0, "PyTorchJobCreated");
}

#[test]
fn volcanos_cause_comes_before_its_per_cycle_summary_whatever_the_order_read() {
    let summary =
        "Unschedulable: 0/0 tasks in gang unschedulable: pod group is not ready, 9 minAvailable";
    let job = pytorch_job(1, 8).with_gpus(8);
    let started = job.with_status_of(&job.plan_with(&Observed::default(), 0, &volcano()));
    for order in [[summary, OVERUSED], [OVERUSED, summary]] {
        let mut observed = held_back(OVERUSED);
        observed.facts.pod_group_warnings = order.iter().map(|w| w.to_string()).collect();
        let plan = started.plan_with(&observed, 5, &volcano());
        let (_, message) = created_condition(&plan);
        assert!(
            message.ends_with(&format!("is unschedulable: {OVERUSED}; {summary}")),
            "{message}"
        );
    }
}

const NOT_SERVED: &str = "the API server does not serve scheduling.volcano.sh/v1beta1 PodGroups \
    (the server could not find the requested resource): install the gang scheduler's CRDs";

#[test]
fn a_refused_pod_group_is_said_on_the_job_and_written_again_later() {
    let job = pytorch_job(1, 1).with_gpus(8);
    let mut observed = Observed::default();
    observed.facts.pod_group_refused = Some(NOT_SERVED.to_string());
    let plan = job.plan_with(&observed, 0, &volcano());
    let want = format!(
        "PyTorchJob mnist is waiting for its gang: PodGroup mnist-pytorchjob was refused: \
         {NOT_SERVED}"
    );
    assert_eq!(
        created_condition(&plan),
        ("PyTorchJobPodGroupRefused".to_string(), want.clone())
    );
    assert_eq!(
        warnings(&plan),
        vec![&Event::warning("PyTorchJobPodGroupRefused", want)]
    );
    assert_eq!(
        action_list(&plan.actions),
        Vec::<String>::new(),
        "no write, no pods"
    );
    assert_eq!(plan.requeue_after, secs(10), "the PodGroup is tried again");
    // The next pass, without the refusal, writes the PodGroup again.
    let again = job
        .with_status_of(&plan)
        .plan_with(&Observed::default(), 10, &volcano());
    assert!(
        action_list(&again.actions)
            .iter()
            .any(|a| a.contains("PodGroup")),
        "{:?}",
        action_list(&again.actions)
    );
}

#[test]
fn the_start_deadline_names_a_refused_pod_group() {
    let job = pytorch_job(1, 1)
        .with_gpus(8)
        .run_policy("schedulingPolicy", json!({"scheduleTimeoutSeconds": 60}));
    let started = job.with_status_of(&job.plan_with(&Observed::default(), 0, &volcano()));
    let mut observed = Observed::default();
    observed.facts.pod_group_refused = Some(NOT_SERVED.to_string());
    let plan = started.plan_with(&observed, 60, &volcano());
    assert_eq!(
        message(&plan, "Failed"),
        format!(
            "PyTorchJob mnist did not start within 60s: PodGroup mnist-pytorchjob was not \
             admitted: the PodGroup could not be written: {NOT_SERVED}"
        )
    );
}

#[test]
fn a_pod_group_in_a_queue_that_does_not_exist_is_named_though_volcano_says_nothing() {
    let job = pytorch_job(1, 1)
        .with_gpus(8)
        .run_policy("schedulingPolicy", json!({"queue": "research"}));
    let mut observed = Observed {
        pod_group: Some(json!({
            "metadata": {"name": "mnist-pytorchjob", "creationTimestamp": "2023-11-14T22:13:20Z"},
            "spec": {"minMember": 2, "queue": "research"},
        })),
        ..Observed::default()
    };
    observed.facts.queue_problem = Some(QueueProblem::Missing("research".into()));
    let plan = job.plan_with(&observed, 5, &volcano());
    let (reason, message) = created_condition(&plan);
    assert_eq!(reason, "PyTorchJobUnschedulable");
    assert_eq!(
        message,
        "PyTorchJob mnist is waiting for its gang: PodGroup mnist-pytorchjob is unschedulable: \
         Queue research does not exist, and Volcano ignores PodGroups of a missing queue: create \
         it, or set runPolicy.schedulingPolicy.queue to an existing one"
    );
    assert_eq!(warnings(&plan).len(), 1);
}

#[test]
fn a_pod_group_in_a_closed_queue_is_named_with_how_to_open_it() {
    let job = pytorch_job(1, 1)
        .with_gpus(8)
        .run_policy("schedulingPolicy", json!({"queue": "research"}));
    let mut observed = Observed {
        pod_group: Some(json!({
            "metadata": {"name": "mnist-pytorchjob", "creationTimestamp": "2023-11-14T22:13:20Z"},
            "spec": {"minMember": 2, "queue": "research"},
            "status": {"phase": "Pending"},
        })),
        ..Observed::default()
    };
    // What Volcano records for it: a summary that does not name the queue.
    observed.facts.pod_group_warnings = vec![
        "Unschedulable: 0/0 tasks in gang unschedulable: pod group is not ready, 2 minAvailable"
            .into(),
    ];
    observed.facts.queue_problem = Some(QueueProblem::NotOpen {
        queue: "research".into(),
        state: "Closed".into(),
    });
    let plan = job.plan_with(&observed, 5, &volcano());
    let (reason, message) = created_condition(&plan);
    assert_eq!(reason, "PyTorchJobUnschedulable");
    assert!(
        message.ends_with(
            "PodGroup mnist-pytorchjob is unschedulable: Queue research is Closed, and Volcano \
             admits no new PodGroup to it: open it (vcctl queue operate --name research \
             --action open), or set runPolicy.schedulingPolicy.queue to an Open one"
        ),
        "{message}"
    );
}

#[test]
fn at_the_deadline_a_pod_group_volcano_never_looked_at_is_named() {
    let job = pytorch_job(1, 1)
        .with_gpus(8)
        .run_policy("schedulingPolicy", json!({"scheduleTimeoutSeconds": 60}));
    let started = job.with_status_of(&job.plan_with(&Observed::default(), 0, &volcano()));
    let observed = Observed {
        pod_group: Some(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "mnist-pytorchjob", "creationTimestamp": "2023-11-14T22:13:20Z"},
            "spec": {"minMember": 2, "queue": "default"},
        })),
        ..Observed::default()
    };
    let before = started.plan_with(&observed, 30, &volcano());
    assert_eq!(
        created_condition(&before).0,
        "PyTorchJobCreated",
        "not before the deadline"
    );
    let plan = started.plan_with(&observed, 60, &volcano());
    assert_eq!(
        message(&plan, "Failed"),
        "PyTorchJob mnist did not start within 60s: PodGroup mnist-pytorchjob was not admitted: \
         the PodGroup has no phase: no Volcano scheduler has looked at it (is vc-scheduler \
         running, with --scheduler-name volcano?)"
    );
}

fn scheduler_plugins() -> Config {
    Config {
        gang: Some(GangScheduler::SchedulerPlugins {
            scheduler_name: "scheduler-plugins-scheduler".to_string(),
        }),
        ..Config::default()
    }
}

/// The job's pods as created, each with `message` as its PodScheduled=False condition, and
/// its scheduler-plugins PodGroup (no status: scheduler-plugins' controller keeps that).
fn coscheduled(job: &Job, messages: &[&str]) -> Observed {
    let mut observed = created(job);
    observed.pod_group = Some(json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "mnist-pytorchjob", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"minMember": 2},
    }));
    for (pod, message) in observed.pods.iter_mut().zip(messages) {
        pod.status = Some(
            serde_json::from_value(json!({"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": message,
            }]}))
            .expect("pod status"),
        );
    }
    observed
}

/// Coscheduling says why only on the pods (nothing on its PodGroup, no Event): the pod's
/// reason is the gang's, on Created at once and in the start deadline's failure.
#[test]
fn a_coscheduling_gang_is_told_the_plugins_reason_from_its_pods() {
    let job = pytorch_job(1, 1).with_gpus(8);
    let gap = "0/3 nodes are available: resource gap: map[nvidia.com/gpu:8].";
    let observed = coscheduled(&job, &[gap, gap]);
    let plan = job.plan_with(&observed, 5, &scheduler_plugins());
    let want = format!(
        "PyTorchJob mnist is waiting for its gang: PodGroup mnist-pytorchjob is unschedulable: \
         pod mnist-master-0: {gap}"
    );
    assert_eq!(
        created_condition(&plan),
        ("PyTorchJobUnschedulable".to_string(), want.clone())
    );
    assert_eq!(
        warnings(&plan),
        vec![&Event::warning("PyTorchJobUnschedulable", want)]
    );
    let plan = job.plan_with(&observed, 15 * 60, &scheduler_plugins());
    assert!(
        message(&plan, "Failed").ends_with(&format!(
            "PodGroup is unschedulable: pod mnist-master-0: {gap}"
        )),
        "{}",
        message(&plan, "Failed")
    );
}

/// PreFilter's "cannot find enough sibling pods" from before the controller created the rest
/// of the gang is not a reason once minMember pods exist; while they do not, it is.
#[test]
fn coschedulings_wait_for_siblings_is_a_reason_only_while_they_are_missing() {
    let job = pytorch_job(1, 1).with_gpus(8);
    let wait = "0/3 nodes are available: pre-filter pod mnist-master-0 cannot find enough \
                sibling pods, current pods number: 1, minMember of group: 2.";
    let observed = coscheduled(&job, &[wait]);
    let plan = job.plan_with(&observed, 5, &scheduler_plugins());
    let (reason, _) = created_condition(&plan);
    assert_eq!(
        reason, "PyTorchJobCreated",
        "every sibling exists: {:?}",
        plan.events
    );
    assert!(warnings(&plan).is_empty(), "{:?}", plan.events);

    let mut alone = observed.clone();
    alone.pods.truncate(1);
    let plan = job.plan_with(&alone, 5, &scheduler_plugins());
    let (reason, message) = created_condition(&plan);
    assert_eq!(reason, "PyTorchJobUnschedulable");
    assert!(message.ends_with(wait), "{message}");
}
