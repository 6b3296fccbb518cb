//! Keeps a [`ClusterHandle`] current from the API server: watches of Nodes,
//! PersistentVolumeClaims, StorageClasses, PriorityClasses, NetworkPolicies and Namespaces
//! and, when their CRDs are installed, Volcano Queues and HyperNodes and Kueue ClusterQueues,
//! LocalQueues, Cohorts, ResourceFlavors and Topologies (at v1beta2 where served, else v1beta1) feed caches, and discovery says every [`DISCOVERY_EVERY`] whether the native gang API is served; a
//! change is published within [`PUBLISH_EVERY`]. When a watch fails, the last good view
//! stays published, marked stale with the reason, so policies can say so and admission never
//! waits on the cluster.
//!
//! Entry point: [`run`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::Value;

use super::cache::Cache;
use super::discovery::native_gang_api;
use super::handle::ClusterHandle;
use super::inventory::Inventory;
use super::nodes::{NodeFacts, NodeIndex};
use super::objects::{Cached, Incremental};
use super::priority_classes;
use super::strip::strip;
use crate::admission::metrics::Metrics;

/// How often pending changes are summarised and published: well inside the 2 s within
/// which a node added to the cluster should reach the policies, and at most four summaries
/// a second however busy the watches are.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// How often to look again for a CRD that was not installed.
const CRD_RECHECK: Duration = Duration::from_secs(60);

/// How often discovery asks whether `scheduling.k8s.io/v1alpha2` podgroups are served: it
/// changes only when kube-apiserver restarts with other flags, and one small GET a minute
/// costs nothing.
pub const DISCOVERY_EVERY: Duration = Duration::from_secs(60);

/// Volcano's Queue (cluster-scoped).
pub fn queue_resource() -> ApiResource {
    custom("scheduling.volcano.sh", "v1beta1", "Queue", "queues")
}

/// Volcano's HyperNode (cluster-scoped): the network domains of topology-aware gangs.
pub fn hypernode_resource() -> ApiResource {
    custom("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes")
}

/// Kueue's versions, the preferred first: v1beta2 is the storage version (v0.19), so reading
/// it needs no conversion; v1beta1 is converted by Kueue's own webhook, and cannot be read
/// while Kueue is down. A Kueue that serves only v1beta1 (before v0.15) is read at v1beta1.
pub const KUEUE_VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

/// Kueue's kinds the inventory reads: ClusterQueue, LocalQueue (namespaced), Cohort,
/// ResourceFlavor and Topology (Topology Aware Scheduling's levels).
const KUEUE_KINDS: [(&str, &str); 5] = [
    ("ClusterQueue", "clusterqueues"),
    ("LocalQueue", "localqueues"),
    ("Cohort", "cohorts"),
    ("ResourceFlavor", "resourceflavors"),
    ("Topology", "topologies"),
];

/// Each of [`KUEUE_KINDS`] at every version of [`KUEUE_VERSIONS`], the preferred first.
pub fn kueue_resources() -> [Vec<ApiResource>; 5] {
    KUEUE_KINDS.map(|(kind, plural)| {
        let at = |version: &&str| custom("kueue.x-k8s.io", version, kind, plural);
        KUEUE_VERSIONS.iter().map(at).collect()
    })
}

fn custom(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version,
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// What changed since the last publish, and which watches are failing (by what they watch).
#[derive(Default)]
struct Pending {
    /// Something the summary reads changed (queues, StorageClasses, staleness).
    changed: bool,
    /// The Node index changed what it holds.
    nodes_changed: bool,
    /// Claims, NetworkPolicies or Namespaces changed.
    objects_changed: bool,
    errors: BTreeMap<&'static str, String>,
    /// The last answer of discovery about the native gang API; `None` until one came.
    native_gang_api: Option<bool>,
}

impl Pending {
    /// Marks what the watch of `what` feeds as changed.
    fn mark(&mut self, what: &str) {
        if what == "Nodes" {
            self.nodes_changed = true;
        } else if NAMESPACED.contains(&what) {
            self.objects_changed = true;
        } else {
            self.changed = true;
        }
    }
}

type Shared = Arc<Mutex<Pending>>;
type Slot = Arc<Mutex<Option<Store<DynamicObject>>>>;
type Nodes = Arc<Mutex<NodeIndex>>;

/// The default bound of what the inventory holds ([`Limits::max_bytes`]): 100,000 realistic
/// GPU nodes in 1,600 classes with 50,000 claims, 10,000 NetworkPolicies and 1,000 Namespaces
/// are estimated at 127 MiB (benches/inventory_scale.rs); deploy/cluster-inventory raises
/// the pod's memory limit by as much (deploy/README.md "Sizing").
pub const DEFAULT_MAX_MIB: usize = 160;

/// Bounds of the inventory.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// What the Node index and the namespaced caches may hold together, estimated; past it
    /// new Nodes are left out and a namespaced kind becomes unknown, said in the view.
    pub max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_bytes: DEFAULT_MAX_MIB << 20,
        }
    }
}

