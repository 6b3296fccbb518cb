//! `gangplank audit` on snapshot files, as users run it: the built binary on a directory of
//! what `kubectl get pytorchjobs,mpijobs,... -A -o yaml` prints, with the table, the JSON,
//! the PolicyReports and the exit codes checked. The live-cluster case is
//! tests/e2e_audit.rs; here only an unreachable server (no cluster needed) is.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use tempfile::TempDir;

const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");
const IMAGE: &str = "registry.example.com/ml/pytorch:2.4.0@sha256:\
                     897f10e5f6f63d68a5e340c9ce4546f4720b48ee657e891e18c2b7515b5566c5";

#[path = "support/run.rs"]
mod run;
use run::Run;

/// The run's stdout as the JSON `-o json` promises.
fn json_of(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("-o json is not JSON ({e})\n{}", run.output()))
}

/// `gangplank audit --policies <repo policies> ARGS`, with no GANGPLANK_* from the caller's
/// environment and KUBECONFIG set to `kubeconfig` (or to a file that does not exist).
fn audit(args: &[&str], kubeconfig: Option<&Path>) -> Run {
    audit_with(POLICIES, args, kubeconfig)
}

/// [`audit`] with the policies of `policies`.
fn audit_with(policies: &str, args: &[&str], kubeconfig: Option<&Path>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gangplank"));
    cmd.args(["audit", "--policies", policies]).args(args);
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("GANGPLANK_")) {
        cmd.env_remove(key);
    }
    cmd.env(
        "KUBECONFIG",
        kubeconfig.unwrap_or(Path::new("/nonexistent/kubeconfig")),
    )
    .env_remove("KUBERNETES_SERVICE_HOST")
    .stdin(Stdio::null());
    Run::finished(cmd.output().expect("the gangplank binary should run"))
}

/// A PyTorchJob as the apiserver stores it: 1 Master and `workers` Workers of `gpus` GPUs,
/// nprocPerNode `nproc`, with the uid, managedFields and status `kubectl get -o yaml` shows.
fn pytorch_job(namespace: &str, name: &str, masters: u32, workers: u32, nproc: &str) -> Value {
    let replica = |replicas: u32| {
        json!({
            "replicas": replicas,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{
                "name": "pytorch",
                "image": IMAGE,
                "command": ["python", "/workspace/train.py"],
                "resources": {"requests": {"nvidia.com/gpu": 8}, "limits": {"nvidia.com/gpu": 8}},
            }]}},
        })
    };
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": format!("uid-{namespace}-{name}"),
            "resourceVersion": "4711",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1"}],
        },
        "spec": {
            "nprocPerNode": nproc,
            "pytorchReplicaSpecs": {"Master": replica(masters), "Worker": replica(workers)},
        },
        "status": {"conditions": [{"type": "Running", "status": "True"}]},
    })
}

/// The snapshot directory every test starts from:
/// - `pytorchjobs.yaml`, a `List` as `kubectl get pytorchjobs -A -o yaml` prints:
///   vision/clean (nothing to say), vision/nproc (nprocPerNode 4 on 8 GPUs: a warning),
///   nlp/two-masters (refused: a PyTorchJob has one Master);
/// - `mpijobs.json`, a JSON `List` holding the example MPIJob v2beta1 hpc/osu-allreduce;
/// - `configmap.yaml`, not a training job.
fn snapshot() -> TempDir {
    let dir = TempDir::new().expect("a temporary directory");
    let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
    "items": [
        pytorch_job("vision", "clean", 1, 2, "8"),
        pytorch_job("vision", "nproc", 1, 2, "4"),
        pytorch_job("nlp", "two-masters", 2, 2, "8"),
    ]});
    write(dir.path(), "pytorchjobs.yaml", &yaml(&list));
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/mpijob-v2beta1.yaml"
    ))
    .expect("examples/mpijob-v2beta1.yaml");
    let mpijob: Value = yaml_serde::from_str(&example).expect("the example parses");
    let mpijobs = json!({"apiVersion": "v1", "kind": "List", "items": [mpijob]});
    write(dir.path(), "mpijobs.json", &mpijobs.to_string());
    write(
        dir.path(),
        "configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: vision}\ndata: {a: b}\n",
    );
    dir
}

fn yaml(value: &Value) -> String {
    yaml_serde::to_string(value).expect("serializes as YAML")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writing the snapshot file");
    path
}

