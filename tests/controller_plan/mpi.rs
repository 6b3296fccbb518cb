//! MPIJob kubeflow.org/v2beta1, ported from the mpi-operator's controller tests
//! (`TestAllResourcesCreated`, `TestNewConfigMap`, `TestUpdateDiscoverHostsInConfigMap`,
//! `TestLauncherActiveWorkerNotReady`/`Ready`, `TestLauncherSucceeded`, `TestLauncherFailed`,
//! `TestCreateSuspendedMPIJob`, `TestSuspendedRunningMPIJob`, `TestResumeMPIJob`), with the
//! launcher as a pod (see `controller::mpi`).

use gangplank::controller::{Action, Config, DeleteReason, Observed, SshSecret};
use k8s_openapi::api::core::v1::PodCondition;
use serde_json::{json, Value};

use crate::fixtures::*;

fn ready(mut observed: Observed, name: &str) -> Observed {
    let pod = observed.pod_mut(name);
    let status = pod.status.get_or_insert_with(Default::default);
    status.phase = Some("Running".into());
    status.conditions = Some(vec![PodCondition {
        type_: "Ready".into(),
        status: "True".into(),
        ..Default::default()
    }]);
    observed
}

fn pod_json(plan: &gangplank::controller::Plan, pod: &str) -> Value {
    json!(created_pod(plan, pod))
}

#[test]
fn all_resources_are_created_in_order() {
    let job = mpi_job(2);
    let plan = job.plan(&Observed::default(), 0);
    assert_eq!(
        action_list(&plan.actions),
        strs(&[
            "configmap mnist-config",
            "secret mnist-ssh",
            "service mnist",
            "pod mnist-worker-0",
            "pod mnist-worker-1",
        ]),
        "the launcher (AtStartup) waits until its workers exist as the job's own"
    );
    let next = job.plan(&after(&Observed::default(), &plan), 1);
    assert_eq!(action_list(&next.actions), strs(&["pod mnist-launcher"]));
    assert_eq!(
        conditions(&plan),
        conds(&[("Created", "True", "MPIJobCreated")])
    );
    assert_eq!(message(&plan, "Created"), "MPIJob team-a/mnist is created.");
    let owner = json!([{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "mnist",
        "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}]);
    let secret = plan.actions.iter().find_map(|a| match a {
        Action::CreateSshSecret(s) => Some(json!(s)),
        _ => None,
    });
    assert_eq!(
        secret,
        Some(json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "mnist-ssh", "namespace": "team-a", "labels": {"app": "mnist",
                "training.kubeflow.org/job-name": "mnist",
                "training.kubeflow.org/operator-name": "mpi-operator"},
                "ownerReferences": owner},
            "type": "kubernetes.io/ssh-auth",
        }))
    );
    let service = plan.actions.iter().find_map(|a| match a {
        Action::CreateService(s) => Some(json!(s)),
        _ => None,
    });
    assert_eq!(
        service,
        Some(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "mnist", "namespace": "team-a", "labels": {"app": "mnist",
                "training.kubeflow.org/job-name": "mnist",
                "training.kubeflow.org/operator-name": "mpi-operator"},
                "ownerReferences": owner},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": false, "selector": {
                "training.kubeflow.org/job-name": "mnist",
                "training.kubeflow.org/operator-name": "mpi-operator",
            }},
        }))
    );
}

#[test]
fn config_map_lists_workers_with_slots_per_implementation() {
    assert_eq!(
        config_data(&mpi_job(2)),
        json!({
            "hostfile": "mnist-worker-0.mnist.team-a.svc slots=1\nmnist-worker-1.mnist.team-a.svc slots=1\n",
            "discover_hosts.sh": "#!/bin/sh\n",
        })
    );
    let intel = mpi_job(2)
        .set("/spec/mpiImplementation", json!("Intel"))
        .set("/spec/slotsPerWorker", json!(8));
    assert_eq!(
        config_data(&intel)["hostfile"],
        "mnist-worker-0.mnist.team-a.svc:8\nmnist-worker-1.mnist.team-a.svc:8\n"
    );
    let domain = gangplank::controller::Config {
        address_domain: Some("cluster.local".into()),
        ..Default::default()
    };
    let plan = mpi_job(1).plan_with(&Observed::default(), 0, &domain);
    assert_eq!(
        json!(config_map(&plan.actions).and_then(|c| c.data.clone()))["hostfile"],
        "mnist-worker-0.mnist.team-a.svc.cluster.local slots=1\n"
    );
    let mpich = mpi_job(1).set("/spec/mpiImplementation", json!("MPICH"));
    assert_eq!(
        config_data(&mpich)["hostfile"],
        "mnist-worker-0.mnist.team-a.svc:1\n"
    );
    let as_worker = mpi_job(1)
        .set("/spec/runLauncherAsWorker", json!(true))
        .set("/spec/slotsPerWorker", json!(2));
    assert_eq!(
        config_data(&as_worker),
        json!({
            "hostfile": "mnist-launcher.mnist.team-a.svc slots=2\nmnist-worker-0.mnist.team-a.svc slots=2\n",
            "discover_hosts.sh": "#!/bin/sh\necho mnist-launcher.mnist.team-a.svc\n",
        })
    );
}

