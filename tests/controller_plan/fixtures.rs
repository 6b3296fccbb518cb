//! Builders for jobs and observed cluster state, and readers for plans.
//!
//! `pytorch_job(1, 2).with_gpus(8)` builds a job object; `running(&job)` is the cluster after
//! the job's first plan was applied; `.phase("worker", 0, "Failed")` and friends edit it.

#![allow(dead_code)] // each test module uses a different subset

use std::time::Duration;

use gangplank::controller::{
    plan, Action, Config, Foreign, JobSnapshot, Observed, Plan, SshSecret, Timestamp,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    EnvVar, Pod, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{json, Value};

/// A fixed origin so that times in assertions are readable offsets.
pub fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
}

pub fn time(seconds: i64) -> Time {
    Time(t(seconds))
}

#[derive(Debug, Clone)]
pub struct Job(pub Value);

fn replica(container: &str, replicas: i32) -> Value {
    json!({
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": container, "image": "registry.example/train@sha256:abc"}]}}
    })
}

fn job(kind: &str, field: &str, container: &str, types: &[(&str, i32)]) -> Job {
    let specs: serde_json::Map<String, Value> = types
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(t, n)| (t.to_string(), replica(container, *n)))
        .collect();
    Job(json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "mnist", "namespace": "team-a", "uid": "uid-1"},
        "spec": {field: specs, "runPolicy": {}},
    }))
}

pub fn pytorch_job(masters: i32, workers: i32) -> Job {
    job(
        "PyTorchJob",
        "pytorchReplicaSpecs",
        "pytorch",
        &[("Master", masters), ("Worker", workers)],
    )
}

pub fn tf_job(chief: i32, workers: i32, ps: i32) -> Job {
    job(
        "TFJob",
        "tfReplicaSpecs",
        "tensorflow",
        &[("Chief", chief), ("Worker", workers), ("PS", ps)],
    )
}

pub fn xgboost_job(masters: i32, workers: i32) -> Job {
    job(
        "XGBoostJob",
        "xgbReplicaSpecs",
        "xgboost",
        &[("Master", masters), ("Worker", workers)],
    )
}

pub fn paddle_job(masters: i32, workers: i32) -> Job {
    job(
        "PaddleJob",
        "paddleReplicaSpecs",
        "paddle",
        &[("Master", masters), ("Worker", workers)],
    )
}

/// A `kubeflow.org/v1` MPIJob (the training operator's): one launcher, `workers` workers.
pub fn mpi_v1_job(workers: i32) -> Job {
    job(
        "MPIJob",
        "mpiReplicaSpecs",
        "mpi",
        &[("Launcher", 1), ("Worker", workers)],
    )
}

/// A `kubeflow.org/v2beta1` MPIJob: one launcher, `workers` workers.
pub fn mpi_job(workers: i32) -> Job {
    job(
        "MPIJob",
        "mpiReplicaSpecs",
        "mpi",
        &[("Launcher", 1), ("Worker", workers)],
    )
    .set("/apiVersion", json!("kubeflow.org/v2beta1"))
}

pub fn jax_job(workers: i32) -> Job {
    job("JAXJob", "jaxReplicaSpecs", "jax", &[("Worker", workers)])
}

impl Job {
    fn field(&self) -> String {
        let spec = self.0.get("spec").and_then(Value::as_object);
        spec.and_then(|s| s.keys().find(|k| k.ends_with("ReplicaSpecs")).cloned())
            .unwrap_or_default()
    }

    fn replica_spec(&mut self, rtype: &str) -> &mut Value {
        let field = self.field();
        &mut self.0["spec"][field.as_str()][rtype]
    }

    pub fn set(mut self, pointer: &str, value: Value) -> Job {
        if let Some(slot) = self.0.pointer_mut(pointer) {
            *slot = value;
        } else {
            let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
            if let Some(Value::Object(m)) = self.0.pointer_mut(parent) {
                m.insert(key.to_string(), value);
            }
        }
        self
    }

    pub fn run_policy(self, key: &str, value: Value) -> Job {
        self.set(&format!("/spec/runPolicy/{key}"), value)
    }

