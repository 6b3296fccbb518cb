//! One pair against scheduler-plugins' Coscheduling: the job through `gangplank controller
//! --gang-scheduler scheduler-plugins-scheduler` (its PodGroup's minMember and minResources
//! as the controller writes them), placed or not by the plugin.
//!
//! Placed: at least minMember pods bound (the plugin's Permit holds every pod until that
//! many have a node). Not placed: every pod exists, none is bound, and the plugin has said
//! why on each for [`SETTLE`] (it retries a rejected group on every pod or PodGroup change
//! and after each pod's backoff, 1 s doubling to 10 s; a gang that fits is bound within a
//! few seconds of its last pod).
//!
//! The plugin's PreFilter compares the PodGroup's minResources (and minMember pods) with the
//! free resources of every node of the cluster, the other pairs' too. Run alone, the pair's
//! nodes are the cluster: a PodGroup whose minResources exceed what they hold (all of them,
//! cordoned and tainted ones included, as the plugin counts them) is refused before any pod
//! binds. A gang bound beside the other pairs whose PodGroup the pair's nodes alone would
//! refuse so counts as not placed, and says so ([`refused_alone`]). The
//! controller's minResources are the first minMember pods in rank order, so with
//! minAvailable below the pod count they can exceed the pair's nodes while a smaller choice
//! of pods fits.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject};
use serde_json::{json, Value};

use super::super::coscheduling::{pod_group, SCHEDULER_NAME};
use super::super::nodes::{create_node, delete_nodes};
use super::super::scheduler::Placement;
use super::super::{jobs, ControlPlane};
use super::{clean_up_job, gang_min_count, nanos, node_names, replica_specs_mut, total_pods};
use super::{Alone, LIMIT};

/// How long a gang must stay unbound, every pod refused by the plugin, to count as not placed.
const SETTLE: Duration = Duration::from_secs(10);

/// The job as the webhook leaves it for scheduler-plugins: `schedulerName` on every template.
pub(super) fn name_the_scheduler(job: &mut Value) {
    for (_, replica) in replica_specs_mut(job) {
        replica["template"]["spec"]["schedulerName"] = json!(SCHEDULER_NAME);
    }
}

/// Creates the pair's nodes and the job, waits until the gang is bound or the plugin has
/// refused it for [`SETTLE`], then deletes it all.
pub(super) async fn schedule(
    plane: &ControlPlane,
    namespace: &str,
    pair: usize,
    nodes: &[Value],
    job: &Value,
) -> Placement {
    let client = plane.client().await;
    for node in nodes {
        create_node(&client, node).await;
    }
    if let Err(e) = jobs::create(&client, namespace, job, false).await {
        panic!("pair {pair}: create the job: {e}");
    }
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    let kind = job["kind"].as_str().unwrap_or_default().to_lowercase();
    let group = format!("{name}-{kind}");
    let gang = Gang {
        job: name,
        group: &group,
        min: gang_min_count(job),
        pods: total_pods(job),
    };
    let placement = wait(plane, namespace, pair, &gang, nodes).await;
    clean_up_job(&client, namespace, pair, job, (&group, &pod_group())).await;
    delete_nodes(&client, &node_names(nodes)).await;
    placement
}

/// The job's gang: its name, its PodGroup's, minMember and the pod count.
struct Gang<'a> {
    job: &'a str,
    group: &'a str,
    min: usize,
    pods: usize,
}

async fn wait(
    plane: &ControlPlane,
    namespace: &str,
    pair: usize,
    gang: &Gang<'_>,
    nodes: &[Value],
) -> Placement {
    let client = plane.client().await;
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &pod_group());
    let selector = jobs::selector(gang.job);
    let started = Instant::now();
    let mut refused_since: Option<Instant> = None;
    loop {
        let pod_group = groups.get_opt(gang.group).await.ok().flatten();
        let pod_group = pod_group.and_then(|g| serde_json::to_value(g).ok());
        let placement = Placement::read(&client, namespace, &selector).await;
        if placement.bound.len() >= gang.min {
            let refusal = pod_group.as_ref().and_then(|g| refused_alone(g, nodes));
            return match refusal {
                Some(why) => {
                    eprintln!(
                        "pair {pair}: placed beside the other pairs ({}), not placed alone: {why}",
                        placement.summary()
                    );
                    let mut alone = Placement::default();
                    alone.pending.insert(gang.group.to_string(), why);
                    alone
                }
                None => placement,
            };
        }
        let refused = placement.bound.is_empty()
            && placement.pending.len() == gang.pods
            && placement.pending.values().all(|why| !why.is_empty());
        refused_since = match (refused, refused_since) {
            (true, Some(since)) if since.elapsed() >= SETTLE => return placement,
            (true, since) => Some(since.unwrap_or_else(Instant::now)),
            (false, _) => None,
        };
        if started.elapsed() >= LIMIT {
            panic!(
                "pair {pair}: Coscheduling neither bound {} pods of {} nor refused them all \
                 within {LIMIT:?}: {}\nPodGroup: {}\ncoscheduler log tail:\n{}",
                gang.min,
                gang.job,
                placement.summary(),
                pod_group.unwrap_or_default(),
                plane.log_tail(super::super::coscheduling::PROCESS, 30)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Why the plugin's PreFilter would refuse the PodGroup with only the pair's nodes in the
/// cluster: its minResources, or minMember pods, exceed what those nodes hold.
fn refused_alone(pod_group: &Value, nodes: &[Value]) -> Option<String> {
    let min_member = pod_group["spec"]["minMember"].as_i64().unwrap_or(0);
    let pods: i128 = nodes
        .iter()
        .filter_map(|n| nanos(&n["status"]["allocatable"]["pods"]))
        .sum();
    let alone = Alone { nodes, queue: None };
    let over_pods = i128::from(min_member) * 1_000_000_000 > pods;
    (over_pods || !alone.enqueues(pod_group)).then(|| {
        format!(
            "PreFilter: minResources {} and {min_member} pods exceed the pair's nodes \
             (the plugin's \"resource gap\")",
            pod_group["spec"]["minResources"]
        )
    })
}