#[test]
fn discover_hosts_follows_the_running_workers_sorted() {
    let job = mpi_job(3);
    let observed = applied(&job)
        .phase("mnist-worker-1", "Running")
        .phase("mnist-worker-0", "Running");
    let plan = job.plan(&observed, 5);
    let update = plan.actions.iter().find_map(|a| match a {
        Action::UpdateConfigMap { name, data } => Some((name.clone(), json!(data))),
        _ => None,
    });
    assert_eq!(
        update,
        Some((
            "mnist-config".to_string(),
            json!({
                "hostfile": "mnist-worker-0.mnist.team-a.svc slots=1\nmnist-worker-1.mnist.team-a.svc slots=1\nmnist-worker-2.mnist.team-a.svc slots=1\n",
                "discover_hosts.sh": "#!/bin/sh\necho mnist-worker-0.mnist.team-a.svc\necho mnist-worker-1.mnist.team-a.svc\n",
            })
        ))
    );
    assert_eq!(
        action_list(&plan.actions),
        strs(&["update configmap mnist-config"])
    );
}

#[test]
fn existing_objects_are_not_planned_again_so_the_key_is_never_rotated() {
    let job = mpi_job(2);
    let plan = job.plan(&applied(&job), 5);
    assert_eq!(action_list(&plan.actions), Vec::<String>::new());
    let secret_deleted = Observed {
        ssh_secret: SshSecret::Absent,
        ..applied(&job)
    };
    assert_eq!(
        action_list(&job.plan(&secret_deleted, 5).actions),
        strs(&["secret mnist-ssh"]),
        "a Secret deleted by hand is repaired"
    );
    let secret_edited = Observed {
        ssh_secret: SshSecret::Damaged,
        ..applied(&job)
    };
    let repaired = job.plan(&secret_edited, 5);
    assert_eq!(
        repaired.actions,
        vec![Action::RepairSshSecret {
            name: "mnist-ssh".into()
        }],
        "a Secret that lost its keys gets a new pair, in place"
    );
    assert_eq!(
        repaired
            .events
            .iter()
            .map(|e| e.reason.as_str())
            .collect::<Vec<_>>(),
        vec!["SSHSecretRepaired"]
    );
}

