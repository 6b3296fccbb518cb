//! `gangplank.dev/release-order` on a native gang: pods created behind the scheduling gate
//! `gangplank.dev/release-order`, released type by type in the annotation's order once the
//! gang is whole, and never kept gated for an order the job does not (validly) give.

use gangplank::controller::{Action, Config, EventType, GangScheduler, Observed, Plan};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::fixtures::*;

const ANNOTATION: &str = "gangplank.dev/release-order";
const GATE: &str = "gangplank.dev/release-order";

fn native() -> Config {
    Config {
        gang: Some(GangScheduler::Kubernetes),
        ..Config::default()
    }
}

fn volcano() -> Config {
    Config {
        gang: Some(GangScheduler::Volcano),
        ..Config::default()
    }
}

fn ordered(order: &str) -> Job {
    pytorch_job(1, 2).annotation(ANNOTATION, order)
}

fn gates(pod: &Pod) -> Vec<String> {
    let gates = pod.spec.as_ref().and_then(|s| s.scheduling_gates.clone());
    gates.into_iter().flatten().map(|g| g.name).collect()
}

/// The names the plan releases, in order; `None` without a release.
fn released(plan: &Plan) -> Option<Vec<String>> {
    plan.actions.iter().find_map(|a| match a {
        Action::ReleasePods { names, .. } => Some(names.clone()),
        _ => None,
    })
}

/// The cluster once `job`'s first plan (under `config`) was applied: its pods, Pending.
fn first_pods(job: &Job, config: &Config) -> Observed {
    after(
        &Observed::default(),
        &job.plan_with(&Observed::default(), 0, config),
    )
}

fn ungated(mut observed: Observed) -> Observed {
    for pod in &mut observed.pods {
        if let Some(spec) = pod.spec.as_mut() {
            spec.scheduling_gates = None;
        }
    }
    observed
}

#[test]
fn a_native_gang_with_a_release_order_creates_every_pod_gated() {
    let plan = ordered("Worker,Master").plan_with(&Observed::default(), 0, &native());
    let pods = created_pods(&plan);
    assert_eq!(pods.len(), 3);
    for pod in pods {
        assert_eq!(gates(pod), strs(&[GATE]), "{:?}", pod.metadata.name);
    }
    assert_eq!(released(&plan), None, "no pod is observed yet");
}

#[test]
fn a_gate_of_the_template_is_kept_beside_ours() {
    let job = ordered("Worker,Master").set(
        "/spec/pytorchReplicaSpecs/Worker/template/spec/schedulingGates",
        json!([{"name": "example.com/quota"}]),
    );
    let plan = job.plan_with(&Observed::default(), 0, &native());
    assert_eq!(
        gates(created_pod(&plan, "mnist-worker-0")),
        strs(&["example.com/quota", GATE])
    );
}

#[test]
fn pods_are_created_ungated_without_the_annotation_another_gang_or_for_an_mpijob() {
    let admitted = Observed {
        pod_group: Some(json!({"spec": {}, "status": {"phase": "Inqueue"}})),
        ..Observed::default()
    };
    let cases = [
        ("no annotation", pytorch_job(1, 2), native()),
        ("Volcano", ordered("Worker,Master"), volcano()),
        (
            "no gang scheduler",
            ordered("Worker,Master"),
            Config::default(),
        ),
        // The launcher is created only once the workers run: gated workers never would.
        (
            "MPIJob",
            mpi_job(2).annotation(ANNOTATION, "Worker,Launcher"),
            native(),
        ),
    ];
    for (note, job, config) in cases {
        // Volcano creates pods only once it admits the PodGroup; an MPIJob's launcher only in
        // a later plan, once its workers exist.
        let plan = match config.gang {
            Some(GangScheduler::Volcano) => job.plan_with(&admitted, 0, &config),
            _ => job.settled_plan(&config),
        };
        let pods = created_pods(&plan);
        assert!(!pods.is_empty(), "{note}");
        for pod in pods {
            assert_eq!(
                gates(pod),
                Vec::<String>::new(),
                "{note}: {:?}",
                pod.metadata.name
            );
        }
    }
}

