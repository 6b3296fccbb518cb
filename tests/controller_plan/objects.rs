//! Generated pods and Services: names, labels, owner references, ports, restart policy
//! (upstream PyTorch "Should get the corresponding resources successfully", TF "Copy Labels
//! and Annotations", Scale Down / Scale Up) and idempotent creates.

use std::collections::BTreeMap;

use gangplank::controller::{Action, DeleteReason, Observed};
use serde_json::json;

use crate::fixtures::*;

fn labels(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn pods_carry_upstreams_labels_owner_and_default_port() {
    let job = pytorch_job(1, 1).set(
        "/spec/pytorchReplicaSpecs/Master/template/metadata",
        json!({"labels": {"team": "vision"}, "annotations": {"note": "kept"}}),
    );
    let plan = job.plan(&Observed::default(), 0);
    let master = created_pod(&plan, "mnist-master-0");
    assert_eq!(master.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(
        master.metadata.labels,
        Some(labels(&[
            ("team", "vision"),
            ("training.kubeflow.org/job-name", "mnist"),
            ("training.kubeflow.org/job-role", "master"),
            (
                "training.kubeflow.org/operator-name",
                "pytorchjob-controller"
            ),
            ("training.kubeflow.org/replica-index", "0"),
            ("training.kubeflow.org/replica-type", "master"),
        ]))
    );
    assert_eq!(
        master.metadata.annotations,
        Some(labels(&[("note", "kept")]))
    );
    let owner = master.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!(
        (
            owner[0].kind.as_str(),
            owner[0].name.as_str(),
            owner[0].uid.as_str()
        ),
        ("PyTorchJob", "mnist", "uid-1")
    );
    assert_eq!(
        (owner[0].controller, owner[0].block_owner_deletion),
        (Some(true), Some(true))
    );
    let ports = master
        .spec
        .as_ref()
        .and_then(|s| s.containers[0].ports.clone())
        .unwrap_or_default();
    assert_eq!(ports.len(), 1);
    assert_eq!(
        (ports[0].name.as_deref(), ports[0].container_port),
        (Some("pytorchjob-port"), 23456)
    );
    let worker = created_pod(&plan, "mnist-worker-0");
    let role = worker
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("training.kubeflow.org/job-role").cloned());
    assert_eq!(role, None, "with a Master, workers are not the master");
}

#[test]
fn worker_zero_is_the_master_when_there_is_no_master() {
    for job in [pytorch_job(0, 2), jax_job(2), tf_job(0, 2, 0)] {
        let plan = job.plan(&Observed::default(), 0);
        let role = |name| {
            created_pod(&plan, name)
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("training.kubeflow.org/job-role").cloned())
        };
        assert_eq!(role("mnist-worker-0").as_deref(), Some("master"));
        assert_eq!(role("mnist-worker-1"), None);
    }
}

#[test]
fn services_are_headless_select_one_replica_and_expose_the_named_ports() {
    let plan = pytorch_job(1, 1).plan(&Observed::default(), 0);
    let svc = plan
        .actions
        .iter()
        .find_map(|a| match a {
            Action::CreateService(s) if s.metadata.name.as_deref() == Some("mnist-master-0") => {
                Some(s.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no master service"));
    let spec = svc.spec.clone().unwrap_or_default();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        spec.selector,
        Some(labels(&[
            ("training.kubeflow.org/job-name", "mnist"),
            (
                "training.kubeflow.org/operator-name",
                "pytorchjob-controller"
            ),
            ("training.kubeflow.org/replica-index", "0"),
            ("training.kubeflow.org/replica-type", "master"),
        ]))
    );
    let ports = spec.ports.unwrap_or_default();
    assert_eq!(ports.len(), 1);
    assert_eq!(
        (ports[0].name.as_deref(), ports[0].port),
        (Some("pytorchjob-port"), 23456)
    );
}

#[test]
fn creates_are_idempotent_by_name() {
    let job = pytorch_job(1, 2);
    let observed = created(&job).without_pod("mnist-worker-1");
    let plan = job.plan(&observed, 5);
    assert_eq!(created_pod_names(&plan), vec!["mnist-worker-1"]);
    assert_eq!(created_service_names(&plan), Vec::<String>::new());
    let all = job.plan(&created(&job), 5);
    assert!(all
        .actions
        .iter()
        .all(|a| !matches!(a, Action::CreatePod(_) | Action::CreateService(_))));
}

/// A Service (or pod) name another workload holds (found by the 409 of a create): the job
/// creates nothing more, its own objects stay, and it says which name and whose, then picks
/// up where it was once the name is free.
#[test]
fn a_name_another_workload_holds_stops_the_creates_and_is_said() {
    let job = pytorch_job(1, 2);
    let first = job.plan(&Observed::default(), 0);
    let observed = created(&job)
        .without_pod("mnist-worker-1")
        .without_pod("mnist-master-0");
    let held = Observed {
        foreign: vec![held("Service", "mnist-worker-1", Some("TFJob mnist"))],
        ..observed.clone()
    };
    let plan = job.with_status_of(&first).plan(&held, 5);
    assert_eq!(action_list(&plan.actions), Vec::<String>::new());
    assert_eq!(
        conditions(&plan),
        conds(&[("Created", "True", "PyTorchJobResourceExists")])
    );
    assert_eq!(
        message(&plan, "Created"),
        "PyTorchJob mnist is waiting for names other objects hold: Service mnist-worker-1 \
         (controlled by TFJob mnist); delete those objects or give the job another name"
    );
    assert_eq!(plan.events.len(), 1);
    let freed = job.with_status_of(&plan).plan(&observed, 40);
    assert_eq!(
        created_pod_names(&freed),
        vec!["mnist-master-0", "mnist-worker-1"]
    );
    assert_eq!(
        conditions(&freed),
        conds(&[("Created", "True", "PyTorchJobCreated")])
    );
}

#[test]
fn scaling_down_deletes_the_surplus_pod_and_service() {
    let job = pytorch_job(1, 3);
    let observed = running(&job);
    let smaller = job.set("/spec/pytorchReplicaSpecs/Worker/replicas", json!(2));
    let plan = smaller.plan(&observed, 5);
    assert!(plan.actions.contains(&Action::DeletePod {
        name: "mnist-worker-2".into(),
        reason: DeleteReason::ScaleDown
    }));
    assert_eq!(deleted_services(&plan), vec!["mnist-worker-2"]);
}

#[test]
fn scaling_up_creates_only_the_new_replicas() {
    let job = pytorch_job(1, 1);
    let bigger = job
        .clone()
        .set("/spec/pytorchReplicaSpecs/Worker/replicas", json!(3));
    let plan = bigger.plan(&running(&job), 5);
    assert_eq!(
        created_pod_names(&plan),
        vec!["mnist-worker-1", "mnist-worker-2"]
    );
    assert_eq!(
        created_service_names(&plan),
        vec!["mnist-worker-1", "mnist-worker-2"]
    );
}

#[test]
fn gpu_quantities_written_as_numbers_are_read() {
    let plan = pytorch_job(1, 1).with_gpus(8).plan(&Observed::default(), 0);
    let pod = created_pod(&plan, "mnist-worker-0");
    let limits = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers[0].resources.clone())
        .and_then(|r| r.limits);
    assert_eq!(
        limits
            .and_then(|l| l.get("nvidia.com/gpu").map(|q| q.0.clone()))
            .as_deref(),
        Some("8")
    );
}
