//! Mutation intents applied to an object, then the JSON patch generated from the change:
//! `{"object": ..., "intents": [...]}`. Applying never panics, and the patch applied to the
//! original object always gives the mutated one (what the apiserver will store).
#![no_main]

use gangplank::policy::Intent;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Object(case)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let original = case.get("object").cloned().unwrap_or(Value::Null);
    let Some(Value::Array(intents)) = case.get("intents") else {
        return;
    };
    let mut mutated = original.clone();
    for raw in intents {
        let Ok(intent) = Intent::parse("fuzz", raw) else {
            continue;
        };
        let _ = intent.apply(&mut mutated);
    }
    let patch = json_patch::diff(&original, &mutated);
    let mut patched = original.clone();
    if let Err(e) = json_patch::patch(&mut patched, &patch) {
        panic!("the generated patch does not apply: {e}");
    }
    assert_eq!(patched, mutated, "the patch gives the mutated object");
});
