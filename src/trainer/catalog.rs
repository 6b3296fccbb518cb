//! The runtimes TrainJobs name, known without asking the API server per request.
//!
//! Entry points: [`RuntimeCatalog`] (filled from files and snapshots by `check`, `test` and
//! `audit`; from watches by `serve`, see [`watch`]) and [`RuntimeCatalog::lookup`].
//! A kind that was never listed is *unknown*, not empty: a lookup then says why no runtime
//! is known rather than claiming the runtime does not exist.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::{RuntimeRef, TrainerKind, CLUSTER_TRAINING_RUNTIME};
use crate::review::input::Input;

/// What a lookup found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The runtime, and why the listing it comes from may be out of date, if it may.
    Found(Arc<Value>, Option<String>),
    /// No runtime: the message says why (absent, never listed, a bad reference).
    Missing(String),
}

#[derive(Debug, Default)]
struct State {
    cluster: HashMap<String, Arc<Value>>,
    /// (namespace, name)
    namespaced: HashMap<(String, String), Arc<Value>>,
    /// Per kind: where the list came from, once listed (`None`: never listed).
    cluster_source: Option<String>,
    namespaced_source: Option<String>,
    /// Why the lists may be out of date (a failing watch).
    stale: Option<String>,
    /// Why nothing was listed, for the message of a lookup that finds nothing.
    unlisted: Option<String>,
}

impl State {
    fn put(&mut self, kind: TrainerKind, (namespace, name): (String, String), value: Arc<Value>) {
        match kind {
            TrainerKind::ClusterTrainingRuntime => {
                self.cluster.insert(name, value);
            }
            TrainerKind::TrainingRuntime => {
                self.namespaced.insert((namespace, name), value);
            }
            TrainerKind::TrainJob => {}
        }
    }
}

/// The runtime kind of `object` and its (namespace, name) key (a TrainingRuntime without a
/// namespace is in `default`, as kubectl would create it); `None` when it is no runtime.
fn entry_of(object: &Value) -> Option<(TrainerKind, (String, String))> {
    let text = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let kind = TrainerKind::lookup(text("/apiVersion"), text("/kind"))?;
    let namespace = match kind {
        TrainerKind::TrainJob => return None,
        TrainerKind::ClusterTrainingRuntime => String::new(),
        TrainerKind::TrainingRuntime => match text("/metadata/namespace") {
            "" => "default".to_string(),
            ns => ns.to_string(),
        },
    };
    Some((kind, (namespace, text("/metadata/name").to_string())))
}

/// A listing of one runtime kind being received (a watch's Init .. InitDone): kept apart from
/// the catalog, which serves the last complete listing until [`RuntimeCatalog::swap`].
#[derive(Debug)]
pub struct Listing {
    kind: TrainerKind,
    fresh: State,
}

impl Listing {
    pub fn new(kind: TrainerKind) -> Listing {
        Listing {
            kind,
            fresh: State::default(),
        }
    }

