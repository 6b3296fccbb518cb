//! A TrainJob's view as the Trainer renders its pods (v2.3.0, reference §1.4), and bad
//! input: a TrainJob or runtime malformed anywhere never panics the review, and a job whose
//! structure cannot be read is refused, never admitted.

use std::sync::OnceLock;

use gangplank::job::JobView;
use gangplank::policy::PolicySet;
use gangplank::review::{self, Input};
use gangplank::trainer::view::{runtime_view, trainjob_view};
use gangplank::trainer::RuntimeCatalog;
use proptest::prelude::*;
use serde_json::{json, Value};

fn shipped() -> &'static PolicySet {
    static SET: OnceLock<PolicySet> = OnceLock::new();
    SET.get_or_init(|| {
        PolicySet::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
            .expect("shipped policies load")
    })
}

const IMAGE: &str = "registry.example.com/ml/train:1@sha256:0000000000000000000000000000000000000000000000000000000000000001";

/// deepspeed-distributed's shape (v2.3.0): MPI with runLauncherAsNode, `node` (no ancestor
/// label) and `launcher` (the trainer step, dependsOn node Ready).
fn mpi_runtime() -> Value {
    let pod = json!({"spec": {"containers": [{"name": "node", "image": IMAGE}]}});
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "deepspeed"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "mpi": {"numProcPerNode": 1, "runLauncherAsNode": true}},
            "template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": pod}}},
                {"name": "launcher", "dependsOn": [{"name": "node", "status": "Ready"}],
                 "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                              "spec": {"template": pod}}},
            ]}},
        },
    })
}

/// A torch runtime with a dataset initializer before the trainer step.
fn torch_runtime() -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch"},
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {}},
            "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 60}},
            "template": {"spec": {"replicatedJobs": [
                {"name": "dataset-initializer",
                 "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
                              "spec": {"template": {"spec": {"containers": [{"name": "dataset-initializer", "image": IMAGE}]}}}}},
                {"name": "node", "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
                 "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                              "spec": {"template": {"spec": {"containers": [{"name": "node", "image": IMAGE,
                                  "env": [{"name": "A", "value": "runtime"}],
                                  "resources": {"limits": {"nvidia.com/gpu": 8, "cpu": "16"}}}]}}}}},
            ]}},
        },
    })
}

fn trainjob(spec: Value) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": "team"},
        "spec": spec,
    })
}

fn replica<'a>(view: &'a JobView, key: &str) -> &'a gangplank::job::view::ReplicaView {
    view.replicas
        .iter()
        .find(|r| r.key == key)
        .unwrap_or_else(|| panic!("no replica {key}: {view:#?}"))
}

#[test]
fn mpi_counts_follow_num_nodes_with_the_launcher_as_a_node() {
    let runtime = mpi_runtime();
    let view = trainjob_view(
        &trainjob(json!({"runtimeRef": {"name": "deepspeed"}, "trainer": {"numNodes": 4}})),
        Ok(&runtime),
    );
    assert!(view.problems.is_empty(), "{:?}", view.problems);
    assert_eq!(
        replica(&view, "node").replicas,
        3,
        "numNodes - 1 with runLauncherAsNode"
    );
    let launcher = replica(&view, "launcher");
    assert_eq!(
        (launcher.replicas, launcher.role, launcher.coordinator),
        (1, Some("launcher"), true)
    );
    let trainer = view.trainer.as_ref().expect("trainer facts");
    assert_eq!(
        (trainer.min_member, trainer.first_wave, trainer.num_nodes),
        (4, 3, 4)
    );
    // On its own admission the runtime's counts are its own: node 1 (parallelism), launcher 1.
    let own = runtime_view("ClusterTrainingRuntime", &runtime);
    assert_eq!(own.total_pods, 2);
    assert_eq!(own.replicas[0].path, "/spec/template/spec/replicatedJobs/0");
}

