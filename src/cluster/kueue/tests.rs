use super::*;

fn yaml(text: &str) -> Vec<Value> {
    let list: Value = yaml_serde::from_str(text).expect("test YAML");
    list.as_array().cloned().expect("a list")
}

fn summarise(
    queues: &[Value],
    cohorts: Option<&[Value]>,
    flavors: Option<&[Value]>,
) -> (Value, Vec<String>) {
    let mut problems = Vec::new();
    let objects = Objects {
        cluster_queues: Some(queues),
        local_queues: None,
        cohorts,
        flavors,
        topologies: None,
    };
    let doc = summary(&objects, &mut problems).expect("ClusterQueues listed");
    (doc, problems)
}

const QUEUES: &str = r#"
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: small}
  spec:
    cohortName: pool
    resourceGroups:
    - coveredResources: [cpu, nvidia.com/gpu]
      flavors:
      - name: a100
        resources:
        - {name: cpu, nominalQuota: "1500m"}
        - {name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: "16"}
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: ClusterQueue
  metadata: {name: big}
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: a100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 16, lendingLimit: 4}
"#;

#[test]
fn both_versions_are_read_and_what_a_queue_can_ever_reserve_is_given() {
    let queues = yaml(QUEUES);
    let (doc, problems) = summarise(&queues, Some(&[]), None);
    assert!(problems.is_empty(), "{problems:?}");
    let small = &doc["cluster_queues"]["small"];
    assert_eq!(small["cohort"], "pool");
    assert_eq!(
        doc["cluster_queues"]["big"]["cohort"], "pool",
        "v1beta1's spec.cohort"
    );
    let gpu = &small["resources"]["nvidia.com/gpu"]["flavors"]["a100"];
    assert_eq!(
        *gpu,
        json!({"nominal": 8, "borrowing_limit": 16, "lending_limit": null, "can_reserve": 12})
    );
    // cpu in millicores, as Kueue counts it; big has none to lend.
    let cpu = &small["resources"]["cpu"]["flavors"]["a100"];
    assert_eq!(cpu["can_reserve"], 1500);
    assert_eq!(
        small["groups"],
        json!([{"resources": ["cpu", "nvidia.com/gpu"], "flavors": ["a100"]}])
    );
    assert_eq!(doc["cohorts_known"], true);
    assert_eq!(doc["flavors"], Value::Null, "ResourceFlavors unknown");
}

#[test]
fn without_cohort_objects_the_queues_own_cap_is_given_or_nothing() {
    let queues = yaml(QUEUES);
    let (doc, _) = summarise(&queues, None, None);
    let small = &doc["cluster_queues"]["small"]["resources"]["nvidia.com/gpu"]["flavors"]["a100"];
    assert_eq!(small["can_reserve"], 24);
    let big = &doc["cluster_queues"]["big"]["resources"]["nvidia.com/gpu"]["flavors"]["a100"];
    assert_eq!(
        big.get("can_reserve"),
        None,
        "no borrowing limit: unbounded"
    );
    assert_eq!(doc["cohorts_known"], false);
}

#[test]
fn a_quota_in_an_unknown_unit_is_named_and_its_tree_not_judged() {
    let mut queues = yaml(QUEUES);
    queues[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] =
        json!("4Q");
    let (doc, problems) = summarise(&queues, Some(&[]), None);
    let small = &doc["cluster_queues"]["small"]["resources"];
    assert_eq!(
        small["nvidia.com/gpu"]["flavors"]["a100"].get("can_reserve"),
        None
    );
    assert_eq!(
        small["cpu"]["flavors"]["a100"]["can_reserve"], 1500,
        "cpu is judged"
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with(r#"Kueue ClusterQueue "big": flavor "a100" nvidia.com/gpu lendingLimit "4Q" is not a quantity"#),
        "{}",
        problems[0]
    );
    assert_eq!(doc["cluster_queues"]["big"]["readable"], true);
}

#[test]
fn a_queue_whose_groups_cannot_be_read_is_kept_unreadable() {
    let queues = yaml(
        r#"
- kind: ClusterQueue
  metadata: {name: odd}
  spec: {resourceGroups: [{coveredResources: [cpu]}]}
- kind: ClusterQueue
  spec: {}
"#,
    );
    let (doc, problems) = summarise(&queues, Some(&[]), None);
    assert_eq!(doc["cluster_queues"]["odd"]["readable"], false);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("ClusterQueue \"odd\": a resource group without"));
    assert_eq!(
        problems[1],
        "Kueue ClusterQueue item 1 has no name; left out"
    );
}