    pub fn restart_policy(mut self, rtype: &str, policy: &str) -> Job {
        self.replica_spec(rtype)["restartPolicy"] = json!(policy);
        self
    }

    pub fn with_evaluator(mut self, n: i32) -> Job {
        let field = self.field();
        self.0["spec"][field.as_str()]["Evaluator"] = replica("tensorflow", n);
        self
    }

    /// `n` GPUs and 4 CPUs / 16Gi per pod on every replica type.
    pub fn with_gpus(mut self, n: i64) -> Job {
        let field = self.field();
        if let Some(Value::Object(specs)) = self.0["spec"].get_mut(field.as_str()) {
            for spec in specs.values_mut() {
                spec["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/gpu": n}, "requests": {"cpu": "4", "memory": "16Gi"}});
            }
        }
        self
    }

    pub fn suspended(self, on: bool) -> Job {
        self.run_policy("suspend", json!(on))
    }

    pub fn annotation(self, key: &str, value: &str) -> Job {
        let mut job = self;
        job.0["metadata"]["annotations"][key] = json!(value);
        job
    }

    /// The job with the status a plan decided (what the I/O shell would write back).
    pub fn with_status_of(&self, plan: &Plan) -> Job {
        let mut job = self.clone();
        job.0["status"] = serde_json::to_value(&plan.status).unwrap_or(Value::Null);
        job
    }

    /// The job with the annotations a plan patched.
    pub fn with_annotations_of(&self, plan: &Plan) -> Job {
        let mut job = self.clone();
        for a in &plan.actions {
            if let Action::PatchJobAnnotations(map) = a {
                for (k, v) in map {
                    job.0["metadata"]["annotations"][k] = json!(v);
                }
            }
        }
        job
    }

    pub fn snapshot(&self) -> JobSnapshot {
        JobSnapshot::from_value(&self.0).unwrap_or_else(|e| panic!("not runnable: {e}"))
    }

    pub fn plan(&self, observed: &Observed, now: i64) -> Plan {
        plan(&self.snapshot(), observed, t(now), &Config::default())
    }

    pub fn plan_with(&self, observed: &Observed, now: i64, config: &Config) -> Plan {
        plan(&self.snapshot(), observed, t(now), config)
    }
}

/// The cluster after `job`'s first plan was applied at time 0: its pods (Pending) and
/// Services exist.
pub fn created(job: &Job) -> Observed {
    settle(job, false, &Config::default()).0
}

/// The cluster after the plans of `job` were applied one after another, each seeing what the
/// ones before it created, until a plan adds nothing (an MPIJob's launcher waits for its
/// workers to exist: its second plan creates it), and the actions of those plans in order.
/// Pods are Pending and sorted by name (a cache has no order); with `objects`, the MPI shared
/// objects count too, else only pods and Services are kept.
fn settle(job: &Job, objects: bool, config: &Config) -> (Observed, Vec<Action>) {
    let mut observed = Observed::default();
    let mut actions = Vec::new();
    // Each plan creates one more layer; three is the deepest (workers, then the launcher).
    for _ in 0..3 {
        let before = observed.clone();
        for a in job.plan_with(&observed, 0, config).actions {
            actions.push(a.clone());
            apply(&mut observed, a, objects);
        }
        observed
            .pods
            .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if observed == before {
            break;
        }
    }
    (observed, actions)
}

impl Job {
    /// The creates of the plans that bring `job` up (see [`settle`]), as one plan's actions:
    /// where a test reads a pod that only a later plan creates.
    pub fn settled_plan(&self, config: &Config) -> Plan {
        Plan {
            actions: settle(self, true, config).1,
            ..Plan::default()
        }
    }
}

/// `observed` after `plan` was applied (pods Pending, the MPI shared objects kept).
pub fn after(observed: &Observed, plan: &Plan) -> Observed {
    let mut next = observed.clone();
    for a in plan.actions.clone() {
        apply(&mut next, a, true);
    }
    next
}

