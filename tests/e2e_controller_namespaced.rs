//! `gangplank controller --namespaces` with nothing but deploy/controller-namespaced's rights:
//! the controller's ClusterRole bound by a RoleBinding in one namespace, no ClusterRoleBinding.
//! A job there runs (every watch, read and write the controller makes for it is namespaced,
//! or the API server would refuse it); a job in another namespace is never touched; and the
//! controller logs no refusal. Against a real kube-apiserver.
//!
//! Run: `cargo test --test e2e_controller_namespaced`.

mod support;

use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use support::controller::{pods_of, wait_pods, Controller};
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_controller_namespaced",
    [a_controller_bound_in_one_namespace_runs_its_jobs_and_never_touches_another_namespace]
);

async fn a_controller_bound_in_one_namespace_runs_its_jobs_and_never_touches_another_namespace() {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    let client = control_plane.client().await;
    let served = control_plane.namespace("served").await;
    let other = control_plane.namespace("other").await;
    let binding = [("controller-namespaced/binding", served.as_str())];
    let kubeconfig = support::controller::deploys_identity_bound(
        control_plane,
        &["controller-namespaced"],
        &binding,
    )
    .await;
    let namespaces = format!("--namespaces={served}");
    let args = [
        "--kinds=PyTorchJob",
        namespaces.as_str(),
        "--leader-elect=true",
        "--lease-namespace=gangplank-system",
        "--gang-scheduler=volcano",
    ];
    let controller = Controller::start_as(control_plane, &kubeconfig, "controller-ns", &args);
    for ns in [&served, &other] {
        jobs::create(&client, ns, &jobs::pytorch_job("bert", 1), false)
            .await
            .expect("created");
    }
    // Volcano would admit the gang's PodGroup; here the test does, as envtest users do.
    let groups: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &served,
        &jobs::resource("scheduling.volcano.sh/v1beta1", "PodGroup"),
    );
    support::wait_for(
        "the served job's PodGroup",
        Duration::from_secs(30),
        || async {
            let admitted = json!({"status": {"phase": "Running"}});
            groups
                .patch(
                    "bert-pytorchjob",
                    &PatchParams::default(),
                    &Patch::Merge(&admitted),
                )
                .await
                .map(drop)
                .map_err(|e| format!("{e}\n{}", controller.log()))
        },
    )
    .await;
    let names = wait_pods(&client, &served, "bert", 3).await;
    assert_eq!(names, ["bert-master-0", "bert-worker-0", "bert-worker-1"]);
    let job = jobs::pytorch_api(&client, &served)
        .get("bert")
        .await
        .expect("job");
    let job = serde_json::to_value(job).expect("JSON");
    assert!(jobs::true_condition(&job, "Created").is_some(), "{job:#}");

    // The job in the other namespace: no pods, no PodGroup, no status, no Events.
    assert!(pods_of(&client, &other, "bert").await.is_empty());
    let other_groups: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &other,
        &jobs::resource("scheduling.volcano.sh/v1beta1", "PodGroup"),
    );
    let listed = other_groups
        .list(&Default::default())
        .await
        .expect("PodGroups");
    assert!(listed.items.is_empty(), "{:?}", listed.items);
    let untouched = jobs::stored_pytorch_job(&client, &other, "bert").await;
    assert!(
        untouched.get("status").is_none_or(|s| s.is_null()),
        "{untouched:#}"
    );

    let log = controller.log();
    for refusal in ["403", "forbidden", "Forbidden"] {
        assert!(
            !log.contains(refusal),
            "the controller met a refusal ({refusal}):\n{log}"
        );
    }
}