/// Watches until the process ends, publishing into `handle`.
pub async fn run(
    client: kube::Client,
    handle: ClusterHandle,
    metrics: Arc<Metrics>,
    limits: Limits,
) {
    let pending: Shared = Arc::default();
    let nodes: Nodes = Arc::new(Mutex::new(NodeIndex::new(limits.max_bytes)));
    tokio::spawn(watch_nodes(client.clone(), nodes.clone(), pending.clone()));
    tokio::spawn(discover(client.clone(), pending.clone()));
    let [cluster_queues, local_queues, cohorts, flavors, topologies] = kueue_resources();
    let [claims, classes, network_policies, namespaces] = storage_and_network_resources();
    let start = |(candidates, what): (Vec<ApiResource>, &'static str)| {
        let slot = Slot::default();
        let watch = watch_custom(client.clone(), candidates, what, pending.clone());
        tokio::spawn(watch(slot.clone()));
        slot
    };
    // What the summary reads (in this order below) ...
    let summary_slots = [
        (vec![queue_resource()], "Volcano Queues"),
        (cluster_queues, "Kueue ClusterQueues"),
        (local_queues, "Kueue LocalQueues"),
        (cohorts, "Kueue Cohorts"),
        (flavors, "Kueue ResourceFlavors"),
        (topologies, "Kueue Topologies"),
        (vec![classes], "StorageClasses"),
        (vec![hypernode_resource()], "Volcano HyperNodes"),
        (vec![priority_classes::resource()], "PriorityClasses"),
    ]
    .map(start);
    // ... and the namespaced objects, indexed apart (they can be tens of thousands).
    let caches = [
        (claims, NAMESPACED[0]),
        (network_policies, NAMESPACED[1]),
        (namespaces, NAMESPACED[2]),
    ]
    .map(|(resource, what)| {
        let cache = Arc::new(Mutex::new(Cache::new(resource.kind.clone())));
        let watch = watch_cached(
            client.clone(),
            resource,
            what,
            pending.clone(),
            cache.clone(),
        );
        tokio::spawn(watch);
        cache
    });
    let mut incremental = Incremental::default();
    let mut said = BTreeSet::new();
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    let mut published = None;
    loop {
        tick.tick().await;
        let (nodes_changed, summary_changed, objects_changed, stale, native_gang_api) = {
            let mut p = lock(&pending);
            let nodes = std::mem::take(&mut p.nodes_changed);
            let summary = std::mem::take(&mut p.changed) || nodes;
            let objects = std::mem::take(&mut p.objects_changed);
            metrics.set_inventory_failing_watches(p.errors.len());
            (nodes, summary, objects, stale_reason(&p), p.native_gang_api)
        };
        if objects_changed {
            let [claims, policies, namespaces] = caches.each_ref().map(|c| lock(c).objects());
            let node_bytes = lock(&nodes).sizes().bytes;
            let cached = Cached {
                claims: claims.as_deref(),
                network_policies: policies.as_deref(),
                namespaces: namespaces.as_deref(),
            };
            let objects = incremental.update(&cached, limits.max_bytes.saturating_sub(node_bytes));
            metrics.set_inventory_objects(&objects.sizes());
            metrics.inventory_published("objects");
            handle.publish_objects(objects);
        }
        if summary_changed {
            let lists = summary_slots.each_ref().map(read_slot);
            // Node events that change nothing the summary reads never get here (the index
            // says so); the queues are few, and hashed: their status updates often change
            // nothing the summary reads either.
            let fingerprint = fingerprint(&lists, stale.as_deref(), native_gang_api);
            if nodes_changed || published != Some(fingerprint) {
                published = Some(fingerprint);
                let [volcano_queues, kueue_cluster_queues, kueue_local_queues, kueue_cohorts, kueue_flavors, kueue_topologies, storage_classes, hypernodes, priority_classes] =
                    lists;
                let rest = Inventory {
                    volcano_queues,
                    hypernodes,
                    kueue_cluster_queues,
                    kueue_local_queues,
                    kueue_cohorts,
                    kueue_flavors,
                    kueue_topologies,
                    storage_classes,
                    priority_classes,
                    native_gang_api,
                    source: "cluster".into(),
                    stale,
                    ..Inventory::default()
                };
                let index = lock(&nodes);
                metrics.set_inventory_nodes(&index.sizes());
                let summary = index.summary(rest);
                drop(index);
                metrics.inventory_published("summary");
                handle.publish_summary(summary);
            }
        }
        if summary_changed || objects_changed {
            report_problems(&handle, &metrics, &mut said);
        }
    }
}

