//! kubectl, the client users have, against a real kube-apiserver with gangplank's webhooks
//! (the kubectl of the test binaries, so client and server are of one version).
//!
//! What a user sees: warnings as `Warning:` lines, stored defaults in `kubectl get -o yaml`,
//! the mutated object from `apply --dry-run=server`, the apiserver's refusal with our lines,
//! a second apply of the same file that changes nothing, and a 1.4 MB job judged by policy
//! (its review is 4 MB), not refused by the webhook's transport.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

e2e_suite!(
    "e2e_kubectl",
    [
        kubectl_apply_prints_our_warnings_and_get_shows_the_stored_defaults,
        kubectl_server_dry_run_prints_the_mutated_object_and_stores_nothing,
        kubectl_apply_of_a_refused_job_prints_the_apiservers_message_with_our_lines,
        applying_the_same_file_again_changes_nothing,
        the_apiserver_sends_validate_the_object_mutate_produced,
        kubectl_apply_of_a_job_with_20000_env_entries_is_judged_not_a_webhook_failure,
    ]
);

use serde_json::Value;
use support::{ControlPlane, Crds, Webhooks};

/// A user's shell: kubectl pointed at the test control plane, in one namespace.
struct Kubectl {
    binary: PathBuf,
    control_plane: &'static ControlPlane,
    kubeconfig: PathBuf,
    namespace: String,
    dir: tempfile::TempDir,
}

impl Kubectl {
    async fn setup(test: &str) -> Kubectl {
        let assets = support::assets::get();
        let control_plane = ControlPlane::shared(&assets, Crds::TrainingV1);
        Webhooks::shared(control_plane);
        Kubectl {
            binary: assets.kubectl(),
            control_plane,
            kubeconfig: control_plane.kubeconfig.clone(),
            namespace: control_plane.namespace(test).await,
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.binary)
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", &self.namespace])
            .args(args)
            .output()
            .expect("run kubectl")
    }

    /// Runs kubectl and requires success; stdout and stderr.
    fn ok(&self, args: &[&str]) -> (String, String) {
        let output = self.run(args);
        let (stdout, stderr) = texts(&output);
        assert!(
            output.status.success(),
            "kubectl {args:?} failed:\n{stderr}\n{stdout}"
        );
        (stdout, stderr)
    }

    /// A manifest file in this test's temp dir.
    fn write(&self, name: &str, manifest: &Value) -> PathBuf {
        let path = self.dir.path().join(name);
        let text = yaml_serde::to_string(manifest).expect("YAML");
        std::fs::write(&path, text).expect("write manifest");
        path
    }

    /// Patch operations gangplank's /mutate returned for each UPDATE in this namespace.
    fn mutations_of_updates(&self) -> Vec<u64> {
        let webhooks = Webhooks::shared(self.control_plane);
        let decisions = webhooks.decisions_in(&self.namespace);
        decisions
            .iter()
            .filter(|d| d["span"]["endpoint"] == "mutate" && d["span"]["operation"] == "UPDATE")
            .map(|d| d["fields"]["operations"].as_u64().unwrap_or(u64::MAX))
            .collect()
    }

    fn get_job(&self, name: &str) -> Value {
        let (stdout, _) = self.ok(&["get", "pytorchjob", name, "-o", "yaml"]);
        yaml_serde::from_str(&stdout).expect("kubectl get -o yaml is YAML")
    }
}