#[test]
fn a_cohort_cycle_is_said_once_and_its_queues_not_judged() {
    let queues = yaml(
        r#"
- kind: ClusterQueue
  metadata: {name: a}
  spec:
    cohortName: x
    resourceGroups:
    - coveredResources: [cpu]
      flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]
- kind: ClusterQueue
  metadata: {name: b}
  spec:
    cohortName: y
    resourceGroups:
    - coveredResources: [cpu]
      flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]
"#,
    );
    let cohorts = yaml(
        r#"
- kind: Cohort
  metadata: {name: x}
  spec: {parentName: y}
- kind: Cohort
  metadata: {name: y}
  spec: {parentName: x}
"#,
    );
    let (doc, problems) = summarise(&queues, Some(&cohorts), None);
    let a = &doc["cluster_queues"]["a"]["resources"]["cpu"]["flavors"]["f"];
    assert_eq!(a.get("can_reserve"), None);
    assert_eq!(
        problems,
        ["Kueue Cohort chain x -> y -> x is a cycle: Kueue admits nothing through the ClusterQueues below it; their quota is not judged"],
        "b meets the same cycle from y: said once"
    );
}

#[test]
fn flavors_give_labels_taints_and_tolerations_and_bad_ones_are_named() {
    let flavors = yaml(
        r#"
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: a100}
  spec:
    nodeLabels: {pool: a100}
    nodeTaints: [{key: gpu, value: a100, effect: NoSchedule}]
    tolerations: [{key: spot, operator: Exists}]
    topologyName: default
- kind: ResourceFlavor
  metadata: {name: default-flavor}
- kind: ResourceFlavor
  metadata: {name: broken}
  spec: {nodeLabels: [pool]}
"#,
    );
    let (doc, problems) = summarise(&[], None, Some(&flavors));
    let f = &doc["flavors"];
    assert_eq!(f["a100"]["node_labels"], json!({"pool": "a100"}));
    assert_eq!(f["a100"]["topology_name"], "default");
    assert_eq!(f["a100"]["tolerations"][0]["key"], "spot");
    assert_eq!(
        f["default-flavor"],
        json!({"readable": true, "node_labels": {}, "node_taints": [], "tolerations": [], "topology_name": ""})
    );
    assert_eq!(f["broken"], json!({"readable": false}));
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[1]
        .contains(r#""a100" names Topology "default", and Kueue's Topologies are not known"#));
    assert_eq!(doc["topologies"], Value::Null, "Topologies not listed");
}

#[test]
fn topologies_are_given_by_name_and_a_flavor_naming_one_held_is_judged() {
    let flavors = yaml("[{kind: ResourceFlavor, metadata: {name: tas}, spec: {topologyName: dc}}]");
    let topologies = yaml(
        "[{kind: Topology, metadata: {name: dc}, spec: {levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]}}]",
    );
    let mut problems = Vec::new();
    let objects = Objects {
        cluster_queues: Some(&[]),
        local_queues: None,
        cohorts: None,
        flavors: Some(&flavors),
        topologies: Some(&topologies),
    };
    let doc = summary(&objects, &mut problems).expect("ClusterQueues listed");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        doc["topologies"],
        json!({"dc": {"readable": true, "levels": ["rack", "kubernetes.io/hostname"]}})
    );
    assert_eq!(doc["flavors"]["tas"]["topology_name"], "dc");
}

#[test]
fn amounts_are_kueues_units_rounded_up_and_huge_ones_unlimited() {
    assert_eq!(amount("cpu", &json!("1.5")), Some(Amount(1500)));
    assert_eq!(amount("cpu", &json!("0.0001")), Some(Amount(1)));
    assert_eq!(amount("memory", &json!("1Gi")), Some(Amount(1 << 30)));
    assert_eq!(amount("nvidia.com/gpu", &json!(8)), Some(Amount(8)));
    assert_eq!(amount("cpu", &json!("1E")), Some(Amount::UNLIMITED));
    assert_eq!(amount("memory", &json!("10E")), Some(Amount::UNLIMITED));
    assert_eq!(amount("memory", &json!("8Q")), None);
    assert_eq!(amount("cpu", &json!("-1")), None);
    assert_eq!(amount("cpu", &json!(true)), None);
}
