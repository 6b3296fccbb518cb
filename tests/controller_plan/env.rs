//! Injected environment per framework: exact names, values and order (upstream
//! `pytorch/envvar.go`, `tensorflow/tensorflow.go`, `xgboost/xgboost.go`,
//! `paddlepaddle/envvar.go`, `jax/envvar.go`).

use gangplank::controller::{Config, Observed};
use serde_json::json;

use crate::fixtures::*;

#[test]
fn pytorch_master_and_workers_get_rank_world_size_and_torchrun_vars() {
    let plan = pytorch_job(1, 2).plan(&Observed::default(), 0);
    let common = |rank: &str| {
        strs(&[
            "PYTHONUNBUFFERED=1",
            "MASTER_PORT=23456",
            "PET_MASTER_PORT=23456",
            "MASTER_ADDR=mnist-master-0",
            "PET_MASTER_ADDR=mnist-master-0",
            "WORLD_SIZE=3",
            &format!("RANK={rank}"),
            &format!("PET_NODE_RANK={rank}"),
            "PET_NPROC_PER_NODE=auto",
            "PET_NNODES=3",
        ])
    };
    assert_eq!(
        env(created_pod(&plan, "mnist-master-0"), "pytorch"),
        common("0")
    );
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-0"), "pytorch"),
        common("1")
    );
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-1"), "pytorch"),
        common("2")
    );
}

#[test]
fn pytorch_world_size_multiplies_nproc_per_node() {
    let job = pytorch_job(1, 1).set("/spec/nprocPerNode", json!("8"));
    let plan = job.plan(&Observed::default(), 0);
    let vars = env(created_pod(&plan, "mnist-worker-0"), "pytorch");
    assert!(vars.contains(&"WORLD_SIZE=16".to_string()), "{vars:?}");
    assert!(
        vars.contains(&"PET_NPROC_PER_NODE=8".to_string()),
        "{vars:?}"
    );
}

#[test]
fn pytorch_workers_only_get_no_master_vars() {
    let plan = pytorch_job(0, 2).plan(&Observed::default(), 0);
    let want = strs(&[
        "PYTHONUNBUFFERED=1",
        "PET_NPROC_PER_NODE=auto",
        "PET_NNODES=2",
    ]);
    assert_eq!(env(created_pod(&plan, "mnist-worker-1"), "pytorch"), want);
    let init = created_pod(&plan, "mnist-worker-0")
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.clone());
    assert_eq!(
        init.unwrap_or_default().len(),
        0,
        "no master: no init container"
    );
}

/// Upstream's init container, but its image pinned by digest (alpine:3.10 is past its end of
/// life) and run as non-root with Pod Security's restricted fields, whatever the pod runs as.
#[test]
fn pytorch_workers_wait_for_the_master_in_an_init_container() {
    let plan = pytorch_job(1, 1).plan(&Observed::default(), 0);
    let spec = created_pod(&plan, "mnist-worker-0")
        .spec
        .clone()
        .unwrap_or_default();
    let init = spec.init_containers.unwrap_or_default();
    assert_eq!(init.len(), 1);
    let c = &init[0];
    assert_eq!(c.name, "init-pytorch");
    assert_eq!(
        c.image.as_deref(),
        Some(
            "docker.io/library/alpine:3.24.2@sha256:\
             294b683cb724975bec92580e1e685676bd4b50bda910ddb8c51d4cabeaec77e6"
        )
    );
    assert_eq!(serde_json::json!(c.security_context), restricted());
    let command = c.command.clone().unwrap_or_default();
    assert_eq!(command[..2], strs(&["sh", "-c"])[..]);
    let script = command.get(2).cloned().unwrap_or_default();
    // The complete name with its trailing dot: busybox's nslookup fails a short name when
    // any search domain answers NXDOMAIN (issue 43), so no search list may take part.
    assert!(
        script.starts_with(
            "name='mnist-master-0.team-a.svc.cluster.local.'; end=$(( $(date +%s) + 200 ))\n"
        ),
        "{script}"
    );
    assert!(script.contains("until nslookup \"$name\""), "{script}");
    assert!(script.contains("did not resolve within 200s"), "{script}");
    assert_eq!(
        c.termination_message_policy.as_deref(),
        Some("FallbackToLogsOnError")
    );
    let master = created_pod(&plan, "mnist-master-0")
        .spec
        .clone()
        .unwrap_or_default();
    assert_eq!(master.init_containers.unwrap_or_default().len(), 0);
}