#[test]
fn trainer_fields_land_on_node_and_patches_merge_in_order() {
    let runtime = torch_runtime();
    let job = trainjob(json!({
        "runtimeRef": {"name": "torch"},
        "trainer": {
            "numNodes": 3,
            "image": "registry.example.com/ml/other:2",
            "env": [{"name": "A", "value": "job"}, {"name": "B", "value": "job"}],
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}},
        },
        "runtimePatches": [
            {"manager": "a.example.com/x", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}, "tolerations": [{"key": "a"}]}}}}}]}}}},
            {"manager": "b.example.com/y", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"zone": "b"}, "tolerations": [{"key": "b"}]}}}}}]}}}},
        ],
    }));
    let view = trainjob_view(&job, Ok(&runtime));
    assert!(view.problems.is_empty(), "{:?}", view.problems);
    let node = replica(&view, "node");
    assert_eq!(node.replicas, 3);
    assert_eq!(
        node.node_selector,
        json!({"pool": "a", "zone": "b"})
            .as_object()
            .cloned()
            .expect("map")
    );
    assert_eq!(
        node.tolerations,
        vec![json!({"key": "b"})],
        "tolerations are replaced, not merged"
    );
    let container = &node.containers[0];
    assert_eq!(
        (container.image.as_str(), container.path.as_str()),
        ("registry.example.com/ml/other:2", "/spec/trainer")
    );
    assert_eq!(
        container.env_names,
        ["A", "B"],
        "trainer.env upserted by name"
    );
    assert_eq!(node.gpus_per_pod, 4, "resourcesPerNode wins per resource");
    assert_eq!(
        node.pod_requests.get("cpu"),
        Some(&16_000),
        "the runtime's cpu kept"
    );
    let init = replica(&view, "dataset-initializer");
    assert_eq!((init.role, init.replicas), (Some("initializer"), 1));
    assert!(init
        .path
        .starts_with("ClusterTrainingRuntime/torch:/spec/template/spec/replicatedJobs/0"));
    let trainer = view.trainer.as_ref().expect("trainer facts");
    assert_eq!((trainer.min_member, trainer.first_wave), (4, 1));
    assert_eq!(trainer.pod_group_policy.as_deref(), Some("coscheduling"));
    assert_eq!(
        trainer.patch_managers,
        ["a.example.com/x", "b.example.com/y"]
    );
}

/// A valid TrainJob, its runtime in the catalog, with `value` written at `pointer` of one of
/// them (`trainjob` or `runtime`).
fn broken(target: &str, pointer: &str, value: Value) -> (Input, PolicySet) {
    let mut runtime = torch_runtime();
    let mut job = trainjob(json!({"runtimeRef": {"name": "torch"}, "trainer": {"numNodes": 2}}));
    let doc = if target == "runtime" {
        &mut runtime
    } else {
        &mut job
    };
    set_at(doc, pointer, value);
    let catalog = RuntimeCatalog::default();
    catalog.insert(&runtime);
    catalog.mark_listed("the test");
    (
        Input::create(job, "default"),
        shipped().clone().with_runtimes(catalog),
    )
}

