//! End to end: a real kube-apiserver calls `gangplank serve` through the webhook
//! configurations of deploy/ for jobs created through its API.
//!
//! Needs the test binaries (`tests/support/assets.rs`; without them the suite prints why it
//! skipped) and the upstream CRDs (`../shared/corpus/upstream-crds`).

mod support;

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use support::{jobs, ControlPlane, Crds, Webhooks};

e2e_suite!(
    "e2e_admission",
    [
        a_valid_job_is_stored_with_gangplanks_defaults,
        an_invalid_job_is_refused_with_gangplanks_message,
        a_merge_patch_that_breaks_a_rule_is_refused,
        a_server_side_dry_run_returns_the_mutated_job_and_stores_nothing,
        jobs_in_kube_system_never_reach_gangplank,
        kinds_that_are_not_training_jobs_are_untouched,
        an_update_of_managed_by_is_refused,
    ]
);

/// The shared control plane with gangplank's webhooks, a client, and a namespace of this
/// test's own.
async fn setup(test: &str) -> (kube::Client, String) {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    Webhooks::shared(control_plane);
    let namespace = control_plane.namespace(test).await;
    (control_plane.client().await, namespace)
}

async fn a_valid_job_is_stored_with_gangplanks_defaults() {
    let (client, ns) = setup("valid").await;
    jobs::create(&client, &ns, &jobs::pytorch_job("bert", 1), false)
        .await
        .expect("created");
    let stored = jobs::stored_pytorch_job(&client, &ns, "bert").await;
    assert_gang_defaults(&stored, 3);
    let run_policy = &stored["spec"]["runPolicy"];
    assert_eq!(run_policy["cleanPodPolicy"], "Running", "{stored}");
    assert_eq!(run_policy["backoffLimit"], 3, "{stored}");
}

async fn an_invalid_job_is_refused_with_gangplanks_message() {
    let (client, ns) = setup("invalid").await;
    let refused = jobs::create(&client, &ns, &jobs::pytorch_job("two-masters", 2), false).await;
    let (code, message) = jobs::refusal(refused);
    assert_eq!(code, 403, "{message}");
    assert_two_masters_refusal(&message);
    let gone = jobs::pytorch_api(&client, &ns).get_opt("two-masters").await;
    assert!(gone.expect("get").is_none(), "a refused job is not stored");
}