#[test]
fn an_invalid_release_order_gates_nothing_and_says_so_once_in_a_warning() {
    let job = ordered("Worker,Chief");
    let plan = job.plan_with(&Observed::default(), 0, &native());
    let pods = created_pods(&plan);
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(|p| gates(p).is_empty()));
    let warnings: Vec<_> = plan
        .events
        .iter()
        .filter(|e| e.type_ == EventType::Warning)
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", plan.events);
    assert_eq!(warnings[0].reason, "InvalidReleaseOrder");
    assert!(
        warnings[0].message.contains("\"Chief\"")
            && warnings[0]
                .message
                .ends_with("released to kube-scheduler together"),
        "{}",
        warnings[0].message
    );
    // Later plans, with the pods there, say it no more.
    let later = job.plan_with(&first_pods(&job, &native()), 1, &native());
    assert!(
        later
            .events
            .iter()
            .all(|e| e.reason != "InvalidReleaseOrder"),
        "{:?}",
        later.events
    );
}

#[test]
fn the_gang_is_released_once_whole_in_the_annotations_order_then_by_index() {
    let job = ordered("Worker,Master");
    let whole = first_pods(&job, &native());
    let plan = job.plan_with(&whole, 1, &native());
    assert_eq!(
        released(&plan),
        Some(strs(&[
            "mnist-worker-0",
            "mnist-worker-1",
            "mnist-master-0"
        ]))
    );
    assert!(created_pods(&plan).is_empty());

    let job = ordered("Master,Worker");
    let plan = job.plan_with(&first_pods(&job, &native()), 1, &native());
    assert_eq!(
        released(&plan),
        Some(strs(&[
            "mnist-master-0",
            "mnist-worker-0",
            "mnist-worker-1"
        ]))
    );
}

#[test]
fn indices_are_released_in_numeric_order() {
    let job = pytorch_job(1, 11).annotation(ANNOTATION, "worker, master");
    let plan = job.plan_with(&first_pods(&job, &native()), 1, &native());
    let mut want: Vec<String> = (0..11).map(|i| format!("mnist-worker-{i}")).collect();
    want.push("mnist-master-0".into());
    assert_eq!(released(&plan), Some(want));
}

#[test]
fn nothing_is_released_while_a_pod_is_missing_or_being_deleted() {
    let job = ordered("Worker,Master");
    let whole = first_pods(&job, &native());
    let missing = whole.clone().without_pod("mnist-worker-1");
    let plan = job.plan_with(&missing, 1, &native());
    assert_eq!(released(&plan), None);
    assert_eq!(created_pod_names(&plan), strs(&["mnist-worker-1"]));

    let mut deleting = whole;
    deleting
        .pod_mut("mnist-master-0")
        .metadata
        .deletion_timestamp = Some(time(1));
    assert_eq!(released(&job.plan_with(&deleting, 1, &native())), None);
}

#[test]
fn nothing_is_released_when_no_pod_is_gated() {
    let job = ordered("Worker,Master");
    let plan = job.plan_with(&ungated(first_pods(&job, &native())), 1, &native());
    assert_eq!(released(&plan), None, "{:?}", action_list(&plan.actions));
}

#[test]
fn only_the_pods_still_gated_are_released() {
    let job = ordered("Worker,Master");
    let mut observed = first_pods(&job, &native());
    if let Some(spec) = observed.pod_mut("mnist-worker-0").spec.as_mut() {
        spec.scheduling_gates = None;
    }
    let plan = job.plan_with(&observed, 1, &native());
    assert_eq!(
        released(&plan),
        Some(strs(&["mnist-worker-1", "mnist-master-0"]))
    );
}

/// Pods gated under an order the job no longer gives (annotation removed or made invalid, or
/// the controller restarted with another gang scheduler) are released at once, whole gang or
/// not, in the kind's order: no pod waits for an order that will not come.
#[test]
fn gated_pods_of_a_job_without_a_valid_order_are_released_at_once_in_the_kinds_order() {
    let gated = first_pods(&ordered("Worker,Master"), &native()).without_pod("mnist-worker-1");
    let cases = [
        ("annotation removed", pytorch_job(1, 2), native()),
        ("annotation invalid", ordered("Worker"), native()),
        (
            "another gang scheduler",
            ordered("Worker,Master"),
            Config::default(),
        ),
    ];
    for (note, job, config) in cases {
        let plan = job.plan_with(&gated, 1, &config);
        assert_eq!(
            released(&plan),
            Some(strs(&["mnist-master-0", "mnist-worker-0"])),
            "{note}"
        );
    }
}