fn arg(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn table_has_a_row_per_violation_and_counts_clean_jobs_per_namespace() {
    let dir = snapshot();
    let run = audit(&[arg(dir.path())], None);
    assert_eq!(
        run.code,
        1,
        "a deny-level violation exits 1\n{}",
        run.output()
    );
    let lines: Vec<&str> = run.stdout.lines().collect();
    let header = lines.first().copied().unwrap_or_default();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NAMESPACE", "KIND", "NAME", "VERDICT", "POLICY", "MESSAGE"],
        "{}",
        run.output()
    );
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().nth(2) == Some(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no row for {name}\n{}", run.output()))
    };
    let denied = row("two-masters");
    assert_eq!(
        denied.get(..5),
        Some(&["nlp", "PyTorchJob", "two-masters", "deny", "coordinator"][..])
    );
    assert!(
        denied
            .join(" ")
            .contains("/spec/pytorchReplicaSpecs/Master/replicas: Master has 2 replicas"),
        "{}",
        run.output()
    );
    let warned = row("nproc");
    assert_eq!(
        warned.get(..5),
        Some(&["vision", "PyTorchJob", "nproc", "warn", "nproc_gpu"][..])
    );
    assert!(
        !lines.iter().any(|l| l.contains(" clean ")),
        "a job without violations has no row\n{}",
        run.output()
    );
    assert!(
        run.stdout
            .contains("jobs without violations: hpc 1, vision 1"),
        "{}",
        run.output()
    );
    assert!(
        run.stdout.contains("4 jobs audited: 1 denied, 1 with warnings, 0 audit-only, 2 without violations, 0 skipped, 0 policy errors; 0 unreadable"),
        "{}",
        run.output()
    );
    assert!(
        run.stderr
            .contains("note: objects that are not training jobs, ignored: 1"),
        "{}",
        run.output()
    );
}

#[test]
fn json_lists_every_job_with_its_verdict_and_violations() {
    let dir = snapshot();
    let run = audit(&[arg(dir.path()), "-o", "json"], None);
    assert_eq!(run.code, 1, "{}", run.output());
    let doc = json_of(&run);
    assert_eq!(doc["source"], arg(dir.path()));
    assert_eq!(doc["inventory"], Value::Null);
    assert_eq!(
        doc["summary"],
        json!({"jobs": 4, "denied": 1, "warned": 1, "audited": 0, "exempted": 0, "passed": 2,
            "skipped": 0, "errors": 0, "unreadable": 0, "ignored": 1})
    );
    let jobs = doc["jobs"].as_array().expect("jobs is a list");
    let keys: Vec<(String, String, String)> = jobs
        .iter()
        .map(|j| {
            let s = |k: &str| j[k].as_str().unwrap_or_default().to_string();
            (s("namespace"), s("name"), s("verdict"))
        })
        .collect();
    let expected = [
        ("hpc", "osu-allreduce", "passed"),
        ("nlp", "two-masters", "denied"),
        ("vision", "clean", "passed"),
        ("vision", "nproc", "warned"),
    ]
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
    assert_eq!(keys, expected, "sorted by namespace, kind, name");
    let denied = &jobs[1];
    assert_eq!(denied["apiVersion"], "kubeflow.org/v1");
    assert_eq!(denied["kind"], "PyTorchJob");
    assert_eq!(denied["uid"], "uid-nlp-two-masters");
    assert_eq!(
        denied["source"],
        format!(
            "{}#1/items/2",
            dir.path().join("pytorchjobs.yaml").display()
        )
    );
    let violation = &denied["violations"][0];
    assert_eq!(violation["policy"], "coordinator");
    assert_eq!(violation["action"], "deny");
    assert_eq!(
        violation["path"],
        "/spec/pytorchReplicaSpecs/Master/replicas"
    );
    assert!(violation["message"]
        .as_str()
        .is_some_and(|m| m.starts_with("Master has 2 replicas")));
    assert_eq!(jobs[3]["violations"][0]["action"], "warn");
    assert_eq!(jobs[0]["apiVersion"], "kubeflow.org/v2beta1");
    assert_eq!(doc["unreadable"], json!([]));
}

