//! Writes the seed corpus of every fuzz target from the crate's own inputs: the manifests
//! of `examples/`, the upstream corpus beside the project (`../shared/corpus`, when there),
//! the AdmissionReviews of `tests/data/admission/`, `policies/params.yaml` and the parameter
//! overlays of the policy case files, and the cluster snapshots of the policy cases.
//! `seed <out dir> [corpus dir...]`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use gangplank::job::{lookup, JobView};
use gangplank::policy::PolicySet;
use gangplank::review::documents::{read_documents, ReadOptions};
use serde_json::{json, Value};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(out) = args.next().map(PathBuf::from) else {
        eprintln!("usage: seed <out dir> [manifest dir...]");
        std::process::exit(2);
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs = vec![
        repo.join("examples"),
        repo.join("tests/data"),
        repo.join("policies/tests/trainer-v2.3.0"),
    ];
    // trainer_view: every TrainJob found, with every runtime found.
    let (mut trainjobs, mut runtimes) = (Vec::new(), Vec::new());
    dirs.extend(args.map(PathBuf::from));
    let mut seeds = Seeds::new(&out);

    let set = PolicySet::load(&repo.join("policies")).unwrap_or_else(|e| {
        eprintln!("cannot load policies: {e}");
        std::process::exit(1)
    });
    let mut images = BTreeSet::new();
    for dir in dirs.iter().filter(|d| d.exists()) {
        for file in files(dir) {
            if let Ok(text) = std::fs::read(&file) {
                seeds.add("check_documents", &text);
            }
        }
        for doc in read_documents(&[dir.clone()], &ReadOptions::default()) {
            let Ok(doc) = doc else { continue };
            let input = &doc.input;
            let review = review_of(input.uid.as_str(), &input.object);
            let body = serde_json::to_vec(&review).unwrap_or_default();
            seeds.add("admission_review", &body);
            for endpoint in [0u8, 1] {
                seeds.add("admission_handler", &[&[endpoint][..], &body].concat());
            }
            let (api_version, kind) = input.type_meta();
            match kind {
                "TrainJob" => trainjobs.push(input.object.clone()),
                "ClusterTrainingRuntime" | "TrainingRuntime" => runtimes.push(input.object.clone()),
                _ => {}
            }
            if let Some(spec) = lookup(api_version, kind) {
                let selector = kind_selector(api_version, kind);
                let object = serde_json::to_vec(&input.object).unwrap_or_default();
                seeds.add("job_view", &[&[selector][..], &object].concat());
                let view = JobView::build(spec, &input.object);
                for r in &view.replicas {
                    for c in r.containers.iter().chain(&r.init_containers) {
                        images.insert(c.image.clone());
                    }
                }
            }
            if let Ok(m) = gangplank::review::decide::mutate(&set, input) {
                let case = json!({"object": input.object, "intents": m.applied});
                seeds.add(
                    "mutation_intents",
                    &serde_json::to_vec(&case).unwrap_or_default(),
                );
            }
        }
    }
    for job in &trainjobs {
        for runtime in &runtimes {
            let pair = serde_json::to_vec(&json!([job, runtime])).unwrap_or_default();
            seeds.add("trainer_view", &pair);
        }
    }
    for image in images.iter().filter(|i| !i.is_empty()) {
        seeds.add("oci_reference", image.as_bytes());
    }
    // cluster_snapshot: the snapshot files of the policy cases, and each `cluster:` list of
    // a case file as the List kubectl would print.
    for file in files(&repo.join("policies/tests")) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if file.parent().is_some_and(|d| d.ends_with("clusters")) {
            seeds.add("cluster_snapshot", text.as_bytes());
            continue;
        }
        for items in cluster_lists(&text) {
            let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
            seeds.add("cluster_snapshot", list.to_string().as_bytes());
        }
    }
    for text in params_texts(&repo.join("policies")) {
        seeds.add("params_yaml", text.as_bytes());
    }
    for (target, n) in &seeds.counts {
        println!("{target}: {n} seeds");
    }
}

/// Seed files, one directory per target, named by index.
struct Seeds {
    out: PathBuf,
    counts: std::collections::BTreeMap<&'static str, usize>,
}

impl Seeds {
    fn new(out: &Path) -> Seeds {
        Seeds {
            out: out.to_path_buf(),
            counts: Default::default(),
        }
    }

    fn add(&mut self, target: &'static str, data: &[u8]) {
        let n = self.counts.entry(target).or_default();
        let dir = self.out.join(target);
        if let Err(e) = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join(format!("seed-{n:05}")), data))
        {
            eprintln!("{}: {e}", dir.display());
            std::process::exit(1);
        }
        *n += 1;
    }
}

fn kind_selector(api_version: &str, kind: &str) -> u8 {
    // The order of the job_view target's KINDS table.
    match (api_version, kind) {
        ("kubeflow.org/v1", "PyTorchJob") => 0,
        ("kubeflow.org/v1", "TFJob") => 1,
        ("kubeflow.org/v1", "MPIJob") => 2,
        ("kubeflow.org/v1", "XGBoostJob") => 3,
        ("kubeflow.org/v1", "PaddleJob") => 4,
        ("kubeflow.org/v1", "JAXJob") => 5,
        _ => 6,
    }
}

fn review_of(uid: &str, object: &Value) -> Value {
    let uid = if uid.is_empty() { "seed" } else { uid };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "namespace": object.pointer("/metadata/namespace").cloned().unwrap_or(json!("default")),
            "name": object.pointer("/metadata/name").cloned(),
            "userInfo": {"username": "seed"},
            "object": object,
        }
    })
}

/// The `cluster:` lists of a case file: the file's own and each case's.
fn cluster_lists(text: &str) -> Vec<Value> {
    let Ok(doc) = yaml_serde::from_str::<Value>(text) else {
        return Vec::new();
    };
    let cases = doc.get("cases").and_then(Value::as_array);
    std::iter::once(&doc)
        .chain(cases.into_iter().flatten())
        .filter_map(|d| d.get("cluster").filter(|c| c.is_array()).cloned())
        .collect()
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// `params.yaml` and every `params:` overlay of the policy case files, as YAML text.
fn params_texts(policies: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string(policies.join("params.yaml")) {
        out.push(text);
    }
    for file in files(&policies.join("tests")) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Ok(doc) = yaml_serde::from_str::<Value>(&text) else {
            continue;
        };
        collect_params(&doc, &mut out);
    }
    out
}

fn collect_params(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == "params" && child.is_object() {
                    if let Ok(text) = yaml_serde::to_string(child) {
                        out.push(text);
                    }
                }
                collect_params(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_params(i, out)),
        _ => {}
    }
}
