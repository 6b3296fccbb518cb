//! `--explain` and `--profile`: which policies the applicability index skips for a job, and
//! why, with and without a cluster snapshot, with the index off, and with another policy
//! directory.

use tempfile::TempDir;

use crate::support::{assert_exit, check, check_policies, check_with_env, Run};

const JOB: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/benches/data/pytorchjob-9.yaml"
);

/// A snapshot with one GPU node: the cluster is known, so `cluster` holds.
const SNAPSHOT: &str = r#"apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: gpu-0, labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}, status: {allocatable: {cpu: "96", memory: 1000Gi, pods: "110", nvidia.com/gpu: "8"}}}
"#;

/// The `--explain` block of the run: its header and the policy lines under it.
fn explanation(run: &Run) -> Vec<&str> {
    let mut lines = run
        .stderr
        .lines()
        .skip_while(|l| !l.starts_with("explain "));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("no explain header: {}", run.output()));
    std::iter::once(header)
        .chain(lines.take_while(|l| l.starts_with("  ")))
        .collect()
}

fn has_line(lines: &[&str], line: &str) -> bool {
    lines.iter().any(|l| l.trim() == line)
}

#[test]
fn explain_lists_the_policies_a_pytorchjob_skips_without_a_cluster() {
    let run = check(&["--explain", JOB], None);
    assert_exit(&run, 0);
    let lines = explanation(&run);
    assert!(
        lines[0].starts_with(&format!("explain {JOB}#1: ")),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(" enabled policies evaluated, ") && lines[0].ends_with(" skipped:"),
        "{}",
        lines[0]
    );
    for line in [
        "mpi_v2: skipped at validation: kind PyTorchJob is not one of MPIJob",
        "capacity: skipped at validation: cluster does not hold",
        "trainer_gang: skipped at mutation and validation: kind PyTorchJob is not one of TrainJob, TrainingRuntime, ClusterTrainingRuntime",
        "spot_capacity: skipped at validation: placement does not hold",
    ] {
        assert!(has_line(&lines, line), "{line:?} missing: {lines:#?}");
    }
    // Policies that apply to every job are counted, not listed.
    assert!(
        !lines
            .iter()
            .any(|l| l.trim_start().starts_with("containers:")),
        "{lines:#?}"
    );
    // The verdict on stdout is what it is without --explain.
    assert_eq!(run.stdout, check(&[JOB], None).stdout);
}

#[test]
fn explain_evaluates_the_cluster_policies_with_a_cluster_snapshot() {
    let dir = TempDir::new().expect("a temporary directory");
    let snapshot = dir.path().join("cluster.yaml");
    std::fs::write(&snapshot, SNAPSHOT).expect("write snapshot");
    let snapshot = snapshot.to_str().expect("UTF-8 path");
    let run = check(&["--explain", "--cluster", snapshot, JOB], None);
    assert_ne!(run.code, 2, "{}", run.output());
    let lines = explanation(&run);
    assert!(
        !lines
            .iter()
            .any(|l| l.trim_start().starts_with("capacity:")),
        "capacity should be evaluated with a cluster: {lines:#?}"
    );
    // Facts of the job itself still hold without the cluster's help.
    assert!(has_line(
        &lines,
        "mpi_v2: skipped at validation: kind PyTorchJob is not one of MPIJob"
    ));
    // With the cluster known, the next condition decides: the job has no Kueue label.
    assert!(
        has_line(
            &lines,
            "kueue_queue: skipped at validation: kueue does not hold"
        ),
        "{lines:#?}"
    );
}

#[test]
fn explain_says_the_index_is_off_and_skips_nothing() {
    let run = check_with_env(&["--explain", JOB], None, &[("GANGPLANK_INDEX", "off")]);
    assert_exit(&run, 0);
    let lines = explanation(&run);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains(
            " enabled policies evaluated (the applicability index is off: GANGPLANK_INDEX=off)"
        ),
        "{}",
        lines[0]
    );
    assert!(!run.stderr.contains("skipped"), "{}", run.stderr);
}

