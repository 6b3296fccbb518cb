//! MPIJob kubeflow.org/v1, the training operator's kubectl-exec transport, ported from its
//! `mpijob_controller_test.go` (`TestAllResourcesCreated`, `TestConfigMapNotControlledByUs`,
//! `TestLauncherServiceAccountNotControlledByUs`, `TestLauncherNotControlledByUs`,
//! `TestLauncherSucceeded`, `TestLauncherFailed`, `TestWorkerReady`, `TestShutdownWorker`,
//! `TestWorkerNotControlledByUs`, `TestNewConfigMap`) and its `newLauncher`/`newWorker`/
//! `newLauncherRole` shapes.

use gangplank::controller::{Action, Config, LauncherRbac, Observed, Plan};
use serde_json::{json, Value};

use crate::fixtures::*;

fn created_json(plan: &Plan, pick: impl Fn(&Action) -> Option<Value>) -> Option<Value> {
    plan.actions.iter().find_map(pick)
}

const OWNER: &str = r#"[{"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "name": "mnist",
    "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}]"#;

fn meta(name: &str) -> Value {
    let owner: Value = serde_json::from_str(OWNER).unwrap_or_default();
    json!({"name": name, "namespace": "team-a", "labels": {"app": "mnist",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/operator-name": "mpijob-controller"},
        "ownerReferences": owner})
}

#[test]
fn all_resources_are_created_in_order_and_no_services() {
    let job = mpi_v1_job(2);
    let plan = job.plan(&Observed::default(), 0);
    assert_eq!(
        action_list(&plan.actions),
        strs(&[
            "configmap mnist-config",
            "serviceaccount mnist-launcher",
            "role mnist-launcher",
            "rolebinding mnist-launcher",
            "pod mnist-worker-0",
            "pod mnist-worker-1",
        ]),
        "the launcher waits until its workers exist"
    );
    assert_eq!(
        conditions(&plan),
        conds(&[("Created", "True", "MPIJobCreated")])
    );
    assert_eq!(message(&plan, "Created"), "MPIJob mnist is created.");
    let account = created_json(&plan, |a| match a {
        Action::CreateServiceAccount(s) => Some(json!(s)),
        _ => None,
    });
    assert_eq!(
        account,
        Some(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("mnist-launcher")})
        )
    );
    let role = created_json(&plan, |a| match a {
        Action::CreateRole(r) => Some(json!(r)),
        _ => None,
    });
    assert_eq!(
        role,
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": meta("mnist-launcher"),
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            ],
        })),
        "no worker of the job's yet: no exec rule (an empty resourceNames would allow all pods)"
    );
    let binding = created_json(&plan, |a| match a {
        Action::CreateRoleBinding(b) => Some(json!(b)),
        _ => None,
    });
    assert_eq!(
        binding,
        Some(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": meta("mnist-launcher"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mnist-launcher"},
            "subjects": [{"kind": "ServiceAccount", "name": "mnist-launcher", "namespace": "team-a"}],
        }))
    );

    let next = job.plan(&after(&Observed::default(), &plan), 1);
    assert_eq!(
        action_list(&next.actions),
        strs(&["update role mnist-launcher", "pod mnist-launcher"]),
        "the workers it controls get into the Role, then the launcher starts"
    );
    assert_eq!(
        exec_names(&next),
        Some(json!(["mnist-worker-0", "mnist-worker-1"]))
    );
}

/// `TestNewConfigMap`: hosts by pod name with their slots, kubexec.sh with and without
/// mainContainer, and a GPU launcher listed first.
#[test]
fn config_map_has_hostfile_kubexec_and_discover_hosts() {
    let kubexec = "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c \"$*\"";
    assert_eq!(
        config_data(&mpi_v1_job(2)),
        json!({
            "hostfile": "mnist-worker-0 slots=1\nmnist-worker-1 slots=1\n",
            "kubexec.sh": kubexec,
            "discover_hosts.sh": "#!/bin/sh",
        })
    );
    let main = mpi_v1_job(1)
        .set("/spec/mainContainer", json!("trainer"))
        .set("/spec/slotsPerWorker", json!(8));
    let data = config_data(&main);
    assert_eq!(data["hostfile"], json!("mnist-worker-0 slots=8\n"));
    assert_eq!(
        data["kubexec.sh"],
        json!("#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} --container trainer -- /bin/sh -c \"$*\"")
    );
    let gpu = mpi_v1_job(1).set(
        "/spec/mpiReplicaSpecs/Launcher/template/spec/containers/0/resources",
        json!({"limits": {"nvidia.com/gpu": 1}}),
    );
    assert_eq!(
        config_data(&gpu)["hostfile"],
        json!("mnist-launcher slots=1\nmnist-worker-0 slots=1\n")
    );
}

