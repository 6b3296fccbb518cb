//! JobView over every kind: replica types, roles, pointers back into the object, GPU counts,
//! defaults, and the problems it records instead of failing.

use gangplank::job::{lookup, JobView};
use serde_json::{json, Value};

fn view(api_version: &str, kind: &str, spec: Value) -> JobView {
    let kind_spec = lookup(api_version, kind).expect("known kind");
    JobView::build(
        kind_spec,
        &json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "job", "namespace": "ns"}, "spec": spec}),
    )
}

fn replica(replicas: Value, containers: Value) -> Value {
    json!({"replicas": replicas, "template": {"spec": {"containers": containers}}})
}

fn gpu_container(name: &str, gpus: Value) -> Value {
    json!({"name": name, "image": "img", "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}})
}

#[test]
fn pytorch_replicas_carry_roles_pointers_and_gpu_counts() {
    let v = view(
        "kubeflow.org/v1",
        "PyTorchJob",
        json!({"pytorchReplicaSpecs": {
            "Master": replica(json!(1), json!([gpu_container("pytorch", json!(8))])),
            "Worker": replica(json!(8), json!([gpu_container("sidecar", json!(0)), gpu_container("pytorch", json!("8"))])),
        }}),
    );
    assert_eq!(v.total_pods, 9);
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    let worker = v
        .replicas
        .iter()
        .find(|r| r.replica_type == "Worker")
        .expect("worker");
    assert_eq!(worker.role, Some("worker"));
    assert!(!worker.coordinator);
    assert_eq!(worker.path, "/spec/pytorchReplicaSpecs/Worker");
    assert_eq!(
        worker.pod_spec_path,
        "/spec/pytorchReplicaSpecs/Worker/template/spec"
    );
    assert_eq!(worker.gpus_per_pod, 8);
    assert_eq!(
        worker.default_container_index,
        Some(1),
        "the container named pytorch, not the first"
    );
    assert_eq!(worker.restart_policy, "OnFailure");
    assert!(!worker.restart_policy_set);
    assert_eq!(worker.last_pod_name, "job-worker-7");
    let master = v
        .replicas
        .iter()
        .find(|r| r.replica_type == "Master")
        .expect("master");
    assert!(master.coordinator);
    assert_eq!(
        master.containers.first().map(|c| c.path.as_str()),
        Some("/spec/pytorchReplicaSpecs/Master/template/spec/containers/0")
    );
}

#[test]
fn replica_keys_match_case_insensitively_and_keep_their_spelling_in_paths() {
    let v = view(
        "kubeflow.org/v1",
        "TFJob",
        json!({"tfReplicaSpecs": {"ps": replica(json!(2), json!([])), "WORKER": replica(json!(4), json!([]))}}),
    );
    let types: Vec<(&str, &str, bool)> = v
        .replicas
        .iter()
        .map(|r| (r.key.as_str(), r.replica_type.as_str(), r.known))
        .collect();
    assert_eq!(types, vec![("ps", "PS", true), ("WORKER", "Worker", true)]);
    assert_eq!(
        v.replicas.first().map(|r| r.path.as_str()),
        Some("/spec/tfReplicaSpecs/ps")
    );
}

#[test]
fn unknown_replica_types_are_kept_and_marked() {
    let v = view(
        "kubeflow.org/v1",
        "JAXJob",
        json!({"jaxReplicaSpecs": {"Master": replica(json!(1), json!([]))}}),
    );
    let r = v.replicas.first().expect("replica");
    assert!(!r.known);
    assert_eq!(r.role, None);
    assert_eq!(v.allowed_types, vec!["Worker"]);
}

#[test]
fn every_kind_has_its_default_container_and_port() {
    let cases = [
        (
            "kubeflow.org/v1",
            "PyTorchJob",
            Some("pytorch"),
            Some(23456),
        ),
        ("kubeflow.org/v1", "TFJob", Some("tensorflow"), Some(2222)),
        ("kubeflow.org/v1", "MPIJob", Some("mpi"), None),
        ("kubeflow.org/v2beta1", "MPIJob", None, None),
        ("kubeflow.org/v1", "XGBoostJob", Some("xgboost"), Some(9999)),
        ("kubeflow.org/v1", "PaddleJob", Some("paddle"), Some(36543)),
        ("kubeflow.org/v1", "JAXJob", Some("jax"), Some(6666)),
    ];
    for (api, kind, container, port) in cases {
        let v = view(api, kind, json!({}));
        assert_eq!(v.default_container, container, "{kind}");
        assert_eq!(v.port.map(|p| p.number), port, "{kind}");
    }
}

#[test]
fn mpi_v1_main_container_names_the_configured_container() {
    let v = view(
        "kubeflow.org/v1",
        "MPIJob",
        json!({"mainContainer": "trainer", "mpiReplicaSpecs": {"Worker": replica(json!(2), json!([{"name": "x", "image": "i"}, {"name": "trainer", "image": "i"}]))}}),
    );
    assert_eq!(
        v.replicas.first().and_then(|r| r.default_container_index),
        Some(1)
    );
}

#[test]
fn mig_slices_are_counted_apart_from_whole_gpus() {
    let c = json!({"name": "pytorch", "image": "i", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1, "amd.com/gpu": 2}}});
    let v = view(
        "kubeflow.org/v1",
        "PyTorchJob",
        json!({"pytorchReplicaSpecs": {"Worker": replica(json!(1), json!([c]))}}),
    );
    let r = v.replicas.first().expect("replica");
    assert_eq!((r.gpus_per_pod, r.mig_slices_per_pod), (2, 1));
}

