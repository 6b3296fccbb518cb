//! `gangplank controller --namespace-selector`: the namespaces the controller acts in, by an
//! opt-in label (`gangplank.dev/managed=true` in deploy/controller), as the admission
//! policies of deploy/controller enforce for its writes. A job in any other namespace is not
//! reconciled and nothing is written there (no pod, no status, no Event); the controller
//! says so once per namespace, and counts such jobs in
//! `gangplank_controller_unmanaged_jobs{job_namespace}`.
//!
//! Entry points: [`Managed::start`] (or [`Managed::every`] without a selector),
//! [`Managed::admits`], asked by every reconcile first, and [`Managed::picked_up`], the
//! reconciles of the jobs of a namespace that starts to match.
//!
//! The Namespaces are watched with the selector itself: the API server parses it (the
//! syntax of `kubectl get -l`, checked once at start so that a bad one stops the controller
//! with the server's reason) and filters, and a filtered watch reports a namespace that
//! stops matching as deleted. So the cache holds exactly the namespaces served: one that
//! loses its label is left at its jobs' next reconcile (each returns at once, no error and
//! no retry loop, while every other job runs on), one that gains it has its jobs
//! reconciled at once, without a restart.
//!
//! With `--namespaces` the selector is not used (the controller says so at start): a
//! RoleBinding cannot grant reading Namespace objects, and the listed namespaces are the
//! allow-list there.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use tokio::sync::broadcast;
use tracing::{info, warn};

use super::metrics::ControllerMetrics;

/// How often the unmanaged jobs are counted anyway: a job deleted in an unmanaged namespace
/// triggers no reconcile, so only a recount lowers the gauge.
const RECOUNT: Duration = Duration::from_secs(30);

/// Namespaces that started to match, queued per kind's controller; one that falls behind
/// further reconciles every served namespace's jobs instead (see [`Managed::picked_up`]).
const PICKUPS: usize = 256;

/// Where the controller acts: every namespace, or those the selector matches.
#[derive(Clone, Default)]
pub struct Managed(Option<Arc<Selected>>);

struct Selected {
    selector: String,
    /// The namespaces the selector matches now.
    namespaces: Store<Namespace>,
    /// Names of namespaces that (again) match, or all of them after a relist.
    matched: broadcast::Sender<String>,
    /// Each running controller's cache of its jobs, for the count of unmanaged ones.
    jobs: Mutex<Vec<Store<DynamicObject>>>,
    /// Namespaces already warned about, while their jobs stay unmanaged.
    warned: Mutex<BTreeSet<String>>,
    metrics: Arc<ControllerMetrics>,
}

impl Managed {
    /// Every namespace: no selector.
    pub fn every() -> Managed {
        Managed(None)
    }

    /// Watches the Namespaces `selector` matches, until `shutdown`; returns once the first
    /// listing is in (or `shutdown` came first). An error names the flag and the fix when
    /// the API server refuses the selector (its syntax) or the listing (the rights).
    pub async fn start(
        client: &kube::Client,
        selector: &str,
        metrics: Arc<ControllerMetrics>,
        shutdown: impl std::future::Future<Output = ()> + Send + Clone + 'static,
    ) -> Result<Managed, String> {
        let api: Api<Namespace> = Api::all(client.clone());
        refused(&api, selector).await?;
        let (namespaces, writer) = reflector::store();
        let (matched, _) = broadcast::channel(PICKUPS);
        let selected = Arc::new(Selected {
            selector: selector.to_string(),
            namespaces: namespaces.clone(),
            matched,
            jobs: Mutex::default(),
            warned: Mutex::default(),
            metrics,
        });
        let config = watcher::Config::default().labels(selector);
        let watch = watcher(api, config).modify(|n| n.managed_fields_mut().clear());
        let events = reflector::reflector(writer, watch).default_backoff();
        tokio::spawn(follow(selected.clone(), events, shutdown.clone()));
        tokio::spawn(recount_every(selected.clone(), shutdown.clone()));
        tokio::select! {
            ready = namespaces.wait_until_ready() => if ready.is_err() {
                return Err("the Namespace watch stopped before its first listing".to_string());
            },
            () = shutdown => {}
        }
        info!(
            selector,
            matching = namespaces.state().len(),
            "acting only on jobs in namespaces whose labels match --namespace-selector"
        );
        Ok(Managed(Some(selected)))
    }

    /// Whether the controller acts on jobs in `namespace`.
    pub fn admits(&self, namespace: &str) -> bool {
        match &self.0 {
            None => true,
            Some(s) => s.namespaces.get(&ObjectRef::new(namespace)).is_some(),
        }
    }

    /// A reconcile left a job in a namespace it does not admit: count and say so.
    pub fn skipped(&self) {
        if let Some(s) = &self.0 {
            s.recount();
        }
    }

    /// Counts the jobs of `store` (a kind's controller cache) among the unmanaged ones.
    pub fn watch_jobs(&self, store: Store<DynamicObject>) {
        if let Some(s) = &self.0 {
            s.jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(store);
        }
    }