#[test]
fn explain_says_why_no_policy_ran_for_a_job_being_deleted() {
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "1",
            "kind": {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"},
            "operation": "DELETE",
            "namespace": "default",
            "name": "gone",
            "userInfo": {"username": "alice"},
            "oldObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "gone", "namespace": "default"}, "spec": {}},
            "object": null,
        }
    });
    let run = check(&["--explain", "-"], Some(review.to_string().as_bytes()));
    assert_exit(&run, 0);
    assert_eq!(
        explanation(&run),
        ["explain <stdin>#1: no policy evaluated: DELETE requests are not checked"]
    );
}

#[test]
fn explain_reads_applies_when_from_another_policy_directory() {
    let dir = TempDir::new().expect("a temporary directory");
    let policy = |name: &str, metadata: &str| {
        format!(
            "{metadata}package gangplank.policies.{name}\n\nimport rego.v1\n\n\
             meta := {{\"title\": \"{name}\", \"description\": \"Finds nothing.\", \"action\": \"deny\", \"params\": {{}}}}\n\n\
             violation contains {{\"path\": \"/spec\", \"msg\": \"never\"}} if input.object.kind == \"NoSuchKind\"\n"
        )
    };
    let write = |file: &str, text: String| {
        std::fs::write(dir.path().join(file), text).expect("write policy file");
    };
    write(
        "mpi_only.rego",
        policy(
            "mpi_only",
            "# METADATA\n# custom:\n#   applies_when:\n#     kinds: [MPIJob]\n",
        ),
    );
    write(
        "needs_kueue.rego",
        policy(
            "needs_kueue",
            "# METADATA\n# custom:\n#   applies_when:\n#     all: [kueue]\n",
        ),
    );
    write("always.rego", policy("always", ""));
    write("sandboxed.rego", policy("sandboxed", ""));
    write(
        "params.yaml",
        "policies:\n  sandboxed:\n    excludedNamespaces: [team-vision]\n".into(),
    );
    let policies = dir.path().to_str().expect("UTF-8 path");
    let run = check_policies(policies, &["--explain", JOB], None, &[]);
    assert_exit(&run, 0);
    let lines = explanation(&run);
    assert_eq!(
        lines,
        [
            format!("explain {JOB}#1: 1 of 4 enabled policies evaluated, 3 skipped:").as_str(),
            "  mpi_only: skipped at validation: kind PyTorchJob is not one of MPIJob",
            "  needs_kueue: skipped at validation: kueue does not hold",
            "  sandboxed: skipped: namespace team-vision is in its excludedNamespaces (params.yaml)",
        ]
    );
}

/// `--profile`: the rules of skipped policies come after the measured ones, each with why,
/// unmeasured; the whole review stays last.
#[test]
fn profile_lists_the_rules_of_skipped_policies_apart() {
    let run = check(&["--profile", "1", JOB], None);
    assert_exit(&run, 0);
    let block: Vec<&str> = run
        .stderr
        .lines()
        .skip_while(|l| !l.starts_with("profile "))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    let first_skipped = block
        .iter()
        .position(|l| l.contains(" skipped ("))
        .unwrap_or_else(|| panic!("no skipped rule: {}", run.stderr));
    let whole = block
        .iter()
        .position(|l| l.contains("whole review as a request runs it"))
        .unwrap_or_else(|| panic!("no whole review line: {}", run.stderr));
    assert_eq!(whole, block.len() - 1, "{block:#?}");
    for l in &block[first_skipped..whole] {
        assert!(
            l.trim_start().starts_with("-  ") && l.contains(" skipped ("),
            "a measured rule among the skipped ones: {l:?} in {block:#?}"
        );
    }
    for l in &block[..first_skipped] {
        assert!(
            !l.contains("mpi_v2.") && !l.contains("capacity."),
            "a skipped policy measured: {l:?}"
        );
    }
    for line in [
        "-  mpi_v2.violation skipped (kind PyTorchJob is not one of MPIJob)",
        "-  capacity.violation skipped (cluster does not hold)",
    ] {
        assert!(has_line(&block, line), "{line:?} missing: {block:#?}");
    }
}
