# The sandbox of the pods gangplank's controller creates, judged when the job is applied.
# deploy/controller/admission-policy.yaml (ValidatingAdmissionPolicy gangplank-controller-pods)
# refuses the controller's own pod creates that reach past a pod's sandbox: privileged
# containers, privilege escalation, capabilities beyond Pod Security's baseline and what
# training needs (IPC_LOCK, SYS_NICE, SYS_PTRACE), the node's namespaces, hostPath volumes,
# host ports, a nodeName. A job whose template asks for one of these would be admitted and
# then never get a pod: the controller's creates are refused one by one, in its log and the
# job's events, while the user waits. This policy refuses such a job at `kubectl apply`, with
# the same reasons. It judges the jobs gangplank's controller runs: kubeflow.org kinds whose
# runPolicy.managedBy is unset or the operator's, not TrainJobs (Trainer's JobSet makes their
# pods) nor a v2beta1 MPIJob's launcher (a batch Job's pods, made by kube-controller-manager),
# in the namespaces the controller runs jobs in: those its --namespace-selector matches
# (`namespaceSelector` here, the same label). Elsewhere the upstream operator, or nobody, runs
# the job, and the fence does not apply. Where the namespace's labels are not known (no
# inventory, `gangplank check` offline) the findings are warnings that say the condition.
package gangplank.policies.pod_sandbox

import rego.v1

import data.gangplank.lib

meta := {
	"title": "Pods the controller's sandbox admits",
	"description": "In namespaces gangplank's controller runs jobs in (namespaceSelector, its --namespace-selector), refuses jobs whose pod templates set what its pod fence (the gangplank-controller-pods ValidatingAdmissionPolicy) refuses: privileged or allowPrivilegeEscalation containers, capabilities outside allowedCapabilities, hostNetwork, hostPID, hostIPC, hostPath volumes, host ports or nodeName. Such a job would be admitted and never get a pod. Namespace labels unknown: warnings.",
	"action": "deny",
	"params": {
		# Must match the variable allowedCapabilities of deploy/controller/admission-policy.yaml:
		# Pod Security's baseline set, plus IPC_LOCK (RDMA), SYS_NICE (NUMA pinning) and
		# SYS_PTRACE (MPI's cross-memory attach).
		"allowedCapabilities": [
			"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
			"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
			"IPC_LOCK", "SYS_NICE", "SYS_PTRACE",
		],
		# What a platform has loosened in its overlay of that policy (deploy/README.md), from
		# privileged, allowPrivilegeEscalation, hostNetwork, hostPID, hostIPC, hostPath,
		# hostPort, nodeName. With hostNetwork allowed, a pod on the host's network may have
		# host ports (the API server sets them from the container ports).
		"allow": [],
		# The controller's --namespace-selector (deploy/controller passes this one).
		"namespaceSelector": "gangplank.dev/managed=true",
	},
}

params := data.params.pod_sandbox

# managedBy values under which gangplank's controller (as the operator) runs the job.
operators := {"kubeflow.org/training-operator", "kubeflow.org/mpi-operator"}

runs_pods if {
	not input.job.trainer
	input.job.kind in {"PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"}
	managed := object.get(input.object, ["spec", "runPolicy", "managedBy"], null)
	ours(managed)
}

ours(m) if m == null

ours(m) if m in operators

# The replicas whose template becomes a pod the controller creates itself.
replica contains r if {
	runs_pods
	some r in input.job.replicas
	not batch_launcher(r)
	is_object(lib.raw_pod_spec(r))
}

batch_launcher(r) if {
	lib.mpi_v2beta1(input.job)
	r.type == "Launcher"
}

# Containers and init containers of a template: both run in the pod's sandbox.
container(spec, field, i) := c if {
	c := spec[field][i]
	is_object(c)
}

containers(spec) := [{"c": c, "path": sprintf("/%s/%d", [field, i])} |
	some field in ["containers", "initContainers"]
	is_array(object.get(spec, field, []))
	some i, _ in object.get(spec, field, [])
	c := container(spec, field, i)
]

security(c) := object.get(c, "securityContext", {})

capability(k) := upper(trim_prefix(upper(k), "CAP_")) if is_string(k)

# The namespace's labels, when Namespaces are known.
labels := data.cluster.namespace.labels if is_object(data.cluster.namespace.labels)

