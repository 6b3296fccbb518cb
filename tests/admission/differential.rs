//! One decision path: every case of the shipped policy suites, sent through the real HTTPS
//! server as the apiserver would (`/mutate`, the patch applied, `/validate` on the result),
//! must get the answer the library gives offline (`gangplank check` and `gangplank test`).

use std::collections::BTreeMap;
use std::path::Path;

use gangplank::admission::verdict::bound_warnings;
use gangplank::policy::{ParamsFile, PolicySet};
use gangplank::review::{self, Input};
use gangplank::suite::{Suite, TestCase};
use serde_json::{json, Value};

use crate::support::{apply, copy_policies, repo, Options, TestServer};

/// A case ready to send, with the parameter overlay its policies are compiled with.
struct Sendable {
    name: String,
    input: Input,
}

/// The AdmissionReview the apiserver would send for `input`, with `object` as the object.
fn review_of(input: &Input, uid: &str, object: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": input.operation.as_str(),
            "namespace": input.namespace,
            "name": input.name,
            "dryRun": input.dry_run,
            "userInfo": input.user_info,
            "object": object,
            "oldObject": input.old_object.clone().unwrap_or(Value::Null),
        }
    })
}

/// The shipped cases grouped by the params.yaml they need, without those the HTTPS path
/// cannot express: `images` (input.images comes from a resolver, not from the review).
fn cases_by_params(suite: &Suite) -> (BTreeMap<String, (ParamsFile, Vec<Sendable>)>, usize) {
    let base = ParamsFile::parse(
        &std::fs::read_to_string(repo().join("policies/params.yaml")).expect("params.yaml"),
        "params.yaml",
    )
    .expect("params parse");
    let mut groups: BTreeMap<String, (ParamsFile, Vec<Sendable>)> = BTreeMap::new();
    let mut left_out = 0;
    for test in suite.tests() {
        let TestCase::Case {
            file,
            case,
            file_params,
            fixtures,
            ..
        } = test
        else {
            continue;
        };
        let Ok(input) = case.input(fixtures, file.parent().unwrap_or(Path::new("."))) else {
            left_out += 1;
            continue;
        };
        if !input.images.is_empty() {
            left_out += 1;
            continue;
        }
        let mut params = base.clone();
        for overlay in [file_params.as_ref(), case.params.as_ref()]
            .into_iter()
            .flatten()
        {
            params.overlay(overlay);
        }
        let key = serde_json::to_string(&params).expect("params serialize");
        let name = test.name(suite.root());
        groups
            .entry(key)
            .or_insert_with(|| (params, Vec::new()))
            .1
            .push(Sendable { name, input });
    }
    (groups, left_out)
}

/// What differs between the server's answers and the offline decision, if anything.
async fn compare(server: &TestServer, set: &PolicySet, case: &Sendable) -> Option<String> {
    let input = &case.input;
    let offline = review::review(set, input);
    let mutated_reply = server
        .admit("/mutate", &review_of(input, "diff-m", &input.object))
        .await;
    let decision = match offline {
        Ok(d) => d,
        Err(e) => {
            return (mutated_reply["allowed"] != false || mutated_reply["status"]["code"] != 500)
                .then(|| {
                    format!("offline evaluation failed ({e}), the server answered {mutated_reply}")
                });
        }
    };
    let stored = apply(&input.object, &mutated_reply);
    if stored != decision.mutated {
        return Some(format!(
            "/mutate's patch gives\n{stored}\noffline mutation gives\n{}",
            decision.mutated
        ));
    }
    // What /mutate tells with its patch (the applied intents' notes), /validate does not
    // repeat: the object it sees no longer shows what was changed. (A request not checked
    // gets its warning from both.)
    let mutation = review::decide::patch(set, input).map(|(d, _)| d).ok();
    let told = mutation
        .as_ref()
        .filter(|d| d.skipped.is_none())
        .map(|d| d.violations.clone())
        .unwrap_or_default();
    let mut validation = decision.clone();
    validation.violations.retain(|v| !told.contains(v));
    let validated = server
        .admit("/validate", &review_of(input, "diff-v", &stored))
        .await;
    let warnings = |reply: &serde_json::Value| reply.get("warnings").cloned().unwrap_or(json!([]));
    let expected = json!({
        "allowed": decision.allowed(),
        "message": decision.denial_message(),
        "warnings": bound_warnings(&validation.warnings()),
        "mutate warnings": bound_warnings(&mutation.map(|d| d.warnings()).unwrap_or_default()),
    });
    let got = json!({
        "allowed": validated["allowed"],
        "message": validated["status"]["message"],
        "warnings": warnings(&validated),
        "mutate warnings": warnings(&mutated_reply),
    });
    (expected != got).then(|| format!("/validate answered {got}\noffline decision {expected}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_case_gets_the_same_answer_over_https_as_offline() {
    let suite = Suite::discover(&repo().join("policies")).expect("suites load");
    let (groups, left_out) = cases_by_params(&suite);
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for (params, cases) in groups.into_values() {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_policies(dir.path());
        let yaml = yaml_serde::to_string(&params).expect("params to YAML");
        std::fs::write(dir.path().join("params.yaml"), yaml).expect("write params");
        let set = PolicySet::load(dir.path()).expect("policies with the overlay load");
        let server = TestServer::with(Options {
            policies: dir.path().to_path_buf(),
            ..Options::default()
        })
        .await;
        for case in &cases {
            compared += 1;
            if let Some(diff) = compare(&server, &set, case).await {
                mismatches.push(format!("{}:\n{diff}", case.name));
            }
        }
        server.stop().await;
    }
    // Libtest captures stdout; this line is meant to be seen.
    eprintln!(
        "differential: {compared} cases compared; {left_out} left out (they supply input.images, which only a resolver provides over HTTPS, or name a missing file)"
    );
    assert!(compared > 300, "only {compared} cases compared");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}
