//! Cluster-aware admission through a real kube-apiserver: the webhook server (`serve`, with
//! the control plane's kubeconfig, as in a cluster) watches Nodes and Volcano Queues the test
//! creates (capacity and labels, no kubelet); a gang larger than the GPU nodes can hold is
//! refused at create with the numbers, a fitting one is admitted, a Queue's capability is
//! enforced, a Node added later reaches the policies without a restart, and a PriorityClass
//! created in the API server is what the `priority` policy judges the classes jobs name by.

mod support;

use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{json, Value};
use support::{jobs, ControlPlane, Crds, Webhooks};

e2e_suite!(
    "e2e_cluster_inventory",
    [
        a_gang_larger_than_the_gpu_nodes_is_refused_with_the_numbers,
        a_gang_that_fits_is_admitted,
        a_queue_capability_below_the_gang_is_refused,
        a_node_added_later_reaches_the_policies_without_a_restart,
        a_gang_that_may_land_on_time_sliced_gpus_is_refused_through_the_webhook,
        heartbeats_publish_nothing_and_the_caches_are_in_metrics,
        a_priority_class_above_the_default_is_refused_and_a_lower_one_admitted,
    ]
);

/// Six 8-GPU nodes labelled pool=main and the Volcano queues `default` and `small`
/// (16 GPUs), created once the webhooks are installed (their readiness probe is a job too);
/// returns when the webhook server has seen them.
async fn cluster() -> &'static ControlPlane {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    READY
        .get_or_init(|| async {
            Webhooks::shared(control_plane);
            let client = control_plane.client().await;
            for i in 0..6 {
                jobs::create_gpu_node(&client, &format!("gpu-{i}"), "main").await;
            }
            let small = json!({"weight": 1, "capability": {"nvidia.com/gpu": "16"}});
            let queues =
                [("default", json!({"weight": 1})), ("small", small)].map(|(name, spec)| {
                    json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": name}, "spec": spec})
                });
            let resource = gangplank::cluster::watch::queue_resource();
            create_all(&client, &resource, queues).await;
            let ns = control_plane.namespace("inventory-sync").await;
            // Nodes and Queues come through separate watches: wait for both.
            let mut probe = gang("probe", 8);
            probe["spec"]["runPolicy"] = json!({"schedulingPolicy": {"queue": "small"}});
            support::wait_for(
                "the inventory reaches the policies",
                Duration::from_secs(30),
                || async {
                    let refused = jobs::create(&client, &ns, &probe, true).await;
                    match refused {
                        Err(kube::Error::Api(s))
                            if s.message.contains("hold 6 of them")
                                && s.message.contains("capability is 16") =>
                        {
                            Ok(())
                        }
                        other => Err(format!("{other:?}")),
                    }
                },
            )
            .await;
        })
        .await;
    control_plane
}

/// Creates the cluster-scoped `objects` of `resource` through the API.
async fn create_all(
    client: &kube::Client,
    resource: &ApiResource,
    objects: impl IntoIterator<Item = Value>,
) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    for object in objects {
        let object: DynamicObject = serde_json::from_value(object).expect("an object");
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", resource.kind));
    }
}

fn gang(name: &str, workers: u32) -> Value {
    jobs::gpu_gang(name, workers, "main")
}

async fn a_gang_larger_than_the_gpu_nodes_is_refused_with_the_numbers() {
    let control_plane = cluster().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("too-large").await;
    let (code, message) = jobs::refusal(jobs::create(&client, &ns, &gang("llm", 8), false).await);
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains("the gang needs 1 Master + 8 Worker pods of 8 nvidia.com/gpu each at once; 6 schedulable nodes can take such a pod")
            && message.contains("together they hold 6 of them"),
        "{message}"
    );
}

async fn a_gang_that_fits_is_admitted() {
    let control_plane = cluster().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("fits").await;
    jobs::create(&client, &ns, &gang("llm", 5), false)
        .await
        .expect("1 + 5 pods of 8 GPUs fit 6 nodes of 8");
}

