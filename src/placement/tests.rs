//! Unit tests of the placement search: scores by hand from upstream's formulas, the
//! outcomes of orders and ties, the release order, what is not modelled.
use super::*;
use crate::policy::to_rego::to_rego;

/// Nodes of 8 GPUs: (product, cpu cores, memory GiB, how many).
fn classes(nodes: &[(&str, i64, i64, u32)]) -> Vec<NodeClass> {
    let doc = json!({"node_classes": nodes.iter().map(|(product, cpu, gib, size)| json!({
        "size": size,
        "labels": {"nvidia.com/gpu.product": product},
        "taints": [],
        "allocatable": {"cpu": cpu * 1000, "memory": gib << 30, "pods": 110, "nvidia.com/gpu": 8},
    })).collect::<Vec<_>>()});
    NodeClass::all_of(&doc)
}

/// A replica of `n` pods asking `gpus` GPUs, 8 cpu and 64Gi each, selecting `product`.
fn replica(name: &str, n: i64, gpus: i64, product: Option<&str>) -> Value {
    let requests = json!({"cpu": 8000, "memory": 64_i64 << 30, "nvidia.com/gpu": gpus});
    json!({
        "key": name, "type": name, "replicas": n, "podRequests": requests,
        "nodeSelector": product.map_or(json!({}), |p| json!({"nvidia.com/gpu.product": p})),
        "tolerations": [],
        "placement": {"nonZeroRequests": {"cpu": 8000, "memory": 64_i64 << 30}, "unmodelled": []},
    })
}

fn input(replicas: Vec<Value>) -> RegoValue {
    to_rego(&json!({"job": {"replicas": replicas}, "object": {"spec": {}}}))
}

/// One Master of 8 GPUs without a nodeSelector, two Workers of 8 GPUs on the A100s.
fn gang() -> RegoValue {
    input(vec![
        replica("Master", 1, 8, None),
        replica("Worker", 2, 8, Some("A100")),
    ])
}

fn outcome(nodes: &[(&str, i64, i64, u32)], input: &RegoValue) -> String {
    let found = kube_scheduler(&classes(nodes), 3, input).unwrap_or_default();
    found["outcome"].as_str().unwrap_or("none").to_string()
}

#[test]
fn ties_the_master_may_lose_are_drawn_again_on_a_retry() {
    // Three identical nodes: a Master taken first ties between all three.
    let nodes = [("A100", 32, 256, 2), ("H100", 32, 256, 1)];
    assert_eq!(outcome(&nodes, &gang()), "eventually");
}

#[test]
fn a_master_that_prefers_the_workers_nodes_depends_on_the_order() {
    // The H100 has less cpu: a Master taken first always picks an A100.
    let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
    assert_eq!(outcome(&nodes, &gang()), "either");
}

/// `gang()` with the job view's parse of a `gangplank.dev/release-order`.
fn released(release_order: Value) -> RegoValue {
    to_rego(&json!({"job": {
        "replicas": [replica("Master", 1, 8, None), replica("Worker", 2, 8, Some("A100"))],
        "releaseOrder": release_order,
    }, "object": {"spec": {}}}))
}

#[test]
fn a_gang_the_order_decides_is_given_the_release_order_that_places_it() {
    let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
    let found = kube_scheduler(&classes(&nodes), 3, &gang()).unwrap_or_default();
    assert_eq!(found["outcome"], "either", "{found}");
    // Workers first take both A100s; the Master then finds only the H100.
    assert_eq!(
        found["placingOrder"],
        json!({"types": ["Worker", "Master"], "outcome": "always"})
    );
}

#[test]
fn a_release_order_is_the_only_order_searched() {
    let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
    let search =
        |order: Value| kube_scheduler(&classes(&nodes), 3, &released(order)).unwrap_or_default();
    let placing = search(json!({"types": ["Worker", "Master"]}));
    assert_eq!(placing["outcome"], "always", "{placing}");
    assert_eq!(placing["release"], json!(["Worker", "Master"]));
    assert!(placing.get("placingOrder").is_none(), "{placing}");
    // The Master first takes an A100 (more cpu left than the H100): a Worker is stuck,
    // and the order that places the gang is named.
    let failing = search(json!({"types": ["Master", "Worker"]}));
    assert_eq!(failing["outcome"], "never", "{failing}");
    assert_eq!(failing["stuck"], "Worker", "{failing}");
    assert_eq!(
        failing["placingOrder"]["types"],
        json!(["Worker", "Master"])
    );
    // An annotation the job view could not parse: not searched, the view's words kept.
    let bad = search(json!({"types": [], "error": "names \"Chief\""}));
    assert_eq!(bad["outcome"], "unknown", "{bad}");
    assert_eq!(bad["why"], "names \"Chief\"");
}