/// The watches of the namespaced objects ([`Incremental`] indexes them): their events mark
/// only those as changed, so a claim created does not summarise the Nodes again.
const NAMESPACED: [&str; 3] = ["PersistentVolumeClaims", "NetworkPolicies", "Namespaces"];

/// PersistentVolumeClaims, StorageClasses, NetworkPolicies and Namespaces (built in, so
/// always served; a cache stays unknown while the webhook may not list its kind).
pub fn storage_and_network_resources() -> [ApiResource; 4] {
    [
        custom("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
        custom("storage.k8s.io", "v1", "StorageClass", "storageclasses"),
        custom(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
        ),
        custom("", "v1", "Namespace", "namespaces"),
    ]
}

/// Sets the count of objects the view leaves out as unreadable, and logs each one the
/// view before did not have (so a bad object is said once, not on every publish).
fn report_problems(handle: &ClusterHandle, metrics: &Metrics, said: &mut BTreeSet<String>) {
    let Some(doc) = handle.current() else {
        return;
    };
    let problems: BTreeSet<String> = doc.problems().into_iter().collect();
    metrics.set_inventory_problems(problems.len());
    for problem in problems.difference(said) {
        tracing::warn!(%problem, "cluster inventory: an object could not be read; left out");
    }
    *said = problems;
}

/// A hash of what the summary reads besides the Nodes (the [`NodeIndex`] tracks those): the
/// queues' and StorageClasses' JSON, the staleness, whether the native gang API is served.
fn fingerprint(
    queues: &[Option<Vec<Value>>],
    stale: Option<&str>,
    native_gang_api: Option<bool>,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for list in queues {
        list.as_ref()
            .map(|l| serde_json::to_string(l).unwrap_or_default())
            .hash(&mut h);
    }
    stale.hash(&mut h);
    native_gang_api.hash(&mut h);
    h.finish()
}

/// Asks discovery about the native gang API now and every [`DISCOVERY_EVERY`]; a change of
/// answer is published. A failed ask keeps the last answer (the Node watch, failing too,
/// marks the view stale).
async fn discover(client: kube::Client, pending: Shared) {
    let mut tick = tokio::time::interval(DISCOVERY_EVERY);
    loop {
        tick.tick().await;
        match native_gang_api(&client).await {
            Ok(served) => {
                let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
                if p.native_gang_api != Some(served) {
                    p.native_gang_api = Some(served);
                    p.changed = true;
                }
            }
            Err(e) => tracing::debug!(error = %e, "discovery of scheduling.k8s.io/v1alpha2 failed"),
        }
    }
}

/// The objects of a custom resource's cache; `None` while its CRD is not installed.
fn read_slot(slot: &Slot) -> Option<Vec<Value>> {
    let store = slot.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
    let objects = store.state();
    Some(
        objects
            .iter()
            .filter_map(|o| serde_json::to_value(&**o).ok())
            .collect(),
    )
}

/// Feeds every watch event to `apply` (true: the view changed) and keeps the watch's
/// error: a failing watch, or one relisting after a restart (410 Gone, a dropped
/// connection), makes the view stale until the relist completes. The first list is not a
/// relist: there is no view yet to call stale.
async fn drive<S, K>(
    stream: S,
    pending: Shared,
    what: &'static str,
    mut apply: impl FnMut(&watcher::Event<K>) -> bool,
) where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    futures::pin_mut!(stream);
    let mut listed_once = false;
    while let Some(event) = stream.next().await {
        let changed = event.as_ref().map(&mut apply).unwrap_or(false);
        let mut p = lock(&pending);
        if changed {
            p.mark(what);
        }
        let since = || humantime(SystemTime::now());
        // A changed error changes the staleness the summary carries.
        let errors_before = p.errors.get(what).cloned();
        match event {
            Ok(watcher::Event::Init) if listed_once => {
                let relisting = format!(
                    "is relisting since {} (the view is the last complete list)",
                    since()
                );
                p.errors.entry(what).or_insert(relisting);
            }
            Ok(watcher::Event::InitApply(_) | watcher::Event::Init) => {}
            Ok(watcher::Event::InitDone) => {
                listed_once = true;
                p.errors.remove(what);
            }
            Ok(_) => {
                p.errors.remove(what);
            }
            Err(e) => {
                p.errors
                    .entry(what)
                    .or_insert(format!("is failing since {}: {e}", since()));
            }
        }
        if p.errors.get(what) != errors_before.as_ref() {
            p.changed = true;
        }
    }
}

