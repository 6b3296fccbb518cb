//! The kind table: what gangplank knows about each training kind.
//!
//! Entry point: [`lookup`]. One row per (apiVersion, kind); facts follow the upstream
//! training-operator (kubeflow.org/v1) and mpi-operator (kubeflow.org/v2beta1) so that
//! manifests written for them work unchanged.

/// What a replica type does in the job. Policies see it as `role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Rank 0 / rendezvous host: PyTorch, XGBoost and Paddle Master, TF Chief or Master.
    Coordinator,
    /// MPI launcher: runs `mpirun`, one per job.
    Launcher,
    Worker,
    /// TensorFlow parameter server.
    Ps,
    /// TensorFlow evaluator: runs beside the job, never part of the gang's rank space.
    Evaluator,
}

impl Role {
    /// Roles a job may have only one replica of.
    pub fn is_singleton(self) -> bool {
        matches!(self, Role::Coordinator | Role::Launcher)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Launcher => "launcher",
            Role::Worker => "worker",
            Role::Ps => "ps",
            Role::Evaluator => "evaluator",
        }
    }
}

/// One allowed replica type of a kind.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaType {
    /// Canonical CamelCase name, the key upstream normalises to (`Worker`, `PS`).
    pub name: &'static str,
    pub role: Role,
    /// restartPolicy the operator uses when the replica spec sets none.
    pub default_restart_policy: &'static str,
    /// replicas the operator uses when the replica spec sets none: 1, except MPI workers,
    /// which both MPI operators default to 0.
    pub default_replicas: i64,
    /// Pods of this type are named `<job>-<type>` without an index (the MPI launcher).
    pub unindexed: bool,
}

/// Everything gangplank needs to know about one training kind.
#[derive(Debug, Clone, Copy)]
pub struct KindSpec {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// Field under `spec` that holds the map of replica specs.
    pub replica_field: &'static str,
    pub replica_types: &'static [ReplicaType],
    /// Container the operator configures (env, port); `None` means "the first container".
    pub default_container: Option<&'static str>,
    /// Whether upstream's webhook requires a container with the default name.
    pub requires_default_container: bool,
    /// Named port the operator adds to the default container, if any.
    pub port: Option<(&'static str, u16)>,
    /// `runPolicy.managedBy` values upstream accepts for this kind.
    pub managed_by: &'static [&'static str],
    /// Name of the operator's controller, as in the `operator-name` label.
    pub operator_name: &'static str,
}

/// Whether `spec` is the v2beta1 MPIJob's row of the kind table.
pub fn is_mpi_v2(spec: &KindSpec) -> bool {
    spec.kind == "MPIJob" && spec.version == "v2beta1"
}

impl KindSpec {
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// Finds a replica type by key, ignoring case as upstream defaulting does.
    pub fn replica_type(&self, key: &str) -> Option<&'static ReplicaType> {
        self.replica_types
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(key))
    }
}

const GROUP: &str = "kubeflow.org";
const TRAINING_OPERATOR: &str = "kubeflow.org/training-operator";
const MPI_OPERATOR: &str = "kubeflow.org/mpi-operator";
const MULTIKUEUE: &str = "kueue.x-k8s.io/multikueue";

const fn rt(name: &'static str, role: Role, restart: &'static str) -> ReplicaType {
    ReplicaType {
        name,
        role,
        default_restart_policy: restart,
        default_replicas: 1,
        unindexed: false,
    }
}

/// The MPI launcher: one pod (v1) or one batch Job (v2beta1), named `<job>-launcher`.
const fn mpi_launcher(restart: &'static str) -> ReplicaType {
    ReplicaType {
        unindexed: true,
        ..rt("Launcher", Role::Launcher, restart)
    }
}

const MPI_WORKER: ReplicaType = ReplicaType {
    default_replicas: 0,
    ..rt("Worker", Role::Worker, "Never")
};