    /// Adds `object` if it is a runtime of this listing's kind; returns whether it was one.
    pub fn add(&mut self, object: Value) -> bool {
        match entry_of(&object).filter(|(k, _)| *k == self.kind) {
            Some((k, key)) => {
                self.fresh.put(k, key, Arc::new(object));
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.fresh.cluster.len() + self.fresh.namespaced.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug, Clone, Default)]
pub struct RuntimeCatalog(Arc<RwLock<State>>);

impl RuntimeCatalog {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        // A poisoned lock means a writer panicked between whole-map swaps: still usable.
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `object` if it is a runtime; returns whether it was one.
    pub fn insert(&self, object: &Value) -> bool {
        let Some((kind, key)) = entry_of(object) else {
            return false;
        };
        self.write().put(kind, key, Arc::new(object.clone()));
        true
    }

    /// The runtimes of a snapshot (a complete listing, when it has any) and of `documents`
    /// (the manifests under review: a runtime given with its TrainJobs).
    pub fn offline<'a>(
        snapshot: Option<&crate::cluster::Inventory>,
        documents: impl IntoIterator<Item = &'a Value>,
    ) -> RuntimeCatalog {
        let catalog = RuntimeCatalog::default();
        if let Some(inventory) = snapshot {
            if let Some(list) = &inventory.trainer_runtimes {
                list.iter().for_each(|r| {
                    catalog.insert(r);
                });
                catalog.mark_listed(&inventory.source);
            }
        }
        for document in documents {
            catalog.insert(document);
        }
        catalog
    }

    /// Says that every runtime of both kinds that exists is in the catalog (a complete
    /// listing, from `source`): a lookup that finds nothing then means "does not exist".
    pub fn mark_listed(&self, source: &str) {
        let mut state = self.write();
        state.cluster_source = Some(source.to_string());
        state.namespaced_source = Some(source.to_string());
    }

    /// Replaces one kind's runtimes with a complete listing (a watch cache's contents), in
    /// one swap: a lookup never sees the kind half filled.
    pub fn replace(&self, kind: TrainerKind, objects: Vec<Value>, source: &str) {
        let mut listing = Listing::new(kind);
        for object in objects {
            listing.add(object);
        }
        self.swap(listing, source);
    }

    /// Puts a complete listing of one kind in place of what the catalog had of it, in one
    /// swap (the maps are moved, not copied).
    pub fn swap(&self, listing: Listing, source: &str) {
        let Listing { kind, fresh } = listing;
        let mut state = self.write();
        match kind {
            TrainerKind::ClusterTrainingRuntime => {
                state.cluster = fresh.cluster;
                state.cluster_source = Some(source.into());
            }
            TrainerKind::TrainingRuntime => {
                state.namespaced = fresh.namespaced;
                state.namespaced_source = Some(source.into());
            }
            TrainerKind::TrainJob => {}
        }
    }

    /// Adds or replaces one runtime of `kind` (a watch's Apply); returns whether it was one.
    /// Takes `object` by value: the catalog keeps it and no copy.
    pub fn apply(&self, kind: TrainerKind, object: Value) -> bool {
        match entry_of(&object).filter(|(k, _)| *k == kind) {
            Some((k, key)) => {
                self.write().put(k, key, Arc::new(object));
                true
            }
            None => false,
        }
    }

    /// Removes one runtime of `kind` (a watch's Delete); returns whether it was there.
    pub fn remove(&self, kind: TrainerKind, object: &Value) -> bool {
        let Some((_, (namespace, name))) = entry_of(object).filter(|(k, _)| *k == kind) else {
            return false;
        };
        let mut state = self.write();
        match kind {
            TrainerKind::ClusterTrainingRuntime => state.cluster.remove(&name).is_some(),
            TrainerKind::TrainingRuntime => state.namespaced.remove(&(namespace, name)).is_some(),
            TrainerKind::TrainJob => false,
        }
    }

    /// Why the catalog may be out of date; `None` once it is current again.
    pub fn set_stale(&self, reason: Option<String>) {
        self.write().stale = reason;
    }

    /// Why no runtime was listed (shown when a lookup finds nothing).
    pub fn set_unlisted(&self, reason: &str) {
        self.write().unlisted = Some(reason.to_string());
    }

    pub fn len(&self) -> usize {
        let state = self.read();
        state.cluster.len() + state.namespaced.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `input` with the runtime its TrainJob names looked up (borrowed when it is not a
    /// TrainJob or already has it).
    pub fn attach<'a>(&self, input: &'a Input) -> Cow<'a, Input> {
        if input.runtime.is_some() || input.trainer_kind() != Some(TrainerKind::TrainJob) {
            return Cow::Borrowed(input);
        }
        let mut owned = input.clone();
        owned.runtime = Some(self.lookup(&RuntimeRef::of(input.subject()), &input.namespace));
        Cow::Owned(owned)
    }

    /// The runtime a TrainJob in `namespace` names.
    pub fn lookup(&self, reference: &RuntimeRef, namespace: &str) -> Lookup {
        if let Some(reason) = reference.invalid() {
            return Lookup::Missing(reason);
        }
        let state = self.read();
        let cluster = reference.kind == CLUSTER_TRAINING_RUNTIME;
        let found = if cluster {
            state.cluster.get(&reference.name)
        } else {
            state
                .namespaced
                .get(&(namespace.to_string(), reference.name.clone()))
        };
        if let Some(runtime) = found {
            return Lookup::Found(runtime.clone(), state.stale.clone());
        }
        let (source, plural) = if cluster {
            (&state.cluster_source, "clustertrainingruntimes")
        } else {
            (&state.namespaced_source, "trainingruntimes")
        };
        let place = if cluster {
            String::new()
        } else {
            format!(" in namespace {namespace}")
        };
        let stale = state
            .stale
            .as_ref()
            .map(|s| format!(" (the runtime cache may be out of date: {s})"))
            .unwrap_or_default();
        Lookup::Missing(match source {
            Some(source) => format!(
                "{} {:?} does not exist{place} (as listed from {source}){stale}: create the runtime before the TrainJob; gangplank judges a TrainJob on the pods its runtime gives it",
                reference.kind, reference.name
            ),
            None => format!(
                "{} {:?} is not known here: {}",
                reference.kind,
                reference.name,
                state.unlisted.clone().unwrap_or_else(|| format!(
                    "gangplank judges a TrainJob on the pods its runtime gives it; give the runtime's manifest with the TrainJob, or a --cluster snapshot that lists {plural}"
                ))
            ),
        })
    }
}

pub mod watch {
    //! `serve`: watches of ClusterTrainingRuntimes and TrainingRuntimes keep a
    //! [`RuntimeCatalog`] current. A failing watch keeps the last listing, marked stale;
    //! without the Trainer's CRDs lookups say so.