/// Nodes per page of a (re)list. A page is held whole as text while it is decoded: 500
/// (kube's default) realistic GPU nodes are 9 MB, and the freed pages stayed in the
/// process's RSS for a while after the first list; 100 cost one more round trip per 100
/// nodes and hold ~2 MB (BENCHMARKS.md "Ultra-scale inventory").
const NODE_PAGE: u32 = 100;

/// Watches Nodes as [`NodeFacts`] into `nodes`: only a change of what the summary reads
/// marks the view changed.
async fn watch_nodes(client: kube::Client, nodes: Nodes, pending: Shared) {
    let config = watcher::Config::default().page_size(NODE_PAGE);
    let stream = watcher(Api::<NodeFacts>::all(client), config).default_backoff();
    drive(stream, pending, "Nodes", |event| {
        feed(&mut *lock(&nodes), event)
    })
    .await;
}

/// A view kept from one watch's events, a relist built aside and swapped in complete
/// ([`NodeIndex`], [`Cache`]). Each method says whether the view changed.
trait WatchView<K> {
    fn apply(&mut self, object: &K) -> bool;
    fn delete(&mut self, object: &K) -> bool;
    fn begin_relist(&mut self);
    fn end_relist(&mut self) -> bool;
}

/// Feeds one watch event to `view`; true when the view changed.
fn feed<K, V: WatchView<K>>(view: &mut V, event: &watcher::Event<K>) -> bool {
    match event {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => view.apply(o),
        watcher::Event::Delete(o) => view.delete(o),
        watcher::Event::Init => {
            view.begin_relist();
            false
        }
        watcher::Event::InitDone => view.end_relist(),
    }
}

impl WatchView<NodeFacts> for NodeIndex {
    fn apply(&mut self, node: &NodeFacts) -> bool {
        NodeIndex::apply(self, node)
    }
    fn delete(&mut self, node: &NodeFacts) -> bool {
        let name = node.metadata.name.as_deref();
        name.is_some_and(|n| NodeIndex::delete(self, n))
    }
    fn begin_relist(&mut self) {
        NodeIndex::begin_relist(self);
    }
    fn end_relist(&mut self) -> bool {
        NodeIndex::end_relist(self)
    }
}

