//! `gangplank audit --write-reports` against a real kube-apiserver with the wgpolicyk8s.io
//! PolicyReport CRD (tests/data/crds/), run as the binary, as deploy/audit's ServiceAccount
//! (impersonated, with deploy/audit's RBAC applied as `kubectl kustomize` renders it): the
//! grants are enough for every step, or a step fails here.
//!
//! A control plane of its own, so the run's counts are this test's jobs' alone. One pass
//! after another: reports created (page size 1, fewer than the jobs), nothing written when
//! nothing changed, a changed job's report updated and the reports of a fixed and a deleted
//! job deleted, another tool's reports untouched, a namespace whose report name is taken
//! failing alone, and the errors of a server that refuses or does not answer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{json, Value};

use crate::support::rbac::{self, Install, SYSTEM_NAMESPACE};
use crate::support::run::Run;
use crate::support::{self, jobs, ControlPlane, Crds};

const ACCOUNT: &str = "gangplank-audit";

fn policy_reports() -> kube::api::ApiResource {
    gangplank::audit::publish::resource()
}

/// Installs the PolicyReport CRD and waits until the resource is served.
async fn install_crd(control_plane: &ControlPlane) {
    let crd = support::repo().join("tests/data/crds/wgpolicyk8s.io_policyreports.yaml");
    rbac::kubectl(control_plane, &["apply", "-f", &crd.display().to_string()]);
    let client = control_plane.client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &policy_reports());
    support::wait_for(
        "policyreports.wgpolicyk8s.io served",
        std::time::Duration::from_secs(30),
        || {
            let api = api.clone();
            async move {
                api.list(&ListParams::default())
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        },
    )
    .await;
}

/// A kubeconfig for the control plane that sends every request as `account` of
/// gangplank-system (the admin token may impersonate).
fn kubeconfig_as(control_plane: &ControlPlane, account: &str) -> PathBuf {
    let text = std::fs::read_to_string(&control_plane.kubeconfig).expect("kubeconfig");
    let token = format!("token: {}\n", support::control_plane::TOKEN);
    assert!(text.contains(&token), "the admin kubeconfig has a token");
    let user = format!("system:serviceaccount:{SYSTEM_NAMESPACE}:{account}");
    let text = text.replace(&token, &format!("{token}      as: {user}\n"));
    let path = control_plane.file(&format!("kubeconfig-as-{account}"));
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

/// `gangplank audit --write-reports ARGS` with `kubeconfig`, as e2e_audit runs the audit.
async fn write_reports(kubeconfig: &Path, args: &[&str]) -> Run {
    let all: Vec<&str> = ["--write-reports"].iter().chain(args).copied().collect();
    super::audit(kubeconfig, &all).await
}

/// Every PolicyReport in `namespaces`, by (namespace, name).
async fn reports(client: &kube::Client, namespaces: &[&str]) -> BTreeMap<(String, String), Value> {
    let mut out = BTreeMap::new();
    for ns in namespaces {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &policy_reports());
        for item in api.list(&ListParams::default()).await.expect("list").items {
            let item = serde_json::to_value(item).expect("JSON");
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            out.insert((ns.to_string(), name.to_string()), item.clone());
        }
    }
    out
}

/// Creates a PolicyReport as another tool would (as admin).
async fn foreign_report(client: &kube::Client, ns: &str, name: &str, labels: Value) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &policy_reports());
    let report: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
        "metadata": {"name": name, "labels": labels},
        "summary": {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0},
        "results": [{"policy": "other-tool-policy", "result": "fail", "source": "kyverno"}],
    }))
    .expect("PolicyReport");
    let created = api
        .create(&PostParams::default(), &report)
        .await
        .unwrap_or_else(|e| panic!("create {ns}/{name}: {e}"));
    serde_json::to_value(created).expect("JSON")
}

async fn store(client: &kube::Client, ns: &str, job: &Value) -> String {
    let stored = jobs::create(client, ns, job, false)
        .await
        .unwrap_or_else(|e| panic!("storing {}: {e}", job["metadata"]["name"]));
    stored["metadata"]["uid"]
        .as_str()
        .expect("a stored uid")
        .to_string()
}

