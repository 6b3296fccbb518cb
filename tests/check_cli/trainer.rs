//! Kubeflow Trainer v2 offline: `check` judges a TrainJob on the runtime it is given beside
//! it or in a `--cluster` snapshot (as `kubectl get nodes,clustertrainingruntimes -A -o yaml`
//! prints it), and says when it has none.

use crate::support::*;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/trainjob-volcano.yaml"
);

/// The example's two documents: the runtime and the TrainJob, as YAML text.
fn parts() -> (String, String) {
    let text = std::fs::read_to_string(EXAMPLE).expect("examples/trainjob-volcano.yaml");
    let (runtime, trainjob) = text.split_once("\n---\n").expect("two documents");
    (runtime.to_string(), trainjob.to_string())
}

#[test]
fn a_trainjob_alone_is_refused_saying_its_runtime_is_not_known() {
    let (_, trainjob) = parts();
    let run = check(&["-"], Some(trainjob.as_bytes()));
    assert_exit(&run, 1);
    assert_stdout_has(
        &run,
        &[
            "[structure] /spec/runtimeRef: ClusterTrainingRuntime \"torch-h100-volcano\" is not known here",
            "or a --cluster snapshot that lists clustertrainingruntimes",
        ],
    );
}

#[test]
fn a_snapshot_listing_runtimes_supplies_the_runtime_and_says_when_one_does_not_exist() {
    let (runtime, trainjob) = parts();
    let dir = tempfile::tempdir().expect("temp dir");
    let snapshot = dir.path().join("cluster.yaml");
    // kubectl's List of the runtimes (no Nodes: the cluster-aware policies stay silent).
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}\n",
        runtime
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    std::fs::write(&snapshot, list).expect("write snapshot");
    let snapshot = snapshot.to_str().expect("UTF-8 path");
    let run = check(&["--cluster", snapshot, "-"], Some(trainjob.as_bytes()));
    assert_exit(&run, 0);
    assert_stdout_has(&run, &["TrainJob team-nlp/llama-sft  ALLOWED"]);

    let other = trainjob.replace("name: torch-h100-volcano", "name: torch-gone");
    let run = check(&["--cluster", snapshot, "-"], Some(other.as_bytes()));
    assert_exit(&run, 1);
    assert_stdout_has(
        &run,
        &["ClusterTrainingRuntime \"torch-gone\" does not exist (as listed from"],
    );
}