impl WatchView<DynamicObject> for Cache {
    fn apply(&mut self, object: &DynamicObject) -> bool {
        Cache::apply(self, object.clone())
    }
    fn delete(&mut self, object: &DynamicObject) -> bool {
        Cache::delete(self, object)
    }
    fn begin_relist(&mut self) {
        Cache::begin_relist(self);
    }
    fn end_relist(&mut self) -> bool {
        Cache::end_relist(self)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits until one of `candidates` (a kind at the versions it may be served at, the
/// preferred first) can be listed (its CRD is installed and serves that version, the webhook
/// may list it), and returns it; until then its part of `data.cluster` is null and the rules
/// that read it stay quiet.
async fn wait_listable(
    client: &kube::Client,
    candidates: &[ApiResource],
    what: &'static str,
) -> Option<ApiResource> {
    let mut said_forbidden = false;
    loop {
        for resource in candidates {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
            match api.list_metadata(&ListParams::default().limit(1)).await {
                Ok(_) => return Some(resource.clone()),
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                // Said once: a platform may keep a kind from the webhook on purpose.
                Err(kube::Error::Api(status)) if status.code == 403 && !said_forbidden => {
                    said_forbidden = true;
                    tracing::warn!(what, "the webhook may not list these (RBAC): the policies that read them stay silent until it may (see deploy/cluster-inventory)");
                }
                Err(e) => {
                    tracing::debug!(error = %e, what, version = %resource.version, "not listable yet")
                }
            }
        }
        if candidates.is_empty() {
            return None;
        }
        tokio::time::sleep(CRD_RECHECK).await;
    }
}

/// Watches the first listable of `candidates` (queues, StorageClasses, PriorityClasses, at
/// the versions they may be served at: few, read whole) into a reflector store, published in
/// `slot` once the first list is in.
fn watch_custom(
    client: kube::Client,
    candidates: Vec<ApiResource>,
    what: &'static str,
    pending: Shared,
) -> impl FnOnce(Slot) -> futures::future::BoxFuture<'static, ()> {
    move |slot| {
        Box::pin(async move {
            let Some(resource) = wait_listable(&client, &candidates, what).await else {
                return;
            };
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            let writer = reflector::store::Writer::new(resource.clone());
            // Published only once the first list is in: an empty store would read as "no
            // queues", and every job naming one would be refused until the list arrived.
            let store = writer.as_reader();
            let ready = {
                let (slot, pending) = (slot.clone(), pending.clone());
                async move {
                    if store.wait_until_ready().await.is_ok() {
                        *lock(&slot) = Some(store);
                        lock(&pending).mark(what);
                    }
                }
            };
            tokio::spawn(ready);
            let watch = watcher(api, watcher::Config::default())
                .modify(move |object| strip(&resource.kind, object));
            let stream = reflector::reflector(writer, watch).default_backoff();
            // The cache is the view: every event may change it.
            drive(stream, pending, what, |_| true).await;
        })
    }
}

/// Watches the namespaced `resource` into `cache`, which keeps each object stripped
/// ([`Kept`](super::cache::Kept)).
async fn watch_cached(
    client: kube::Client,
    resource: ApiResource,
    what: &'static str,
    pending: Shared,
    cache: Arc<Mutex<Cache>>,
) {
    if wait_listable(&client, std::slice::from_ref(&resource), what)
        .await
        .is_none()
    {
        return;
    }
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    drive(stream, pending, what, |event| {
        feed(&mut *lock(&cache), event)
    })
    .await;
}

fn stale_reason(p: &Pending) -> Option<String> {
    let parts: Vec<String> = p
        .errors
        .iter()
        .map(|(what, e)| format!("the watch of {what} {e}"))
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn humantime(t: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(t).map_or_else(|_| "?".into(), |t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    fn node(name: &str, gpus: &str) -> NodeFacts {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"nvidia.com/gpu": gpus}},
        }))
        .expect("node")
    }

    #[test]
    fn kueue_kinds_are_tried_at_v1beta2_first_then_v1beta1() {
        let versions = kueue_resources().map(|candidates| {
            let at: Vec<String> = candidates.iter().map(|r| r.api_version.clone()).collect();
            (candidates[0].kind.clone(), at)
        });
        let both = ["kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"].map(String::from);
        for (kind, at) in &versions {
            assert_eq!(at.as_slice(), both.as_slice(), "{kind}");
        }
        let kinds: Vec<&str> = versions.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "ClusterQueue",
                "LocalQueue",
                "Cohort",
                "ResourceFlavor",
                "Topology"
            ]
        );
    }

    #[tokio::test]
    async fn a_relist_serves_the_last_complete_view_and_says_so_until_it_completes() {
        let pending: Shared = Arc::default();
        let nodes: Nodes = Arc::new(Mutex::new(NodeIndex::new(usize::MAX)));
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let index = nodes.clone();
        let apply = move |event: &Event<NodeFacts>| feed(&mut *lock(&index), event);
        let driving = tokio::spawn(drive(rx, pending.clone(), "Nodes", apply));
        let step = |event: Result<Event<NodeFacts>, watcher::Error>| {
            tx.unbounded_send(event).expect("send");
        };
        let look = || async {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            let stale = stale_reason(&lock(&pending));
            let count = lock(&nodes).summary(Inventory::default()).0["node_count"].clone();
            (stale, count)
        };
        step(Ok(Event::Init));
        step(Ok(Event::InitApply(node("a", "8"))));
        step(Ok(Event::InitApply(node("b", "8"))));
        let (stale, count) = look().await;
        assert_eq!(
            (stale, count),
            (None, serde_json::json!(0)),
            "the first list: no view yet, not stale"
        );
        step(Ok(Event::InitDone));
        assert_eq!(look().await, (None, serde_json::json!(2)));
        // The watch restarts (410 Gone): a relist, of one node only.
        step(Ok(Event::Init));
        step(Ok(Event::InitApply(node("a", "8"))));
        let (stale, count) = look().await;
        assert_eq!(count, serde_json::json!(2), "the last complete view serves");
        let stale = stale.expect("said");
        assert!(
            stale.starts_with("the watch of Nodes is relisting since "),
            "{stale}"
        );
        step(Ok(Event::InitDone));
        assert_eq!(look().await, (None, serde_json::json!(1)), "b is gone");
        drop(tx);
        driving.await.expect("drive ends with its stream");
    }
}
