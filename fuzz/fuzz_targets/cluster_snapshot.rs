//! A cluster snapshot over arbitrary text (what `check --cluster` and `audit
//! --cluster-snapshot` read), published and viewed by a job's request: never a panic; an
//! unreadable item is a problem of the view, never an error of the whole snapshot unless
//! the text is not YAML or holds a kind a snapshot never does; and a kind the snapshot
//! does not list stays unknown (null) in the view.
#![no_main]

use gangplank::cluster::{snapshot, ClusterHandle};
use gangplank::review::Input;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(inventory) = snapshot::parse(text, "fuzz") else {
        return;
    };
    let lists_claims = inventory.claims.is_some();
    let handle = ClusterHandle::fixed(&inventory);
    let Some(doc) = handle.current() else {
        panic!("a published inventory is current");
    };
    let job = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {
            "metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "pytorch", "image": "i"}]}}}}}});
    let input = Input::create(job, "default");
    let view = doc.view(&input.rego_input_for(&input.object));
    let view: serde_json::Value =
        serde_json::from_str(&view.to_json_str().unwrap_or_default()).unwrap_or_default();
    assert_eq!(!view["claims"].is_null(), lists_claims, "claims known iff listed");
});