    use futures::StreamExt;
    use kube::api::{Api, ApiResource, DynamicObject};
    use kube::runtime::{watcher, WatchStreamExt};

    use super::{Listing, RuntimeCatalog};
    use crate::trainer::{TrainerKind, GROUP, VERSION};

    fn resource(kind: TrainerKind) -> ApiResource {
        let plural = match kind {
            TrainerKind::ClusterTrainingRuntime => "clustertrainingruntimes",
            _ => "trainingruntimes",
        };
        ApiResource {
            group: GROUP.into(),
            version: VERSION.into(),
            api_version: format!("{GROUP}/{VERSION}"),
            kind: kind.as_str().into(),
            plural: plural.into(),
        }
    }

    /// Watches both kinds until the process ends.
    pub async fn run(client: kube::Client, catalog: RuntimeCatalog) {
        catalog.set_unlisted("the runtime watch has not listed runtimes yet (just started, no RBAC to list them, or the Trainer's CRDs are not installed); see the server log");
        let kinds = [
            TrainerKind::ClusterTrainingRuntime,
            TrainerKind::TrainingRuntime,
        ];
        let watches = kinds.map(|kind| watch_kind(client.clone(), catalog.clone(), kind));
        futures::future::join_all(watches).await;
    }

    /// One kind's watch, applied to the catalog event by event: the catalog's map is the only
    /// copy of each runtime (no reflector store beside it), and an event costs the one runtime
    /// it names. A relist (Init .. InitDone, after a start or a 410 Gone) is gathered apart;
    /// the catalog serves the last complete listing until InitDone swaps the new one in.
    async fn watch_kind(client: kube::Client, catalog: RuntimeCatalog, kind: TrainerKind) {
        let ar = resource(kind);
        let api: Api<DynamicObject> = Api::all_with(client, &ar);
        // managedFields is the apiserver's bookkeeping, which no policy judges (see
        // review::input): not kept.
        let stream = watcher(api, watcher::Config::default())
            .modify(|o| o.metadata.managed_fields = None)
            .default_backoff();
        futures::pin_mut!(stream);
        let mut listing: Option<Listing> = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    if let Some(listed) = apply(&catalog, kind, &mut listing, event) {
                        tracing::debug!(kind = kind.as_str(), runtimes = listed, "runtimes listed");
                    }
                }
                Err(e) => {
                    tracing::warn!(kind = kind.as_str(), error = %e, "runtime watch failed");
                    catalog.set_stale(Some(format!("the watch of {} is failing: {e}", ar.plural)));
                }
            }
        }
    }

    /// Applies one watch event of `kind` to the catalog; `listing` holds a relist in progress.
    /// Returns the number of runtimes listed when the event completes a listing.
    pub fn apply(
        catalog: &RuntimeCatalog,
        kind: TrainerKind,
        listing: &mut Option<Listing>,
        event: watcher::Event<DynamicObject>,
    ) -> Option<usize> {
        let value = |o: DynamicObject| serde_json::to_value(o).ok();
        match event {
            // Until a listing is complete it is partial: the catalog keeps serving the last
            // complete one (or, before the first, says the runtimes are not listed yet,
            // never that one does not exist).
            watcher::Event::Init => {
                *listing = Some(Listing::new(kind));
                None
            }
            watcher::Event::InitApply(o) => {
                let pending = listing.get_or_insert_with(|| Listing::new(kind));
                if let Some(v) = value(o) {
                    pending.add(v);
                }
                None
            }
            watcher::Event::InitDone => {
                let done = listing.take().unwrap_or_else(|| Listing::new(kind));
                let listed = done.len();
                catalog.swap(done, "the cluster");
                catalog.set_stale(None);
                Some(listed)
            }
            watcher::Event::Apply(o) => {
                if let Some(v) = value(o) {
                    catalog.apply(kind, v);
                }
                catalog.set_stale(None);
                None
            }
            watcher::Event::Delete(o) => {
                if let Some(v) = value(o) {
                    catalog.remove(kind, &v);
                }
                catalog.set_stale(None);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn runtime(kind: &str, name: &str) -> Value {
        json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": "team"}})
    }

    fn found(catalog: &RuntimeCatalog, kind: &str, name: &str) -> bool {
        let reference = RuntimeRef {
            api_group: crate::trainer::GROUP.into(),
            kind: kind.into(),
            name: name.into(),
        };
        matches!(catalog.lookup(&reference, "team"), Lookup::Found(..))
    }

    #[test]
    fn a_listing_replaces_its_kind_whole_and_leaves_the_other() {
        let catalog = RuntimeCatalog::default();
        catalog.insert(&runtime("ClusterTrainingRuntime", "old"));
        catalog.insert(&runtime("TrainingRuntime", "local"));
        catalog.replace(
            TrainerKind::ClusterTrainingRuntime,
            vec![
                runtime("ClusterTrainingRuntime", "new"),
                runtime("TrainingRuntime", "not-this-kind"),
            ],
            "the cluster",
        );
        assert!(!found(&catalog, "ClusterTrainingRuntime", "old"));
        assert!(found(&catalog, "ClusterTrainingRuntime", "new"));
        assert!(found(&catalog, "TrainingRuntime", "local"));
        assert!(!found(&catalog, "TrainingRuntime", "not-this-kind"));
    }

    fn object(kind: &str, name: &str) -> kube::api::DynamicObject {
        serde_json::from_value(runtime(kind, name))
            .unwrap_or_else(|e| panic!("a runtime is a DynamicObject: {e}"))
    }

    #[test]
    fn a_relist_keeps_serving_the_last_complete_listing_until_it_is_done() {
        use kube::runtime::watcher::Event;
        let catalog = RuntimeCatalog::default();
        let kind = TrainerKind::ClusterTrainingRuntime;
        let mut listing = None;
        let mut feed = |event| watch::apply(&catalog, kind, &mut listing, event);
        let ctr = "ClusterTrainingRuntime";
        assert_eq!(feed(Event::Init), None);
        feed(Event::InitApply(object(ctr, "a")));
        feed(Event::InitApply(object(ctr, "b")));
        // The first listing is not complete yet: not listed, rather than "does not exist".
        let reference = |name: &str| RuntimeRef {
            api_group: crate::trainer::GROUP.into(),
            kind: ctr.into(),
            name: name.into(),
        };
        match catalog.lookup(&reference("a"), "team") {
            Lookup::Missing(m) => assert!(m.contains("is not known here"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(feed(Event::InitDone), Some(2));
        feed(Event::Apply(object(ctr, "c")));
        feed(Event::Delete(object(ctr, "b")));
        catalog.set_stale(Some(
            "the watch of clustertrainingruntimes is failing: 410 Gone".into(),
        ));
        let names = |catalog: &RuntimeCatalog| {
            ["a", "b", "c", "d"]
                .into_iter()
                .filter(|n| found(catalog, ctr, n))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&catalog), ["a", "c"]);

        // A relist (after 410 Gone): while it runs the last complete view is served, marked stale.
        let mut listing = None;
        let mut feed = |event| watch::apply(&catalog, kind, &mut listing, event);
        feed(Event::Init);
        feed(Event::InitApply(object(ctr, "c")));
        assert_eq!(names(&catalog), ["a", "c"]);
        match catalog.lookup(&reference("a"), "team") {
            Lookup::Found(_, Some(stale)) => assert!(stale.contains("410 Gone"), "{stale}"),
            other => panic!("{other:?}"),
        }
        feed(Event::InitApply(object(ctr, "d")));
        assert_eq!(names(&catalog), ["a", "c"]);
        assert_eq!(feed(Event::InitDone), Some(2));
        assert_eq!(names(&catalog), ["c", "d"]);
        assert!(matches!(
            catalog.lookup(&reference("c"), "team"),
            Lookup::Found(_, None)
        ));
        match catalog.lookup(&reference("a"), "team") {
            Lookup::Missing(m) => assert!(m.contains("does not exist"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn watch_events_of_the_other_kind_are_not_taken() {
        use kube::runtime::watcher::Event;
        let catalog = RuntimeCatalog::default();
        let mut listing = None;
        let kind = TrainerKind::TrainingRuntime;
        watch::apply(&catalog, kind, &mut listing, Event::Init);
        watch::apply(
            &catalog,
            kind,
            &mut listing,
            Event::InitApply(object("TrainingRuntime", "t")),
        );
        watch::apply(
            &catalog,
            kind,
            &mut listing,
            Event::InitApply(object("ClusterTrainingRuntime", "x")),
        );
        watch::apply(&catalog, kind, &mut listing, Event::InitDone);
        assert!(found(&catalog, "TrainingRuntime", "t"));
        assert!(!found(&catalog, "ClusterTrainingRuntime", "x"));
        assert_eq!(catalog.len(), 1);
    }
}
