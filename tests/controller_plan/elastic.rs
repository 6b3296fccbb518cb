//! Elastic PyTorch: torchrun rendezvous env (upstream `pytorch/elastic.go`,
//! `elastic_test.go`), min/max defaulting (`TestSetElasticPolicy`), the HPA
//! (`pytorch/hpa.go`; "Should get the corresponding resources successfully" and "Should
//! delete HPA once the PyTorchJob is suspended" of the elastic controller tests), scaling
//! through Worker.replicas, and the PodGroup's minMember.

use gangplank::controller::{Action, Config, GangScheduler, Observed};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use serde_json::{json, Value};

use crate::fixtures::*;

/// Workers only, as upstream's elastic test job (`pytorchjob_controller_test.go`).
fn elastic(workers: i32, policy: Value) -> Job {
    pytorch_job(0, workers).set("/spec/elasticPolicy", policy)
}

fn cpu_metric() -> Value {
    json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
}

fn upstream_policy() -> Value {
    json!({"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 10, "maxRestarts": 3, "metrics": cpu_metric()})
}

fn hpas(actions: &[Action]) -> Vec<Value> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateHpa(h) => Some(json!({"create": h})),
            Action::UpdateHpa { name, spec } => Some(json!({"update": name, "spec": spec})),
            Action::DeleteHpa { name } => Some(json!({"delete": name})),
            _ => None,
        })
        .collect()
}

fn with_hpa(observed: Observed, job: &Job) -> Observed {
    let first = job.plan(&Observed::default(), 0);
    let hpa = first.actions.iter().find_map(|a| match a {
        Action::CreateHpa(h) => Some(HorizontalPodAutoscaler::clone(h)),
        _ => None,
    });
    Observed {
        hpa: Some(hpa.unwrap_or_else(|| panic!("no HPA created"))),
        ..observed
    }
}

#[test]
fn elastic_workers_get_rendezvous_env_in_upstream_order() {
    let plan = elastic(1, upstream_policy()).plan(&Observed::default(), 0);
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-0"), "pytorch"),
        strs(&[
            "PYTHONUNBUFFERED=1",
            "PET_NPROC_PER_NODE=auto",
            "PET_RDZV_ENDPOINT=mnist-worker-0:23456",
            "PET_RDZV_BACKEND=c10d",
            "PET_NNODES=1:10",
            "PET_MAX_RESTARTS=3",
        ])
    );
}

#[test]
fn every_optional_elastic_field_becomes_its_variable() {
    let policy = json!({
        "minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "etcd-v2", "rdzvHost": "etcd.infra",
        "rdzvPort": 2379, "rdzvId": "run-7", "standalone": true, "nProcPerNode": 8,
        "maxRestarts": 5,
        "rdzvConf": [{"key": "timeout", "value": "900"}, {"key": "read_timeout", "value": "60"}],
    });
    let plan = elastic(2, policy).plan(&Observed::default(), 0);
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-1"), "pytorch"),
        strs(&[
            "PYTHONUNBUFFERED=1",
            "PET_RDZV_ENDPOINT=etcd.infra:2379",
            "PET_RDZV_BACKEND=etcd-v2",
            "PET_NNODES=2:4",
            "PET_MAX_RESTARTS=5",
            "PET_NPROC_PER_NODE=8",
            "PET_RDZV_ID=run-7",
            "PET_RDZV_CONF=timeout=900,read_timeout=60",
            "PET_STANDALONE=",
        ])
    );
}

#[test]
fn rendezvous_port_defaults_to_the_workers_named_port() {
    let job = elastic(1, json!({})).set(
        "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/ports",
        json!([{"name": "pytorchjob-port", "containerPort": 29400}]),
    );
    let plan = job.plan(&Observed::default(), 0);
    let vars = env(created_pod(&plan, "mnist-worker-0"), "pytorch");
    assert!(
        vars.contains(&"PET_RDZV_ENDPOINT=mnist-worker-0:29400".to_string()),
        "{vars:?}"
    );
}

/// Upstream `TestSetElasticPolicy`: unset bounds take the Worker count, one copies the other.
#[test]
fn nnodes_bounds_default_as_upstream() {
    let cases = [
        (json!({}), "PET_NNODES=3:3"),
        (json!({"minReplicas": 2}), "PET_NNODES=2:2"),
        (json!({"maxReplicas": 5}), "PET_NNODES=5:5"),
        (
            json!({"minReplicas": 1, "maxReplicas": 5}),
            "PET_NNODES=1:5",
        ),
        (
            json!({"minReplicas": 3, "maxReplicas": 3}),
            "PET_NNODES=3:3",
        ),
    ];
    for (policy, want) in cases {
        let plan = elastic(3, policy.clone()).plan(&Observed::default(), 0);
        let vars = env(created_pod(&plan, "mnist-worker-0"), "pytorch");
        let nnodes: Vec<&String> = vars
            .iter()
            .filter(|v| v.starts_with("PET_NNODES="))
            .collect();
        assert_eq!(nnodes, vec![want], "{policy}");
    }
}

