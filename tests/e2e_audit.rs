//! `gangplank audit` against a real kube-apiserver: jobs the webhooks would refuse are
//! stored directly (no webhooks are installed here), Nodes are created through the API
//! (capacity and labels, no kubelet), and the audit, run as a process with the control
//! plane's kubeconfig, finds each violation, builds the Node inventory itself for the
//! capacity policy, notes the kind whose CRD is missing and exits 1.
//!
//! `audit -o policyreport` is checked for the reports' shape and their resources' uids;
//! writing them to the cluster (`--write-reports`, with the PolicyReport CRD of
//! tests/data/crds/) is audit_reports/.

mod audit_reports;
mod support;

use std::path::Path;

use audit_reports::write_reports_creates_updates_and_deletes_only_gangplanks_own;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{json, Value};
use support::run::Run;
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_audit",
    [
        audit_reports_every_violation_of_the_stored_jobs_and_exits_1,
        audit_of_a_namespace_without_violations_exits_0,
        policyreports_name_the_stored_jobs_by_uid,
        write_reports_creates_updates_and_deletes_only_gangplanks_own,
    ]
);

const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");

/// The control plane, with two 8-GPU nodes labelled pool=audit and the Volcano queue
/// `default` that a Volcano install creates (created once): the policies send gangs there.
async fn cluster() -> &'static ControlPlane {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    static NODES: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    NODES
        .get_or_init(|| async {
            let client = control_plane.client().await;
            for name in ["audit-gpu-0", "audit-gpu-1"] {
                jobs::create_gpu_node(&client, name, "audit").await;
            }
            let queues: Api<DynamicObject> =
                Api::all_with(client.clone(), &gangplank::cluster::watch::queue_resource());
            let queue: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                "metadata": {"name": "default"}, "spec": {"weight": 1},
            }))
            .expect("Queue");
            queues
                .create(&PostParams::default(), &queue)
                .await
                .expect("Queue created");
        })
        .await;
    control_plane
}

/// A PyTorchJob of 1 Master + `workers` Workers, 8 GPUs each, on the `audit` nodes, with
/// nprocPerNode `nproc`.
fn gpu_job(name: &str, workers: u32, nproc: &str) -> Value {
    let mut job = jobs::gpu_gang(name, workers, "audit");
    job["spec"]["nprocPerNode"] = json!(nproc);
    job
}

/// Stores `job` in `ns` as it is: no webhook looks at it here.
async fn store(client: &kube::Client, ns: &str, job: &Value) -> Value {
    jobs::create(client, ns, job, false)
        .await
        .unwrap_or_else(|e| panic!("storing {}: {e}", job["metadata"]["name"]))
}

/// `gangplank audit --policies <repo policies> ARGS` with KUBECONFIG set to the control
/// plane's.
async fn audit(kubeconfig: &Path, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(support::gangplank());
    cmd.args(["audit", "--policies", POLICIES]).args(args);
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("GANGPLANK_")) {
        cmd.env_remove(key);
    }
    let out = cmd
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .await
        .expect("gangplank audit runs");
    Run::finished(out)
}

