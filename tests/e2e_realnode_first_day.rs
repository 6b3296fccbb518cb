//! A safe first day, on a real node (issue 39 item 3): gangplank installed from its image with
//! deploy/opt-in, deploy/fail-open and deploy/audit-first, as a platform team starts. Jobs in
//! namespaces without the label are not judged at all; in a labelled namespace every finding
//! is reported (the decision log) and nothing is refused, while the mutations still apply; promoting
//! one policy (`action: deny` in the policies ConfigMap's params.yaml) makes the running pods
//! refuse its findings again without a restart; and with every webhook replica gone, jobs are
//! admitted instead of refused.

mod support;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::install::{self, describe, kubectl_ok, scale_webhook, Install, Overlay, NAMESPACE};
use support::realnode::{self, node, RealNode};
use support::realnode_jobs::tag_only_job;

fn main() {
    let tests: Vec<(&'static str, support::harness::Test)> = vec![
        ("jobs_in_unlabelled_namespaces_are_not_judged", || {
            Box::pin(jobs_in_unlabelled_namespaces_are_not_judged())
        }),
        (
            "audit_first_reports_and_mutates_but_refuses_nothing",
            || Box::pin(audit_first_reports_and_mutates_but_refuses_nothing()),
        ),
        ("a_promoted_policy_refuses_again_without_a_restart", || {
            Box::pin(a_promoted_policy_refuses_again_without_a_restart())
        }),
        ("fail_open_admits_jobs_while_no_replica_answers", || {
            Box::pin(fail_open_admits_jobs_while_no_replica_answers())
        }),
    ];
    realnode::run_suite_with(
        "e2e_realnode_first_day",
        realnode::DEFAULT_DOMAIN,
        install::image_requirement,
        tests,
    )
}

const OVERLAY: Overlay = Overlay {
    dir: "realnode-first-day",
    components: &["opt-in", "fail-open", "audit-first"],
};

/// The namespace that opted in (labelled `gangplank.dev/admission=enabled`).
const OPTED_IN: &str = "team-a";

static INSTALL: OnceLock<Result<Install, String>> = OnceLock::new();

fn installed() -> (&'static RealNode, &'static Install) {
    let node = node();
    let install = INSTALL.get_or_init(|| {
        let install =
            std::panic::catch_unwind(|| Install::run_with(node, &OVERLAY)).map_err(|panic| {
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "the install panicked".to_string())
            })?;
        kubectl_ok(node, &["create", "namespace", OPTED_IN]);
        kubectl_ok(
            node,
            &[
                "label",
                "namespace",
                OPTED_IN,
                "gangplank.dev/admission=enabled",
            ],
        );
        Ok(install)
    });
    match install {
        Ok(install) => (node, install),
        Err(why) => panic!("the install failed: {why}"),
    }
}

/// `kubectl create -o json` of `manifest` (`dry_run`: server-side): the object as stored (or
/// as it would be) and kubectl's stderr (warnings), or the refusal.
fn create(node: &RealNode, manifest: &str, dry_run: bool) -> Result<(Value, String), String> {
    let mut args = vec!["create", "-o", "json", "-f", "-"];
    if dry_run {
        args.push("--dry-run=server");
    }
    let out = node.kubectl_stdin(&args, manifest);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        return Err(stderr);
    }
    let stored = serde_json::from_slice(&out.stdout).map_err(|e| format!("{e}: {stderr}"))?;
    Ok((stored, stderr))
}

/// Whether gangplank's mutating webhook defaulted the job (the runPolicy it adds).
fn mutated(job: &Value) -> bool {
    !job["spec"]["runPolicy"]["cleanPodPolicy"].is_null()
}

async fn jobs_in_unlabelled_namespaces_are_not_judged() {
    let (node, _) = installed();
    kubectl_ok(node, &["create", "namespace", "free"]);
    let (stored, stderr) =
        create(node, &tag_only_job("tagged", "free"), false).expect("created unjudged");
    assert!(!mutated(&stored), "not defaulted either: {stored}");
    assert!(!stderr.contains("Warning"), "no finding reported: {stderr}");
}

