//! Cluster objects shaped as real ones, for the inventory's memory and churn measurements
//! (benches/inventory_scale.rs offline, benches/inventory_apiserver.rs through a real
//! kube-apiserver).
//!
//! A Node is benches/data/gpu-node.json: a p5.48xlarge node of an EKS managed node group as
//! `kubectl get node -o json --show-managed-fields` returns it — 53 labels from the cloud
//! provider, Node Feature Discovery and GPU Feature Discovery (among them GFD's per-node
//! `nvidia.com/gfd.timestamp`), NFD's and the CSI drivers' annotations, the GPU taint, 4
//! conditions, 50 `status.images` as the kubelet reports them (name by digest and by tag),
//! nodeInfo, addresses, and managedFields of two managers (kubelet's status, nfd-master's
//! labels): 18 KB of JSON. Node `i` varies it as a cluster does: its own name, IP, instance
//! ids and boot id; node groups of 2,000 nodes, each in one of three zones; the network
//! topology labels of EC2 (`topology.k8s.aws/network-node-layer-{1,2,3}`: a layer-3 switch
//! per 64 nodes, layer 2 per 512, layer 1 per 4,096), so 100,000 nodes are 1,563 node
//! classes; GFD's timestamp per node.
//!
//! Claims, NetworkPolicies and Namespaces carry what the API server adds (managedFields,
//! finalizers, annotations of the controllers that bind claims).
//!
//! Standalone (serde_json only), so an offline bench can include it by path.

#![allow(dead_code)]

use serde_json::{json, Value};

/// The template Node (benches/data/gpu-node.json).
pub fn node_template() -> Value {
    let text = include_str!("../../benches/data/gpu-node.json");
    serde_json::from_str(text).expect("benches/data/gpu-node.json parses")
}

/// Node `i` of a cluster made of `template`.
pub fn node(template: &Value, i: usize) -> Value {
    let mut n = template.clone();
    let ip = format!("10.{}.{}.{}", 1 + i / 65_536, (i / 256) % 256, i % 256);
    let name = format!("ip-{}.ec2.internal", ip.replace('.', "-"));
    let instance = format!("i-0{:016x}", 0x0a1b_2c3d_0000_0000_u64 + i as u64);
    let zone = ["us-east-1a", "us-east-1b", "us-east-1c"][(i / 2_000) % 3];
    n["metadata"]["name"] = json!(name);
    n["metadata"]["uid"] = json!(format!("5a8f4c1e-0000-4000-8000-{i:012}"));
    let labels = &mut n["metadata"]["labels"];
    labels["kubernetes.io/hostname"] = json!(name);
    labels["topology.kubernetes.io/zone"] = json!(zone);
    labels["failure-domain.beta.kubernetes.io/zone"] = json!(zone);
    labels["eks.amazonaws.com/nodegroup"] = json!(format!("gpu-p5-{}", i / 2_000));
    for (layer, span) in [(1, 4_096), (2, 512), (3, 64)] {
        let key = format!("topology.k8s.aws/network-node-layer-{layer}");
        labels[key.as_str()] = json!(format!(
            "nn-{:017x}",
            0x1a2b_0000_0000_u64 * layer + (i / span) as u64
        ));
    }
    labels["nvidia.com/gfd.timestamp"] = json!((1_732_780_000 + i % 600).to_string());
    let annotations = &mut n["metadata"]["annotations"];
    annotations["alpha.kubernetes.io/provided-node-ip"] = json!(ip);
    annotations["csi.volume.kubernetes.io/nodeid"] = json!(format!(
        "{{\"ebs.csi.aws.com\":\"{instance}\",\"efs.csi.aws.com\":\"{instance}\",\"fsx.csi.aws.com\":\"{instance}\"}}"
    ));
    n["spec"]["providerID"] = json!(format!("aws:///{zone}/{instance}"));
    n["status"]["addresses"] = json!([
        {"type": "InternalIP", "address": ip},
        {"type": "InternalDNS", "address": name},
        {"type": "Hostname", "address": name},
    ]);
    let info = &mut n["status"]["nodeInfo"];
    info["machineID"] = json!(format!("ec2{i:029x}"));
    info["systemUUID"] = json!(format!("ec2a1b2c-3d4e-5f60-0001-{i:012}"));
    info["bootID"] = json!(format!("0b1c2d3e-4f50-6172-8394-{i:012}"));
    n
}

/// What a kubelet heartbeat (and a GFD relabel) changes: every condition's
/// lastHeartbeatTime, the resourceVersion, GFD's timestamp. Nothing the inventory reads.
pub fn heartbeat(node: &mut Value, beat: u64) {
    node["metadata"]["resourceVersion"] = json!((200_000_000 + beat).to_string());
    let time = format!("2026-11-28T19:{:02}:{:02}Z", (beat / 60) % 60, beat % 60);
    if let Some(conditions) = node["status"]["conditions"].as_array_mut() {
        for c in conditions {
            c["lastHeartbeatTime"] = json!(time);
        }
    }
    node["metadata"]["labels"]["nvidia.com/gfd.timestamp"] =
        json!((1_732_790_000 + beat).to_string());
}

