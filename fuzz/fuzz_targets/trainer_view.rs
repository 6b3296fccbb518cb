//! A TrainJob rendered with its runtime, and a runtime on its own, over arbitrary JSON
//! (`[trainjob, runtime]`): never a panic, counts never negative, the gang's first wave
//! never larger than the Trainer's minMember, and a runtime's own paths are pointers.
#![no_main]

use gangplank::trainer::view::{runtime_view, trainjob_view};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Array(pair)) = serde_json::from_slice::<serde_json::Value>(data)
    else {
        return;
    };
    let (Some(job), Some(runtime)) = (pair.first(), pair.get(1)) else {
        return;
    };
    let view = trainjob_view(job, Ok(runtime));
    let Some(trainer) = view.trainer.as_ref() else {
        panic!("a TrainJob's view has trainer facts");
    };
    assert!(trainer.first_wave >= 0 && trainer.first_wave <= trainer.min_member);
    assert!(view.replicas.iter().all(|r| r.replicas >= 0));
    let own = runtime_view("ClusterTrainingRuntime", runtime);
    for r in &own.replicas {
        assert!(r.path.starts_with('/'), "{}", r.path);
    }
    for p in &own.problems {
        assert!(p.path.is_empty() || p.path.starts_with('/'), "{}", p.path);
    }
});