fn texts(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn path_arg(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// examples/pytorchjob-gpu.yaml (1 Master + 8 Workers, 8 GPUs each) with torchrun told to
/// start 4 processes per pod: admitted, with nproc_gpu's warning.
fn job_with_a_warning() -> Value {
    let path = support::repo().join("examples/pytorchjob-gpu.yaml");
    let text = std::fs::read_to_string(path).expect("example");
    let mut job: Value = yaml_serde::from_str(&text).expect("example YAML");
    job["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("namespace");
    job["spec"]["nprocPerNode"] = "4".into();
    job
}

async fn kubectl_apply_prints_our_warnings_and_get_shows_the_stored_defaults() {
    let kubectl = Kubectl::setup("kubectl-apply").await;
    let file = kubectl.write("job.yaml", &job_with_a_warning());
    let (stdout, stderr) = kubectl.ok(&["apply", "-f", path_arg(&file)]);
    assert!(
        stdout.contains("pytorchjob.kubeflow.org/resnet50-imagenet created"),
        "{stdout}"
    );
    let warning = "Warning: [nproc_gpu] /spec/nprocPerNode: ";
    assert!(stderr.contains(warning), "no {warning:?} in:\n{stderr}");

    let stored = kubectl.get_job("resnet50-imagenet");
    let spec = &stored["spec"];
    assert_eq!(spec["runPolicy"]["cleanPodPolicy"], "Running", "{stored:#}");
    assert_eq!(
        spec["runPolicy"]["schedulingPolicy"]["minAvailable"], 9,
        "{stored:#}"
    );
    for replica in ["Master", "Worker"] {
        let pod = &spec["pytorchReplicaSpecs"][replica]["template"]["spec"];
        assert_eq!(pod["schedulerName"], "volcano", "{replica}: {stored:#}");
    }
}

async fn kubectl_server_dry_run_prints_the_mutated_object_and_stores_nothing() {
    let kubectl = Kubectl::setup("kubectl-dry-run").await;
    let file = kubectl.write("job.yaml", &job_with_a_warning());
    let (stdout, _) = kubectl.ok(&[
        "apply",
        "--dry-run=server",
        "-o",
        "yaml",
        "-f",
        path_arg(&file),
    ]);
    let printed: Value = yaml_serde::from_str(&stdout).expect("-o yaml prints YAML");
    let run_policy = &printed["spec"]["runPolicy"];
    assert_eq!(
        run_policy["schedulingPolicy"]["minAvailable"], 9,
        "{printed:#}"
    );
    assert_eq!(run_policy["cleanPodPolicy"], "Running", "{printed:#}");
    let output = kubectl.run(&["get", "pytorchjob", "resnet50-imagenet"]);
    let (_, stderr) = texts(&output);
    assert!(!output.status.success(), "a server dry run stored the job");
    assert!(
        stderr.contains("NotFound") || stderr.contains("not found"),
        "{stderr}"
    );
}

async fn kubectl_apply_of_a_refused_job_prints_the_apiservers_message_with_our_lines() {
    let kubectl = Kubectl::setup("kubectl-refused").await;
    let file = support::repo().join("examples/rejected/two-masters.yaml");
    let mut job: Value =
        yaml_serde::from_str(&std::fs::read_to_string(file).expect("example")).expect("YAML");
    job["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("namespace");
    let file = kubectl.write("two-masters.yaml", &job);
    let output = kubectl.run(&["apply", "-f", path_arg(&file)]);
    let (_, stderr) = texts(&output);
    assert!(!output.status.success(), "refused, so kubectl fails");
    for expected in [
        "admission webhook \"validate.gangplank.dev\" denied the request:",
        "[coordinator] /spec/pytorchReplicaSpecs/Master/replicas: Master has 2 replicas",
    ] {
        assert!(stderr.contains(expected), "no {expected:?} in:\n{stderr}");
    }
}

/// The mutating webhook is idempotent: on UPDATE it finds its defaults in place and patches
/// nothing, so re-applying a file never bumps `metadata.generation` (which would look like a
/// spec change to every controller watching the job).
async fn applying_the_same_file_again_changes_nothing() {
    let kubectl = Kubectl::setup("kubectl-reapply").await;
    let file = kubectl.write("job.yaml", &job_with_a_warning());
    kubectl.ok(&["apply", "-f", path_arg(&file)]);
    let first = kubectl.get_job("resnet50-imagenet");

    let (stdout, _) = kubectl.ok(&["apply", "-f", path_arg(&file)]);
    assert!(stdout.contains("unchanged"), "{stdout}");
    // Client-side apply sends nothing for an unchanged file; a server-side apply does reach
    // the webhooks as an UPDATE, and gangplank, finding its defaults in place, patches
    // nothing.
    kubectl.ok(&["apply", "--server-side", "-f", path_arg(&file)]);
    // (kubectl may send more than one request: it migrates client-side apply's field
    // ownership first.)
    let mutations = kubectl.mutations_of_updates();
    assert!(
        !mutations.is_empty() && mutations.iter().all(|&ops| ops == 0),
        "patch operations of each mutating UPDATE: {mutations:?}"
    );
    // A replace sends the file as it is, without the defaults: they are written again, to
    // the same values, so the spec (and generation) stays as it was.
    kubectl.ok(&["replace", "-f", path_arg(&file)]);

    let last = kubectl.get_job("resnet50-imagenet");
    let generation = |job: &Value| job["metadata"]["generation"].clone();
    assert_eq!(
        generation(&last),
        generation(&first),
        "generation bumped:\n{last:#}"
    );
    assert_eq!(last["spec"], first["spec"], "spec changed");
    assert_eq!(generation(&first), 1, "{first:#}");
}

/// `gangplank_validate_handoffs_total{outcome}` of the shared server.
async fn handoffs(webhooks: &Webhooks, outcome: &str) -> u64 {
    let metrics = webhooks.metrics().await;
    let series = format!("gangplank_validate_handoffs_total{{outcome=\"{outcome}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in /metrics:\n{metrics}"))
}

/// The hand-off through a real apiserver: what it sends `/validate` after applying our
/// patch (uid, resourceVersion, creationTimestamp, generation and managedFields set, the
/// object re-encoded) is recognised as what `/mutate` produced, so the mutation policies
/// do not run a second time. Other tests share the server, so only the rise is asserted:
/// without a hit nothing else in the suite raises it.
async fn the_apiserver_sends_validate_the_object_mutate_produced() {
    let kubectl = Kubectl::setup("kubectl-handoff").await;
    let webhooks = Webhooks::shared(kubectl.control_plane);
    let hits = handoffs(webhooks, "hit").await;
    let mut job = job_with_a_warning();
    job["metadata"]["name"] = "handed-over".into();
    let file = kubectl.write("job.yaml", &job);
    let (_, stderr) = kubectl.ok(&["apply", "-f", path_arg(&file)]);
    // The answer is the full review's: nproc_gpu's warning is there.
    assert!(stderr.contains("Warning: [nproc_gpu]"), "{stderr}");
    let after = handoffs(webhooks, "hit").await;
    assert!(
        after > hits,
        "the apiserver's /validate of the applied job was not a hand-off hit ({hits} -> {after}; misses {})",
        handoffs(webhooks, "miss").await
    );
}

/// A job with 20,000 env entries (1.6 MB), applied server-side (client-side apply cannot
/// store it: its last-applied-configuration annotation would pass the apiserver's 256 KiB
/// bound on annotations). The apiserver adds managedFields, an entry per env entry, and
/// sends the webhooks a 3.2 MB review: over the old 3 MiB body limit, whose bare 413 kubectl
/// printed as "failed calling webhook". Now the review is read and judged: the structure
/// policy refuses more than 1,024 env entries per container, with its own message.
async fn kubectl_apply_of_a_job_with_20000_env_entries_is_judged_not_a_webhook_failure() {
    let kubectl = Kubectl::setup("kubectl-large").await;
    let mut job = job_with_a_warning();
    let env: Vec<Value> = (0..20_000)
        .map(|i| {
            serde_json::json!({
                "name": format!("PLATFORM_SETTING_{i:05}"),
                "value": format!("v-{i:05}-{}", "x".repeat(30)),
            })
        })
        .collect();
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"] =
        Value::Array(env);
    let size = serde_json::to_vec(&job).expect("JSON").len();
    assert!(
        (1_600_000..1_700_000).contains(&size),
        "a 1.6 MB job: {size} bytes"
    );
    let file = kubectl.write("large.yaml", &job);
    let output = kubectl.run(&["apply", "--server-side", "-f", path_arg(&file)]);
    let (stdout, stderr) = texts(&output);
    assert!(
        !stderr.contains("failed calling webhook"),
        "refused by the webhook's transport, not judged:\n{stderr}"
    );
    assert!(!output.status.success(), "refused by policy:\n{stdout}");
    for expected in [
        "admission webhook \"validate.gangplank.dev\" denied the request:",
        "[structure] /spec/pytorchReplicaSpecs/Master/template/spec/containers/0/env: has 20000 env entries",
    ] {
        assert!(stderr.contains(expected), "no {expected:?} in:\n{stderr}");
    }
}