#[test]
fn the_release_follows_the_creates_in_the_plan() {
    let job = ordered("Worker,Master");
    let mut observed = first_pods(&job, &native());
    // A restarted worker: its pod is recreated (gated) in this plan, released in the next.
    observed = observed.without_pod("mnist-worker-1");
    let plan = job.plan_with(&observed, 1, &native());
    let list = action_list(&plan.actions);
    assert_eq!(released(&plan), None, "{list:?}");
    let next = after(&observed, &plan);
    let plan = job.plan_with(&next, 2, &native());
    assert_eq!(
        released(&plan),
        Some(strs(&[
            "mnist-worker-0",
            "mnist-worker-1",
            "mnist-master-0"
        ]))
    );
}

/// The watchdog's start deadline runs for pods the cluster holds, not for pods the
/// controller itself holds until the gang is whole (a controller restart can stretch that).
#[test]
fn the_watchdog_does_not_count_pods_held_behind_the_release_gate() {
    let job = ordered("Worker,Master");
    let fifteen_minutes = 15 * 60;
    let gated = first_pods(&job, &native()).without_pod("mnist-worker-1");
    let plan = job.plan_with(&gated, fifteen_minutes + 60, &native());
    assert!(
        conditions(&plan).iter().all(|(t, _, _)| t != "Failed"),
        "{:?}",
        conditions(&plan)
    );
    assert_eq!(created_pod_names(&plan), strs(&["mnist-worker-1"]));

    let released = ungated(first_pods(&job, &native()));
    let plan = job.plan_with(&released, fifteen_minutes + 60, &native());
    assert!(
        message(&plan, "Failed").contains("3 pod(s) still Pending"),
        "released pods are the cluster's again: {:?}",
        conditions(&plan)
    );
}

/// A release delayed past the start deadline (the controller was down while the gang was
/// gated) leaves the scheduler the whole deadline: the clock starts at the release, which
/// the release writes on each pod.
#[test]
fn a_released_pods_deadline_runs_from_its_release() {
    let job = ordered("Worker,Master");
    let fifteen_minutes = 15 * 60;
    let late = fifteen_minutes + 300;
    let plan = job.plan_with(&first_pods(&job, &native()), late, &native());
    let at = plan.actions.iter().find_map(|a| match a {
        Action::ReleasePods { at, .. } => Some(at.clone()),
        _ => None,
    });
    assert_eq!(at, Some(time(late)), "{:?}", action_list(&plan.actions));

    let released = stamped(ungated(first_pods(&job, &native())), late);
    let plan = job.plan_with(&released, late + 60, &native());
    assert!(
        conditions(&plan).iter().all(|(t, _, _)| t != "Failed"),
        "{:?}",
        conditions(&plan)
    );
    assert_eq!(plan.requeue_after, secs(fifteen_minutes as u64 - 60));
    let plan = job.plan_with(&released, late + fifteen_minutes, &native());
    assert!(
        message(&plan, "Failed").contains("did not start within 900s: 3 pod(s) still Pending"),
        "{:?}",
        conditions(&plan)
    );
}

/// `observed` with every pod stamped released at `at` (what the release writes).
fn stamped(mut observed: Observed, at: i64) -> Observed {
    let stamp = time(at).0.to_string();
    for pod in &mut observed.pods {
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("gangplank.dev/released-at".into(), stamp.clone());
    }
    observed
}

/// A release stamp the controller cannot have written (the pods were created at 0): one
/// from the future (forged in a template or on the pod) would restart the clock at every
/// look and switch the watchdog off for good; one before the pod's creation would start it
/// early. Neither is believed: the clock runs from the pod's creation.
#[test]
fn a_release_stamp_outside_creation_and_now_does_not_move_the_clock() {
    let job = ordered("Worker,Master");
    let fifteen_minutes = 15 * 60;
    let ten_years = 10 * 365 * 24 * 3600;
    for (why, stamp) in [("from the future", ten_years), ("before creation", -3600)] {
        let forged = stamped(ungated(first_pods(&job, &native())), stamp);
        let plan = job.plan_with(&forged, fifteen_minutes - 60, &native());
        assert!(
            conditions(&plan).iter().all(|(t, _, _)| t != "Failed"),
            "{why}: {:?}",
            conditions(&plan)
        );
        assert_eq!(plan.requeue_after, secs(60), "{why}: from creation");
        let plan = job.plan_with(&forged, fifteen_minutes + 1, &native());
        assert!(
            message(&plan, "Failed").contains("did not start within 900s: 3 pod(s) still Pending"),
            "{why}: {:?}",
            conditions(&plan)
        );
    }
}