#[test]
fn a_release_order_names_the_types_without_pods_too() {
    let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
    let job = input(vec![
        replica("Master", 1, 8, None),
        replica("Worker", 2, 8, Some("A100")),
        replica("Evaluator", 0, 8, None),
    ]);
    let found = kube_scheduler(&classes(&nodes), 3, &job).unwrap_or_default();
    assert_eq!(
        found["placingOrder"]["types"],
        json!(["Worker", "Master", "Evaluator"])
    );
}

#[test]
fn a_minimum_below_the_pod_count_is_searched_for_kube_scheduler() {
    // The gang the order decides in full: with minAvailable 2 any two of its three pods
    // find a node in every order (the Master on an A100 leaves one A100 for a Worker).
    let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
    let with_min = |min: i64| {
        to_rego(&json!({"job": {"replicas": [
            replica("Master", 1, 8, None), replica("Worker", 2, 8, Some("A100")),
        ]}, "object": {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": min}}}}}))
    };
    assert_eq!(outcome(&nodes, &with_min(2)), "always");
    assert_eq!(outcome(&nodes, &with_min(3)), "either");
    // Only one A100 for two Workers: the Master and one Worker always fit (2), never 3.
    let small = [("A100", 32, 256, 1), ("H100", 32, 256, 1)];
    assert_eq!(outcome(&small, &with_min(2)), "eventually");
    assert_eq!(outcome(&small, &with_min(3)), "never");
}

#[test]
fn a_master_that_prefers_its_own_node_is_always_placed() {
    let nodes = [("A100", 32, 256, 2), ("H100", 64, 512, 1)];
    assert_eq!(outcome(&nodes, &gang()), "always");
}

#[test]
fn a_gang_no_order_places_is_never_placed_and_one_run_is_named() {
    // Only one A100 for two Workers: no order helps.
    let nodes = [("A100", 32, 256, 1), ("H100", 32, 256, 1)];
    let found = kube_scheduler(&classes(&nodes), 2, &gang()).unwrap_or_default();
    assert_eq!(found["outcome"], "never", "{found}");
    assert_eq!(found["stuck"], "Worker", "{found}");
    assert_eq!(found["reach"], json!({"Master": [0, 1], "Worker": [0]}));
}

#[test]
fn types_that_share_no_node_need_no_search() {
    let job = input(vec![
        replica("Master", 1, 8, Some("H100")),
        replica("Worker", 2, 8, Some("A100")),
    ]);
    assert!(kube_scheduler(
        &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
        3,
        &job
    )
    .is_none());
}

#[test]
fn what_the_search_does_not_model_is_named_not_guessed() {
    let mut master = replica("Master", 1, 8, None);
    master["placement"]["unmodelled"] = json!(["affinity"]);
    let job = input(vec![master, replica("Worker", 2, 8, Some("A100"))]);
    let found = kube_scheduler(
        &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
        3,
        &job,
    )
    .unwrap_or_default();
    assert_eq!(found["outcome"], "unknown");
    assert_eq!(
        found["why"],
        "Master pods set affinity, which the search does not evaluate"
    );
    let mut other = replica("Master", 1, 8, None);
    other["schedulerName"] = json!("my-scheduler");
    let job = input(vec![other, replica("Worker", 2, 8, Some("A100"))]);
    let found = kube_scheduler(
        &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
        3,
        &job,
    )
    .unwrap_or_default();
    assert_eq!(found["why"], "Master pods go to scheduler my-scheduler");
}

#[test]
fn pods_one_service_spreads_are_not_searched() {
    let job = to_rego(&json!({"job": {"kind": "MPIJob", "replicas": [
        replica("Launcher", 1, 8, None), replica("Worker", 2, 8, Some("A100")),
    ]}, "object": {"spec": {}}}));
    let found = kube_scheduler(
        &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
        3,
        &job,
    )
    .unwrap_or_default();
    assert_eq!(found["outcome"], "unknown");
    assert_eq!(
        found["why"],
        "MPIJob pods share a Service, whose default topology spreading the search does not score"
    );
}

#[test]
fn a_gang_of_billions_of_pods_is_not_searched_and_does_not_overflow() {
    let job = input(vec![
        replica("Master", 5_000_000_000, 8, None),
        replica("Worker", 5_000_000_000, 8, Some("A100")),
    ]);
    let found = kube_scheduler(
        &classes(&[("A100", 32, 256, 2), ("H100", 32, 256, 1)]),
        3,
        &job,
    )
    .unwrap_or_default();
    assert_eq!(found["outcome"], "unknown");
    assert_eq!(found["why"], "131072 pods are more than the search takes");
}

#[test]
fn large_clusters_score_only_some_nodes() {
    assert_eq!(feasible_nodes_to_find(50), 50);
    assert_eq!(feasible_nodes_to_find(100), 100);
    assert_eq!(feasible_nodes_to_find(1000), 420);
    assert_eq!(feasible_nodes_to_find(5000), 500);
    assert_eq!(feasible_nodes_to_find(100_000), 5000);
}

/// `r` as the controller creates it for Volcano: `schedulerName: volcano`, pods named
/// `job-<type>-<index>`.
fn volcano(mut r: Value) -> Value {
    let last = r["replicas"].as_i64().unwrap_or(1) - 1;
    let name = r["type"].as_str().unwrap_or_default().to_lowercase();
    r["schedulerName"] = json!("volcano");
    r["lastPodName"] = json!(format!("job-{name}-{last}"));
    r
}

fn volcano_gang() -> RegoValue {
    input(vec![
        volcano(replica("Master", 1, 8, None)),
        volcano(replica("Worker", 2, 8, Some("A100"))),
    ])
}

#[test]
fn volcano_gangs_are_searched_in_index_order_with_volcanos_scores() {
    // kube-scheduler's Master prefers an A100 (more cpu left): either. Volcano's scores
    // the H100 658.5 and an A100 657 (score.rs's tests): the Master takes the H100
    // whether it goes before or after Worker 0, and Worker 1 comes last: always.
    let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
    assert_eq!(outcome(&nodes, &gang()), "either");
    let found = kube_scheduler(&classes(&nodes), 3, &volcano_gang()).unwrap_or_default();
    assert_eq!(found["outcome"], "always", "{found}");
    assert_eq!(found["scheduler"], "volcano");
    assert_eq!(found["order"], "index");
    assert_eq!(found["reach"], json!({"Master": [0, 1], "Worker": [0]}));
}

#[test]
fn volcano_draws_ties_anew_each_session() {
    // Three identical nodes: the Master, first or second, ties between an A100 and the
    // H100; a failed session is retried in the same order: eventually.
    let nodes = [("A100", 32, 256, 2), ("H100", 32, 256, 1)];
    assert_eq!(outcome(&nodes, &volcano_gang()), "eventually");
    // One A100 for two Workers: never, whatever Volcano does.
    let nodes = [("A100", 32, 256, 1), ("H100", 32, 256, 1)];
    let found = kube_scheduler(&classes(&nodes), 2, &volcano_gang()).unwrap_or_default();
    assert_eq!(found["outcome"], "never", "{found}");
    assert_eq!(found["stuck"], "Worker", "{found}");
}

#[test]
fn pods_without_an_index_in_their_name_are_searched_in_every_order() {
    let mut launcher = volcano(replica("Launcher", 1, 8, None));
    launcher["lastPodName"] = json!("job-launcher");
    let job = input(vec![
        launcher,
        volcano(replica("Worker", 2, 8, Some("A100"))),
    ]);
    let nodes = [("A100", 32, 256, 2), ("H100", 16, 256, 1)];
    let found = kube_scheduler(&classes(&nodes), 3, &job).unwrap_or_default();
    assert_eq!(found["order"], "any", "{found}");
    assert_eq!(found["outcome"], "always", "{found}");
}

#[test]
fn what_volcano_does_that_the_search_does_not_play_is_named() {
    let nodes = [("A100", 32, 256, 2), ("H100", 32, 256, 1)];
    let why = |job: &RegoValue| {
        let found = kube_scheduler(&classes(&nodes), 3, job).unwrap_or_default();
        found["why"].as_str().unwrap_or("none").to_string()
    };
    let job = input(vec![
        volcano(replica("Master", 1, 8, None)),
        replica("Worker", 2, 8, Some("A100")),
    ]);
    assert_eq!(
        why(&job),
        "Master pods go to scheduler volcano, Worker pods to default-scheduler"
    );
    let mut master = volcano(replica("Master", 1, 8, None));
    master["annotations"] = json!({"volcano.sh/task-priority": "10"});
    let job = input(vec![master, volcano(replica("Worker", 2, 8, Some("A100")))]);
    assert_eq!(
        why(&job),
        "the replica types have different volcano.sh/task-priority annotations"
    );
    let job = to_rego(&json!({
        "job": {"replicas": [
            volcano(replica("Master", 1, 8, None)),
            volcano(replica("Worker", 2, 8, Some("A100"))),
        ]},
        "object": {"spec": {}, "metadata": {"annotations":
            {"gangplank.dev/network-topology": "mode=hard,highestTierAllowed=1"}}},
    }));
    assert!(why(&job).contains("network topology"), "{}", why(&job));
    let mut job = json!({"job": {"replicas": [
        volcano(replica("Master", 1, 8, None)),
        volcano(replica("Worker", 2, 8, Some("A100"))),
    ]}, "object": {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}}});
    assert!(why(&to_rego(&job)).starts_with("minAvailable is below"));
    job["object"]["spec"] = json!({});
    job["job"]["replicas"][0]["placement"]["unmodelled"] = json!(["affinity"]);
    assert_eq!(
        why(&to_rego(&job)),
        "Master pods set affinity, which the search does not evaluate"
    );
}