/// A cluster whose kubelets use another clusterDomain: the worker waits for the master's
/// name under that domain, its timeout from `--pytorch-init-timeout`.
#[test]
fn pytorch_workers_wait_for_the_master_under_the_clusters_own_domain() {
    let config = Config {
        cluster_domain: gangplank::controller::cluster_domain::ClusterDomain::parse("k8s.corp.")
            .unwrap_or_default(),
        pytorch_init_timeout: std::time::Duration::from_secs(45),
        ..Config::default()
    };
    let plan = pytorch_job(1, 2).plan_with(&Observed::default(), 0, &config);
    for worker in ["mnist-worker-0", "mnist-worker-1"] {
        let spec = created_pod(&plan, worker).spec.clone().unwrap_or_default();
        let init = spec.init_containers.unwrap_or_default();
        let script = init
            .first()
            .and_then(|c| c.command.clone())
            .and_then(|c| c.get(2).cloned())
            .unwrap_or_default();
        assert!(
            script.starts_with(
                "name='mnist-master-0.team-a.svc.k8s.corp.'; end=$(( $(date +%s) + 45 ))"
            ),
            "{worker}: {script}"
        );
    }
}

#[test]
fn tf_config_lists_every_replica_type_and_the_task() {
    let job = tf_job(1, 2, 1).with_evaluator(1);
    let plan = job.plan(&Observed::default(), 0);
    let want = concat!(
        r#"TF_CONFIG={"cluster":{"chief":["mnist-chief-0.team-a.svc:2222"],"#,
        r#""evaluator":["mnist-evaluator-0.team-a.svc:2222"],"ps":["mnist-ps-0.team-a.svc:2222"],"#,
        r#""worker":["mnist-worker-0.team-a.svc:2222","mnist-worker-1.team-a.svc:2222"]},"#,
        r#""task":{"type":"worker","index":1},"environment":"cloud"}"#
    );
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-1"), "tensorflow"),
        strs(&[want])
    );
}

#[test]
fn tf_config_uses_the_custom_cluster_domain() {
    let config = Config {
        address_domain: Some("cluster.local".into()),
        ..Config::default()
    };
    let plan = tf_job(0, 2, 0).plan_with(&Observed::default(), 0, &config);
    let want = concat!(
        r#"TF_CONFIG={"cluster":{"worker":["mnist-worker-0.team-a.svc.cluster.local:2222","#,
        r#""mnist-worker-1.team-a.svc.cluster.local:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}"#
    );
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-0"), "tensorflow"),
        strs(&[want])
    );
}

#[test]
fn tf_config_is_sparse_with_dynamic_workers() {
    let job = tf_job(0, 2, 1).set("/spec/enableDynamicWorker", json!(true));
    let plan = job.plan(&Observed::default(), 0);
    let want = concat!(
        r#"TF_CONFIG={"cluster":{"worker":{"1":"mnist-worker-1.team-a.svc:2222"},"#,
        r#""ps":["mnist-ps-0.team-a.svc:2222"]},"task":{"type":"worker","index":1}}"#
    );
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-1"), "tensorflow"),
        strs(&[want])
    );
}

#[test]
fn a_single_replica_tf_job_gets_no_tf_config() {
    let plan = tf_job(0, 1, 0).plan(&Observed::default(), 0);
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-0"), "tensorflow"),
        Vec::<String>::new()
    );
}