#[test]
fn discover_hosts_lists_running_workers_and_a_hand_edit_is_repaired() {
    let job = mpi_v1_job(3);
    let observed = applied(&job)
        .phase("mnist-worker-2", "Running")
        .phase("mnist-worker-0", "Running");
    let plan = job.plan(&observed, 5);
    let update = plan.actions.iter().find_map(|a| match a {
        Action::UpdateConfigMap { data, .. } => data.get("discover_hosts.sh").cloned(),
        _ => None,
    });
    assert_eq!(
        update.as_deref(),
        Some("#!/bin/sh\necho mnist-worker-0:1\necho mnist-worker-2:1")
    );
    let mut edited = applied(&job);
    if let Some(cm) = edited.config_map.as_mut() {
        cm.data = Some([("hostfile".to_string(), "evil slots=1\n".to_string())].into());
    }
    let repaired = job.plan(&edited, 5);
    assert_eq!(
        action_list(&repaired.actions),
        strs(&["update configmap mnist-config"]),
        "repaired in place, nothing created twice"
    );
}

#[test]
fn existing_objects_are_not_planned_again() {
    let job = mpi_v1_job(2);
    let plan = job.plan(&applied(&job), 5);
    assert_eq!(action_list(&plan.actions), Vec::<String>::new());
}

/// The names an `update role` of `plan` gives exec rights on.
fn exec_names(plan: &Plan) -> Option<Value> {
    let rules = plan.actions.iter().find_map(|a| match a {
        Action::UpdateRole { rules, .. } => Some(json!(rules)),
        _ => None,
    });
    rules.map(|r| r[1]["resourceNames"].clone())
}

/// Scaling the workers rewrites the hostfile at once and the Role's exec list as the workers
/// appear and go: a name is in the Role only while a pod the job controls has it.
#[test]
fn the_role_follows_the_workers_the_job_controls() {
    let job = mpi_v1_job(2);
    let observed = applied(&job);
    let bigger = job.set("/spec/mpiReplicaSpecs/Worker/replicas", json!(3));
    let plan = bigger.plan(&observed, 5);
    assert_eq!(
        action_list(&plan.actions),
        strs(&["update configmap mnist-config", "pod mnist-worker-2"])
    );
    let grown = applied(&bigger);
    let names = ["mnist-worker-0", "mnist-worker-1", "mnist-worker-2"];
    let in_role = |o: &Observed| {
        let role = o.launcher_rbac.role.as_ref().and_then(|r| r.rules.clone());
        json!(role)[1]["resourceNames"].clone()
    };
    assert_eq!(in_role(&grown), json!(names));
    let rules = |workers: &[&str]| {
        let pods: Vec<_> = workers.iter().map(|w| grown.pod(w).cloned()).collect();
        let pods: Vec<_> = pods.into_iter().flatten().collect();
        json!(gangplank::controller::mpi::kubexec::role_rules(
            &pods.iter().collect::<Vec<_>>()
        ))
    };
    assert_eq!(rules(&names)[1]["resourceNames"], json!(names));
    let gone = grown.clone().without_pod("mnist-worker-1");
    assert_eq!(
        exec_names(&bigger.plan(&gone, 6)),
        Some(json!(["mnist-worker-0", "mnist-worker-2"])),
        "a worker deleted (say, to be recreated) leaves the Role until its successor exists"
    );
    assert_eq!(
        rules(&[]),
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]),
        "no worker: no exec rule at all, never an empty resourceNames list"
    );
}