    /// The reconciles of the jobs in `store` (of `resource`) whose namespace starts to match:
    /// for `Controller::reconcile_on`. Nothing without a selector.
    pub fn picked_up(
        &self,
        store: Store<DynamicObject>,
        resource: ApiResource,
    ) -> impl Stream<Item = ObjectRef<DynamicObject>> + Send + 'static {
        let Some(selected) = self.0.clone() else {
            return futures::stream::empty().left_stream();
        };
        let matched = futures::stream::unfold(selected.matched.subscribe(), |mut rx| async move {
            let namespace = match rx.recv().await {
                Ok(namespace) => Some(namespace),
                // Fell behind: every namespace served now, rather than miss one.
                Err(broadcast::error::RecvError::Lagged(_)) => None,
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            Some((namespace, rx))
        });
        matched
            .flat_map(move |namespace| {
                let refs = jobs_in(&store, &resource, |ns| match &namespace {
                    Some(n) => ns == n,
                    None => selected.admits(ns),
                });
                futures::stream::iter(refs)
            })
            .right_stream()
    }
}

impl Selected {
    fn admits(&self, namespace: &str) -> bool {
        self.namespaces.get(&ObjectRef::new(namespace)).is_some()
    }

    /// Counts the jobs in namespaces not served, sets the gauge, and warns once about each
    /// namespace that has some (again once if it has some after none).
    fn recount(&self) {
        let stores = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        let jobs: Vec<Arc<DynamicObject>> = stores.iter().flat_map(Store::state).collect();
        drop(stores);
        let counts = unmanaged(
            jobs.iter().filter_map(|j| j.metadata.namespace.as_deref()),
            |ns| self.admits(ns),
        );
        let mut warned = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
        for (namespace, jobs) in &counts {
            if warned.insert(namespace.clone()) {
                warn!(
                    namespace = %namespace,
                    jobs,
                    selector = %self.selector,
                    "jobs in a namespace --namespace-selector does not match are not reconciled; label the namespace to have them run"
                );
            }
        }
        warned.retain(|ns| counts.contains_key(ns));
        drop(warned);
        self.metrics.set_unmanaged_jobs(&counts);
    }
}

/// Jobs per namespace `admits` refuses, from the namespaces of all jobs.
pub fn unmanaged<'a>(
    namespaces: impl Iterator<Item = &'a str>,
    admits: impl Fn(&str) -> bool,
) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for ns in namespaces.filter(|ns| !admits(ns)) {
        *counts.entry(ns.to_string()).or_insert(0) += 1;
    }
    counts
}

/// The jobs of `store` whose namespace `wanted` accepts, as reconcile requests.
fn jobs_in(
    store: &Store<DynamicObject>,
    resource: &ApiResource,
    wanted: impl Fn(&str) -> bool,
) -> Vec<ObjectRef<DynamicObject>> {
    store
        .state()
        .iter()
        .filter(|j| j.metadata.namespace.as_deref().is_some_and(&wanted))
        .map(|j| ObjectRef::from_obj_with(j.as_ref(), resource.clone()))
        .collect()
}

/// Why the controller cannot start with `selector`, when the API server says so: it refuses
/// the selector, or the listing of Namespaces. Other failures (the server not up yet) are
/// left to the watch, which retries.
async fn refused(api: &Api<Namespace>, selector: &str) -> Result<(), String> {
    let probe = ListParams::default().labels(selector).limit(1);
    match api.list(&probe).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 400 => Err(format!(
            "--namespace-selector {selector:?}: the API server refuses it: {}; write a label selector as kubectl get -l takes it, e.g. gangplank.dev/managed=true (GANGPLANK_NAMESPACE_SELECTOR)",
            status.message
        )),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
            "--namespace-selector needs list and watch on namespaces, cluster-wide (deploy/controller/rbac.yaml grants them): {}; or run without the selector, or confine the controller with --namespaces instead",
            status.message
        )),
        Err(e) => {
            warn!(error = %crate::error_chain(&e), "cannot list the Namespaces --namespace-selector matches yet; retrying");
            Ok(())
        }
    }
}

/// Feeds the namespace cache (the reflector does) until `shutdown`: a namespace that starts
/// to match is announced to the controllers, and every change recounts.
async fn follow(
    selected: Arc<Selected>,
    events: impl Stream<Item = Result<watcher::Event<Namespace>, watcher::Error>>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut events = std::pin::pin!(events.take_until(shutdown));
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(ns)) => {
                // No controller listening yet (at start) is fine: they read the cache.
                let _ = selected.matched.send(ns.name_any());
            }
            Ok(watcher::Event::InitDone) => {
                for ns in selected.namespaces.state() {
                    let _ = selected.matched.send(ns.name_any());
                }
            }
            // The initial list arrives one object at a time: recount once, at InitDone,
            // not once per namespace (a cluster of thousands would recount thousands of times).
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => continue,
            Ok(watcher::Event::Delete(_)) => {}
            Err(e) => {
                warn!(error = %crate::error_chain(&e), selector = %selected.selector, "the watch of the Namespaces --namespace-selector matches failed; retrying");
                continue;
            }
        }
        selected.recount();
    }
}

async fn recount_every(selected: Arc<Selected>, shutdown: impl std::future::Future<Output = ()>) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = tokio::time::sleep(RECOUNT) => selected.recount(),
            () = &mut shutdown => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_counted_per_namespace_the_selector_does_not_match() {
        let namespaces = ["team-a", "scratch", "team-a", "scratch", "other"];
        let counts = unmanaged(namespaces.into_iter(), |ns| ns == "team-a");
        assert_eq!(
            counts,
            BTreeMap::from([("other".to_string(), 1), ("scratch".to_string(), 2)])
        );
        assert!(unmanaged(namespaces.into_iter(), |_| true).is_empty());
    }

    #[test]
    fn without_a_selector_every_namespace_is_admitted() {
        let every = Managed::every();
        assert!(every.admits("anything"));
        // Nothing to count, nothing to pick up.
        every.skipped();
    }
}