async fn a_queue_capability_below_the_gang_is_refused() {
    let control_plane = cluster().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("queue").await;
    let mut job = gang("llm", 2);
    job["spec"]["runPolicy"] = json!({"schedulingPolicy": {"queue": "small"}});
    let (_, message) = jobs::refusal(jobs::create(&client, &ns, &job, false).await);
    assert!(
        message.contains(
            "the gang needs 24 nvidia.com/gpu; Volcano queue \"small\"'s capability is 16"
        ),
        "{message}"
    );
}

async fn a_node_added_later_reaches_the_policies_without_a_restart() {
    let control_plane = cluster().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("grows").await;
    // Its own pool, so the other tests' node counts do not change under them.
    let job = jobs::gpu_gang("llm", 1, "late");
    let (_, message) = jobs::refusal(jobs::create(&client, &ns, &job, true).await);
    assert!(message.contains("match no schedulable node"), "{message}");
    let added = Instant::now();
    jobs::create_gpu_node(&client, "gpu-late-0", "late").await;
    jobs::create_gpu_node(&client, "gpu-late-1", "late").await;
    support::wait_for(
        "the new nodes admit the gang",
        Duration::from_secs(30),
        || async {
            jobs::create(&client, &ns, &job, true)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        },
    )
    .await;
    // A figure, not a threshold (timings go to BENCHMARKS.md, never into assertions).
    println!(
        "inventory: nodes added reached the policies after {} ms",
        added.elapsed().as_millis()
    );
}