#[test]
fn elastic_job_with_a_master_keeps_rank_and_world_size() {
    let plan = pytorch_job(1, 2)
        .set(
            "/spec/elasticPolicy",
            json!({"minReplicas": 1, "maxReplicas": 3}),
        )
        .plan(&Observed::default(), 0);
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-1"), "pytorch"),
        strs(&[
            "PYTHONUNBUFFERED=1",
            "MASTER_PORT=23456",
            "PET_MASTER_PORT=23456",
            "MASTER_ADDR=mnist-master-0",
            "PET_MASTER_ADDR=mnist-master-0",
            "WORLD_SIZE=3",
            "RANK=2",
            "PET_NODE_RANK=2",
            "PET_NPROC_PER_NODE=auto",
            "PET_RDZV_ENDPOINT=mnist-worker-0:23456",
            "PET_RDZV_BACKEND=c10d",
            "PET_NNODES=1:3",
        ])
    );
}

#[test]
fn metrics_create_an_hpa_on_the_jobs_scale_subresource() {
    let plan = elastic(1, upstream_policy()).plan(&Observed::default(), 0);
    assert_eq!(
        hpas(&plan.actions),
        vec![json!({"create": {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {
                "name": "mnist",
                "namespace": "team-a",
                "ownerReferences": [{
                    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist",
                    "uid": "uid-1", "controller": true, "blockOwnerDeletion": true,
                }],
            },
            "spec": {
                "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist"},
                "minReplicas": 1,
                "maxReplicas": 10,
                "metrics": cpu_metric(),
            },
        }})]
    );
    let first_hpa = plan
        .actions
        .iter()
        .position(|a| matches!(a, Action::CreateHpa(_)));
    let first_pod = plan
        .actions
        .iter()
        .position(|a| matches!(a, Action::CreatePod(_)));
    assert!(first_hpa < first_pod, "HPA before pods: {:?}", plan.actions);
}

#[test]
fn numeric_metric_targets_are_read_as_quantities() {
    let metrics = json!([{"type": "Pods", "pods": {
        "metric": {"name": "samples_per_second"},
        "target": {"type": "AverageValue", "averageValue": 100},
    }}]);
    let plan =
        elastic(2, json!({"maxReplicas": 4, "metrics": metrics})).plan(&Observed::default(), 0);
    assert_eq!(
        hpas(&plan.actions)[0]["create"]["spec"]["metrics"][0]["pods"]["target"],
        json!({"type": "AverageValue", "averageValue": "100"})
    );
}

#[test]
fn no_metrics_no_hpa() {
    let plan =
        elastic(2, json!({"minReplicas": 1, "maxReplicas": 4})).plan(&Observed::default(), 0);
    assert_eq!(hpas(&plan.actions), Vec::<Value>::new());
    let plain = pytorch_job(1, 2).plan(&Observed::default(), 0);
    assert_eq!(hpas(&plain.actions), Vec::<Value>::new());
}

#[test]
fn an_unchanged_hpa_is_left_alone_and_a_changed_one_is_updated() {
    let job = elastic(1, upstream_policy());
    let observed = with_hpa(running(&job), &job);
    assert_eq!(hpas(&job.plan(&observed, 5).actions), Vec::<Value>::new());

    let wider = job
        .clone()
        .set("/spec/elasticPolicy/maxReplicas", json!(16));
    assert_eq!(
        hpas(&wider.plan(&observed, 5).actions),
        vec![json!({"update": "mnist", "spec": {
            "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist"},
            "minReplicas": 1,
            "maxReplicas": 16,
            "metrics": cpu_metric(),
        }})]
    );
}

/// Upstream "Should delete HPA once the PyTorchJob is suspended".
#[test]
fn suspending_deletes_the_hpa_and_a_suspended_job_gets_none() {
    let job = elastic(1, upstream_policy());
    let observed = with_hpa(running(&job), &job);
    let suspended = job.clone().suspended(true);
    let plan = suspended.plan(&observed, 5);
    assert_eq!(hpas(&plan.actions), vec![json!({"delete": "mnist"})]);
    assert_eq!(
        plan.actions.first(),
        Some(&Action::DeleteHpa {
            name: "mnist".into()
        }),
        "the HPA goes first, so it cannot resize the job while its pods are deleted"
    );
    let fresh = suspended.plan(&Observed::default(), 0);
    assert_eq!(hpas(&fresh.actions), Vec::<Value>::new());
}

#[test]
fn removing_metrics_deletes_the_hpa() {
    let job = elastic(1, upstream_policy());
    let observed = with_hpa(running(&job), &job);
    let without = job.set("/spec/elasticPolicy/metrics", Value::Null);
    assert_eq!(
        hpas(&without.plan(&observed, 5).actions),
        vec![json!({"delete": "mnist"})]
    );
}

