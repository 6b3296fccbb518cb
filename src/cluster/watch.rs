//! Keeps a [`ClusterHandle`] current from the API server: watches of Nodes and, when its
//! CRD is installed, Volcano Queues feed caches; a change is published within
//! [`PUBLISH_EVERY`]. When a watch fails, the last good view stays published, marked stale
//! with the reason, so policies can say so and admission never waits on the cluster.
//!
//! Entry point: [`run`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::Value;

use super::handle::ClusterHandle;
use super::inventory::Inventory;

/// How often pending changes are summarised and published: well inside the 2 s within
/// which a node added to the cluster should reach the policies, and at most four summaries
/// a second however busy the watches are.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// How often to look again for the Volcano Queue CRD when it was not installed.
const CRD_RECHECK: Duration = Duration::from_secs(60);

/// Volcano's Queue (cluster-scoped).
pub fn queue_resource() -> ApiResource {
    ApiResource {
        group: "scheduling.volcano.sh".into(),
        version: "v1beta1".into(),
        api_version: "scheduling.volcano.sh/v1beta1".into(),
        kind: "Queue".into(),
        plural: "queues".into(),
    }
}

/// What changed since the last publish, and why the view may be stale.
#[derive(Default)]
struct Pending {
    changed: bool,
    node_error: Option<String>,
    queue_error: Option<String>,
}

/// Watches until the process ends, publishing into `handle`.
pub async fn run(client: kube::Client, handle: ClusterHandle) {
    let pending = Arc::new(Mutex::new(Pending::default()));
    let (nodes, node_writer) = reflector::store::<Node>();
    let node_stream = reflector::reflector(
        node_writer,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff();
    tokio::spawn(drive(node_stream, pending.clone(), |p, e| p.node_error = e));
    let queues = Arc::new(Mutex::new(None::<Store<DynamicObject>>));
    tokio::spawn(watch_queues(client, pending.clone(), queues.clone()));
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    loop {
        tick.tick().await;
        let stale = {
            let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
            if !std::mem::take(&mut p.changed) {
                continue;
            }
            stale_reason(&p)
        };
        let queue_store = queues.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let inventory = Inventory {
            nodes: nodes.state().iter().map(|n| (**n).clone()).collect(),
            volcano_queues: queue_store.map(|s| {
                s.state()
                    .iter()
                    .filter_map(|q| serde_json::to_value(&**q).ok())
                    .collect::<Vec<Value>>()
            }),
            source: "cluster".into(),
            stale,
        };
        handle.publish(&inventory);
    }
}

/// Marks a change for every watch event; records (and clears) the watch's error.
async fn drive<S, K>(
    stream: S,
    pending: Arc<Mutex<Pending>>,
    set_error: fn(&mut Pending, Option<String>),
) where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
        p.changed = true;
        match event {
            Ok(_) => set_error(&mut p, None),
            Err(e) => {
                let since = humantime(SystemTime::now());
                set_error(&mut p, Some(format!("since {since}: {e}")));
            }
        }
    }
}

/// Starts the Queue watch once the CRD answers; until then `data.cluster.volcano_queues` is
/// null and queue rules stay quiet.
async fn watch_queues(
    client: kube::Client,
    pending: Arc<Mutex<Pending>>,
    slot: Arc<Mutex<Option<Store<DynamicObject>>>>,
) {
    let resource = queue_resource();
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    loop {
        match api.list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => tracing::debug!(error = %e, "volcano Queue CRD not readable yet"),
        }
        tokio::time::sleep(CRD_RECHECK).await;
    }
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(store);
    let stream =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    drive(stream, pending, |p, e| p.queue_error = e).await;
}

fn stale_reason(p: &Pending) -> Option<String> {
    let parts: Vec<String> = [("Nodes", &p.node_error), ("Queues", &p.queue_error)]
        .into_iter()
        .filter_map(|(what, e)| {
            e.as_ref()
                .map(|e| format!("the watch of {what} is failing {e}"))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn humantime(t: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(t).map_or_else(|_| "?".into(), |t| t.to_string())
}