fn apply(observed: &mut Observed, action: Action, objects: bool) {
    let rbac = &mut observed.launcher_rbac;
    match action {
        Action::CreatePod(new) => {
            let mut pod = new.pod;
            let name = pod.metadata.name.clone().unwrap_or_default();
            pod.metadata.uid = Some(format!("uid-{name}"));
            pod.metadata.creation_timestamp = Some(time(0));
            pod.status = Some(PodStatus {
                phase: Some("Pending".into()),
                ..PodStatus::default()
            });
            observed.pods.push(pod);
        }
        Action::CreateService(svc) => observed.services.push(*svc),
        _ if !objects => {}
        Action::CreateConfigMap(cm) => observed.config_map = Some(*cm),
        Action::UpdateConfigMap { data, .. } => {
            if let Some(cm) = observed.config_map.as_mut() {
                cm.data = Some(data);
            }
        }
        Action::CreateSshSecret(_) => observed.ssh_secret = SshSecret::Intact,
        Action::CreateServiceAccount(_) => rbac.service_account = true,
        Action::CreateRole(role) => rbac.role = Some(*role),
        Action::UpdateRole { rules, .. } => {
            if let Some(role) = rbac.role.as_mut() {
                role.rules = Some(rules);
            }
        }
        Action::CreateRoleBinding(_) => rbac.role_binding = true,
        _ => {}
    }
}

/// The cluster with every pod of `job` Running.
pub fn running(job: &Job) -> Observed {
    let mut o = created(job);
    for p in &mut o.pods {
        set_phase(p, "Running");
    }
    o
}

fn set_phase(p: &mut Pod, phase: &str) {
    p.status.get_or_insert_with(Default::default).phase = Some(phase.to_string());
}

pub trait ObservedExt {
    fn pod_mut(&mut self, name: &str) -> &mut Pod;
    fn phase(self, name: &str, phase: &str) -> Self;
    fn exit(self, name: &str, container: &str, code: i32) -> Self;
    fn restarts(self, name: &str, container: &str, count: i32) -> Self;
    fn waiting(self, name: &str, reason: &str, message: &str) -> Self;
    fn without_pod(self, name: &str) -> Self;
}

impl ObservedExt for Observed {
    fn pod_mut(&mut self, name: &str) -> &mut Pod {
        let found = self
            .pods
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(name));
        found.unwrap_or_else(|| panic!("no pod {name}"))
    }

    fn phase(mut self, name: &str, phase: &str) -> Self {
        set_phase(self.pod_mut(name), phase);
        self
    }

    /// The pod Failed, its `container` terminated with `code`.
    fn exit(mut self, name: &str, container: &str, code: i32) -> Self {
        let pod = self.pod_mut(name);
        set_phase(pod, "Failed");
        let state = ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                ..Default::default()
            }),
            ..Default::default()
        };
        container_status(pod, container).state = Some(state);
        self
    }

    fn restarts(mut self, name: &str, container: &str, count: i32) -> Self {
        container_status(self.pod_mut(name), container).restart_count = count;
        self
    }

    fn waiting(mut self, name: &str, reason: &str, message: &str) -> Self {
        let pod = self.pod_mut(name);
        let state = ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                message: Some(message.into()),
            }),
            ..Default::default()
        };
        let first = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .map(|c| c.name.clone());
        container_status(pod, &first.unwrap_or_default()).state = Some(state);
        self
    }

    fn without_pod(mut self, name: &str) -> Self {
        self.pods
            .retain(|p| p.metadata.name.as_deref() != Some(name));
        self
    }
}

fn container_status<'a>(pod: &'a mut Pod, container: &str) -> &'a mut ContainerStatus {
    let statuses = pod
        .status
        .get_or_insert_with(Default::default)
        .container_statuses
        .get_or_insert_with(Vec::new);
    if !statuses.iter().any(|s| s.name == container) {
        statuses.push(ContainerStatus {
            name: container.to_string(),
            ..Default::default()
        });
    }
    let last = statuses.iter_mut().rev().find(|s| s.name == container);
    last.unwrap_or_else(|| unreachable!())
}

/// `(type, status, reason)` of every condition, in order.
pub fn conditions(plan: &Plan) -> Vec<(String, String, String)> {
    let status = plan
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    status
        .into_iter()
        .map(|c| (String::from(c.type_), c.status, c.reason))
        .collect()
}