#[test]
fn a_finished_job_leaves_its_hpa_to_the_garbage_collector() {
    let job = elastic(2, upstream_policy());
    let observed = with_hpa(running(&job), &job).phase("mnist-worker-0", "Succeeded");
    let plan = job.plan(&observed, 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "PyTorchJobCreated"),
            ("Succeeded", "True", "PyTorchJobSucceeded"),
        ])
    );
    assert_eq!(hpas(&plan.actions), Vec::<Value>::new());
}

/// The HPA resizes Worker.replicas through the scale subresource: the next plan creates or
/// deletes the difference, new pods carry the new WORLD_SIZE, and the bounds stay min:max.
#[test]
fn scaling_workers_adds_and_removes_pods_with_the_new_world_size() {
    let job = pytorch_job(1, 2).set(
        "/spec/elasticPolicy",
        json!({"minReplicas": 1, "maxReplicas": 4}),
    );
    let observed = running(&job);
    let up = job
        .clone()
        .set("/spec/pytorchReplicaSpecs/Worker/replicas", json!(3));
    let plan = up.plan(&observed, 5);
    assert_eq!(created_pod_names(&plan), vec!["mnist-worker-2"]);
    assert_eq!(created_service_names(&plan), vec!["mnist-worker-2"]);
    let vars = env(created_pod(&plan, "mnist-worker-2"), "pytorch");
    for want in ["WORLD_SIZE=4", "RANK=3", "PET_NNODES=1:4"] {
        assert!(vars.contains(&want.to_string()), "{want} in {vars:?}");
    }
    assert_eq!(
        plan.status.as_ref().map(|s| s.replica_statuses["Worker"].selector.clone()),
        Some(Some(
            "training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=worker"
                .to_string()
        ))
    );

    let down = job.set("/spec/pytorchReplicaSpecs/Worker/replicas", json!(1));
    let plan = down.plan(&observed, 5);
    assert_eq!(deleted_pods(&plan), vec!["mnist-worker-1"]);
    assert_eq!(deleted_services(&plan), vec!["mnist-worker-1"]);
    assert_eq!(created_pod_names(&plan), Vec::<String>::new());
}

#[test]
fn pod_group_min_member_counts_min_replicas_workers() {
    let volcano = Config {
        gang: Some(GangScheduler::Volcano),
        ..Config::default()
    };
    let job = pytorch_job(1, 4).set(
        "/spec/elasticPolicy",
        json!({"minReplicas": 2, "maxReplicas": 8}),
    );
    let min_member = |job: &Job| {
        let plan = job.plan_with(&Observed::default(), 0, &volcano);
        plan.actions.iter().find_map(|a| match a {
            Action::CreatePodGroup(pg) => Some(pg["spec"]["minMember"].clone()),
            _ => None,
        })
    };
    assert_eq!(min_member(&job), Some(json!(3)), "Master + 2 Workers");
    let pinned = job.run_policy("schedulingPolicy", json!({"minAvailable": 5}));
    assert_eq!(min_member(&pinned), Some(json!(5)), "minAvailable wins");
    assert_eq!(
        min_member(&pytorch_job(1, 4)),
        Some(json!(5)),
        "not elastic: all"
    );
}

#[test]
fn elastic_policies_upstreams_webhook_refuses_fail_the_job() {
    let cases = [
        (
            pytorch_job(1, 0).set("/spec/elasticPolicy", json!({})),
            "PyTorchJob mnist is invalid: /spec/pytorchReplicaSpecs/Worker: must be configured if elastic policy is used",
        ),
        (
            elastic(2, json!({"nProcPerNode": 4})).set("/spec/nprocPerNode", json!("4")),
            "PyTorchJob mnist is invalid: /spec/elasticPolicy/nProcPerNode: must not be used with spec.nprocPerNode",
        ),
        (
            elastic(2, json!({"minReplicas": 4, "maxReplicas": 2})),
            "PyTorchJob mnist is invalid: /spec/elasticPolicy: minReplicas 4 and maxReplicas 2 need 1 <= minReplicas <= maxReplicas",
        ),
        (
            elastic(2, json!({"minReplicas": "two"})),
            "PyTorchJob mnist is invalid: /spec/elasticPolicy: cannot be read: invalid type: string \"two\", expected i32",
        ),
    ];
    for (job, want) in cases {
        let plan = job.plan(&Observed::default(), 0);
        assert_eq!(
            conditions(&plan),
            conds(&[
                ("Created", "True", "PyTorchJobCreated"),
                ("Failed", "True", "PyTorchJobFailedValidation"),
            ])
        );
        assert_eq!(message(&plan, "Failed"), want);
        assert_eq!(created_pod_names(&plan), Vec::<String>::new());
        assert_eq!(hpas(&plan.actions), Vec::<Value>::new());
    }
}