/// Writes `value` at `pointer`, creating objects on the way (a list index replaces the list).
fn set_at(doc: &mut Value, pointer: &str, value: Value) {
    let mut at = doc;
    let tokens: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, token) in tokens.iter().enumerate() {
        if i + 1 == tokens.len() {
            match at {
                Value::Object(m) => {
                    m.insert(token.to_string(), value);
                }
                Value::Array(a) => match token.parse::<usize>().ok().and_then(|k| a.get_mut(k)) {
                    Some(slot) => *slot = value,
                    None => a.push(value),
                },
                other => *other = json!({*token: value}),
            }
            return;
        }
        if !at.is_object() && !at.is_array() {
            *at = json!({});
        }
        at = match at {
            Value::Array(a) => {
                let k = token
                    .parse::<usize>()
                    .unwrap_or(0)
                    .min(a.len().saturating_sub(1));
                if a.is_empty() {
                    a.push(json!({}));
                }
                &mut a[k]
            }
            other => other
                .as_object_mut()
                .expect("object")
                .entry(token.to_string())
                .or_insert(json!({})),
        };
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-z$]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z$]{1,5}|name|replace|delete", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const POINTERS: &[(&str, &str)] = &[
    ("trainjob", "/spec"),
    ("trainjob", "/spec/runtimeRef"),
    ("trainjob", "/spec/trainer"),
    ("trainjob", "/spec/trainer/numNodes"),
    ("trainjob", "/spec/trainer/env"),
    ("trainjob", "/spec/trainer/resourcesPerNode"),
    ("trainjob", "/spec/runtimePatches"),
    (
        "trainjob",
        "/spec/runtimePatches/0/trainingRuntimeSpec/template/spec",
    ),
    (
        "trainjob",
        "/spec/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/0/$patch",
    ),
    ("trainjob", "/spec/initializer/dataset"),
    ("runtime", "/spec"),
    ("runtime", "/spec/mlPolicy"),
    ("runtime", "/spec/mlPolicy/numNodes"),
    ("runtime", "/spec/podGroupPolicy"),
    ("runtime", "/spec/template/spec/replicatedJobs"),
    ("runtime", "/spec/template/spec/replicatedJobs/1"),
    ("runtime", "/spec/template/spec/replicatedJobs/1/dependsOn"),
    (
        "runtime",
        "/spec/template/spec/replicatedJobs/1/template/spec/parallelism",
    ),
    (
        "runtime",
        "/spec/template/spec/replicatedJobs/1/template/spec/template/spec/containers",
    ),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Anything anywhere: a decision (never a panic or an evaluation error), and a TrainJob
    /// whose view has problems is never admitted.
    #[test]
    fn malformed_trainjobs_and_runtimes_are_decided_never_crash(
        at in 0..POINTERS.len(),
        value in arbitrary_json(),
    ) {
        let (target, pointer) = POINTERS[at];
        let (input, set) = broken(target, pointer, value);
        let decision = review::review(&set, &input).expect("a decision, not an evaluation error");
        let view = set.runtimes().attach(&input).view_of(&decision.mutated).expect("a view");
        if !view.problems.is_empty() {
            prop_assert!(!decision.allowed(), "admitted with problems {:?}", view.problems);
        }
    }
}

/// While the runtime watch fails, a TrainJob is judged on the last listing and told so; a
/// runtime missing from it is refused with the reason the listing may be out of date.
#[test]
fn a_stale_runtime_cache_is_said_on_the_trainjob() {
    let catalog = RuntimeCatalog::default();
    catalog.insert(&torch_runtime());
    catalog.mark_listed("the cluster");
    catalog.set_stale(Some(
        "the watch of clustertrainingruntimes is failing: 503".into(),
    ));
    let set = shipped().clone().with_runtimes(catalog);
    let job = trainjob(json!({"runtimeRef": {"name": "torch"}, "trainer": {"numNodes": 2}}));
    let decision = review::review(&set, &Input::create(job, "default")).expect("decides");
    assert!(
        decision.warnings().iter().any(|w| w
            == "[trainer_gang] /spec/runtimeRef: judged on ClusterTrainingRuntime torch as last listed: the watch of clustertrainingruntimes is failing: 503"),
        "{:?}",
        decision.warnings()
    );
    let gone = trainjob(json!({"runtimeRef": {"name": "gone"}, "trainer": {"numNodes": 2}}));
    let decision = review::review(&set, &Input::create(gone, "default")).expect("decides");
    let refusal = decision.denial_message().unwrap_or_default();
    assert!(
        refusal.contains("ClusterTrainingRuntime \"gone\" does not exist (as listed from the cluster) (the runtime cache may be out of date: the watch of clustertrainingruntimes is failing: 503)"),
        "{refusal}"
    );
}