/// An MPIJob named like another workload (a PyTorchJob `mnist` has pods `mnist-worker-N`):
/// its worker creates find those names held, and the plan with that knowledge says so on
/// Created (reason MPIJobResourceExists) and in Warnings naming each pod and its owner,
/// creates no launcher and gives no exec right on them, and looks again later.
#[test]
fn worker_names_another_workload_holds_stop_the_launcher_and_its_exec_rights() {
    let job = mpi_v1_job(2);
    let first = job.plan(&Observed::default(), 0);
    // The first plan's worker creates found the names taken: only its other objects exist.
    let mut observed = after(&Observed::default(), &first);
    observed.pods.clear();
    observed.foreign = vec![
        held("Pod", "mnist-worker-0", Some("PyTorchJob mnist")),
        held("Pod", "mnist-worker-1", Some("PyTorchJob mnist")),
    ];
    let plan = job.with_status_of(&first).plan(&observed, 1);
    assert_eq!(action_list(&plan.actions), Vec::<String>::new());
    assert_eq!(
        conditions(&plan),
        conds(&[("Created", "True", "MPIJobResourceExists")])
    );
    assert_eq!(
        message(&plan, "Created"),
        "MPIJob mnist is waiting for names other objects hold: Pod mnist-worker-0 (controlled \
         by PyTorchJob mnist), Pod mnist-worker-1 (controlled by PyTorchJob mnist); delete \
         those objects or give the job another name"
    );
    let events: Vec<(&str, &str)> = plan
        .events
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                "ErrResourceExists",
                "Resource \"mnist-worker-0\" already exists and is not managed by MPIJob: Pod \
                 controlled by PyTorchJob mnist"
            ),
            (
                "ErrResourceExists",
                "Resource \"mnist-worker-1\" already exists and is not managed by MPIJob: Pod \
                 controlled by PyTorchJob mnist"
            ),
        ]
    );
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(30)));
    let role = observed.launcher_rbac.role.clone().and_then(|r| r.rules);
    assert_eq!(
        json!(role).as_array().map(Vec::len),
        Some(1),
        "no exec rule"
    );

    let again = job.with_status_of(&plan).plan(&observed, 31);
    assert!(again.events.is_empty(), "said once, not every look");
    let freed = Observed {
        foreign: Vec::new(),
        ..observed
    };
    let resumed = job.with_status_of(&again).plan(&freed, 61);
    assert_eq!(
        action_list(&resumed.actions),
        strs(&["pod mnist-worker-0", "pod mnist-worker-1"])
    );
    assert_eq!(
        conditions(&resumed),
        conds(&[("Created", "True", "MPIJobCreated")])
    );
}