#[test]
fn malformed_structure_becomes_problems_not_failures() {
    let v = view(
        "kubeflow.org/v1",
        "PyTorchJob",
        json!({"pytorchReplicaSpecs": {
            "Master": null,
            "Worker": {"replicas": "2", "template": {"spec": {"containers": "pytorch"}}},
            "worker": replica(json!(1), json!([])),
        }}),
    );
    let problems: Vec<(&str, &str)> = v
        .problems
        .iter()
        .map(|p| (p.path.as_str(), p.msg.as_str()))
        .collect();
    let has = |path: &str, text: &str| problems.iter().any(|(p, m)| *p == path && m.contains(text));
    assert!(
        has("/spec/pytorchReplicaSpecs/Master", "is null"),
        "{problems:?}"
    );
    assert!(
        has(
            "/spec/pytorchReplicaSpecs/Worker/replicas",
            "must be an integer, got string"
        ),
        "{problems:?}"
    );
    assert!(
        has(
            "/spec/pytorchReplicaSpecs/Worker/template/spec/containers",
            "must be a list"
        ),
        "{problems:?}"
    );
    assert!(
        has(
            "/spec/pytorchReplicaSpecs/worker",
            "duplicate replica type Worker"
        ),
        "{problems:?}"
    );
    assert_eq!(
        v.replicas.len(),
        1,
        "the null spec and the duplicate are left out"
    );
}

#[test]
fn a_missing_spec_or_replica_map_is_a_problem() {
    let kind = lookup("kubeflow.org/v1", "PaddleJob").expect("kind");
    let no_spec = JobView::build(
        kind,
        &json!({"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": "x"}}),
    );
    assert_eq!(
        no_spec.problems.first().map(|p| p.path.as_str()),
        Some("/spec")
    );
    let v = view("kubeflow.org/v1", "PaddleJob", json!({"runPolicy": {}}));
    assert_eq!(
        v.problems.first().map(|p| p.path.as_str()),
        Some("/spec/paddleReplicaSpecs")
    );
}

#[test]
fn gpu_quantities_that_are_not_whole_numbers_are_problems() {
    let c = json!({"name": "pytorch", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1.5"}}});
    let v = view(
        "kubeflow.org/v1",
        "PyTorchJob",
        json!({"pytorchReplicaSpecs": {"Worker": replica(json!(1), json!([c]))}}),
    );
    let p = v.problems.first().expect("a problem");
    assert_eq!(p.path, "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/resources/limits/nvidia.com~1gpu");
}

#[test]
fn generate_name_jobs_get_a_placeholder_name_for_length_checks() {
    let kind = lookup("kubeflow.org/v1", "JAXJob").expect("kind");
    let v = JobView::build(
        kind,
        &json!({"metadata": {"generateName": "sweep-"}, "spec": {"jaxReplicaSpecs": {"Worker": replica(json!(4), json!([]))}}}),
    );
    assert!(v.name_generated);
    assert_eq!(
        v.replicas.first().map(|r| r.last_pod_name.as_str()),
        Some("sweep-xxxxx-worker-3")
    );
}

#[test]
fn mpi_launchers_are_unindexed_and_unset_workers_default_to_zero() {
    for api in ["kubeflow.org/v1", "kubeflow.org/v2beta1"] {
        let v = view(
            api,
            "MPIJob",
            json!({"mpiReplicaSpecs": {"Launcher": replica(json!(1), json!([])), "Worker": {"template": {}}}}),
        );
        let launcher = v
            .replicas
            .iter()
            .find(|r| r.replica_type == "Launcher")
            .expect("launcher");
        assert_eq!(launcher.last_pod_name, "job-launcher", "{api}");
        let worker = v
            .replicas
            .iter()
            .find(|r| r.replica_type == "Worker")
            .expect("worker");
        assert_eq!((worker.replicas, worker.replicas_set), (0, false), "{api}");
        assert_eq!(v.total_pods, 1, "{api}");
    }
}

#[test]
fn an_empty_restart_policy_means_the_default_and_a_non_string_is_a_problem() {
    let spec = |policy: Value| json!({"pytorchReplicaSpecs": {"Worker": {"restartPolicy": policy, "template": {}}}});
    let v = view("kubeflow.org/v1", "PyTorchJob", spec(json!("")));
    let r = v.replicas.first().expect("replica");
    assert_eq!(
        (r.restart_policy.as_str(), r.restart_policy_set),
        ("OnFailure", false)
    );
    let v = view("kubeflow.org/v1", "PyTorchJob", spec(json!(3)));
    assert_eq!(
        v.problems.first().map(|p| p.path.as_str()),
        Some("/spec/pytorchReplicaSpecs/Worker/restartPolicy")
    );
}

#[test]
fn whole_quantities_written_with_a_fraction_count() {
    let v = view(
        "kubeflow.org/v1",
        "PyTorchJob",
        json!({"pytorchReplicaSpecs": {"Worker": replica(json!(1), json!([gpu_container("pytorch", json!("2.0"))]))}}),
    );
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert_eq!(v.replicas.first().map(|r| r.gpus_per_pod), Some(2));
}

#[test]
fn long_generate_name_prefixes_are_cut_like_the_apiserver_does() {
    let kind = lookup("kubeflow.org/v1", "JAXJob").expect("kind");
    let prefix = "p".repeat(70);
    let v = JobView::build(
        kind,
        &json!({"metadata": {"generateName": prefix}, "spec": {}}),
    );
    assert_eq!(v.name.len(), 63);
}

#[test]
fn non_string_container_names_and_images_are_problems() {
    let v = view(
        "kubeflow.org/v1",
        "JAXJob",
        json!({"jaxReplicaSpecs": {"Worker": replica(json!(1), json!([{"name": 1, "image": ["x"]}]))}}),
    );
    let paths: Vec<&str> = v.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "/spec/jaxReplicaSpecs/Worker/template/spec/containers/0/name",
            "/spec/jaxReplicaSpecs/Worker/template/spec/containers/0/image"
        ]
    );
}