/// Two nodes of their own pool, labelled as GPU Feature Discovery labels time-sliced GPUs: a
/// 1 + 1 gang there is refused through the webhook (the sharing labels reach the policy though
/// the job selects only `pool`), and admitted once it opts out.
async fn a_gang_that_may_land_on_time_sliced_gpus_is_refused_through_the_webhook() {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams};
    let control_plane = cluster().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("shared-gpus").await;
    let nodes: Api<Node> = Api::all(client.clone());
    let sliced = json!({"metadata": {"labels": {
        "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}}});
    for name in ["gpu-sliced-0", "gpu-sliced-1"] {
        jobs::create_gpu_node(&client, name, "sliced").await;
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&sliced))
            .await
            .expect("labels patched");
    }
    let job = jobs::gpu_gang("llm", 1, "sliced");
    let message = support::wait_for(
        "the sliced nodes reach the policies",
        Duration::from_secs(30),
        || async {
            match jobs::create(&client, &ns, &job, true).await {
                // Both nodes, not the first one seen: the inventory publishes each label patch
                // as it arrives, so an early answer may count one node.
                Err(kube::Error::Api(s)) if s.message.contains("shared GPUs: 2 node(s)") => {
                    Ok(s.message)
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(
        message.contains("Worker pods may be placed on shared GPUs: 2 node(s) (nvidia.com/gpu.replicas=4, nvidia.com/gpu.sharing-strategy=time-slicing)")
            && message.contains("gangplank.dev/gpu-sharing: allow"),
        "{message}"
    );
    let mut opted_out = job.clone();
    opted_out["metadata"]["annotations"] = json!({"gangplank.dev/gpu-sharing": "allow"});
    jobs::create(&client, &ns, &opted_out, true)
        .await
        .expect("a job that opts out is admitted");
}

/// On a control plane of its own (the other tests add nodes): kubelet-style heartbeats
/// (conditions, an annotation) change nothing the policies read, so the server publishes no
/// new view; a GPU lost does. `/metrics` shows what the inventory holds.
async fn heartbeats_publish_nothing_and_the_caches_are_in_metrics() {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams};
    let control_plane = ControlPlane::start(&support::assets::get(), Crds::TrainingV1);
    let client = control_plane.client().await;
    let server = Webhooks::install(&control_plane, support::repo().join("policies")).await;
    for i in 0..3 {
        jobs::create_gpu_node(&client, &format!("beat-{i}"), "main").await;
    }
    let gauge = |text: &str, name: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    let nodes = "gangplank_cache_entries{cache=\"nodes\"}";
    let classes = "gangplank_cache_entries{cache=\"node_classes\"}";
    let publishes = "gangplank_cluster_inventory_publishes_total{cache=\"summary\"}";
    support::wait_for(
        "the three nodes in the index",
        Duration::from_secs(30),
        || async {
            let m = server.metrics().await;
            match gauge(&m, nodes) {
                Some(3.0) => Ok(()),
                other => Err(format!("nodes: {other:?}")),
            }
        },
    )
    .await;
    // Settle: the status patches of create_gpu_node may still be publishing.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let metrics = server.metrics().await;
    assert_eq!(gauge(&metrics, classes), Some(1.0), "{metrics}");
    assert!(
        gauge(&metrics, "gangplank_cache_bytes{cache=\"nodes\"}").is_some_and(|b| b > 0.0),
        "{metrics}"
    );
    let before = gauge(&metrics, publishes).expect("publishes counted");

    let api: Api<Node> = Api::all(client.clone());
    for round in 0..3 {
        for i in 0..3 {
            let name = format!("beat-{i}");
            let time = format!("2026-11-28T20:00:0{round}Z");
            let beat = json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": time,
                 "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}});
            api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&beat))
                .await
                .expect("heartbeat");
            let annotated = json!({"metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": round.to_string()}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&annotated))
                .await
                .expect("annotation");
        }
    }
    // Six publish ticks: a view the heartbeats had changed would be out by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let metrics = server.metrics().await;
    assert_eq!(
        gauge(&metrics, publishes),
        Some(before),
        "heartbeats published a view"
    );

    let lost = json!({"status": {"allocatable": {"nvidia.com/gpu": "7"}}});
    api.patch_status("beat-0", &PatchParams::default(), &Patch::Merge(&lost))
        .await
        .expect("allocatable");
    support::wait_for(
        "a GPU lost is published",
        Duration::from_secs(30),
        || async {
            let m = server.metrics().await;
            match (gauge(&m, publishes), gauge(&m, classes)) {
                (Some(p), Some(c)) if p > before && c == 2.0 => Ok(()),
                other => Err(format!("publishes, classes: {other:?}")),
            }
        },
    )
    .await;
}

/// PriorityClasses created through the API reach the `priority` policy: with no globalDefault
/// class (pods naming none get 0), a job whose Workers name a class of value 500000 is
/// refused naming the class, its value and the classes allowed; one naming a class of
/// negative value is admitted; one naming a class the cluster lacks, or gangplank-critical,
/// is refused saying why.
async fn a_priority_class_above_the_default_is_refused_and_a_lower_one_admitted() {
    let control_plane = cluster().await;
    let client = control_plane.client().await;
    let ns = control_plane.namespace("priority").await;
    let classes = [("e2e-tenant-high", 500_000), ("e2e-batch", -100)].map(|(name, value)| {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value})
    });
    create_all(
        &client,
        &gangplank::cluster::priority_classes::resource(),
        classes,
    )
    .await;
    let naming = |class: &str| {
        let mut job = gang("ranked", 1);
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] =
            json!(class);
        job
    };
    // The classes come through the watch: wait until the refusal names the new one's value.
    let message = support::wait_for(
        "the PriorityClasses reach the policy",
        Duration::from_secs(30),
        || async {
            match jobs::create(&client, &ns, &naming("e2e-tenant-high"), true).await {
                Err(kube::Error::Api(s)) if s.message.contains("(value 500000)") => Ok(s.message),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(
        message.contains("[priority] /spec/pytorchReplicaSpecs/Worker/template/spec/priorityClassName: its Worker pods would run at PriorityClass \"e2e-tenant-high\" (value 500000), which namespace")
            && message.contains("its value is above 0, what pods naming no class get (no globalDefault PriorityClass)")
            && message.contains("allowed here: ")
            && message.contains("e2e-batch (-100)")
            && message.contains("or ask the platform team to allow \"e2e-tenant-high\""),
        "{message}"
    );
    jobs::create(&client, &ns, &naming("e2e-batch"), false)
        .await
        .expect("a class below the default is admitted");
    let (_, missing) =
        jobs::refusal(jobs::create(&client, &ns, &naming("e2e-no-such-class"), true).await);
    assert!(
        missing.contains("PriorityClass \"e2e-no-such-class\", which the cluster does not have"),
        "{missing}"
    );
    let (_, reserved) =
        jobs::refusal(jobs::create(&client, &ns, &naming("gangplank-critical"), true).await);
    assert!(
        reserved.contains("it is reserved for gangplank's own pods in gangplank-system"),
        "{reserved}"
    );
}