/// The PolicyReport shape, from the field list of wg-policy-prototypes'
/// `apis/wgpolicyk8s.io/v1alpha2/policyreport_types.go`: the names and enums Policy
/// Reporter reads. Unknown fields are refused, so a misspelt one shows.
fn policy_report_schema() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    json!({
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "summary", "results"],
        "additionalProperties": false,
        "properties": {
            "apiVersion": {"const": "wgpolicyk8s.io/v1alpha2"},
            "kind": {"const": "PolicyReport"},
            "metadata": {"type": "object", "required": ["name", "namespace"]},
            "summary": {
                "type": "object", "additionalProperties": false,
                "required": ["pass", "fail", "warn", "error", "skip"],
                "properties": {"pass": count, "fail": count, "warn": count, "error": count, "skip": count},
            },
            "results": {"type": "array", "items": {
                "type": "object",
                "required": ["policy", "result", "source", "timestamp", "resources"],
                "additionalProperties": false,
                "properties": {
                    "source": {"type": "string"},
                    "policy": {"type": "string", "minLength": 1},
                    "rule": {"type": "string"},
                    "category": {"type": "string"},
                    "severity": {"enum": ["critical", "high", "low", "medium", "info"]},
                    "timestamp": {
                        "type": "object", "additionalProperties": false,
                        "required": ["seconds", "nanos"],
                        "properties": {"seconds": {"type": "integer"}, "nanos": {"type": "integer"}},
                    },
                    "result": {"enum": ["pass", "fail", "warn", "error", "skip"]},
                    "scored": {"type": "boolean"},
                    "resources": {"type": "array", "items": {
                        "type": "object", "additionalProperties": false,
                        "required": ["apiVersion", "kind", "name", "namespace"],
                        "properties": {
                            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                            "name": {"type": "string"}, "namespace": {"type": "string"},
                            "uid": {"type": "string"},
                        },
                    }},
                    "message": {"type": "string"},
                    "properties": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            }},
        },
    })
}

fn parse_yaml_docs(text: &str) -> Vec<Value> {
    text.split("\n---")
        .map(|d| d.trim_start_matches("---"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| yaml_serde::from_str(d).unwrap_or_else(|e| panic!("a YAML document ({e}):\n{d}")))
        .collect()
}

/// The results of `report` for the job `name`, as (policy, result) pairs.
fn results_for(report: &Value, name: &str) -> Vec<(String, String)> {
    report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["resources"][0]["name"] == name)
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (s("policy"), s("result"))
        })
        .collect()
}

#[test]
fn policyreport_is_one_valid_report_per_namespace() {
    let dir = snapshot();
    let run = audit(&[arg(dir.path()), "-o", "policyreport"], None);
    assert_eq!(run.code, 1, "{}", run.output());
    let reports = parse_yaml_docs(&run.stdout);
    let schema = policy_report_schema();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    for report in &reports {
        let errors: Vec<String> = validator
            .iter_errors(report)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}\n{report:#}");
    }
    let namespaces: Vec<&str> = reports
        .iter()
        .filter_map(|r| r["metadata"]["namespace"].as_str())
        .collect();
    assert_eq!(namespaces, ["hpc", "nlp", "vision"]);
    assert!(reports
        .iter()
        .all(|r| r["metadata"]["name"] == "gangplank-audit"
            && r["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gangplank"));

    let nlp = &reports[1];
    let fail: Vec<&Value> = nlp["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["result"] == "fail")
        .collect();
    assert_eq!(fail.len(), 1, "{nlp:#}");
    let fail = fail[0];
    assert_eq!(fail["policy"], "coordinator");
    assert_eq!(fail["rule"], "coordinator");
    assert_eq!(fail["source"], "gangplank");
    assert_eq!(fail["properties"]["action"], "deny");
    assert_eq!(
        fail["properties"]["path"],
        "/spec/pytorchReplicaSpecs/Master/replicas"
    );
    assert!(fail["message"]
        .as_str()
        .is_some_and(|m| m.contains("Master has 2 replicas")));
    assert_eq!(
        fail["resources"],
        json!([{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "two-masters",
            "namespace": "nlp", "uid": "uid-nlp-two-masters"}])
    );
    assert!(fail["timestamp"]["seconds"]
        .as_i64()
        .is_some_and(|s| s > 1_700_000_000));

    // Every validating policy that found nothing passes, so the counts add up per job.
    let vision = &reports[2];
    let nproc = results_for(vision, "nproc");
    let clean = results_for(vision, "clean");
    // nprocPerNode "4" on 8 GPUs: one warning for the Master's pods, one for the Workers'.
    let warnings: Vec<&(String, String)> = nproc.iter().filter(|(_, r)| r == "warn").collect();
    assert_eq!(warnings.len(), 2, "{nproc:?}");
    assert!(warnings.iter().all(|(p, _)| p == "nproc_gpu"), "{nproc:?}");
    assert!(
        !nproc.contains(&("nproc_gpu".into(), "pass".into())),
        "{nproc:?}"
    );
    assert!(
        clean.iter().all(|(_, result)| result == "pass"),
        "{clean:?}"
    );
    assert!(
        clean.contains(&("nproc_gpu".into(), "pass".into())),
        "{clean:?}"
    );
    let policies = |results: &[(String, String)]| {
        let mut names: Vec<String> = results.iter().map(|(p, _)| p.clone()).collect();
        names.dedup();
        names
    };
    assert_eq!(
        policies(&nproc),
        policies(&clean),
        "every validating policy has a result for every job"
    );
    let summary = &vision["summary"];
    assert_eq!(summary["warn"], 2, "{summary}");
    assert_eq!(summary["fail"], 0, "{summary}");
    assert_eq!(summary["pass"], clean.len() * 2 - 1, "{summary}");
}

#[test]
fn a_broken_file_is_reported_and_exits_2_while_the_other_jobs_are_still_audited() {
    let dir = snapshot();
    write(dir.path(), "broken.yaml", "apiVersion: v1\nkind: [\n");
    let run = audit(&[arg(dir.path())], None);
    assert_eq!(
        run.code,
        2,
        "unreadable input wins over a denial\n{}",
        run.output()
    );
    assert!(
        run.stdout.contains(&format!(
            "UNREADABLE {}#1: invalid YAML at line 3",
            dir.path().join("broken.yaml").display()
        )),
        "{}",
        run.output()
    );
    assert!(run.stdout.contains("two-masters"), "{}", run.output());

    let doc = json_of(&audit(&[arg(dir.path()), "-o", "json"], None));
    assert_eq!(doc["summary"]["unreadable"], 1);
    assert_eq!(doc["summary"]["jobs"], 4);
    let source = doc["unreadable"][0]["source"].as_str().unwrap_or_default();
    assert!(source.ends_with("broken.yaml#1"), "{doc:#}");
}

#[test]
fn only_clean_and_warned_jobs_exit_0() {
    let dir = TempDir::new().expect("a temporary directory");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        pytorch_job("vision", "clean", 1, 2, "8"),
        pytorch_job("vision", "nproc", 1, 2, "4"),
    ]});
    write(dir.path(), "jobs.yaml", &yaml(&list));
    let run = audit(&[arg(dir.path())], None);
    assert_eq!(
        run.code,
        0,
        "warnings do not fail an audit\n{}",
        run.output()
    );
}