async fn audit_reports_every_violation_of_the_stored_jobs_and_exits_1() {
    let control_plane = cluster().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("audit-mixed").await;
    store(&client, &ns, &gpu_job("fits", 1, "8")).await;
    store(&client, &ns, &gpu_job("idle-gpus", 1, "4")).await;
    store(&client, &ns, &gpu_job("too-large", 3, "8")).await;
    let mut two_masters = jobs::pytorch_job("two-masters", 2);
    two_masters["metadata"]["labels"] = json!({"team": "nlp"});
    store(&client, &ns, &two_masters).await;

    let run = audit(&control_plane.kubeconfig, &["-n", &ns, "-o", "json"]).await;
    assert_eq!(run.code, 1, "{}", run.output());
    let doc: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(doc["source"], format!("cluster {}/", control_plane.url));
    assert_eq!(
        doc["inventory"], "cluster",
        "the audit lists the Nodes itself"
    );
    let verdicts: Vec<(String, String)> = doc["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            let s = |k: &str| j[k].as_str().unwrap_or_default().to_string();
            (s("name"), s("verdict"))
        })
        .collect();
    let expected = [
        ("fits", "passed"),
        ("idle-gpus", "warned"),
        ("too-large", "denied"),
        ("two-masters", "denied"),
    ]
    .map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(verdicts, expected, "{}", run.output());
    let violations = |name: &str| -> Vec<Value> {
        doc["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|j| j["name"] == name)
            .flat_map(|j| j["violations"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let too_large = violations("too-large");
    assert!(
        too_large.iter().any(|v| v["policy"] == "capacity"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.contains("together they hold 2 of them"))),
        "{too_large:#?}"
    );
    let two_masters = violations("two-masters");
    assert_eq!(two_masters[0]["policy"], "coordinator", "{two_masters:#?}");
    assert_eq!(
        two_masters[0]["path"],
        "/spec/pytorchReplicaSpecs/Master/replicas"
    );
    // This control plane has the v1 MPIJob CRD; the v2beta1 one is missing, and said so.
    assert!(
        run.stderr
            .contains("note: MPIJob kubeflow.org/v2beta1: CRD not installed; skipped"),
        "{}",
        run.output()
    );

    let table = audit(&control_plane.kubeconfig, &["--namespace", &ns]).await;
    assert_eq!(table.code, 1, "{}", table.output());
    let row = |name: &str, verdict: &str, policy: &str| {
        table.stdout.lines().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.get(..5) == Some(&[ns.as_str(), "PyTorchJob", name, verdict, policy][..])
        })
    };
    assert!(
        row("two-masters", "deny", "coordinator"),
        "{}",
        table.output()
    );
    assert!(row("too-large", "deny", "capacity"), "{}", table.output());
    assert!(row("idle-gpus", "warn", "nproc_gpu"), "{}", table.output());
    assert!(
        table
            .stdout
            .contains(&format!("jobs without violations: {ns} 1")),
        "{}",
        table.output()
    );
}

async fn audit_of_a_namespace_without_violations_exits_0() {
    let control_plane = cluster().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("audit-clean").await;
    store(&client, &ns, &jobs::pytorch_job("clean", 1)).await;
    store(&client, &ns, &gpu_job("fits", 1, "8")).await;
    let run = audit(&control_plane.kubeconfig, &["-n", &ns]).await;
    assert_eq!(run.code, 0, "{}", run.output());
    assert!(
        run.stdout.contains("2 jobs audited: 0 denied"),
        "{}",
        run.output()
    );
}

async fn policyreports_name_the_stored_jobs_by_uid() {
    let control_plane = cluster().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("audit-report").await;
    let stored = store(&client, &ns, &jobs::pytorch_job("two-masters", 2)).await;
    let uid = stored["metadata"]["uid"].as_str().expect("a stored uid");
    let run = audit(
        &control_plane.kubeconfig,
        &["-n", &ns, "-o", "policyreport"],
    )
    .await;
    assert_eq!(run.code, 1, "{}", run.output());
    let reports: Vec<Value> = run
        .stdout
        .split("\n---")
        .map(|d| d.trim_start_matches("---"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| yaml_serde::from_str(d).expect("a YAML document"))
        .collect();
    assert_eq!(reports.len(), 1, "{}", run.output());
    let report = &reports[0];
    assert_eq!(report["apiVersion"], "wgpolicyk8s.io/v1alpha2");
    assert_eq!(report["kind"], "PolicyReport");
    assert_eq!(report["metadata"]["namespace"], ns.as_str());
    assert_eq!(report["summary"]["fail"], 1, "{report:#}");
    let fail = fail_result(report);
    assert_eq!(
        fail["resources"],
        json!([{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "two-masters",
            "namespace": ns, "uid": uid}])
    );
}

/// The first `fail` result of a PolicyReport (the suites' reports hold one each).
fn fail_result(report: &Value) -> &Value {
    report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["result"] == "fail")
        .expect("a fail result")
}