/// The supported kinds. PyTorch and Paddle default to OnFailure in upstream code (#2127)
/// even though the CRD text says Never; we follow the code, which is what runs.
pub const KINDS: &[KindSpec] = &[
    KindSpec {
        group: GROUP,
        version: "v1",
        kind: "PyTorchJob",
        replica_field: "pytorchReplicaSpecs",
        replica_types: &[
            rt("Master", Role::Coordinator, "OnFailure"),
            rt("Worker", Role::Worker, "OnFailure"),
        ],
        default_container: Some("pytorch"),
        requires_default_container: true,
        port: Some(("pytorchjob-port", 23456)),
        managed_by: &[TRAINING_OPERATOR, MULTIKUEUE],
        operator_name: "pytorchjob-controller",
    },
    KindSpec {
        group: GROUP,
        version: "v1",
        kind: "TFJob",
        replica_field: "tfReplicaSpecs",
        replica_types: &[
            rt("Chief", Role::Coordinator, "Never"),
            rt("Master", Role::Coordinator, "Never"),
            rt("Worker", Role::Worker, "Never"),
            rt("PS", Role::Ps, "Never"),
            rt("Evaluator", Role::Evaluator, "Never"),
        ],
        default_container: Some("tensorflow"),
        requires_default_container: true,
        port: Some(("tfjob-port", 2222)),
        managed_by: &[TRAINING_OPERATOR, MULTIKUEUE],
        operator_name: "tfjob-controller",
    },
    KindSpec {
        group: GROUP,
        version: "v1",
        kind: "MPIJob",
        replica_field: "mpiReplicaSpecs",
        replica_types: &[mpi_launcher("Never"), MPI_WORKER],
        default_container: Some("mpi"),
        requires_default_container: false,
        port: None,
        managed_by: &[TRAINING_OPERATOR, MULTIKUEUE],
        operator_name: "mpijob-controller",
    },
    KindSpec {
        group: GROUP,
        version: "v2beta1",
        kind: "MPIJob",
        replica_field: "mpiReplicaSpecs",
        replica_types: &[mpi_launcher("OnFailure"), MPI_WORKER],
        default_container: None,
        requires_default_container: false,
        port: None,
        managed_by: &[MPI_OPERATOR, MULTIKUEUE],
        operator_name: "mpi-operator",
    },
    KindSpec {
        group: GROUP,
        version: "v1",
        kind: "XGBoostJob",
        replica_field: "xgbReplicaSpecs",
        replica_types: &[
            rt("Master", Role::Coordinator, "Never"),
            rt("Worker", Role::Worker, "Never"),
        ],
        default_container: Some("xgboost"),
        requires_default_container: true,
        port: Some(("xgboostjob-port", 9999)),
        managed_by: &[TRAINING_OPERATOR, MULTIKUEUE],
        operator_name: "xgboostjob-controller",
    },
    KindSpec {
        group: GROUP,
        version: "v1",
        kind: "PaddleJob",
        replica_field: "paddleReplicaSpecs",
        replica_types: &[
            rt("Master", Role::Coordinator, "OnFailure"),
            rt("Worker", Role::Worker, "OnFailure"),
        ],
        default_container: Some("paddle"),
        requires_default_container: true,
        port: Some(("master", 36543)),
        managed_by: &[TRAINING_OPERATOR, MULTIKUEUE],
        operator_name: "paddlejob-controller",
    },
    KindSpec {
        group: GROUP,
        version: "v1",
        kind: "JAXJob",
        replica_field: "jaxReplicaSpecs",
        replica_types: &[rt("Worker", Role::Worker, "Never")],
        default_container: Some("jax"),
        requires_default_container: true,
        port: Some(("jaxjob-port", 6666)),
        managed_by: &[TRAINING_OPERATOR, MULTIKUEUE],
        operator_name: "jaxjob-controller",
    },
];

/// Finds the kind table row for an `apiVersion` and `kind`, exactly as written in a manifest.
pub fn lookup(api_version: &str, kind: &str) -> Option<&'static KindSpec> {
    let (group, version) = api_version.split_once('/')?;
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_kind_by_api_version() {
        assert_eq!(
            lookup("kubeflow.org/v1", "PyTorchJob").map(|k| k.replica_field),
            Some("pytorchReplicaSpecs")
        );
        assert_eq!(
            lookup("kubeflow.org/v2beta1", "MPIJob").map(|k| k.operator_name),
            Some("mpi-operator")
        );
        assert_eq!(
            lookup("kubeflow.org/v1", "MPIJob").map(|k| k.operator_name),
            Some("mpijob-controller")
        );
        assert!(lookup("kubeflow.org/v1beta1", "PyTorchJob").is_none());
        assert!(lookup("v1", "ConfigMap").is_none());
    }

    #[test]
    fn replica_type_lookup_ignores_case() {
        let tf = lookup("kubeflow.org/v1", "TFJob").map(|k| k.replica_type("ps").map(|t| t.name));
        assert_eq!(tf, Some(Some("PS")));
    }

    #[test]
    fn every_kind_has_exactly_one_api_version_row() {
        for k in KINDS {
            let same = KINDS
                .iter()
                .filter(|o| o.kind == k.kind && o.version == k.version)
                .count();
            assert_eq!(same, 1, "{} {}", k.kind, k.version);
        }
    }
}
