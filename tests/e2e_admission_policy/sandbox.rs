//! deploy/controller/admission-policy.yaml's gangplank-controller-pods: a pod the controller
//! creates stays in its own sandbox, however well its ownerReference is forged and whatever
//! the namespace's Pod Security level (none here: the envtest namespaces are privileged).
//! Each refusal names the field to change in the job's pod template.

use serde_json::{json, Value};

use super::{client_as, control_plane, job_pod, refused, try_pod, Attack, CONTROLLER};

fn container(pod: &mut Value) -> &mut Value {
    &mut pod["spec"]["containers"][0]
}

fn add_capability(pod: &mut Value, capability: &str) {
    container(pod)["securityContext"]["capabilities"]["add"] = json!([capability]);
}

const ATTACKS: [Attack; 12] = [
    (
        "a privileged container",
        |pod| {
            // allowPrivilegeEscalation false with privileged is invalid before admission.
            container(pod)["securityContext"] = json!({"privileged": true});
        },
        "containers pytorch set securityContext.privileged: true",
    ),
    (
        "a privileged init container",
        |pod| {
            pod["spec"]["initContainers"] = json!([{
                "name": "setup", "image": "busybox", "securityContext": {"privileged": true},
            }]);
        },
        "containers setup set securityContext.privileged: true",
    ),
    (
        "privilege escalation",
        |pod| container(pod)["securityContext"]["allowPrivilegeEscalation"] = true.into(),
        "securityContext.allowPrivilegeEscalation: true",
    ),
    (
        "SYS_ADMIN",
        |pod| add_capability(pod, "SYS_ADMIN"),
        "add a capability outside",
    ),
    (
        "CAP_NET_ADMIN spelled with its prefix",
        |pod| add_capability(pod, "CAP_NET_ADMIN"),
        "add a capability outside",
    ),
    (
        "ALL capabilities",
        |pod| add_capability(pod, "ALL"),
        "add a capability outside",
    ),
    (
        "the host's network",
        |pod| pod["spec"]["hostNetwork"] = true.into(),
        "the pod sets hostNetwork: true",
    ),
    (
        "the host's PID and IPC namespaces",
        |pod| {
            pod["spec"]["hostPID"] = true.into();
            pod["spec"]["hostIPC"] = true.into();
        },
        "the pod sets hostPID, hostIPC: true",
    ),
    (
        "a hostPath volume",
        |pod| {
            pod["spec"]["volumes"] = json!([{"name": "root", "hostPath": {"path": "/"}}]);
        },
        "volumes root are hostPath volumes",
    ),
    (
        "a hostPort",
        |pod| {
            container(pod)["ports"] = json!([{"containerPort": 22, "hostPort": 2222}]);
        },
        "containers pytorch set ports[].hostPort",
    ),
    (
        "a node chosen past the scheduler",
        |pod| pod["spec"]["nodeName"] = "gpu-node-7".into(),
        "the pod sets spec.nodeName gpu-node-7",
    ),
    (
        "sys_admin in lower case",
        |pod| add_capability(pod, "sys_admin"),
        "add a capability outside",
    ),
];

pub async fn the_controllers_pods_stay_in_their_sandbox_whatever_their_owner() {
    let plane = control_plane().await;
    let controller = client_as(plane, CONTROLLER).await;
    let ns = plane.namespace("vap-sandbox").await;
    let uid = "00000000-0000-0000-0000-000000000010";
    for (what, attack, expected) in ATTACKS {
        let mut pod = job_pod("train", uid);
        attack(&mut pod);
        let message = refused(what, expected, || {
            try_pod(controller.clone(), ns.clone(), pod.clone())
        })
        .await;
        assert!(
            message.contains("change it in the job's pod template")
                && message.contains("of job train"),
            "{what}: {message}"
        );
    }
    // What training does need: pinned memory for RDMA, NUMA pinning, MPI's cross-memory
    // attach; a named container port without a hostPort.
    let mut rdma = job_pod("train", uid);
    container(&mut rdma)["securityContext"]["capabilities"]["add"] =
        json!(["IPC_LOCK", "CAP_SYS_NICE", "SYS_PTRACE"]);
    container(&mut rdma)["ports"] = json!([{"name": "pytorchjob-port", "containerPort": 23456}]);
    try_pod(controller, ns, rdma)
        .await
        .expect("a training pod with IPC_LOCK, SYS_NICE and SYS_PTRACE is admitted");
}