/// `newLauncher`: the ServiceAccount, the kubectl-delivery init container, the rsh agent and
/// hostfile variables (a user's own kept), blank NVIDIA variables, the two volumes.
#[test]
fn launcher_gets_kubectl_its_account_and_the_kubexec_env() {
    let job = mpi_v1_job(1).set(
        "/spec/mpiReplicaSpecs/Launcher/template/spec/containers/0/env",
        json!([{"name": "OMPI_MCA_orte_default_hostfile", "value": "/my/hosts"}]),
    );
    let config = Config {
        mpi_kubectl_delivery_image: "registry.example/kubectl-delivery@sha256:1".into(),
        ..Config::default()
    };
    let plan = job.settled_plan(&config);
    let pod = json!(created_pod(&plan, "mnist-launcher"));
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], json!("mnist-launcher"));
    assert_eq!(spec["restartPolicy"], json!("Never"), "v1 launcher default");
    assert_eq!(
        pod["metadata"]["labels"]["training.kubeflow.org/job-role"],
        json!("master")
    );
    assert_eq!(
        env(created_pod(&plan, "mnist-launcher"), "mpi"),
        strs(&[
            "OMPI_MCA_orte_default_hostfile=/my/hosts",
            "OMPI_MCA_plm_rsh_agent=/etc/mpi/kubexec.sh",
            "I_MPI_HYDRA_BOOTSTRAP=rsh",
            "I_MPI_HYDRA_BOOTSTRAP_EXEC=/etc/mpi/kubexec.sh",
            "NVIDIA_VISIBLE_DEVICES=",
            "NVIDIA_DRIVER_CAPABILITIES=",
        ])
    );
    let amounts = json!({"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"});
    assert_eq!(
        spec["initContainers"],
        json!([{
            "name": "kubectl-delivery",
            "image": "registry.example/kubectl-delivery@sha256:1",
            "imagePullPolicy": "IfNotPresent",
            "command": ["cp", "/bin/kubectl", "/opt/kube/kubectl"],
            "securityContext": restricted(),
            "env": [{"name": "TARGET_DIR", "value": "/opt/kube"}, {"name": "NAMESPACE", "value": "team-a"}],
            "volumeMounts": [{"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
                             {"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
            "resources": {"limits": amounts, "requests": amounts},
        }])
    );
    assert_eq!(
        spec["volumes"],
        json!([
            {"name": "mpi-job-kubectl", "emptyDir": {}},
            {"name": "mpi-job-config", "configMap": {"name": "mnist-config", "items": [
                {"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555},
                {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
            ]}},
        ])
    );
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
               {"name": "mpi-job-config", "mountPath": "/etc/mpi"}])
    );
    assert_eq!(spec.get("hostname"), None, "no DNS names: kubectl exec");
}

/// By default kubectl comes from the Kubernetes project's kubectl image pinned by digest (not
/// upstream's `kubeflow/kubectl-delivery:latest`), copied by a non-root, restricted container.
#[test]
fn kubectl_is_delivered_from_a_pinned_image_by_a_restricted_container() {
    let plan = mpi_v1_job(1).settled_plan(&Config::default());
    let pod = json!(created_pod(&plan, "mnist-launcher"));
    let delivery = &pod["spec"]["initContainers"][0];
    assert_eq!(
        delivery["image"],
        json!(
            "registry.k8s.io/kubectl:v1.34.1@sha256:\
             59bafa07ff3a6d4b417e7633ddb9d79a9606ca98bf64bac080b3e65748669250"
        )
    );
    assert_eq!(
        delivery["command"],
        json!(["cp", "/bin/kubectl", "/opt/kube/kubectl"])
    );
    assert_eq!(delivery["securityContext"], restricted());
}

#[test]
fn a_gpu_launcher_keeps_the_nvidia_variables() {
    let job = mpi_v1_job(1).set(
        "/spec/mpiReplicaSpecs/Launcher/template/spec/containers/0/resources",
        json!({"limits": {"nvidia.com/gpu": 1}}),
    );
    let plan = job.settled_plan(&Config::default());
    let vars = env(created_pod(&plan, "mnist-launcher"), "mpi");
    assert!(!vars.iter().any(|v| v.starts_with("NVIDIA_")), "{vars:?}");
}

/// `newWorker`: `sleep 365d` unless a command is given, and kubexec.sh mounted.
#[test]
fn workers_sleep_and_see_kubexec() {
    let plan = mpi_v1_job(1).plan(&Observed::default(), 0);
    let worker = json!(created_pod(&plan, "mnist-worker-0"));
    let c = &worker["spec"]["containers"][0];
    assert_eq!(
        (c["command"].clone(), c["args"].clone()),
        (json!(["sleep"]), json!(["365d"]))
    );
    assert_eq!(
        c["volumeMounts"],
        json!([{"name": "mpi-job-config", "mountPath": "/etc/mpi"}])
    );
    assert_eq!(
        worker["spec"]["volumes"],
        json!([{"name": "mpi-job-config", "configMap": {"name": "mnist-config",
            "items": [{"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555}]}}])
    );
    assert_eq!(
        worker["metadata"]["labels"]["training.kubeflow.org/replica-index"],
        json!("0")
    );
    assert_eq!(
        worker["metadata"]["labels"].get("training.kubeflow.org/job-role"),
        None
    );

    let own = mpi_v1_job(1).set(
        "/spec/mpiReplicaSpecs/Worker/template/spec/containers/0/command",
        json!(["/usr/sbin/sshd", "-D"]),
    );
    let plan = own.plan(&Observed::default(), 0);
    let c = json!(created_pod(&plan, "mnist-worker-0"))["spec"]["containers"][0].clone();
    assert_eq!(
        (c["command"].clone(), c.get("args").cloned()),
        (json!(["/usr/sbin/sshd", "-D"]), None)
    );
}

/// `TestLauncherSucceeded`, `TestLauncherFailed`, `TestWorkerReady`: the launcher decides.
#[test]
fn the_launcher_decides_the_outcome() {
    let job = mpi_v1_job(2);
    let all_running = applied(&job)
        .phase("mnist-launcher", "Running")
        .phase("mnist-worker-0", "Running")
        .phase("mnist-worker-1", "Running");
    let running = job.plan(&all_running, 5);
    assert_eq!(
        conditions(&running),
        conds(&[
            ("Created", "True", "MPIJobCreated"),
            ("Running", "True", "MPIJobRunning"),
        ])
    );
    let job = job.with_status_of(&running);
    let done = job.plan(&all_running.clone().phase("mnist-launcher", "Succeeded"), 9);
    assert_eq!(
        conditions(&done),
        conds(&[
            ("Created", "True", "MPIJobCreated"),
            ("Running", "False", "MPIJobRunning"),
            ("Succeeded", "True", "MPIJobSucceeded"),
        ]),
        "MPIJobSucceeded, not upstream's event reason mpijobsSucceeded"
    );
    let failed = job.plan(&all_running.exit("mnist-launcher", "mpi", 1), 9);
    assert_eq!(
        conditions(&failed),
        conds(&[
            ("Created", "True", "MPIJobCreated"),
            ("Running", "False", "MPIJobRunning"),
            ("Failed", "True", "MPIJobFailed"),
        ]),
        "a Never launcher fails the job; MPIJobFailed, not upstream's MPIJobMPIJobFailed"
    );
}

#[test]
fn an_evicted_worker_fails_the_job() {
    let job = mpi_v1_job(2);
    let mut observed = applied(&job)
        .phase("mnist-launcher", "Running")
        .phase("mnist-worker-0", "Running")
        .phase("mnist-worker-1", "Failed");
    observed
        .pod_mut("mnist-worker-1")
        .status
        .get_or_insert_with(Default::default)
        .reason = Some("Evicted".into());
    let plan = job.plan(&observed, 5);
    assert_eq!(
        conditions(&plan).last(),
        Some(&(
            "Failed".to_string(),
            "True".to_string(),
            "MPIJobEvicted".to_string()
        ))
    );
    assert_eq!(message(&plan, "Failed"), "1/2 workers are evicted");
}

/// `TestLauncherServiceAccountNotControlledByUs` and friends: another owner's ServiceAccount,
/// Role or ConfigMap of the same name (say, a v2beta1 MPIJob `mnist`) is never adopted,
/// rewritten or used by a launcher.
#[test]
fn objects_of_another_owner_block_the_pods_with_an_event() {
    let job = mpi_v1_job(1);
    let observed = Observed {
        foreign: vec![held("ServiceAccount", "mnist-launcher", None)],
        launcher_rbac: LauncherRbac::default(),
        ..Observed::default()
    };
    let plan = job.plan(&observed, 0);
    assert_eq!(action_list(&plan.actions), Vec::<String>::new());
    assert_eq!(
        plan.events
            .iter()
            .map(|e| e.reason.as_str())
            .collect::<Vec<_>>(),
        vec!["ErrResourceExists"]
    );
}

/// The legacy top-level `spec.cleanPodPolicy` counts when runPolicy sets none, and
/// runPolicy wins when both do (upstream syncs them that way).
#[test]
fn the_legacy_clean_pod_policy_applies_unless_run_policy_sets_one() {
    let finished = |job: Job| {
        let observed = applied(&job)
            .phase("mnist-launcher", "Running")
            .phase("mnist-worker-0", "Running");
        let running = job.plan(&observed, 5);
        let job = job.with_status_of(&running);
        let done = job.plan(&observed.clone().phase("mnist-launcher", "Succeeded"), 9);
        deleted_pods(&done)
    };
    assert_eq!(
        finished(mpi_v1_job(1).set("/spec/cleanPodPolicy", json!("All"))),
        strs(&["mnist-launcher", "mnist-worker-0"])
    );
    assert_eq!(
        finished(
            mpi_v1_job(1)
                .set("/spec/cleanPodPolicy", json!("All"))
                .run_policy("cleanPodPolicy", json!("None"))
        ),
        Vec::<String>::new()
    );
}

/// `ValidateV1MpiJobSpec`: "Master ReplicaSpec must be present" (the launcher).
#[test]
fn a_job_without_a_launcher_fails_naming_it() {
    let mut job = mpi_v1_job(2);
    if let Some(specs) = job.0["spec"]["mpiReplicaSpecs"].as_object_mut() {
        specs.remove("Launcher");
    }
    let plan = job.plan(&Observed::default(), 0);
    assert!(created_pods(&plan).is_empty());
    assert!(
        message(&plan, "Failed").contains("/spec/mpiReplicaSpecs/Launcher: is required"),
        "{}",
        message(&plan, "Failed")
    );
}