/// Containers named c0, c1, … with `env` entries each.
fn containers(n: usize, env: usize) -> Value {
    let env: Vec<Value> = (0..env)
        .map(|i| json!({"name": format!("E{i}"), "value": "1"}))
        .collect();
    Value::Array(
        (0..n)
            .map(|i| json!({"name": format!("c{i}"), "image": "img", "env": env}))
            .collect(),
    )
}

#[test]
fn replica_types_past_the_limit_are_a_problem_and_are_not_read() {
    use gangplank::job::view::MAX_REPLICA_TYPES;
    let specs: serde_json::Map<String, Value> = (0..MAX_REPLICA_TYPES + 4)
        .map(|i| (format!("Type{i:03}"), replica(json!(1), containers(1, 0))))
        .collect();
    let v = view("kubeflow.org/v1", "TFJob", json!({"tfReplicaSpecs": specs}));
    assert_eq!(v.replicas.len(), MAX_REPLICA_TYPES);
    let p = v
        .problems
        .iter()
        .find(|p| p.path == "/spec/tfReplicaSpecs")
        .expect("a problem at the replica map");
    assert!(
        p.msg
            .contains(&format!("has {} replica types", MAX_REPLICA_TYPES + 4))
            && p.msg.contains(&format!("at most {MAX_REPLICA_TYPES}")),
        "{}",
        p.msg
    );
}

#[test]
fn containers_and_env_entries_past_their_limits_are_problems_and_are_not_read() {
    use gangplank::job::view::{MAX_CONTAINERS, MAX_ENV};
    let v = view(
        "kubeflow.org/v1",
        "PyTorchJob",
        json!({"pytorchReplicaSpecs": {
            "Master": replica(json!(1), containers(MAX_CONTAINERS + 1, 0)),
            "Worker": replica(json!(1), containers(1, MAX_ENV + 1)),
        }}),
    );
    let master = &v.replicas[0];
    assert_eq!(master.containers.len(), MAX_CONTAINERS);
    let worker = &v.replicas[1];
    assert_eq!(worker.containers[0].env_names.len(), MAX_ENV);
    let messages: Vec<(&str, &str)> = v
        .problems
        .iter()
        .map(|p| (p.path.as_str(), p.msg.as_str()))
        .collect();
    assert!(
        messages.iter().any(|(path, msg)| *path
            == "/spec/pytorchReplicaSpecs/Master/template/spec/containers"
            && msg.contains(&format!("has {} containers", MAX_CONTAINERS + 1))),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|(path, msg)| *path
            == "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/env"
            && msg.contains(&format!("has {} env entries", MAX_ENV + 1))),
        "{messages:?}"
    );
}

#[test]
fn a_job_at_every_limit_has_no_problem() {
    use gangplank::job::view::{MAX_CONTAINERS, MAX_ENV};
    let v = view(
        "kubeflow.org/v1",
        "PyTorchJob",
        json!({"pytorchReplicaSpecs": {
            "Master": replica(json!(1), containers(MAX_CONTAINERS, 0)),
            "Worker": replica(json!(1), containers(1, MAX_ENV)),
        }}),
    );
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}
