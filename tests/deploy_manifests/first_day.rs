//! The first-day components, built as their kustomizations tell users to: deploy/opt-in
//! narrows the job webhooks to labelled namespaces, deploy/fail-open lets jobs through while
//! no replica answers, deploy/audit-first turns every policy's default action to audit. Each
//! changes only what its file says, and they combine with each other and with
//! deploy/trainer. (What they do in a cluster: tests/e2e_realnode_first_day.rs.)

use serde_json::{json, Value};

use crate::components::build;
use crate::kustomize::find;

const CONFIGURATIONS: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// The webhooks of both configurations, by name, as (configuration kind, webhook).
fn webhooks(objects: &[Value]) -> Vec<(&'static str, &Value)> {
    CONFIGURATIONS
        .iter()
        .flat_map(|kind| {
            find(objects, kind, "gangplank")["webhooks"]
                .as_array()
                .expect("webhooks")
                .iter()
                .map(move |w| (*kind, w))
        })
        .collect()
}

fn job_webhooks(objects: &[Value]) -> Vec<&Value> {
    webhooks(objects)
        .into_iter()
        .map(|(_, w)| w)
        .filter(|w| w["name"] == "mutate.gangplank.dev" || w["name"] == "validate.gangplank.dev")
        .collect()
}

fn serve_args(objects: &[Value]) -> Vec<String> {
    find(objects, "Deployment", "gangplank-webhook")["spec"]["template"]["spec"]["containers"][0]
        ["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_string())
        .collect()
}

/// Everything but the paths a component is meant to change is equal to the plain build.
fn without(mut objects: Vec<Value>, strip: impl Fn(&mut Value)) -> Vec<Value> {
    objects.iter_mut().for_each(strip);
    objects
}

#[test]
fn opt_in_calls_the_job_webhooks_only_in_labelled_namespaces() {
    let (Some(plain), Some(opt_in)) = (build(&[], None, &[]), build(&["opt-in"], None, &[])) else {
        return;
    };
    let expected = json!({
        "matchLabels": {"gangplank.dev/admission": "enabled"},
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                              "values": ["gangplank-system", "kube-system"]}]
    });
    let hooks = job_webhooks(&opt_in);
    assert_eq!(hooks.len(), 2);
    for hook in hooks {
        assert_eq!(hook["namespaceSelector"], expected, "{}", hook["name"]);
    }
    // Nothing else changes: the exclusions of the plain build are kept inside the new selector.
    let selector_free = |o: &mut Value| {
        if let Some(hooks) = o["webhooks"].as_array_mut() {
            hooks
                .iter_mut()
                .for_each(|w| w["namespaceSelector"] = Value::Null);
        }
    };
    assert_eq!(
        without(plain, selector_free),
        without(opt_in, selector_free)
    );
}

#[test]
fn fail_open_ignores_failures_of_the_job_webhooks_but_not_of_the_trainer_pod_webhook() {
    let (Some(plain), Some(open)) = (
        build(&["trainer"], None, &[]),
        build(&["trainer", "fail-open"], None, &[]),
    ) else {
        return;
    };
    for (kind, hook) in webhooks(&open) {
        let expected = match hook["name"].as_str() {
            Some("mutate.gangplank.dev" | "validate.gangplank.dev") => "Ignore",
            _ => "Fail",
        };
        assert_eq!(hook["failurePolicy"], expected, "{kind} {}", hook["name"]);
    }
    let policy_free = |o: &mut Value| {
        if let Some(hooks) = o["webhooks"].as_array_mut() {
            hooks
                .iter_mut()
                .for_each(|w| w["failurePolicy"] = Value::Null);
        }
    };
    assert_eq!(without(plain, policy_free), without(open, policy_free));
}

#[test]
fn audit_first_adds_the_default_action_to_serve_and_nothing_else() {
    let (Some(plain), Some(audit)) = (build(&[], None, &[]), build(&["audit-first"], None, &[]))
    else {
        return;
    };
    let mut expected = serve_args(&plain);
    expected.push("--default-action=audit".to_string());
    assert_eq!(serve_args(&audit), expected);
    let args_free = |o: &mut Value| {
        if o["kind"] == "Deployment" {
            o["spec"]["template"]["spec"]["containers"][0]["args"] = Value::Null;
        }
    };
    assert_eq!(without(plain, args_free), without(audit, args_free));
}

#[test]
fn the_three_first_day_components_combine_with_each_other_and_the_controller() {
    let Some(all) = build(
        &[
            "controller",
            "trainer",
            "opt-in",
            "fail-open",
            "audit-first",
        ],
        None,
        &[],
    ) else {
        return;
    };
    for hook in job_webhooks(&all) {
        assert_eq!(hook["failurePolicy"], "Ignore");
        assert_eq!(
            hook["namespaceSelector"]["matchLabels"]["gangplank.dev/admission"],
            "enabled"
        );
    }
    assert!(serve_args(&all).contains(&"--default-action=audit".to_string()));
}