#[test]
fn tf_config_goes_to_the_tensorflow_container_only() {
    let job = tf_job(0, 2, 0).set(
        "/spec/tfReplicaSpecs/Worker/template/spec/containers/1",
        json!({"name": "sidecar", "image": "busybox"}),
    );
    let plan = job.plan(&Observed::default(), 0);
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-0"), "sidecar"),
        Vec::<String>::new()
    );
}

#[test]
fn xgboost_ranks_workers_after_the_master_and_lists_worker_addresses() {
    let plan = xgboost_job(1, 2).plan(&Observed::default(), 0);
    let vars = |rank: &str| {
        strs(&[
            "MASTER_PORT=9999",
            "MASTER_ADDR=mnist-master-0",
            "WORLD_SIZE=3",
            &format!("RANK={rank}"),
            "PYTHONUNBUFFERED=1",
            "WORKER_PORT=9999",
            "WORKER_ADDRS=mnist-worker-0,mnist-worker-1",
        ])
    };
    assert_eq!(
        env(created_pod(&plan, "mnist-master-0"), "xgboost"),
        vars("0")
    );
    assert_eq!(
        env(created_pod(&plan, "mnist-worker-1"), "xgboost"),
        vars("2")
    );
}

#[test]
fn paddle_master_advertises_its_pod_ip_and_workers_dial_it() {
    let plan = paddle_job(1, 2).plan(&Observed::default(), 0);
    let head = [
        "PYTHONUNBUFFERED=1",
        "PADDLE_JOB_ID=mnist",
        "PADDLE_NNODES=3",
    ];
    let master: Vec<String> = strs(&head)
        .into_iter()
        .chain(strs(&[
            "POD_IP_DUMMY=<status.podIP>",
            "PADDLE_MASTER=$(POD_IP_DUMMY):36543",
            "PADDLE_SERVER_NUM=1",
        ]))
        .collect();
    let worker: Vec<String> = strs(&head)
        .into_iter()
        .chain(strs(&[
            "PADDLE_MASTER=mnist-master-0:36543",
            "PADDLE_TRAINER_NUM=1",
        ]))
        .collect();
    assert_eq!(env(created_pod(&plan, "mnist-master-0"), "paddle"), master);
    assert_eq!(env(created_pod(&plan, "mnist-worker-0"), "paddle"), worker);
}

#[test]
fn paddle_without_master_uses_worker_zero() {
    let plan = paddle_job(0, 2).plan(&Observed::default(), 0);
    let w0 = env(created_pod(&plan, "mnist-worker-0"), "paddle");
    let w1 = env(created_pod(&plan, "mnist-worker-1"), "paddle");
    assert_eq!(
        &w0[3..],
        &strs(&[
            "POD_IP_DUMMY=<status.podIP>",
            "PADDLE_MASTER=$(POD_IP_DUMMY):36543"
        ])[..]
    );
    assert_eq!(&w1[3..], &strs(&["PADDLE_MASTER=mnist-worker-0:36543"])[..]);
}

#[test]
fn jax_processes_find_the_coordinator_on_worker_zero() {
    let plan = jax_job(2).plan(&Observed::default(), 0);
    let want = strs(&[
        "PYTHONUNBUFFERED=1",
        "COORDINATOR_PORT=6666",
        "COORDINATOR_ADDRESS=mnist-worker-0",
        "NUM_PROCESSES=2",
        "PROCESS_ID=1",
    ]);
    assert_eq!(env(created_pod(&plan, "mnist-worker-1"), "jax"), want);
}

#[test]
fn a_custom_port_on_the_master_is_what_workers_dial() {
    let job = pytorch_job(1, 1).set(
        "/spec/pytorchReplicaSpecs/Master/template/spec/containers/0/ports",
        json!([{"name": "pytorchjob-port", "containerPort": 29500}]),
    );
    let plan = job.plan(&Observed::default(), 0);
    let vars = env(created_pod(&plan, "mnist-worker-0"), "pytorch");
    assert!(vars.contains(&"MASTER_PORT=29500".to_string()), "{vars:?}");
}
