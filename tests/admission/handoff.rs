//! The `/mutate` → `/validate` hand-off over HTTPS: `/validate` answers an object `/mutate`
//! produced with the validation policies alone, and answers exactly what a server that
//! never saw the `/mutate` answers (a full review).

use serde_json::{json, Map, Value};

use crate::support::{apply, create, example, TestServer};

/// The object as the apiserver sends it to `/validate`: the patch applied, then the fields
/// it sets itself, with every object's keys in another order (the apiserver re-encodes).
fn as_apiserver_sends(object: &Value, mutate_answer: &Value) -> Value {
    let mut stored = apply(object, mutate_answer);
    let meta = &mut stored["metadata"];
    meta["uid"] = json!("5c1c0a8e-1111-4c4e-9d6a-0d2a4b1f0c11");
    meta["resourceVersion"] = json!("4711");
    meta["creationTimestamp"] = json!("2026-11-26T23:00:00Z");
    meta["generation"] = json!(1);
    meta["managedFields"] =
        json!([{"manager": "kubectl-client-side-apply", "operation": "Update"}]);
    reversed(&stored)
}

fn reversed(v: &Value) -> Value {
    match v {
        Value::Object(fields) => {
            let mut out = Map::new();
            for (k, v) in fields.iter().rev() {
                out.insert(k.clone(), reversed(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

async fn handoffs(server: &TestServer) -> (u64, u64) {
    (
        server.metrics.handoffs_with(true),
        server.metrics.handoffs_with(false),
    )
}

/// The parts of an answer a user sees.
fn verdict(answer: &Value) -> Value {
    json!({
        "allowed": answer["allowed"],
        "status": answer["status"],
        "warnings": answer["warnings"],
    })
}

#[tokio::test]
async fn validate_skips_the_mutation_policies_for_what_mutate_produced_and_answers_the_same() {
    let server = TestServer::start().await;
    let other_replica = TestServer::start().await;
    for name in [
        "pytorchjob-gpu.yaml",
        "tfjob-parameter-server.yaml",
        "mpijob-v2beta1.yaml",
    ] {
        let job = example(name);
        let mutated = server.admit("/mutate", &create("m", &job)).await;
        assert_eq!(mutated["allowed"], true, "{name}: {mutated}");
        let review = create("v", &as_apiserver_sends(&job, &mutated));
        let before = handoffs(&server).await;
        let handed = server.admit("/validate", &review).await;
        assert_eq!(
            handoffs(&server).await,
            (before.0 + 1, before.1),
            "{name}: /validate of what /mutate produced is a hit"
        );
        // The other replica never saw the /mutate: a miss, a full review, the same answer.
        let before = handoffs(&other_replica).await;
        let full = other_replica.admit("/validate", &review).await;
        assert_eq!(handoffs(&other_replica).await, (before.0, before.1 + 1));
        assert_eq!(verdict(&handed), verdict(&full), "{name}");
    }
}

#[tokio::test]
async fn an_object_changed_after_mutate_is_reviewed_in_full() {
    let server = TestServer::start().await;
    let job = example("pytorchjob-gpu.yaml");
    let mutated = server.admit("/mutate", &create("m", &job)).await;
    let mut changed = as_apiserver_sends(&job, &mutated);
    // Another mutating webhook (or a later patch) moves the Workers to a scheduler that
    // does not gang-schedule: what /mutate produced is no longer what is validated.
    changed["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] =
        json!("default-scheduler");
    let before = handoffs(&server).await;
    let answer = server.admit("/validate", &create("v", &changed)).await;
    assert_eq!(handoffs(&server).await, (before.0, before.1 + 1));
    assert_eq!(answer["allowed"], false, "{answer}");
    let message = answer["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("gang_scheduling"), "{message}");
}

#[tokio::test]
async fn the_request_around_the_object_is_part_of_the_key() {
    let server = TestServer::start().await;
    let job = example("pytorchjob-gpu.yaml");
    let mutated = server.admit("/mutate", &create("m", &job)).await;
    let object = as_apiserver_sends(&job, &mutated);
    // The same object in an UPDATE (with an old object) was not what /mutate produced.
    let update = crate::support::review("u", "UPDATE", &object, Some(&object), false);
    let before = handoffs(&server).await;
    let answer = server.admit("/validate", &update).await;
    assert_eq!(handoffs(&server).await, (before.0, before.1 + 1));
    assert_eq!(answer["allowed"], true, "{answer}");
}
