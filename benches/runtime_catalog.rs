//! Memory and per-event cost of the runtime catalog fed by its watch (issue 33: "the runtime
//! catalog keeps one copy"), offline: the same watch events the apiserver would send, fed
//! (a) to the code before issue 33 — a kube-runtime reflector store, and on each event every
//! runtime of the store re-serialised into the catalog — and (b) to `catalog::watch::apply`,
//! which `serve` runs. Live heap bytes are counted by a counting global allocator.
//!
//! `RUNTIMES=1000 cargo bench --bench runtime_catalog`
//!
//! The runtime is shaped like Kubeflow Trainer's `torch-distributed` ClusterTrainingRuntime with
//! the dataset and model initializers (3 replicated jobs, env, volumes, resources), applied by
//! `kubectl apply` (the last-applied-configuration annotation) and carrying the managedFields
//! of two managers, as the apiserver returns it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use gangplank::trainer::catalog::{watch, Listing, RuntimeCatalog};
use gangplank::trainer::TrainerKind;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::{reflector, watcher::Event};
use serde_json::{json, Value};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn container(name: &str, image: &str, gpu: bool) -> Value {
    let mut resources =
        json!({"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"memory": "16Gi"}});
    if gpu {
        resources = json!({"requests": {"cpu": "96", "memory": "1800Gi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
            "limits": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "memory": "1800Gi"}});
    }
    json!({"name": name, "image": image,
        "command": ["torchrun", "--nnodes=$(PET_NNODES)", "--nproc-per-node=$(PET_NPROC_PER_NODE)", "/workspace/train.py"],
        "env": [
            {"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "NCCL_SOCKET_IFNAME", "value": "^lo,docker"},
            {"name": "FI_PROVIDER", "value": "efa"}, {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
            {"name": "HF_HOME", "value": "/workspace/cache"}, {"name": "STORAGE_URI", "value": "hf://meta-llama/Llama-3.1-70B"},
            {"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "1"}, {"name": "OMP_NUM_THREADS", "value": "1"}],
        "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}, {"name": "dshm", "mountPath": "/dev/shm"}],
        "resources": resources,
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}})
}

fn replicated_job(name: &str, step: &str, c: Value) -> Value {
    json!({"name": name, "replicas": 1, "dependsOn": [],
        "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
            "spec": {"template": {"spec": {"containers": [c],
                "volumes": [{"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}},
                            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}}})
}

/// One ClusterTrainingRuntime as the apiserver returns it (see the module's doc).
fn runtime(i: usize) -> Value {
    let name = format!("torch-distributed-{i:04}");
    let spec = json!({
    "mlPolicy": {"numNodes": 16, "torch": {"numProcPerNode": "auto"}},
    "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 120}},
    "template": {"spec": {"replicatedJobs": [
        replicated_job("dataset-initializer", "dataset-initializer",
            container("dataset-initializer", "ghcr.io/kubeflow/trainer/dataset-initializer:v2.1.0", false)),
        replicated_job("model-initializer", "model-initializer",
            container("model-initializer", "ghcr.io/kubeflow/trainer/model-initializer:v2.1.0", false)),
        replicated_job("node", "trainer",
            container("node", "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", true)),
    ]}}});
    let labels = json!({"trainer.kubeflow.org/framework": "torch", "app.kubernetes.io/part-of": "kubeflow-trainer"});
    let applied = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": labels}, "spec": spec});
    let fields = |v: &Value| -> Value {
        // fieldsV1 mirrors the object's keys, as the apiserver writes them ("f:key": {...}).
        fn walk(v: &Value) -> Value {
            match v {
                Value::Object(m) => {
                    Value::Object(m.iter().map(|(k, v)| (format!("f:{k}"), walk(v))).collect())
                }
                Value::Array(a) => Value::Object(
                    a.iter()
                        .enumerate()
                        .map(|(i, v)| (format!("k:{{\"index\":{i}}}"), walk(v)))
                        .collect(),
                ),
                _ => json!({}),
            }
        }
        walk(v)
    };
    json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "uid": format!("6f1c2e4a-0000-4000-8000-{i:012}"),
            "resourceVersion": format!("{}", 100_000 + i), "generation": 1,
            "creationTimestamp": "2026-11-28T10:00:00Z", "labels": labels,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied.to_string()},
            "managedFields": [
                {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "trainer.kubeflow.org/v1alpha1",
                 "time": "2026-11-28T10:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}}, "f:labels": fields(&labels)}, "f:spec": fields(&spec)}},
                {"manager": "helm", "operation": "Update", "apiVersion": "trainer.kubeflow.org/v1alpha1",
                 "time": "2026-11-28T10:05:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": fields(&labels)}}}]},
        "spec": spec})
}

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("a runtime is a DynamicObject")
}

/// What `watch_kind` does with the watcher's `.modify()` before the event reaches `apply`.
fn as_watched(mut o: DynamicObject) -> DynamicObject {
    o.metadata.managed_fields = None;
    o
}

fn resource() -> ApiResource {
    ApiResource {
        group: "trainer.kubeflow.org".into(),
        version: "v1alpha1".into(),
        api_version: "trainer.kubeflow.org/v1alpha1".into(),
        kind: "ClusterTrainingRuntime".into(),
        plural: "clustertrainingruntimes".into(),
    }
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() {
    // `cargo test --all-targets` runs benches once as tests, in debug: a smoke run of a few
    // runtimes then, the measurement under `cargo bench` only.
    let measuring = std::env::args().any(|a| a == "--bench");
    let n: usize = std::env::var("RUNTIMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if measuring { 1000 } else { 20 });
    let updates: usize = std::env::var("UPDATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if measuring { 200 } else { 5 });
    let kind = TrainerKind::ClusterTrainingRuntime;
    let sent = serde_json::to_vec(&runtime(0))
        .map(|b| b.len())
        .unwrap_or(0);
    println!("runtime_catalog: {n} ClusterTrainingRuntimes of {sent} bytes as sent ({:.2} MiB as JSON), {updates} Apply events", mib(sent * n));

    // (a) Before: a reflector store beside the catalog; each event re-serialises every runtime.
    {
        let base = live();
        let catalog = RuntimeCatalog::default();
        let mut writer = reflector::store::Writer::<DynamicObject>::new(resource());
        let store = writer.as_reader();
        let refill = |catalog: &RuntimeCatalog| {
            let objects = store
                .state()
                .iter()
                .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
                .collect();
            catalog.replace(kind, objects, "the cluster");
        };
        writer.apply_watcher_event(&Event::Init);
        for i in 0..n {
            writer.apply_watcher_event(&Event::InitApply(object(runtime(i))));
        }
        writer.apply_watcher_event(&Event::InitDone);
        refill(&catalog);
        let held = live() - base;
        let start = Instant::now();
        for u in 0..updates {
            writer.apply_watcher_event(&Event::Apply(object(runtime(u % n))));
            refill(&catalog);
        }
        let per = start.elapsed() / updates as u32;
        println!("before (reflector store + catalog, refilled per event): {:.2} MiB live heap, {:.1} KiB per runtime; {:?} per Apply event (incl. building the event)", mib(held), held as f64 / 1024.0 / n as f64, per);
        drop(catalog);
    }

    // (b) After: the watch applies each event to the catalog, the only copy.
    {
        let base = live();
        let catalog = RuntimeCatalog::default();
        let mut listing = None;
        list_all(&catalog, kind, &mut listing, n, || {});
        let held = live() - base;
        let start = Instant::now();
        for u in 0..updates {
            watch::apply(
                &catalog,
                kind,
                &mut listing,
                Event::Apply(as_watched(object(runtime(u % n)))),
            );
        }
        let per = start.elapsed() / updates as u32;
        println!("after (catalog only, events applied): {:.2} MiB live heap, {:.1} KiB per runtime; {:?} per Apply event (incl. building the event)", mib(held), held as f64 / 1024.0 / n as f64, per);
        // A relist: the old listing is served while the new one is gathered; peak = both.
        let mut peak = 0;
        list_all(&catalog, kind, &mut listing, n, || peak = peak.max(live()));
        println!("after, during a relist: peak {:.2} MiB live heap (last listing served + the new one gathered), {:.2} MiB once swapped", mib(peak - base), mib(live() - base));
        assert_eq!(catalog.len(), n);
    }
}

/// A complete listing of `n` runtimes as the watch gets it (Init, an InitApply each,
/// InitDone), applied by the watch's own code; `after_each` runs after every InitApply.
fn list_all(
    catalog: &RuntimeCatalog,
    kind: TrainerKind,
    listing: &mut Option<Listing>,
    n: usize,
    mut after_each: impl FnMut(),
) {
    watch::apply(catalog, kind, listing, Event::Init);
    for i in 0..n {
        let object = as_watched(object(runtime(i)));
        watch::apply(catalog, kind, listing, Event::InitApply(object));
        after_each();
    }
    watch::apply(catalog, kind, listing, Event::InitDone);
}