#[test]
fn launcher_gets_role_mpi_env_ssh_and_config_volumes() {
    let plan = mpi_job(1).settled_plan(&Config::default());
    assert_eq!(
        pod_json(&plan, "mnist-launcher"),
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "mnist-launcher",
                "namespace": "team-a",
                "labels": {
                    "training.kubeflow.org/job-name": "mnist",
                    "training.kubeflow.org/operator-name": "mpi-operator",
                    "training.kubeflow.org/replica-type": "launcher",
                    "training.kubeflow.org/replica-index": "0",
                    "training.kubeflow.org/job-role": "launcher",
                },
                "ownerReferences": [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                    "name": "mnist", "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {
                "hostname": "mnist-launcher",
                "subdomain": "mnist",
                "restartPolicy": "OnFailure",
                "containers": [{
                    "name": "mpi",
                    "image": "registry.example/train@sha256:abc",
                    "env": [
                        {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
                        {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
                        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                        {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
                        {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
                        {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
                        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
                    ],
                    "volumeMounts": [
                        {"name": "ssh-auth", "mountPath": "/root/.ssh"},
                        {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
                    ],
                }],
                "volumes": [
                    {"name": "ssh-auth", "secret": {"secretName": "mnist-ssh", "defaultMode": 0o600,
                        "items": [
                            {"key": "ssh-privatekey", "path": "id_rsa"},
                            {"key": "ssh-publickey", "path": "id_rsa.pub"},
                            {"key": "ssh-publickey", "path": "authorized_keys"},
                        ]}},
                    {"name": "mpi-job-config", "configMap": {"name": "mnist-config", "items": [
                        {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                        {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
                    ]}},
                ],
            },
        })
    );
}

#[test]
fn launcher_env_per_mpi_implementation() {
    let launcher_env = |job: Job| {
        env(
            created_pod(&job.settled_plan(&Config::default()), "mnist-launcher"),
            "mpi",
        )
    };
    let intel = mpi_job(1)
        .set("/spec/mpiImplementation", json!("Intel"))
        .set("/spec/slotsPerWorker", json!(4));
    assert_eq!(
        launcher_env(intel),
        strs(&[
            "K_MPI_JOB_ROLE=launcher",
            "I_MPI_HYDRA_HOST_FILE=/etc/mpi/hostfile",
            "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS=-o ConnectionAttempts=10",
            "I_MPI_PERHOST=4",
            "NVIDIA_VISIBLE_DEVICES=",
            "NVIDIA_DRIVER_CAPABILITIES=",
        ])
    );
    let mpich = mpi_job(1)
        .set("/spec/mpiImplementation", json!("MPICH"))
        .set("/spec/runLauncherAsWorker", json!(true));
    assert_eq!(
        launcher_env(mpich),
        strs(&[
            "K_MPI_JOB_ROLE=launcher",
            "HYDRA_HOST_FILE=/etc/mpi/hostfile",
            "HYDRA_LAUNCH_EXTRA_ARGS=-o ConnectionAttempts=10",
        ]),
        "a launcher that is also a worker keeps its GPUs visible"
    );
}

#[test]
fn workers_run_sshd_with_the_key_at_ssh_auth_mount_path() {
    let job = mpi_job(2).set("/spec/sshAuthMountPath", json!("/home/mpiuser/.ssh"));
    let plan = job.plan(&Observed::default(), 0);
    let pod = pod_json(&plan, "mnist-worker-1");
    assert_eq!(
        pod["metadata"]["labels"],
        json!({
            "training.kubeflow.org/job-name": "mnist",
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "1",
            "training.kubeflow.org/job-role": "worker",
        })
    );
    assert_eq!(
        pod["spec"],
        json!({
            "hostname": "mnist-worker-1",
            "subdomain": "mnist",
            "restartPolicy": "Never",
            "containers": [{
                "name": "mpi",
                "image": "registry.example/train@sha256:abc",
                "command": ["/usr/sbin/sshd", "-De"],
                "env": [{"name": "K_MPI_JOB_ROLE", "value": "worker"}],
                "volumeMounts": [{"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"}],
            }],
            "volumes": [{"name": "ssh-auth", "secret": {"secretName": "mnist-ssh", "items": [
                {"key": "ssh-privatekey", "path": "id_rsa"},
                {"key": "ssh-publickey", "path": "id_rsa.pub"},
                {"key": "ssh-publickey", "path": "authorized_keys"},
            ]}}],
        }),
        "no 0600 outside /root/.ssh"
    );
    let own_command = mpi_job(1).set(
        "/spec/mpiReplicaSpecs/Worker/template/spec/containers/0/args",
        json!(["/start-sshd.sh"]),
    );
    let plan = own_command.plan(&Observed::default(), 0);
    assert_eq!(
        pod_json(&plan, "mnist-worker-0")["spec"]["containers"][0]["command"],
        Value::Null
    );
}

#[test]
fn run_launcher_as_worker_shifts_worker_ranks_and_publishes_not_ready_addresses() {
    let job = mpi_job(2).set("/spec/runLauncherAsWorker", json!(true));
    let plan = job.settled_plan(&Config::default());
    let index = |pod: &str| {
        pod_json(&plan, pod)["metadata"]["labels"]["training.kubeflow.org/replica-index"].clone()
    };
    assert_eq!(
        [
            index("mnist-launcher"),
            index("mnist-worker-0"),
            index("mnist-worker-1")
        ],
        [json!("0"), json!("1"), json!("2")]
    );
    let publish = plan.actions.iter().find_map(|a| match a {
        Action::CreateService(s) => s.spec.as_ref()?.publish_not_ready_addresses,
        _ => None,
    });
    assert_eq!(publish, Some(true));
    // The shifted labels still map each pod to its own slot: nothing is recreated.
    assert_eq!(
        action_list(&job.plan(&applied(&job), 5).actions),
        Vec::<String>::new()
    );
}

/// `TestLauncherActiveWorkerNotReady` / `TestLauncherActiveWorkerReady`.
#[test]
fn wait_for_workers_ready_holds_the_launcher_back() {
    let job = mpi_job(2).set("/spec/launcherCreationPolicy", json!("WaitForWorkersReady"));
    let first = job.plan(&Observed::default(), 0);
    assert_eq!(
        created_pod_names(&first),
        strs(&["mnist-worker-0", "mnist-worker-1"])
    );
    let mut observed = applied(&job);
    observed.config_map = config_map(&first.actions).cloned();
    let one_ready = ready(observed.clone(), "mnist-worker-0").phase("mnist-worker-1", "Running");
    let plan = job.plan(&one_ready, 5);
    assert_eq!(created_pod_names(&plan), Vec::<String>::new());
    let both = ready(ready(observed, "mnist-worker-0"), "mnist-worker-1");
    let plan = job.plan(&both, 6);
    assert_eq!(created_pod_names(&plan), strs(&["mnist-launcher"]));
}

/// `TestLauncherSucceeded`, `TestLauncherFailed` and the Running rule.
#[test]
fn the_launcher_decides_the_outcome() {
    let job = mpi_job(2);
    let all_running = applied(&job)
        .phase("mnist-launcher", "Running")
        .phase("mnist-worker-0", "Running")
        .phase("mnist-worker-1", "Running");
    let waiting = applied(&job)
        .phase("mnist-launcher", "Running")
        .phase("mnist-worker-0", "Running");
    assert_eq!(
        conditions(&job.plan(&waiting, 5)),
        conds(&[("Created", "True", "MPIJobCreated")]),
        "not Running until every worker runs"
    );
    let running = job.plan(&all_running, 5);
    assert_eq!(
        conditions(&running),
        conds(&[
            ("Created", "True", "MPIJobCreated"),
            ("Running", "True", "MPIJobRunning"),
        ])
    );
    assert_eq!(
        message(&running, "Running"),
        "MPIJob team-a/mnist is running."
    );

    let job = job.with_status_of(&running);
    let done = job.plan(&all_running.clone().phase("mnist-launcher", "Succeeded"), 9);
    assert_eq!(
        conditions(&done),
        conds(&[
            ("Created", "True", "MPIJobCreated"),
            ("Running", "False", "MPIJobRunning"),
            ("Succeeded", "True", "MPIJobSucceeded"),
        ])
    );
    assert_eq!(
        message(&done, "Succeeded"),
        "MPIJob team-a/mnist successfully completed."
    );

    let never = job.clone().restart_policy("Launcher", "Never");
    let failed = never.plan(&all_running.clone().exit("mnist-launcher", "mpi", 1), 9);
    assert_eq!(
        conditions(&failed),
        conds(&[
            ("Created", "True", "MPIJobCreated"),
            ("Running", "False", "MPIJobRunning"),
            ("Failed", "True", "MPIJobFailed"),
        ])
    );
    assert_eq!(
        message(&failed, "Failed"),
        "MPIJob mnist is failed because 1 Launcher replica(s) failed."
    );

    let retried = job.plan(&all_running.exit("mnist-launcher", "mpi", 1), 9);
    assert_eq!(
        retried
            .actions
            .iter()
            .find(|a| matches!(a, Action::DeletePod { .. })),
        Some(&Action::DeletePod {
            name: "mnist-launcher".into(),
            reason: DeleteReason::Restart
        }),
        "an OnFailure launcher is recreated, counted against backoffLimit"
    );
}

/// `TestCreateSuspendedMPIJob`, `TestSuspendedRunningMPIJob`, `TestResumeMPIJob`.
#[test]
fn suspend_deletes_pods_keeps_config_and_secret_and_resume_restarts() {
    let fresh = mpi_job(2).suspended(true).plan(&Observed::default(), 0);
    assert_eq!(action_list(&fresh.actions), Vec::<String>::new());
    assert_eq!(
        conditions(&fresh),
        conds(&[
            ("Created", "True", "MPIJobCreated"),
            ("Suspended", "True", "MPIJobSuspended"),
        ])
    );
    assert_eq!(
        message(&fresh, "Suspended"),
        "MPIJob team-a/mnist is suspended."
    );
    assert_eq!(
        fresh.status.as_ref().and_then(|s| s.start_time.clone()),
        None
    );

    let job = mpi_job(1);
    let observed = applied(&job);
    let suspended = job.clone().suspended(true).plan(&observed, 5);
    assert_eq!(
        action_list(&suspended.actions),
        strs(&[
            "delete pod mnist-launcher",
            "delete pod mnist-worker-0",
            "delete service mnist",
        ])
    );
    let after: Observed = Observed {
        config_map: observed.config_map.clone(),
        ssh_secret: SshSecret::Intact,
        ..Observed::default()
    };
    let resumed = job
        .suspended(false)
        .with_status_of(&suspended)
        .plan(&after, 20);
    assert_eq!(
        action_list(&resumed.actions),
        strs(&["service mnist", "pod mnist-worker-0"]),
        "the workers first; the launcher once they exist"
    );
    assert_eq!(
        conditions(&resumed),
        conds(&[
            ("Created", "True", "MPIJobCreated"),
            ("Suspended", "False", "MPIJobResumed"),
        ])
    );
    assert_eq!(
        resumed.status.as_ref().and_then(|s| s.start_time.clone()),
        Some(time(20)),
        "resume resets startTime"
    );
}

fn without_launcher() -> Job {
    let mut job = mpi_job(1);
    if let Some(specs) = job.0["spec"]["mpiReplicaSpecs"].as_object_mut() {
        specs.remove("Launcher");
    }
    job
}

#[test]
fn invalid_v2beta1_specs_fail_the_job() {
    let cases = [
        (
            mpi_job(1).set("/spec/mpiReplicaSpecs/Launcher/replicas", json!(2)),
            "MPIJob mnist is invalid: /spec/mpiReplicaSpecs/Launcher: Launcher must have exactly 1 replica",
        ),
        (
            without_launcher(),
            "MPIJob mnist is invalid: /spec/mpiReplicaSpecs/Launcher: is required",
        ),
        (
            mpi_job(1).restart_policy("Worker", "ExitCode"),
            "MPIJob mnist is invalid: /spec/mpiReplicaSpecs/Worker/restartPolicy: ExitCode is not supported by MPIJob v2beta1; use Never or OnFailure",
        ),
        (
            mpi_job(1).set("/spec/mpiImplementation", json!("MVAPICH")),
            "MPIJob mnist is invalid: /spec/mpiImplementation: \"MVAPICH\" is not one of OpenMPI, Intel, MPICH",
        ),
    ];
    for (job, want) in cases {
        let plan = job.plan(&Observed::default(), 0);
        assert_eq!(message(&plan, "Failed"), want);
        assert_eq!(action_list(&plan.actions), Vec::<String>::new());
    }
}

#[test]
fn an_evicted_worker_fails_the_job() {
    let job = mpi_job(2).run_policy("cleanPodPolicy", json!("All"));
    let mut observed = applied(&job)
        .phase("mnist-launcher", "Running")
        .phase("mnist-worker-0", "Running")
        .phase("mnist-worker-1", "Failed");
    if let Some(s) = observed.pod_mut("mnist-worker-1").status.as_mut() {
        s.reason = Some("Evicted".into());
    }
    let plan = job.plan(&observed, 5);
    assert_eq!(
        conditions(&plan),
        conds(&[
            ("Created", "True", "MPIJobCreated"),
            ("Failed", "True", "MPIJobEvicted"),
        ])
    );
    assert_eq!(message(&plan, "Failed"), "1/2 workers are evicted");
    assert_eq!(
        deleted_pods(&plan),
        strs(&["mnist-launcher", "mnist-worker-0", "mnist-worker-1"]),
        "cleanPodPolicy All"
    );
}

#[test]
fn a_hand_edited_config_map_is_repaired() {
    let job = mpi_job(1);
    let mut observed = applied(&job);
    if let Some(cm) = observed.config_map.as_mut() {
        cm.data = Some([("hostfile".to_string(), "evil\n".to_string())].into());
    }
    let plan = job.plan(&observed, 5);
    let update = plan.actions.iter().find_map(|a| match a {
        Action::UpdateConfigMap { data, .. } => Some(json!(data)),
        _ => None,
    });
    assert_eq!(
        update,
        Some(json!({
            "hostfile": "mnist-worker-0.mnist.team-a.svc slots=1\n",
            "discover_hosts.sh": "#!/bin/sh\n",
        }))
    );
}

/// `TestNewPodGroup`, `TestCalculateMinAvailable`, `TestCalcPriorityClassName`.
#[test]
fn pod_group_counts_the_launcher_and_takes_mpi_operator_fallbacks() {
    let volcano = gangplank::controller::Config {
        gang: Some(gangplank::controller::GangScheduler::Volcano),
        ..Default::default()
    };
    let spec = |job: &Job| {
        let plan = job.plan_with(&Observed::default(), 0, &volcano);
        plan.actions.iter().find_map(|a| match a {
            Action::CreatePodGroup(pg) => Some(pg["spec"].clone()),
            _ => None,
        })
    };
    let job = mpi_job(3)
        .annotation("scheduling.volcano.sh/queue-name", "research")
        .set(
            "/spec/mpiReplicaSpecs/Worker/template/spec/priorityClassName",
            json!("low"),
        );
    assert_eq!(
        spec(&job),
        Some(
            json!({"minMember": 4, "minResources": {}, "queue": "research", "priorityClassName": "low"})
        )
    );
    let launcher_first = job.set(
        "/spec/mpiReplicaSpecs/Launcher/template/spec/priorityClassName",
        json!("high"),
    );
    assert_eq!(
        spec(&launcher_first).map(|s| s["priorityClassName"].clone()),
        Some(json!("high"))
    );
    let policy_wins = launcher_first.run_policy(
        "schedulingPolicy",
        json!({"queue": "prod", "priorityClass": "urgent"}),
    );
    assert_eq!(
        spec(&policy_wins).map(|s| (s["queue"].clone(), s["priorityClassName"].clone())),
        Some((json!("prod"), json!("urgent")))
    );
}

/// Issue item 4: a launcher that fails before any worker runs is recreated, counted against
/// backoffLimit, and the Restarting message says what the workers were doing.
#[test]
fn a_launcher_failing_before_the_workers_run_is_counted_and_explained() {
    let job = mpi_job(2);
    let observed = applied(&job).exit("mnist-launcher", "mpi", 1).waiting(
        "mnist-worker-0",
        "ImagePullBackOff",
        "Back-off pulling image \"train:v2\"",
    );
    let plan = job.plan(&observed, 30);
    assert_eq!(
        message(&plan, "Restarting"),
        "MPIJob mnist is restarting because 1 Launcher replica(s) failed. \
         Recreating mnist-launcher. No worker was Running yet \
         (mnist-worker-0 Pending, mnist-worker-1 Pending): pod mnist-worker-0: ImagePullBackOff: \
         Back-off pulling image \"train:v2\""
    );
    let annotations = plan.actions.iter().find_map(|a| match a {
        Action::PatchJobAnnotations(map) => Some(json!(map)),
        _ => None,
    });
    assert_eq!(
        annotations.map(|a| a["gangplank.dev/restarts"].clone()),
        Some(json!("1"))
    );
}

/// The mpi-operator's "NotControlledByUs" cases for the ConfigMap and the Secret: another
/// owner's object (e.g. a v1 MPIJob of the same name) is never adopted or mounted.
#[test]
fn objects_of_another_owner_block_the_pods_with_an_event() {
    let job = mpi_job(1);
    let observed = Observed {
        foreign: vec![
            held("ConfigMap", "mnist-config", None),
            held("Secret", "mnist-ssh", Some("MPIJob mnist")),
        ],
        ..Observed::default()
    };
    let plan = job.plan(&observed, 0);
    assert_eq!(action_list(&plan.actions), Vec::<String>::new());
    let events: Vec<(String, String)> = plan
        .events
        .iter()
        .map(|e| (e.reason.clone(), e.message.clone()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                "ErrResourceExists".to_string(),
                "Resource \"mnist-config\" already exists and is not managed by MPIJob: \
                 ConfigMap with no controller"
                    .to_string()
            ),
            (
                "ErrResourceExists".to_string(),
                "Resource \"mnist-ssh\" already exists and is not managed by MPIJob: Secret \
                 controlled by MPIJob mnist"
                    .to_string()
            ),
        ]
    );
}