async fn audit_first_reports_and_mutates_but_refuses_nothing() {
    let (node, _) = installed();
    let (stored, stderr) = create(node, &tag_only_job("tagged", OPTED_IN), false)
        .unwrap_or_else(|refusal| panic!("audit-first refuses nothing: {refusal}"));
    assert!(mutated(&stored), "the defaults still apply: {stored}");
    // `audit` reports without bothering the user (`warn` would print `Warning:` lines).
    assert!(!stderr.contains("not pinned by digest"), "{stderr}");
    // The finding is in the webhook's decision log (one JSON line per decision).
    let began = Instant::now();
    loop {
        let logs = kubectl_ok(
            node,
            &[
                "-n",
                NAMESPACE,
                "logs",
                "-l",
                "app.kubernetes.io/component=webhook",
                "--tail=-1",
            ],
        );
        let reported = logs.lines().any(|line| {
            line.contains("\"object_name\":\"tagged\"")
                && line.contains(OPTED_IN)
                && line.contains("images")
        });
        if reported {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "no decision line reports the images finding:\n{logs}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The policies ConfigMap's params.yaml with `images` promoted to deny.
fn promote_images(node: &RealNode) {
    let params = kubectl_ok(
        node,
        &[
            "-n",
            NAMESPACE,
            "get",
            "configmap",
            "gangplank-policies",
            "-o",
            "jsonpath={.data.params\\.yaml}",
        ],
    );
    assert!(params.contains("\npolicies:\n"), "{params}");
    let promoted = params.replacen(
        "\npolicies:\n",
        "\npolicies:\n  images:\n    action: deny\n",
        1,
    );
    let patch = json!({"data": {"params.yaml": promoted}}).to_string();
    kubectl_ok(
        node,
        &[
            "-n",
            NAMESPACE,
            "patch",
            "configmap",
            "gangplank-policies",
            "--type=merge",
            "-p",
            &patch,
        ],
    );
}

async fn a_promoted_policy_refuses_again_without_a_restart() {
    let (node, _) = installed();
    promote_images(node);
    let began = Instant::now();
    let refusal = loop {
        match create(node, &tag_only_job("promoted", OPTED_IN), true) {
            Err(refusal) if refusal.contains("denied the request") => break refusal,
            other => assert!(
                began.elapsed() < Duration::from_secs(120),
                "the promotion never reached the pods: {other:?}\n{}",
                describe(node)
            ),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!(
        "realnode: images promoted to deny in the ConfigMap: refused {:.1} s later (kubelet sync + reload)",
        began.elapsed().as_secs_f64()
    );
    assert!(refusal.contains("[images]"), "{refusal}");
    let restarts = kubectl_ok(
        node,
        &[
            "-n",
            NAMESPACE,
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/component=webhook",
            "-o",
            "jsonpath={.items[*].status.containerStatuses[0].restartCount}",
        ],
    );
    assert!(
        restarts.split_whitespace().all(|r| r == "0"),
        "reloaded, not restarted: {restarts}"
    );
}

async fn fail_open_admits_jobs_while_no_replica_answers() {
    let (node, _) = installed();
    scale_webhook(node, 0);
    kubectl_ok(
        node,
        &[
            "-n",
            NAMESPACE,
            "wait",
            "--for=delete",
            "pod",
            "-l",
            "app.kubernetes.io/component=webhook",
            "--timeout=120s",
        ],
    );
    let (stored, _) = create(node, &tag_only_job("unjudged", OPTED_IN), false)
        .unwrap_or_else(|refusal| panic!("fail-open admits: {refusal}"));
    assert!(!mutated(&stored), "admitted as written: {stored}");
    scale_webhook(node, 3);
    let back = install::wait_until_the_webhooks_answer(node);
    eprintln!(
        "realnode: fail-open: a job admitted unjudged with no replica; scaled back to 3, answering {:.1} s later",
        back.as_secs_f64()
    );
}
