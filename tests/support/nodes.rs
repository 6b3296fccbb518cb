//! Simulated nodes: Node objects with capacity, labels, taints and a Ready condition, and no
//! kubelet behind them. kube-scheduler places pods on them as on real nodes; the tests write
//! pod phases themselves.
//!
//! Entry points: [`SimNode`] (a builder), [`SimNode::create`], [`delete_nodes`].
//!
//! A new Node gets `node.kubernetes.io/not-ready:NoSchedule` from the apiserver's
//! TaintNodesByCondition admission until the node-lifecycle controller sees the kubelet
//! report Ready. No node-lifecycle controller runs here (it would taint kubelet-less nodes
//! unreachable), so [`SimNode::create`] writes the Ready condition and takes that taint off
//! itself; nothing turns the node NotReady afterwards. A cordoned node gets
//! `node.kubernetes.io/unschedulable:NoSchedule` as node-lifecycle would add it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{json, Map, Value};

/// The GPU product most suites' nodes carry (GPU Feature Discovery's spelling).
pub const H100: &str = "NVIDIA-H100-80GB-HBM3";

/// The GPU Feature Discovery labels a GPU node carries.
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
pub const GPU_COUNT_LABEL: &str = "nvidia.com/gpu.count";

/// One simulated node.
#[derive(Debug, Clone)]
pub struct SimNode {
    pub name: String,
    /// Resource name → quantity; capacity and allocatable are the same.
    pub resources: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    /// `(key, value, effect)`.
    pub taints: Vec<(String, String, String)>,
    pub cordoned: bool,
}

impl SimNode {
    /// A node with 96 cpu, 1000Gi of memory and room for 110 pods, no GPUs.
    pub fn new(name: &str) -> SimNode {
        let resources = [("cpu", "96"), ("memory", "1000Gi"), ("pods", "110")];
        SimNode {
            name: name.to_string(),
            resources: resources
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            labels: BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())]),
            taints: Vec::new(),
            cordoned: false,
        }
    }

    /// `gpus` whole GPUs of `product` (GPU Feature Discovery labels included).
    pub fn gpus(self, gpus: u32, product: &str) -> SimNode {
        self.resource("nvidia.com/gpu", &gpus.to_string())
            .label(GPU_PRODUCT_LABEL, product)
            .label(GPU_COUNT_LABEL, &gpus.to_string())
    }

    /// `count` MIG slices of `profile` (`1g.10gb`), as the device plugin's mixed strategy
    /// advertises them.
    pub fn mig(self, profile: &str, count: u32) -> SimNode {
        self.resource(&format!("nvidia.com/mig-{profile}"), &count.to_string())
            .label("nvidia.com/mig.strategy", "mixed")
    }

    pub fn resource(mut self, name: &str, quantity: &str) -> SimNode {
        self.resources
            .insert(name.to_string(), quantity.to_string());
        self
    }

    pub fn without_resource(mut self, name: &str) -> SimNode {
        self.resources.remove(name);
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> SimNode {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> SimNode {
        let taint = (key.to_string(), value.to_string(), effect.to_string());
        self.taints.push(taint);
        self
    }

    pub fn cordoned(mut self) -> SimNode {
        self.cordoned = true;
        self
    }

    fn taints_json(&self) -> Vec<Value> {
        let mut taints: Vec<Value> = self
            .taints
            .iter()
            .map(|(key, value, effect)| {
                let mut taint = json!({"key": key, "effect": effect});
                if !value.is_empty() {
                    taint["value"] = json!(value);
                }
                taint
            })
            .collect();
        if self.cordoned {
            taints.push(json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}));
        }
        taints
    }

    /// The Node as the apiserver stores it once a kubelet has reported: spec, labels and
    /// status (for `gangplank check --cluster`, which reads what `kubectl get nodes -o
    /// yaml` prints).
    pub fn to_json(&self) -> Value {
        let mut node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": self.labels},
            "spec": {"taints": self.taints_json(), "unschedulable": self.cordoned},
        });
        node["status"] = self.status();
        node
    }

    fn status(&self) -> Value {
        let resources: Map<String, Value> = self
            .resources
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let now = rfc3339_now();
        json!({
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "simulated by gangplank's tests",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
        })
    }

    /// Creates the node (see [`create_node`]).
    pub async fn create(&self, client: &kube::Client) {
        create_node(client, &self.to_json()).await;
    }
}

