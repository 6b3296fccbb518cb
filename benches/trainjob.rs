//! A TrainJob's review beside the v1 job of the same shape: the platform benchmark job
//! (benches/data/pytorchjob-9-platform.yaml: 9 pods × 8 GPUs, 30 env entries, volumes, an
//! init container, a sidecar) as a PyTorchJob, and as a 9-node TrainJob whose runtime's
//! `node` template is that job's Worker template (with a Volcano podGroupPolicy), the runtime
//! read from the catalog as the webhook's watch cache holds it. Also the TrainJob with a
//! `runtimePatches` entry, and rendering the view alone. Figures in BENCHMARKS.md.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, Criterion};
use gangplank::policy::PolicySet;
use gangplank::review::{self, Input};
use gangplank::trainer::RuntimeCatalog;
use serde_json::{json, Value};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn platform_job() -> Value {
    yaml_serde::from_str(include_str!("data/pytorchjob-9-platform.yaml")).expect("job parses")
}

/// The platform job's Worker pod as a ClusterTrainingRuntime's `node` step, its training
/// container renamed `node` (the Trainer's name for it).
fn runtime(job: &Value) -> Value {
    let mut pod = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"].clone();
    for c in pod["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
    {
        if c["name"] == "pytorch" {
            c["name"] = "node".into();
        }
    }
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "platform-torch"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "podGroupPolicy": {"volcano": {}},
            "template": {"spec": {"replicatedJobs": [{
                "name": "node",
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": pod},
                },
            }]}},
        },
    })
}

fn trainjob(job: &Value) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama-finetune", "namespace": "team-vision",
            "labels": job["metadata"]["labels"], "annotations": job["metadata"]["annotations"]},
        "spec": {
            "runtimeRef": {"name": "platform-torch"},
            "trainer": {
                "numNodes": 9,
                "env": [{"name": "RUN_ID", "value": "exp-2291"}],
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}, "requests": {"nvidia.com/gpu": 8}},
            },
        },
    })
}

fn with_patch(mut job: Value) -> Value {
    job["spec"]["runtimePatches"] = json!([{
        "manager": "example.com/platform",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node",
            "template": {"spec": {"template": {"spec": {
                "nodeSelector": {"pool": "h100"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}],
            }}}}}]}}},
    }]);
    job
}

fn review_allowed(set: &PolicySet, input: &Input, name: &str) {
    let decision = review::review(set, input).expect("decides");
    assert!(
        decision.allowed(),
        "{name} must be allowed: {:?}",
        decision.violations
    );
}

fn trainjob_reviews(c: &mut Criterion) {
    let job = platform_job();
    let catalog = RuntimeCatalog::default();
    catalog.insert(&runtime(&job));
    catalog.mark_listed("the benchmark");
    let set = PolicySet::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
        .expect("shipped policies load")
        .with_runtimes(catalog);
    let cases = [
        ("PyTorchJob (platform job, 1 + 8)", job.clone()),
        (
            "TrainJob (same pods, 9 nodes, runtime from the catalog)",
            trainjob(&job),
        ),
        (
            "TrainJob with a runtimePatches entry",
            with_patch(trainjob(&job)),
        ),
    ];
    let mut g = c.benchmark_group("trainjob");
    for (name, object) in cases {
        let input = Input::create(object, "default");
        review_allowed(&set, &input, name);
        g.bench_function(name, |b| {
            b.iter(|| review::review(black_box(&set), black_box(&input)))
        });
    }
    let input = set
        .runtimes()
        .attach(&Input::create(trainjob(&job), "default"))
        .into_owned();
    g.bench_function("TrainJob view alone (render + JobView)", |b| {
        b.iter(|| input.view_of(black_box(&input.object)))
    });
    g.finish();
}

criterion_group!(benches, trainjob_reviews);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
