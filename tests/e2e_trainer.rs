//! Kubeflow Trainer v2 end to end: `kubectl apply` of runtimes and TrainJobs through a real
//! kube-apiserver with the Trainer's CRDs (v2.3.0's from the corpus, or the project's
//! schema-less stand-ins in tests/data/crds/ on a fresh clone) and gangplank's webhooks as
//! deploy/ with the deploy/trainer component configures them, digests from a real
//! docker-registry. The runtimes reach the webhook through its watch, never a call per
//! request; `gangplank audit` judges the stored TrainJobs on the runtimes stored now.
//!
//! No Trainer or JobSet controller runs: what is tested is admission. Skipped, with the
//! reason, without the test binaries or docker-registry.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};
use support::registry::{self, Auth, Registry, OCI_MANIFEST};
use support::run::Run;
use support::{jobs, ControlPlane, Crds, Scheduling, Webhooks};

e2e_suite!(
    "e2e_trainer",
    [
        runtimes_and_trainjobs_are_pinned_on_apply_and_a_trainjob_without_a_gang_is_refused,
        audit_judges_stored_trainjobs_on_the_runtime_as_it_is_now,
    ],
    registry::requirement
);

const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");

/// A ClusterTrainingRuntime of one `node` job running `image`, with `extra` merged into its
/// spec (a podGroupPolicy, say).
fn runtime(name: &str, image: &str, extra: Value) -> Value {
    let pod = json!({"containers": [{"name": "node", "image": image}]});
    support::trainer::runtime(name, pod, extra)
}

fn trainjob(name: &str, runtime: &str, nodes: u32, image: Option<&str>) -> Value {
    let mut job = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": nodes}},
    });
    if let Some(image) = image {
        job["spec"]["trainer"]["image"] = image.into();
    }
    job
}

fn api(client: &kube::Client, namespace: Option<&str>, kind: &str) -> Api<DynamicObject> {
    let resource = jobs::resource("trainer.kubeflow.org/v1alpha1", kind);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn stored(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    let object = api.get_opt(name).await.expect("get");
    object.map(|o| serde_json::to_value(o).expect("JSON"))
}

/// How long the webhook's runtime watch gets to see a runtime just applied.
const WATCH_LIMIT: Duration = Duration::from_secs(10);

/// `kubectl apply` of `object` once the webhook's watch knows the runtime it names.
async fn apply_when_runtime_known(
    plane: &ControlPlane,
    ns: &str,
    object: &Value,
) -> Result<String, String> {
    support::trainer::apply_when_runtime_known(plane, ns, object, WATCH_LIMIT).await
}

/// The shared control plane with the Trainer's CRDs, a registry holding `ml/train:v1`, and
/// the webhooks (resolution on), installed once for both tests: webhook configurations
/// outlive a test, so their server must too.
struct Setup {
    plane: &'static ControlPlane,
    webhooks: Webhooks,
    /// `ml/train:v1` by tag, and pinned to the digest the registry has for it.
    tag: String,
    pinned: String,
    _registry: Registry,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let plane =
            ControlPlane::shared_with(&support::assets::get(), Crds::Trainer, Scheduling::None);
        support::on_own_runtime(move || async move {
            let registry = Registry::start(Auth::Open).await;
            let (bytes, _) = registry
                .push_image("ml/train", "v1", OCI_MANIFEST, "trainer")
                .await;
            let tag = registry.image("ml/train", "v1");
            let pinned = format!("{tag}@{}", registry::sha256(&bytes));
            let policies = plane.file("trainer-policies");
            registry::pinning_policies(&registry, &policies);
            // The webhook starts before any runtime exists: it learns them from its watch.
            let webhooks = Webhooks::install(plane, policies).await;
            Setup {
                plane,
                webhooks,
                tag,
                pinned,
                _registry: registry,
            }
        })
    })
}