#[test]
fn namespace_flag_audits_one_namespace() {
    let dir = snapshot();
    let doc = json_of(&audit(&[arg(dir.path()), "-n", "nlp", "-o", "json"], None));
    let names: Vec<&str> = doc["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|j| j["name"].as_str())
        .collect();
    assert_eq!(names, ["two-masters"]);
    let clean = audit(&[arg(dir.path()), "--namespace", "vision"], None);
    assert_eq!(clean.code, 0, "{}", clean.output());
    let both = audit(&[arg(dir.path()), "-n", "nlp", "-A"], None);
    assert_eq!(both.code, 2, "-n and -A conflict\n{}", both.output());
}

/// Two 8-GPU nodes labelled pool=main, as `kubectl get nodes -o yaml` prints them.
fn two_gpu_nodes(dir: &Path) -> PathBuf {
    let node = |name: &str| {
        let resources =
            json!({"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": "8", "pods": "110"});
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": "main"}},
            "status": {"capacity": resources, "allocatable": resources}})
    };
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [node("gpu-0"), node("gpu-1")]});
    write(dir, "nodes.yaml", &yaml(&list))
}

#[test]
fn cluster_snapshot_lets_the_capacity_policy_judge_gangs() {
    let dir = TempDir::new().expect("a temporary directory");
    let jobs = dir.path().join("jobs");
    std::fs::create_dir(&jobs).expect("jobs dir");
    let mut gang = pytorch_job("llm", "gang", 1, 3, "8");
    for r in ["Master", "Worker"] {
        gang["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"]["nodeSelector"] =
            json!({"pool": "main"});
    }
    write(&jobs, "gang.yaml", &yaml(&gang));
    let nodes = two_gpu_nodes(dir.path());

    let without = audit(&[arg(&jobs)], None);
    assert_eq!(
        without.code,
        0,
        "no inventory: capacity has nothing to say\n{}",
        without.output()
    );

    let run = audit(
        &[arg(&jobs), "--cluster-snapshot", arg(&nodes), "-o", "json"],
        None,
    );
    assert_eq!(run.code, 1, "{}", run.output());
    let doc = json_of(&run);
    assert_eq!(doc["inventory"], arg(&nodes));
    let violation = &doc["jobs"][0]["violations"][0];
    assert_eq!(violation["policy"], "capacity", "{doc:#}");
    assert!(
        violation["message"]
            .as_str()
            .is_some_and(|m| m.contains("together they hold 2 of them")),
        "{doc:#}"
    );
}