/// Replaces the stored PyTorchJob `name` with `job` (its resourceVersion kept).
async fn update(client: &kube::Client, ns: &str, name: &str, mut job: Value) {
    let stored = jobs::stored_pytorch_job(client, ns, name).await;
    job["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
    let object: DynamicObject = serde_json::from_value(job).expect("job");
    jobs::pytorch_api(client, ns)
        .replace(name, &PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("replace {ns}/{name}: {e}"));
}

fn summary_line(run: &Run) -> &str {
    run.stdout
        .lines()
        .find(|l| l.starts_with("PolicyReports:"))
        .unwrap_or_else(|| panic!("no summary line:\n{}", run.output()))
}

fn key(ns: &str, uid: &str) -> (String, String) {
    (ns.to_string(), format!("gangplank-{uid}"))
}

pub async fn write_reports_creates_updates_and_deletes_only_gangplanks_own() {
    let control_plane = ControlPlane::start(&support::assets::get(), Crds::TrainingV1);
    install_crd(&control_plane).await;
    let install = Install::render(&control_plane, "e2e-audit-reports", &["audit"], &[]);
    install.apply(&control_plane);
    let client = control_plane.client().await;
    let kubeconfig = kubeconfig_as(&control_plane, ACCOUNT);
    let a = control_plane.namespace("reports-a").await;
    let b = control_plane.namespace("reports-b").await;
    let a_kept = store(&client, &a, &jobs::pytorch_job("two-masters", 2)).await;
    store(&client, &a, &jobs::pytorch_job("clean", 1)).await;
    let a_deleted = store(&client, &a, &jobs::pytorch_job("to-delete", 2)).await;
    let b_fixed = store(&client, &b, &jobs::pytorch_job("to-fix", 2)).await;
    let b_changed = store(&client, &b, &jobs::pytorch_job("to-change", 2)).await;
    let kyverno = json!({"app.kubernetes.io/managed-by": "kyverno"});
    let other = foreign_report(&client, &b, "kyverno-report", kyverno).await;

    // RBAC reaches the authorizer through an informer: wait until it shows the grants.
    support::wait_for(
        "deploy/audit's grants reach the RBAC authorizer",
        std::time::Duration::from_secs(20),
        || async {
            let rights = rbac::rights(&control_plane, SYSTEM_NAMESPACE, ACCOUNT, &a);
            let verbs = |resource: &str| {
                rights
                    .get(&(resource.to_string(), String::new()))
                    .map_or(0, |v| v.len())
            };
            if verbs("policyreports.wgpolicyk8s.io") == 4 && verbs("pytorchjobs.kubeflow.org") == 1
            {
                Ok(())
            } else {
                Err(format!("{rights:?}"))
            }
        },
    )
    .await;
    let first = write_reports(&kubeconfig, &["--page-size", "1"]).await;
    assert_eq!(first.code, 0, "{}", first.output());
    assert_eq!(
        summary_line(&first),
        "PolicyReports: 4 created, 0 updated, 0 deleted, 0 unchanged; 5 jobs audited, 4 with findings",
        "page size 1, five jobs: every page was read\n{}",
        first.output()
    );
    let stored = reports(&client, &[&a, &b]).await;
    for (ns, uid) in [
        (&a, &a_kept),
        (&a, &a_deleted),
        (&b, &b_fixed),
        (&b, &b_changed),
    ] {
        let report = stored
            .get(&key(ns, uid))
            .unwrap_or_else(|| panic!("no report for {uid} in {ns}: {stored:#?}"));
        assert_eq!(
            report["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "gangplank"
        );
        assert_eq!(report["scope"]["uid"], uid.as_str());
        assert_eq!(report["summary"]["fail"], 1, "{report:#}");
        let fail = crate::fail_result(report);
        assert_eq!(fail["policy"], "coordinator", "{report:#}");
        assert_eq!(
            report["metadata"]["managedFields"][0]["manager"], "gangplank-audit",
            "{report:#}"
        );
    }
    assert_eq!(
        stored.len(),
        5,
        "four of gangplank's and kyverno's: {stored:#?}"
    );

    let again = write_reports(&kubeconfig, &[]).await;
    assert_eq!(again.code, 0, "{}", again.output());
    assert_eq!(
        summary_line(&again),
        "PolicyReports: 0 created, 0 updated, 0 deleted, 4 unchanged; 5 jobs audited, 4 with findings"
    );
    assert_eq!(reports(&client, &[&a, &b]).await, stored, "nothing written");

    jobs::pytorch_api(&client, &a)
        .delete("to-delete", &Default::default())
        .await
        .expect("delete job");
    update(&client, &b, "to-fix", jobs::pytorch_job("to-fix", 1)).await;
    update(&client, &b, "to-change", jobs::pytorch_job("to-change", 3)).await;
    let third = write_reports(&kubeconfig, &["--page-size", "2"]).await;
    assert_eq!(third.code, 0, "{}", third.output());
    assert_eq!(
        summary_line(&third),
        "PolicyReports: 0 created, 1 updated, 2 deleted, 1 unchanged; 4 jobs audited, 2 with findings",
        "{}",
        third.output()
    );
    let now = reports(&client, &[&a, &b]).await;
    let kyverno_key = (b.clone(), "kyverno-report".to_string());
    let names: BTreeSet<(String, String)> = now.keys().cloned().collect();
    let expected = BTreeSet::from([key(&a, &a_kept), key(&b, &b_changed), kyverno_key.clone()]);
    assert_eq!(
        names, expected,
        "the fixed and the deleted job's reports are gone"
    );
    let changed = &now[&key(&b, &b_changed)];
    assert!(
        changed["results"]
            .to_string()
            .contains("Master has 3 replicas"),
        "{changed:#}"
    );
    assert_eq!(now[&key(&a, &a_kept)], stored[&key(&a, &a_kept)]);
    assert_eq!(
        now[&kyverno_key]["metadata"]["resourceVersion"], other["metadata"]["resourceVersion"],
        "another tool's report is untouched"
    );

    // A report named as gangplank would name one, but not labelled as its own: that
    // namespace fails, the others are still written.
    let c = control_plane.namespace("reports-c").await;
    let c_taken = store(&client, &c, &jobs::pytorch_job("two-masters", 2)).await;
    let squatter = foreign_report(&client, &c, &format!("gangplank-{c_taken}"), json!({})).await;
    let a_new = store(&client, &a, &jobs::pytorch_job("new-two-masters", 2)).await;
    let fourth = write_reports(&kubeconfig, &[]).await;
    assert_eq!(fourth.code, 2, "{}", fourth.output());
    assert!(
        fourth.stderr.contains(&format!(
            "error: {c}: cannot create PolicyReport gangplank-{c_taken}"
        )) && fourth.stderr.contains("another tool's, left alone"),
        "{}",
        fourth.output()
    );
    assert!(
        fourth
            .stdout
            .contains(&format!("FAILED: 1 write(s) not done, in namespace(s) {c}")),
        "{}",
        fourth.output()
    );
    assert_eq!(
        summary_line(&fourth),
        "PolicyReports: 1 created, 0 updated, 0 deleted, 2 unchanged; 6 jobs audited, 4 with findings"
    );
    let after = reports(&client, &[&a, &c]).await;
    assert!(after.contains_key(&key(&a, &a_new)), "{after:#?}");
    assert_eq!(
        after[&key(&c, &c_taken)]["metadata"]["resourceVersion"],
        squatter["metadata"]["resourceVersion"]
    );

    refusals_and_silence_exit_2_with_the_reason(&control_plane).await;
    install.remove(&control_plane);
}

/// An identity without deploy/audit's grants, and a server that does not answer: exit 2,
/// the reason on stderr, nothing written.
async fn refusals_and_silence_exit_2_with_the_reason(control_plane: &ControlPlane) {
    let nobody = kubeconfig_as(control_plane, "gangplank-nobody");
    let refused = write_reports(&nobody, &[]).await;
    assert_eq!(refused.code, 2, "{}", refused.output());
    assert!(
        refused
            .stderr
            .contains("cannot list PolicyReports labelled app.kubernetes.io/managed-by=gangplank")
            && refused.stderr.contains("forbidden")
            && refused.stderr.contains("no PolicyReport written"),
        "{}",
        refused.output()
    );
    let [port] = support::control_plane::free_ports::<1>();
    let text = std::fs::read_to_string(&control_plane.kubeconfig).expect("kubeconfig");
    let silent = control_plane.file("kubeconfig-silent");
    std::fs::write(
        &silent,
        text.replace(&control_plane.url, &format!("https://127.0.0.1:{port}")),
    )
    .expect("write kubeconfig");
    let unreachable = write_reports(&silent, &[]).await;
    assert_eq!(unreachable.code, 2, "{}", unreachable.output());
    assert!(
        unreachable.stderr.contains(&format!(
            "error: cannot reach the Kubernetes API server at https://127.0.0.1:{port}"
        )),
        "{}",
        unreachable.output()
    );
}