async fn runtimes_and_trainjobs_are_pinned_on_apply_and_a_trainjob_without_a_gang_is_refused() {
    let Setup {
        plane,
        webhooks,
        tag,
        pinned,
        ..
    } = setup();
    let (plane, tag, pinned) = (*plane, tag.as_str(), pinned.as_str());
    let client = plane.client().await;
    let ns = plane.namespace("trainer").await;
    let runtimes = api(&client, None, "ClusterTrainingRuntime");

    // A runtime with a gang is pinned on apply.
    let gang = format!("{ns}-volcano");
    plane
        .kubectl_apply(
            None,
            &runtime(&gang, tag, json!({"podGroupPolicy": {"volcano": {}}})),
            &[],
        )
        .expect("runtime applied");
    let stored_runtime = stored(&runtimes, &gang).await.expect("runtime stored");
    assert_eq!(
        jobs::get_str(
            &stored_runtime,
            "/spec/template/spec/replicatedJobs/0/template/spec/template/spec/containers/0/image"
        ),
        pinned
    );

    // A 4-node TrainJob on it: admitted once the watch has the runtime, its image pinned.
    let job = trainjob("llm", &gang, 4, Some(tag));
    apply_when_runtime_known(plane, &ns, &job)
        .await
        .unwrap_or_else(|e| panic!("TrainJob refused: {e}\n{}", webhooks.log_tail(20)));
    let trainjobs = api(&client, Some(&ns), "TrainJob");
    let stored_job = stored(&trainjobs, "llm").await.expect("TrainJob stored");
    assert_eq!(jobs::get_str(&stored_job, "/spec/trainer/image"), pinned);
    assert_eq!(stored_job["spec"]["runtimeRef"]["name"], json!(gang));
    assert!(
        stored_job["spec"].get("runtimePatches").is_none(),
        "nothing but the image is written into the TrainJob: {stored_job}"
    );

    // The same file applied again: unchanged (the pin holds, the mutation is idempotent),
    // and a server dry run of a new one stores nothing.
    // (kubectl sends the tag again, as the live object differs from the file; the webhook
    // pins it again and the apiserver stores nothing new.)
    let again = plane.kubectl_apply(Some(&ns), &job, &[]);
    assert!(again.is_ok(), "{again:?}");
    let after = stored(&trainjobs, "llm").await.expect("TrainJob stored");
    assert_eq!(
        after["metadata"]["resourceVersion"], stored_job["metadata"]["resourceVersion"],
        "re-applying the same file changes nothing: {after}"
    );
    let dry = plane.kubectl_apply(
        Some(&ns),
        &trainjob("dry", &gang, 2, Some(tag)),
        &["--dry-run=server"],
    );
    assert!(dry.is_ok(), "{dry:?}");
    assert!(
        stored(&trainjobs, "dry").await.is_none(),
        "a dry run stores nothing"
    );

    // A runtime without a gang: admitted (with a warning), and a 2-node TrainJob on it is
    // refused naming the runtime.
    let plain = format!("{ns}-plain");
    let warned = plane
        .kubectl_apply(None, &runtime(&plain, pinned, json!({})), &[])
        .expect("runtime applied");
    let refused = apply_when_runtime_known(plane, &ns, &trainjob("halfway", &plain, 2, None))
        .await
        .expect_err("a 2-node TrainJob without a gang is refused");
    assert!(
        refused.contains(&format!(
            "ClusterTrainingRuntime {plain} has no podGroupPolicy"
        )),
        "{refused}\n(runtime apply printed: {warned})"
    );

    // A runtime that does not exist is named.
    let missing = plane
        .kubectl_apply(
            Some(&ns),
            &trainjob("orphan", "no-such-runtime", 2, Some(pinned)),
            &[],
        )
        .expect_err("refused");
    assert!(
        missing.contains("ClusterTrainingRuntime \"no-such-runtime\" does not exist"),
        "{missing}"
    );

    // Kueue's resume: suspend flipped and its patch entry written while suspended.
    let mut queued = trainjob("queued", &gang, 4, Some(pinned));
    queued["metadata"]["labels"] = json!({"kueue.x-k8s.io/queue-name": "team"});
    queued["spec"]["suspend"] = json!(true);
    plane
        .kubectl_apply(Some(&ns), &queued, &[])
        .expect("queued TrainJob admitted");
    let resume = json!({"spec": {"suspend": false, "runtimePatches": [{
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node",
            "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": "team"}}}}}}]}}},
    }]}});
    let resumed = trainjobs
        .patch("queued", &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .expect("Kueue's resume admitted");
    let resumed = serde_json::to_value(resumed).expect("JSON");
    assert_eq!(
        resumed["spec"]["suspend"],
        json!(false),
        "suspend is Kueue's"
    );
}

/// `gangplank audit --policies <repo policies> ARGS` with the control plane's kubeconfig.
async fn audit(plane: &ControlPlane, args: &[&str]) -> Run {
    let out = tokio::process::Command::new(support::gangplank())
        .args(["audit", "--policies", POLICIES])
        .args(args)
        .env("KUBECONFIG", &plane.kubeconfig)
        .output()
        .await
        .expect("run gangplank audit");
    Run::finished(out)
}

async fn audit_judges_stored_trainjobs_on_the_runtime_as_it_is_now() {
    let plane = setup().plane;
    let ns = plane.namespace("trainer-audit").await;
    let name = format!("{ns}-gang");
    // Pinned and ganged: admitted whether or not the other test's webhooks are installed.
    let digest = "registry.example.com/ml/train:v1@sha256:0000000000000000000000000000000000000000000000000000000000000001";
    let gang = runtime(&name, digest, json!({"podGroupPolicy": {"volcano": {}}}));
    plane
        .kubectl_apply(None, &gang, &[])
        .expect("runtime applied");
    apply_when_runtime_known(plane, &ns, &trainjob("llm", &name, 4, Some(digest)))
        .await
        .expect("TrainJob applied");
    let before = audit(plane, &["--namespace", &ns, "--output", "json"]).await;
    assert_eq!(before.code, 0, "{}", before.output());

    // The runtime loses its gang after the TrainJob was admitted (applying a runtime is
    // allowed: it only warns): the audit refuses the stored TrainJob now, naming the runtime.
    plane
        .kubectl_apply(None, &runtime(&name, digest, json!({})), &[])
        .expect("runtime edited");
    let after = audit(plane, &["--namespace", &ns, "--output", "json"]).await;
    assert_eq!(after.code, 1, "{}", after.output());
    assert!(
        after.stdout.contains(&format!(
            "ClusterTrainingRuntime {name} has no podGroupPolicy"
        )) && after.stdout.contains("\"llm\""),
        "{}",
        after.output()
    );
}