#[test]
fn an_unreachable_cluster_is_an_error_naming_the_server() {
    let dir = TempDir::new().expect("a temporary directory");
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    let kubeconfig = write(
        dir.path(),
        "kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         contexts: [{name: c, context: {cluster: c, user: u}}]\n\
         users: [{name: u, user: {token: t}}]\n",
    );
    let run = audit(&[], Some(&kubeconfig));
    assert_eq!(run.code, 2, "{}", run.output());
    assert!(
        run.stderr
            .contains("error: cannot reach the Kubernetes API server at https://127.0.0.1:1/"),
        "{}",
        run.output()
    );
    assert!(run.stdout.is_empty(), "{}", run.output());
}

#[test]
fn a_missing_snapshot_path_is_unreadable() {
    let run = audit(&["/nonexistent/dump"], None);
    assert_eq!(run.code, 2, "{}", run.output());
    assert!(
        run.stdout.contains("UNREADABLE /nonexistent/dump"),
        "{}",
        run.output()
    );
}

/// Kubeflow Trainer v2 in a snapshot (`kubectl get clustertrainingruntimes,trainjobs -A -o
/// yaml`): a runtime applied before gangplank still names its image by tag, so the audit
/// lists it, and the stored TrainJob on it fails today, naming the runtime and the image.
#[test]
fn trainer_runtimes_with_tags_and_the_trainjobs_on_them_are_listed() {
    let dir = TempDir::new().expect("a temporary directory");
    let runtime = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-volcano", "uid": "rt-1"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "podGroupPolicy": {"volcano": {}},
            "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"spec": {"containers": [
                    {"name": "node", "image": IMAGE},
                    {"name": "log-shipper", "image": "registry.example.com/tools/fluent-bit:3.1"},
                ]}}},
            }}]}},
        },
    });
    let trainjob = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "llm", "namespace": "nlp", "uid": "tj-1"},
        "spec": {"runtimeRef": {"name": "torch-volcano"}, "trainer": {"numNodes": 4}},
    });
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [runtime, trainjob]});
    write(dir.path(), "trainer.yaml", &yaml(&list));
    let run = audit(&[arg(dir.path()), "-o", "json"], None);
    assert_eq!(run.code, 1, "{}", run.output());
    let report = json_of(&run);
    let jobs = report["jobs"].as_array().expect("jobs");
    let find = |kind: &str| {
        jobs.iter()
            .find(|j| j["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {report:#}"))
    };
    let messages = |job: &Value| -> Vec<String> {
        job["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                format!(
                    "[{}] {}: {}",
                    v["policy"].as_str().unwrap_or(""),
                    v["path"].as_str().unwrap_or(""),
                    v["message"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    let runtime_findings = messages(find("ClusterTrainingRuntime"));
    assert!(
        runtime_findings.iter().any(|m| m.starts_with("[images] /spec/template/spec/replicatedJobs/0/template/spec/template/spec/containers/1/image")),
        "{runtime_findings:#?}"
    );
    let trainjob_findings = messages(find("TrainJob"));
    assert!(
        trainjob_findings.iter().any(|m| m.contains("runtime ClusterTrainingRuntime torch-volcano runs image \"registry.example.com/tools/fluent-bit:3.1\"")),
        "{trainjob_findings:#?}"
    );
}

/// The storage and network policies in an audit: a stored job that shares a ReadWriteOnce
/// claim is refused naming it, and every job of a namespace isolated by a NetworkPolicy is
/// warned naming the policy; the snapshot holds claims and NetworkPolicies as `kubectl get
/// pvc,networkpolicies -A -o yaml` prints them.
#[test]
fn stored_jobs_are_judged_on_their_claims_and_network_policies() {
    let dir = TempDir::new().expect("a temporary directory");
    let jobs = dir.path().join("jobs");
    std::fs::create_dir(&jobs).expect("jobs dir");
    let mut shared = pytorch_job("llm", "shares-scratch", 1, 2, "8");
    for r in ["Master", "Worker"] {
        let spec = &mut shared["spec"]["pytorchReplicaSpecs"][r]["template"]["spec"];
        spec["volumes"] =
            json!([{"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}}]);
        spec["containers"][0]["volumeMounts"] =
            json!([{"name": "scratch", "mountPath": "/scratch"}]);
    }
    write(&jobs, "shared.yaml", &yaml(&shared));
    write(
        &jobs,
        "plain.yaml",
        &yaml(&pytorch_job("llm", "plain", 1, 2, "8")),
    );
    let inventory = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "scratch", "namespace": "llm"},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3"},
         "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "deny-all", "namespace": "llm"},
         "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}},
    ]});
    let inventory = write(dir.path(), "inventory.yaml", &yaml(&inventory));
    let run = audit(
        &[
            arg(&jobs),
            "--cluster-snapshot",
            arg(&inventory),
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(run.code, 1, "{}", run.output());
    let doc = json_of(&run);
    let findings = |name: &str| -> Vec<(String, String, String)> {
        let job = doc["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|j| j["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {doc:#}"));
        job["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                (text("policy"), text("action"), text("message"))
            })
            .collect()
    };
    let shared = findings("shares-scratch");
    assert!(
        shared.iter().any(|(p, a, m)| p == "storage"
            && a == "deny"
            && m.contains("scratch")
            && m.contains("ReadWriteOnce")),
        "{shared:?}"
    );
    for name in ["shares-scratch", "plain"] {
        let found = findings(name);
        assert!(
            found
                .iter()
                .any(|(p, a, m)| p == "network" && a == "warn" && m.contains("deny-all")),
            "{name}: {found:?}"
        );
    }
    let plain = findings("plain");
    assert!(plain.iter().all(|(p, _, _)| p != "storage"), "{plain:?}");
}

#[test]
fn default_action_audit_reports_the_job_policies_would_deny_and_exits_0() {
    let dir = snapshot();
    let doc = json_of(&audit(
        &[arg(dir.path()), "-o", "json", "--default-action", "audit"],
        None,
    ));
    let job = doc["jobs"]
        .as_array()
        .and_then(|jobs| jobs.iter().find(|j| j["name"] == "two-masters"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(job["verdict"], "audited", "{doc:#}");
    assert_eq!(doc["summary"]["denied"], 0, "{doc:#}");
}

/// The shipped policies and params.yaml (not their tests), with `exceptions` written into
/// `exceptions/`.
fn policies_with_exceptions(exceptions: &[(&str, &str)]) -> TempDir {
    let dir = TempDir::new().expect("a temporary directory");
    for sub in ["", "lib"] {
        let (from, to) = (Path::new(POLICIES).join(sub), dir.path().join(sub));
        std::fs::create_dir_all(&to).expect("mkdir");
        for entry in std::fs::read_dir(&from).expect("policies/") {
            let path = entry.expect("an entry").path();
            if path.is_file() {
                std::fs::copy(&path, to.join(path.file_name().expect("a name"))).expect("copy");
            }
        }
    }
    std::fs::create_dir_all(dir.path().join("exceptions")).expect("mkdir exceptions");
    for (name, text) in exceptions {
        write(&dir.path().join("exceptions"), name, text);
    }
    dir
}

#[test]
fn a_finding_an_exception_excuses_is_reported_as_exempted_and_a_policyreport_skip() {
    let policies = policies_with_exceptions(&[(
        "ml-42.yaml",
        "name: ml-42\npolicies: [coordinator]\nmatch: {namespaces: [nlp], names: [two-*]}\nreason: launcher rewrite\nexpires: 2999-12-31\n",
    )]);
    let dir = snapshot();
    let table = audit_with(arg(policies.path()), &[arg(dir.path())], None);
    let row = table
        .stdout
        .lines()
        .find(|l| l.contains("two-masters"))
        .unwrap_or_default();
    assert!(
        row.contains("exempt")
            && row.contains("exempted by exception ml-42 until 3000-01-01T00:00:00Z"),
        "{}",
        table.output()
    );
    assert!(table.stdout.contains("1 exempted"), "{}", table.output());
    let run = audit_with(
        arg(policies.path()),
        &[arg(dir.path()), "-o", "policyreport"],
        None,
    );
    let reports = parse_yaml_docs(&run.stdout);
    let nlp = reports
        .iter()
        .find(|r| r["metadata"]["namespace"] == "nlp")
        .expect("a report for nlp");
    let skipped = nlp["results"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["policy"] == "coordinator"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(skipped["result"], "skip", "{nlp:#}");
    assert_eq!(skipped["properties"]["exception"], "ml-42", "{nlp:#}");
}