/// `conditions` written as `[("Created", "True", "PyTorchJobCreated"), ...]`.
pub fn conds(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

/// Message of the last condition of type `ty`.
pub fn message(plan: &Plan, ty: &str) -> String {
    let status = plan
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    status
        .into_iter()
        .rfind(|c| String::from(c.type_.clone()) == ty)
        .map(|c| c.message)
        .unwrap_or_default()
}

pub fn created_pods(plan: &Plan) -> Vec<&Pod> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod(p) => Some(&p.pod),
            _ => None,
        })
        .collect()
}

pub fn created_pod<'a>(plan: &'a Plan, name: &str) -> &'a Pod {
    let found = created_pods(plan)
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some(name));
    found.unwrap_or_else(|| panic!("{name} not created"))
}

pub fn created_service_names(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateService(s) => s.metadata.name.clone(),
            _ => None,
        })
        .collect()
}

pub fn created_pod_names(plan: &Plan) -> Vec<String> {
    created_pods(plan)
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

/// Names of deleted pods, in order.
pub fn deleted_pods(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

pub fn deleted_services(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteService { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// Owned strings, for comparing with lists of names or `name=value` pairs.
pub fn strs(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// `name=value` of every env var of container `container`, in order.
pub fn env(pod: &Pod, container: &str) -> Vec<String> {
    let c = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == container));
    c.and_then(|c| c.env.clone())
        .unwrap_or_default()
        .iter()
        .map(show)
        .collect()
}

fn show(e: &EnvVar) -> String {
    match (&e.value, &e.value_from) {
        (Some(v), _) => format!("{}={v}", e.name),
        (None, Some(from)) => {
            let path = from
                .field_ref
                .as_ref()
                .map(|f| f.field_path.clone())
                .unwrap_or_default();
            format!("{}=<{path}>", e.name)
        }
        _ => e.name.clone(),
    }
}

pub fn secs(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n))
}

/// The kinds and names of the actions, in order.
pub fn action_list(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::CreateConfigMap(c) => format!("configmap {}", name(&c.metadata.name)),
            Action::UpdateConfigMap { name, .. } => format!("update configmap {name}"),
            Action::CreateSshSecret(s) => format!("secret {}", name(&s.metadata.name)),
            Action::CreateService(s) => format!("service {}", name(&s.metadata.name)),
            Action::CreatePod(p) => format!("pod {}", name(&p.pod.metadata.name)),
            Action::DeletePod { name, .. } => format!("delete pod {name}"),
            Action::DeleteService { name, .. } => format!("delete service {name}"),
            Action::CreateServiceAccount(a) => format!("serviceaccount {}", name(&a.metadata.name)),
            Action::CreateRole(r) => format!("role {}", name(&r.metadata.name)),
            Action::UpdateRole { name, .. } => format!("update role {name}"),
            Action::CreateRoleBinding(b) => format!("rolebinding {}", name(&b.metadata.name)),
            other => format!("{other:?}"),
        })
        .collect()
}

pub fn name(n: &Option<String>) -> String {
    n.clone().unwrap_or_default()
}

/// What the plans of an MPIJob created, as applied: pods (Pending), Services, the
/// ConfigMap and the version's own objects (v2beta1's Secret, v1's launcher RBAC).
pub fn applied(job: &Job) -> Observed {
    settle(job, true, &Config::default()).0
}

/// Pod Security's `restricted` container fields, as the containers the controller injects
/// carry them.
pub fn restricted() -> Value {
    json!({
        "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"}, "readOnlyRootFilesystem": true,
    })
}

/// An object of another owner holding `name`; `controller` as `<Kind> <name>`.
pub fn held(kind: &str, name: &str, controller: Option<&str>) -> Foreign {
    Foreign {
        kind: kind.to_string(),
        name: name.to_string(),
        controller: controller.map(str::to_string),
    }
}

/// The ConfigMap a plan creates, if it does.
pub fn config_map(actions: &[Action]) -> Option<&ConfigMap> {
    actions.iter().find_map(|a| match a {
        Action::CreateConfigMap(cm) => Some(&**cm),
        _ => None,
    })
}

/// The data of the ConfigMap the first plan of `job` creates.
pub fn config_data(job: &Job) -> Value {
    let plan = job.plan(&Observed::default(), 0);
    json!(config_map(&plan.actions).and_then(|c| c.data.clone()))
}