/// Creates a Node from what `kubectl get node -o json` prints (metadata, spec, status): the
/// object, then its status, then its own taints in place of the `not-ready` one the
/// apiserver added. A node without allocatable cpu, memory or pods is refused here: the
/// scheduler would place nothing there, and every verdict would be about nothing.
pub async fn create_node(client: &kube::Client, node: &Value) {
    let name = node["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!name.is_empty(), "a simulated node needs a name: {node}");
    for needed in ["cpu", "memory", "pods"] {
        assert!(
            node["status"]["allocatable"].get(needed).is_some(),
            "simulated node {name} has no allocatable {needed}: the scheduler would place \
             nothing there (give it status.allocatable.{needed})"
        );
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let mut object = node.clone();
    let status = object.as_object_mut().and_then(|o| o.remove("status"));
    let typed: Node = serde_json::from_value(object).unwrap_or_else(|e| panic!("{name}: {e}"));
    if let Err(e) = nodes.create(&PostParams::default(), &typed).await {
        panic!("create node {name}: {e}");
    }
    let params = PatchParams::default();
    let status = json!({"status": status});
    if let Err(e) = nodes
        .patch_status(&name, &params, &Patch::Merge(&status))
        .await
    {
        panic!("node {name} status: {e}");
    }
    // A merge patch replaces the whole list: the admission's not-ready taint goes.
    let taints = node["spec"]
        .get("taints")
        .cloned()
        .unwrap_or_else(|| json!([]));
    let spec = json!({"spec": {"taints": taints}});
    if let Err(e) = nodes.patch(&name, &params, &Patch::Merge(&spec)).await {
        panic!("node {name} taints: {e}");
    }
}

/// `count` 8-GPU H100 nodes labelled `pool=<pool>`, named `<pool>-gpu-<i>`: a test's own
/// pool, which its jobs select so that tests of one control plane run side by side.
pub fn gpu_pool(pool: &str, count: usize) -> Vec<SimNode> {
    (0..count)
        .map(|i| {
            SimNode::new(&format!("{pool}-gpu-{i}"))
                .gpus(8, H100)
                .label("pool", pool)
        })
        .collect()
}

/// Creates [`gpu_pool`]`(pool, count)`; the node names.
pub async fn create_gpu_pool(client: &kube::Client, pool: &str, count: usize) -> Vec<String> {
    let nodes = gpu_pool(pool, count);
    create_nodes(client, &nodes).await;
    nodes.into_iter().map(|n| n.name).collect()
}

/// Creates every node of `nodes`, 16 at a time (a 1,024-node cluster in seconds).
pub async fn create_nodes(client: &kube::Client, nodes: &[SimNode]) {
    use futures::StreamExt;
    futures::stream::iter(nodes)
        .for_each_concurrent(16, |node| node.create(client))
        .await;
}

/// Deletes the named nodes and waits until they are gone (a pod bound to a node that is
/// being deleted stays bound: delete the pods first).
pub async fn delete_nodes(client: &kube::Client, names: &[String]) {
    let nodes: Api<Node> = Api::all(client.clone());
    for name in names {
        match nodes.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => panic!("delete node {name}: {e}"),
        }
    }
    for name in names {
        super::wait_for(
            &format!("node {name} deleted"),
            Duration::from_secs(30),
            || async {
                match nodes.get_opt(name).await {
                    Ok(None) => Ok(()),
                    Ok(Some(_)) => Err("still there".to_string()),
                    Err(e) => Err(e.to_string()),
                }
            },
        )
        .await;
    }
}

/// Now, RFC 3339 in UTC, whole seconds (the apiserver's own format for these fields).
fn rfc3339_now() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}
