//! `gangplank.dev/network-topology` on a job: its Volcano PodGroup's `spec.networkTopology`
//! (Volcano's HyperNode-aware gang), and a value that is none said on the job.

use gangplank::controller::{Action, Config, GangScheduler, Observed};
use serde_json::{json, Value};

use crate::fixtures::*;

fn volcano() -> Config {
    Config {
        gang: Some(GangScheduler::Volcano),
        ..Config::default()
    }
}

fn created_group(actions: &[Action]) -> Option<Value> {
    actions.iter().find_map(|a| match a {
        Action::CreatePodGroup(pg) => Some(pg.clone()),
        _ => None,
    })
}

#[test]
fn the_annotation_puts_network_topology_on_the_volcano_pod_group() {
    let cases = [
        ("hard:2", json!({"mode": "hard", "highestTierAllowed": 2})),
        (
            "hard:spine",
            json!({"mode": "hard", "highestTierName": "spine"}),
        ),
        ("soft", json!({"mode": "soft"})),
        (
            r#"{"mode":"hard","highestTierAllowed":1}"#,
            json!({"mode": "hard", "highestTierAllowed": 1}),
        ),
    ];
    for (value, want) in cases {
        let job = pytorch_job(1, 3)
            .with_gpus(8)
            .annotation("gangplank.dev/network-topology", value);
        let plan = job.plan_with(&Observed::default(), 0, &volcano());
        let pg = created_group(&plan.actions).unwrap_or_else(|| panic!("{value}: no PodGroup"));
        assert_eq!(pg["spec"]["networkTopology"], want, "{value}");
        assert_eq!(pg["spec"]["minMember"], 4, "{value}: the gang is unchanged");
    }
}

#[test]
fn without_the_annotation_or_on_another_gang_no_network_topology_is_written() {
    let plain = pytorch_job(1, 1);
    let plan = plain.plan_with(&Observed::default(), 0, &volcano());
    let pg = created_group(&plan.actions).expect("a PodGroup");
    assert_eq!(pg["spec"].get("networkTopology"), None);
    let plugins = Config {
        gang: GangScheduler::from_flag("scheduler-plugins-scheduler"),
        ..Config::default()
    };
    let annotated = pytorch_job(1, 1).annotation("gangplank.dev/network-topology", "hard:1");
    let plan = annotated.plan_with(&Observed::default(), 0, &plugins);
    let pg = created_group(&plan.actions).expect("a PodGroup");
    assert_eq!(pg["spec"].get("networkTopology"), None);
}

#[test]
fn a_value_that_is_no_network_topology_is_said_on_the_job_and_no_pod_group_is_written() {
    for (value, says) in [
        ("hard", "names no tier"),
        ("hard:0", "tier 0 holds no HyperNode"),
        ("strict:2", "neither hard nor soft"),
        (r#"{"mode":"hard","tier":2}"#, "not a field"),
    ] {
        let job = pytorch_job(1, 1).annotation("gangplank.dev/network-topology", value);
        let plan = job.plan_with(&Observed::default(), 0, &volcano());
        assert_eq!(created_group(&plan.actions), None, "{value}");
        let created = conditions(&plan)
            .into_iter()
            .find(|(ty, _, _)| ty == "Created")
            .unwrap_or_else(|| panic!("{value}: no Created condition"));
        assert_eq!(created.2, "PyTorchJobPodGroupRefused", "{value}");
        let message = message(&plan, "Created");
        assert!(
            message.contains("annotation gangplank.dev/network-topology is not a network topology")
                && message.contains(says),
            "{value}: {message}"
        );
    }
}