/// Namespace `i` (a team's), as the API server returns it.
pub fn namespace(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {
            "name": format!("team-{i}"), "uid": format!("6b000000-0000-4000-8000-{i:012}"),
            "resourceVersion": (300_000 + i).to_string(), "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"kubernetes.io/metadata.name": format!("team-{i}"), "team": format!("team-{i}"),
                "cost-center": format!("cc-{}", i % 40), "pod-security.kubernetes.io/enforce": "baseline"},
            "annotations": {"scheduler.alpha.kubernetes.io/node-selector": ""},
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
                "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}, "f:cost-center": {}, "f:pod-security.kubernetes.io/enforce": {}}}}}],
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

/// Claim `i`, bound, in namespace `team-{i % namespaces}`.
pub fn claim(i: usize, namespaces: usize) -> Value {
    let ns = format!("team-{}", i % namespaces);
    let volume = format!("pvc-7c000000-0000-4000-8000-{i:012}");
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": format!("checkpoints-{i}"), "namespace": ns,
            "uid": format!("7c000000-0000-4000-8000-{i:012}"), "resourceVersion": (400_000 + i).to_string(),
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {"app.kubernetes.io/part-of": "training", "team": ns},
            "annotations": {
                "pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
                "volume.beta.kubernetes.io/storage-provisioner": "fsx.csi.aws.com",
                "volume.kubernetes.io/storage-provisioner": "fsx.csi.aws.com"},
            "finalizers": ["kubernetes.io/pvc-protection"],
            "managedFields": [
                {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1", "time": "2026-11-01T00:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:accessModes": {}, "f:resources": {"f:requests": {"f:storage": {}}}, "f:storageClassName": {}}}},
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-11-01T00:00:05Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:pv.kubernetes.io/bind-completed": {}}}, "f:spec": {"f:volumeName": {}}}},
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-11-01T00:00:05Z",
                 "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:accessModes": {}, "f:capacity": {"f:storage": {}}, "f:phase": {}}}},
            ],
        },
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1200Gi"}},
            "storageClassName": "fsx-lustre", "volumeMode": "Filesystem", "volumeName": volume},
        "status": {"phase": "Bound", "accessModes": ["ReadWriteMany"], "capacity": {"storage": "1200Gi"}},
    })
}

/// NetworkPolicy `i` in namespace `team-{i % namespaces}`: a team's default-deny plus
/// allow-rules for its training pods (the shape of most policies in multi-tenant clusters).
pub fn network_policy(i: usize, namespaces: usize) -> Value {
    let ns = format!("team-{}", i % namespaces);
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {
            "name": format!("allow-training-{i}"), "namespace": ns,
            "uid": format!("8d000000-0000-4000-8000-{i:012}"), "resourceVersion": (500_000 + i).to_string(),
            "generation": 1, "creationTimestamp": "2026-11-01T00:00:00Z",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\",\"metadata\":{\"annotations\":{},\"name\":\"allow-training\"},\"spec\":{\"podSelector\":{\"matchLabels\":{\"app\":\"training\"}}}}"},
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "networking.k8s.io/v1",
                "time": "2026-11-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:ingress": {}, "f:egress": {}, "f:podSelector": {}, "f:policyTypes": {}}}}],
        },
        "spec": {
            "podSelector": {"matchLabels": {"app": format!("training-{}", i % 7)}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": format!("training-{}", i % 7)}}},
                                  {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
                         "ports": [{"protocol": "TCP", "port": 29500}, {"protocol": "TCP", "port": 9090}]}],
            "egress": [{"to": [{"podSelector": {}}]},
                       {"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                       {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"protocol": "TCP", "port": 443}]}],
        },
    })
}

/// The four zones of the label-cardinality fixture (issue 44), with their EC2 zone ids.
const FOUR_ZONES: [(&str, &str); 4] = [
    ("us-east-1a", "use1-az4"),
    ("us-east-1b", "use1-az6"),
    ("us-east-1c", "use1-az1"),
    ("us-east-1d", "use1-az2"),
];

/// Node `i` of one node group spread over four zones (node `i` in zone `i % 4`) with an EC2
/// layer-3 network node per `4 × per_class` consecutive nodes: a node class per `per_class`
/// nodes (1: every node a class of its own). The shape of the clusters of issue 44, whose
/// network-topology labels group GPU nodes far more finely than [`node`]'s.
pub fn node_grained(template: &Value, i: usize, per_class: usize) -> Value {
    let mut n = node(template, i);
    let (zone, zone_id) = FOUR_ZONES[i % 4];
    let span = 4 * per_class.max(1);
    let labels = &mut n["metadata"]["labels"];
    labels["topology.kubernetes.io/zone"] = json!(zone);
    labels["failure-domain.beta.kubernetes.io/zone"] = json!(zone);
    labels["topology.k8s.aws/zone-id"] = json!(zone_id);
    labels["eks.amazonaws.com/nodegroup"] = json!("gpu-p5");
    // Layers 1 and 2 stay coarser than layer 3, as the switches above it are.
    for (layer, per) in [(1, span.max(4_096)), (2, span.max(512)), (3, span)] {
        let key = format!("topology.k8s.aws/network-node-layer-{layer}");
        labels[key.as_str()] = json!(format!(
            "nn-{:017x}",
            0x1a2b_0000_0000_u64 * layer + (i / per) as u64
        ));
    }
    n
}

/// The NFD label a rolling kernel upgrade changes on every node, one after another.
pub const KERNEL_LABEL: &str = "feature.node.kubernetes.io/kernel-version.full";

/// Resident set size of this process, MiB (Linux; 0 elsewhere): what the offline inventory
/// benches that include this file by path read between their phases.
pub fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}
