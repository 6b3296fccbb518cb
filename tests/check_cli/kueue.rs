//! Kueue offline: `check --cluster` with a snapshot of Kueue's kinds (`kubectl get
//! nodes,clusterqueues,localqueues,cohorts,resourceflavors,topologies,workloads,... -A -o
//! yaml`) reads them, refuses a gang its ClusterQueue can never reserve, and names the
//! snapshot's gaps (a cohort cycle, a quota in an unknown unit, an unreadable flavor or
//! Topology, a flavor naming an absent Topology) as notes without blaming a job for them; a pod
//! set that must be in one topology domain none can hold is refused, and a gang with no gang
//! scheduler of its own is warned that Kueue's admission does not place it.

use crate::support::*;

const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/policies/tests/clusters/kueue-cluster.yaml"
);

/// 1 Master + 1 Worker of 8 GPUs each, queued in LocalQueue `queue` of team-a.
fn gang(queue: &str) -> String {
    let pod = "template: {spec: {containers: [{name: pytorch, image: \"registry.example.com/ml/train:1.0@sha256:0000000000000000000000000000000000000000000000000000000000000001\", resources: {limits: {nvidia.com/gpu: 8}}}]}}";
    format!(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {{name: llm, namespace: team-a, labels: {{kueue.x-k8s.io/queue-name: {queue}}}}}\nspec:\n  nprocPerNode: \"8\"\n  pytorchReplicaSpecs:\n    Master: {{replicas: 1, restartPolicy: OnFailure, {pod}}}\n    Worker: {{replicas: 1, restartPolicy: OnFailure, {pod}}}\n"
    )
}

#[test]
fn a_gang_above_what_the_cohort_can_lend_its_queue_is_refused_from_a_snapshot_of_kueues_kinds() {
    // 8 GPUs, borrowingLimit 16, beside a queue that lends at most 4: 12 at most, not 24.
    let run = check(
        &["--cluster", SNAPSHOT, "-"],
        Some(gang("small").as_bytes()),
    );
    assert_exit(&run, 1);
    assert_stdout_has(
        &run,
        &["[kueue_queue] /metadata/labels/kueue.x-k8s.io~1queue-name: the gang needs 16 nvidia.com/gpu at once; Kueue ClusterQueue \"small\" can ever reserve at most 12 nvidia.com/gpu"],
    );
}

#[test]
fn the_snapshots_gaps_are_notes_and_the_jobs_they_touch_are_not_refused_for_them() {
    for queue in ["looped", "odd", "brokenq", "ghostq", "badq"] {
        let run = check(&["--cluster", SNAPSHOT, "-"], Some(gang(queue).as_bytes()));
        assert_exit(&run, 0);
        for note in [
            "note: --cluster: Kueue Cohort chain loop-a -> loop-b -> loop-a is a cycle",
            "note: --cluster: Kueue ClusterQueue \"odd\": flavor \"a100\" nvidia.com/gpu nominalQuota \"8Q\" is not a quantity",
            "note: --cluster: Kueue ResourceFlavor \"broken\": nodeLabels, nodeTaints or tolerations cannot be read",
            "note: --cluster: Kueue Topology \"bad\": spec.levels is not a list of nodeLabel keys",
            "note: --cluster: Kueue ResourceFlavor \"tas-ghost\" names Topology \"gone\", which is not in the inventory",
        ] {
            assert!(run.stderr.contains(note), "{note:?} in {}", run.stderr);
        }
    }
}

#[test]
fn a_pod_set_no_rack_can_hold_is_refused_and_the_unplaced_gang_warned() {
    let job = gang("tasq").replace(
        "Worker: {replicas: 1, restartPolicy: OnFailure, template: {spec:",
        "Worker: {replicas: 3, restartPolicy: OnFailure, template: {metadata: {annotations: {kueue.x-k8s.io/podset-required-topology: rack}}, spec:",
    );
    let run = check(&["--cluster", SNAPSHOT, "-"], Some(job.as_bytes()));
    assert_exit(&run, 1);
    assert_stdout_has(
        &run,
        &[
            "the 3 Worker pods must be in one \"rack\" domain (kueue.x-k8s.io/podset-required-topology), but no flavor of Kueue ClusterQueue \"tasq\" that can take them has one that holds them: flavor \"tas\": its largest \"rack\" domain (Topology \"dc\") holds 2",
            "Kueue admits this 4-pod job by quota, not placement",
        ],
    );
}