/// UPDATE goes through both webhooks too (with oldObject): a stored valid job cannot be
/// patched into an invalid one.
async fn a_merge_patch_that_breaks_a_rule_is_refused() {
    let (client, ns) = setup("merge-patch").await;
    jobs::create(&client, &ns, &jobs::pytorch_job("bert", 1), false)
        .await
        .expect("created");
    let api = jobs::pytorch_api(&client, &ns);
    let patch = json!({"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2}}}});
    let patched = api
        .patch("bert", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|o| serde_json::to_value(o).expect("JSON"));
    let (code, message) = jobs::refusal(patched);
    assert_eq!(code, 403, "{message}");
    assert_two_masters_refusal(&message);
    let stored = serde_json::to_value(api.get("bert").await.expect("get")).expect("JSON");
    let masters = &stored["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"];
    assert_eq!(masters, 1, "the stored job is unchanged: {stored}");
}

async fn a_server_side_dry_run_returns_the_mutated_job_and_stores_nothing() {
    let (client, ns) = setup("dry-run").await;
    let returned = jobs::create(&client, &ns, &jobs::pytorch_job("bert", 1), true)
        .await
        .expect("dry run admitted");
    assert_gang_defaults(&returned, 3);
    let stored = jobs::pytorch_api(&client, &ns).get_opt("bert").await;
    assert!(stored.expect("get").is_none(), "a dry run stores nothing");
}

/// deploy/'s namespaceSelector keeps kube-system away from gangplank: a job it would refuse
/// (two Masters) is stored as sent.
async fn jobs_in_kube_system_never_reach_gangplank() {
    let (client, _) = setup("kube-system").await;
    let job = jobs::pytorch_job("excluded", 2);
    let stored = jobs::create(&client, "kube-system", &job, false)
        .await
        .expect("stored without admission");
    let master = &stored["spec"]["pytorchReplicaSpecs"]["Master"];
    assert_eq!(master["replicas"], 2, "{stored}");
    assert!(
        master["template"]["spec"].get("schedulerName").is_none(),
        "mutated: {stored}"
    );
    assert!(
        stored["spec"].get("runPolicy").is_none(),
        "mutated: {stored}"
    );
}

/// Kinds the webhook rules do not list are stored exactly as sent: a ConfigMap, and a
/// Volcano PodGroup (a CRD of another group that gangplank's controller will create).
async fn kinds_that_are_not_training_jobs_are_untouched() {
    let (client, ns) = setup("other-kinds").await;
    let config_map = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"},
        "data": {"minAvailable": "9", "schedulerName": "default-scheduler"},
    });
    let pod_group = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "bert"},
        "spec": {"minMember": 2, "queue": "default"},
    });
    for (object, plural) in [(config_map, "configmaps"), (pod_group, "podgroups")] {
        let resource = support::jobs::resource(
            object["apiVersion"].as_str().expect("apiVersion"),
            object["kind"].as_str().expect("kind"),
        );
        assert_eq!(resource.plural, plural);
        let created = jobs::create(&client, &ns, &object, false)
            .await
            .unwrap_or_else(|e| panic!("{plural}: {e}"));
        for field in ["data", "spec"] {
            assert_eq!(
                created.get(field),
                object.get(field),
                "{plural} {field} changed"
            );
        }
        let labels = created["metadata"].get("labels");
        let annotations = created["metadata"].get("annotations");
        assert!(
            labels.is_none() && annotations.is_none(),
            "{plural} metadata changed: {created}"
        );
    }
}

/// managedBy decides which controller runs the job: changing it after create would hand a
/// running job to another controller, and the apiserver's CRD schema does not stop it.
async fn an_update_of_managed_by_is_refused() {
    let (client, ns) = setup("managed-by").await;
    jobs::create(&client, &ns, &jobs::pytorch_job("bert", 1), false)
        .await
        .expect("created");
    let api = jobs::pytorch_api(&client, &ns);
    let patch = json!({"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}});
    let patched = api
        .patch("bert", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|o| serde_json::to_value(o).expect("JSON"));
    let (code, message) = jobs::refusal(patched);
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains("[managed_by] /spec/runPolicy/managedBy:"),
        "{message}"
    );
    // A replace (PUT) is an UPDATE too.
    let mut stored = api.get("bert").await.expect("get");
    stored.data["spec"]["runPolicy"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    let replaced = api
        .replace("bert", &PostParams::default(), &stored)
        .await
        .map(|o| serde_json::to_value(o).expect("JSON"));
    let (code, message) = jobs::refusal(replaced);
    assert_eq!(code, 403, "{message}");
}

fn assert_gang_defaults(job: &Value, pods: u64) {
    let replicas = &job["spec"]["pytorchReplicaSpecs"];
    for replica in ["Master", "Worker"] {
        let scheduler = &replicas[replica]["template"]["spec"]["schedulerName"];
        assert_eq!(scheduler, "volcano", "{replica} scheduler: {job}");
    }
    let min_available = &job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"];
    assert_eq!(min_available, pods, "PodGroup minAvailable: {job}");
}

/// The apiserver wraps the webhook's message: `admission webhook "<name>" denied the request:
/// [policy] path: message`.
fn assert_two_masters_refusal(message: &str) {
    for expected in [
        "admission webhook \"validate.gangplank.dev\" denied the request",
        "[coordinator] /spec/pytorchReplicaSpecs/Master/replicas:",
        "Master has 2 replicas",
    ] {
        assert!(message.contains(expected), "{expected:?} not in {message}");
    }
}
