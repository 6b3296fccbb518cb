//! The controller process under what happens to processes: killed mid-reconcile and
//! restarted (no duplicate pods, no pod made twice), and run as two replicas (one leads; the
//! other takes over when the leader dies). Against a real kube-apiserver.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::controller::{pods_of, wait_pods, Controller};
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_controller_process",
    [
        a_controller_killed_mid_reconcile_and_restarted_creates_no_duplicates,
        of_two_replicas_one_leads_and_the_other_takes_over_when_it_dies,
    ]
);

fn control_plane() -> &'static ControlPlane {
    ControlPlane::shared(&support::assets::get(), Crds::TrainingV1)
}

fn tf_job(name: &str, workers: u32) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": {"Worker": {
            "replicas": workers,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{"name": "tensorflow", "image": jobs::IMAGE}]}},
        }}},
    })
}

async fn a_controller_killed_mid_reconcile_and_restarted_creates_no_duplicates() {
    let control_plane = control_plane();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("restart").await;
    let args = [
        "--kinds=PyTorchJob",
        "--leader-elect=false",
        "--gang-scheduler=",
    ];
    let first = Controller::start(control_plane, "controller-first", &args);
    let mut job = jobs::pytorch_job("bert", 1);
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 16.into();
    jobs::create(&client, &ns, &job, false)
        .await
        .expect("created");
    // Kill it as soon as the gang is partly created.
    let before = support::wait_for("the first pods", Duration::from_secs(30), || async {
        let pods = pods_of(&client, &ns, "bert").await;
        (!pods.is_empty())
            .then_some(pods)
            .ok_or_else(|| "none yet".to_string())
    })
    .await;
    drop(first);
    let second = Controller::start(control_plane, "controller-second", &args);
    wait_pods(&client, &ns, "bert", 17).await;
    let after = pods_of(&client, &ns, "bert").await;
    for pod in &before {
        let same = after.iter().find(|p| p.metadata.name == pod.metadata.name);
        let uid = same.and_then(|p| p.metadata.uid.clone());
        assert_eq!(
            uid, pod.metadata.uid,
            "{:?} was made again",
            pod.metadata.name
        );
    }
    // Settled: a few more seconds bring no 18th pod.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        pods_of(&client, &ns, "bert").await.len(),
        17,
        "{}",
        second.log()
    );
}

async fn of_two_replicas_one_leads_and_the_other_takes_over_when_it_dies() {
    let control_plane = control_plane();
    let client = control_plane.client().await;
    let ns = control_plane.namespace("leader").await;
    let lease_ns = format!("--lease-namespace={ns}");
    let args = [
        "--kinds=TFJob",
        "--leader-elect=true",
        lease_ns.as_str(),
        "--lease-name=tf-leader",
        "--gang-scheduler=",
    ];
    let mut replicas = vec![
        Controller::start(control_plane, "replica-a", &args),
        Controller::start(control_plane, "replica-b", &args),
    ];
    let leading = |c: &Controller| c.log().contains("\"leading\"");
    let leader = support::wait_for("one leader", Duration::from_secs(30), || async {
        let leaders: Vec<usize> = (0..2).filter(|&i| leading(&replicas[i])).collect();
        match leaders.as_slice() {
            [one] => Ok(*one),
            other => Err(format!("leaders: {other:?}")),
        }
    })
    .await;
    jobs::create(&client, &ns, &tf_job("first", 2), false)
        .await
        .expect("created");
    wait_pods(&client, &ns, "first", 2).await;
    // Still exactly one leader once it has worked.
    let follower = 1 - leader;
    assert!(
        !leading(&replicas[follower]),
        "both lead:\n{}",
        replicas[follower].log()
    );

    replicas.remove(leader); // killed
    let survivor = &replicas[0];
    support::wait_for(
        "the follower takes over",
        Duration::from_secs(45),
        || async {
            leading(survivor)
                .then_some(())
                .ok_or_else(|| "not yet".to_string())
        },
    )
    .await;
    jobs::create(&client, &ns, &tf_job("second", 3), false)
        .await
        .expect("created");
    wait_pods(&client, &ns, "second", 3).await;
}
