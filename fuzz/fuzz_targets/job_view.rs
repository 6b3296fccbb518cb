//! JobView construction over arbitrary JSON for every training kind: never a panic, and
//! every path it reports is a pointer (`""` or starting with `/`).
#![no_main]

use gangplank::job::{lookup, JobView};
use libfuzzer_sys::fuzz_target;

const KINDS: &[(&str, &str)] = &[
    ("kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/v1", "TFJob"),
    ("kubeflow.org/v1", "MPIJob"),
    ("kubeflow.org/v1", "XGBoostJob"),
    ("kubeflow.org/v1", "PaddleJob"),
    ("kubeflow.org/v1", "JAXJob"),
    ("kubeflow.org/v2beta1", "MPIJob"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, json)) = data.split_first() else {
        return;
    };
    let Ok(object) = serde_json::from_slice::<serde_json::Value>(json) else {
        return;
    };
    let Some(&(api_version, kind)) = KINDS.get(usize::from(selector) % KINDS.len()) else {
        return;
    };
    let Some(spec) = lookup(api_version, kind) else {
        panic!("{api_version} {kind} is a known kind");
    };
    let view = JobView::build(spec, &object);
    for p in &view.problems {
        assert!(p.path.is_empty() || p.path.starts_with('/'), "{}", p.path);
    }
    for r in &view.replicas {
        assert!(r.path.starts_with('/'), "{}", r.path);
        for c in r.containers.iter().chain(&r.init_containers) {
            assert!(
                c.path.starts_with(&r.pod_spec_path),
                "{} under {}",
                c.path,
                r.pod_spec_path
            );
        }
    }
    assert!(view.total_pods >= 0);
});