selector := split(params.namespaceSelector, "=")

run_here if {
	count(selector) == 2
	labels[selector[0]] == selector[1]
}

violation contains f if {
	run_here
	some f in finding
}

warning contains {"path": f.path, "msg": msg} if {
	not labels
	some f in finding
	msg := sprintf("if gangplank's controller runs this job (its namespace labelled %s; the namespace's labels are not known here): %s", [params.namespaceSelector, f.msg])
}

fix := "the gangplank controller creates no pod that reaches past its sandbox (deploy/controller/admission-policy.yaml, gangplank-controller-pods), so the job would be admitted and never get a pod"

finding contains {"path": concat("", [r.podSpecPath, e.path, "/securityContext/privileged"]), "msg": msg} if {
	some r in replica
	some e in containers(lib.raw_pod_spec(r))
	not "privileged" in params.allow
	security(e.c).privileged == true
	msg := sprintf("%s container %q sets securityContext.privileged: true; remove it: %s", [r.type, object.get(e.c, "name", ""), fix])
}

finding contains {"path": concat("", [r.podSpecPath, e.path, "/securityContext/allowPrivilegeEscalation"]), "msg": msg} if {
	some r in replica
	some e in containers(lib.raw_pod_spec(r))
	not "allowPrivilegeEscalation" in params.allow
	security(e.c).allowPrivilegeEscalation == true
	msg := sprintf("%s container %q sets securityContext.allowPrivilegeEscalation: true; set it false or remove it: %s", [r.type, object.get(e.c, "name", ""), fix])
}

finding contains {"path": concat("", [r.podSpecPath, e.path, "/securityContext/capabilities/add"]), "msg": msg} if {
	some r in replica
	some e in containers(lib.raw_pod_spec(r))
	added := object.get(security(e.c), ["capabilities", "add"], [])
	is_array(added)
	refused := sort([k | some k in added; not capability(k) in params.allowedCapabilities])
	count(refused) > 0
	msg := sprintf("%s container %q adds capabilities %s; only %s may be added: %s", [r.type, object.get(e.c, "name", ""), concat(", ", [sprintf("%v", [k]) | some k in refused]), concat(", ", params.allowedCapabilities), fix])
}

finding contains {"path": concat("", [r.podSpecPath, "/", field]), "msg": msg} if {
	some r in replica
	some field in ["hostNetwork", "hostPID", "hostIPC"]
	not field in params.allow
	lib.raw_pod_spec(r)[field] == true
	msg := sprintf("%s pods set %s: true (the node's own namespaces); remove it: %s", [r.type, field, fix])
}

finding contains {"path": concat("", [r.podSpecPath, "/volumes/", format_int(i, 10), "/hostPath"]), "msg": msg} if {
	some r in replica
	not "hostPath" in params.allow
	volumes := object.get(lib.raw_pod_spec(r), "volumes", [])
	is_array(volumes)
	some i, v in volumes
	is_object(v)
	v.hostPath
	msg := sprintf("%s volume %q is a hostPath volume (the node's files); use a PersistentVolumeClaim, an emptyDir or a CSI volume: %s", [r.type, object.get(v, "name", ""), fix])
}

finding contains {"path": concat("", [r.podSpecPath, e.path, "/ports"]), "msg": msg} if {
	some r in replica
	not "hostPort" in params.allow
	not host_network_allowed(lib.raw_pod_spec(r))
	some e in containers(lib.raw_pod_spec(r))
	ports := object.get(e.c, "ports", [])
	is_array(ports)
	some p in ports
	is_object(p)
	not object.get(p, "hostPort", 0) in {0, null}
	msg := sprintf("%s container %q sets ports[].hostPort (a port of the node); remove it, the job's headless Services name each pod: %s", [r.type, object.get(e.c, "name", ""), fix])
}

finding contains {"path": concat("", [r.podSpecPath, "/nodeName"]), "msg": msg} if {
	some r in replica
	not "nodeName" in params.allow
	node := object.get(lib.raw_pod_spec(r), "nodeName", "")
	is_string(node)
	node != ""
	msg := sprintf("%s pods set spec.nodeName %q, which bypasses the scheduler and the gang; use a nodeSelector or node affinity: %s", [r.type, node, fix])
}

host_network_allowed(spec) if {
	"hostNetwork" in params.allow
	spec.hostNetwork == true
}
