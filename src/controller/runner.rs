//! The controller process: one kube-runtime `Controller` per kind, each watching its jobs
//! and, through owner references, the pods and Services it made.
//!
//! Entry point: [`run`]. Pods and Services are watched once per kind with the kind's
//! `training.kubeflow.org/operator-name` label, into caches the reconciles read from; a pod
//! change triggers its owner's reconcile.
//!
//! With `--namespaces` ([`Scope::Namespaces`]) each kind runs one `Controller` per namespace,
//! every watch of it opened on that namespace alone. Not one controller over merged
//! per-namespace watches: a reflector's cache is replaced whole when its watch (re)lists, so
//! one cache fed by several namespaces' watches would lose the others' objects at each
//! relist; separate controllers keep separate caches, and need no cluster-wide right.
//!
//! With `--namespace-selector` ([`Managed`]) every reconcile first asks whether the job's
//! namespace is served, and a namespace that starts to match has its jobs reconciled at once.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::ApiResource;
use kube::runtime::controller::Controller;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};

use super::managed::Managed;
use super::metrics::ControllerMetrics;
use super::naming::OPERATOR_NAME;
use super::observe::pod_group_resource;
use super::podgroup;
use super::reconcile::{error_policy, reconcile, Context};
use super::scope::{api, dynamic_api, Scope};
use super::Config;
use crate::job::KindSpec;

/// Reconciles at once per kind; each is a handful of API calls.
const CONCURRENCY: u16 = 16;

/// What every kind's controller shares beside the client and the settings.
#[derive(Clone)]
pub struct Shared {
    pub metrics: Arc<ControllerMetrics>,
    /// The name Events are recorded under.
    pub reporter: Reporter,
    /// The namespaces acted in (`--namespace-selector`).
    pub managed: Managed,
}

/// Runs the controllers of `kinds` in `scope` until `shutdown` resolves (then they finish
/// what they are doing and return).
pub async fn run(
    client: kube::Client,
    kinds: Vec<&'static KindSpec>,
    scope: &Scope,
    config: Config,
    shared: Shared,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let namespaces = scope.each();
    let loops = kinds.into_iter().flat_map(|kind| {
        namespaces.iter().map(|namespace| {
            let context = KindContext {
                client: client.clone(),
                config: config.clone(),
                shared: shared.clone(),
                namespace: namespace.map(str::to_string),
            };
            run_kind(context, kind, shutdown.clone())
        })
    });
    futures::future::join_all(loops.collect::<Vec<_>>()).await;
}

struct KindContext {
    client: kube::Client,
    config: Config,
    shared: Shared,
    /// The one namespace this controller watches, or `None` for the whole cluster.
    namespace: Option<String>,
}

/// The API resource of a training kind (kubeflow.org/v1; plurals are `<kind>s`).
pub fn resource(kind: &KindSpec) -> ApiResource {
    ApiResource {
        group: kind.group.to_string(),
        version: kind.version.to_string(),
        api_version: kind.api_version(),
        kind: kind.kind.to_string(),
        plural: format!("{}s", kind.kind.to_lowercase()),
    }
}

async fn run_kind(
    ctx: KindContext,
    kind: &'static KindSpec,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let resource = resource(kind);
    let namespace = ctx.namespace.as_deref();
    let jobs = dynamic_api(&ctx.client, namespace, &resource);
    let selector = format!("{OPERATOR_NAME}={}", kind.operator_name);
    let children = watcher::Config::default().labels(&selector);
    let (pods, pod_events) = cached::<Pod>(&ctx.client, namespace, children.clone());
    let (services, service_events) = cached::<Service>(&ctx.client, namespace, children.clone());
    let mut controller = Controller::new_with(jobs, watcher::Config::default(), resource.clone())
        .owns_stream(pod_events)
        .owns_stream(service_events);
    let Shared {
        metrics,
        reporter,
        managed,
    } = ctx.shared;
    // A namespace that starts to match has its jobs reconciled now, not at their next change.
    managed.watch_jobs(controller.store());
    let picked_up = managed.picked_up(controller.store(), resource.clone());
    controller = controller.reconcile_on(picked_up);
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        config: ctx.config,
        resource: resource.clone(),
        kind: kind.kind,
        pods,
        services,
        recorder: Recorder::new(ctx.client, reporter),
        metrics,
        expectations: Default::default(),
        managed,
    });
    let scope = namespace.unwrap_or("(all namespaces)").to_string();
    tracing::info!(kind = kind.kind, namespace = %scope, "controller started");
    if kind.kind == "MPIJob" {
        // A hostfile edited or deleted by hand is repaired at once, not at the job's next
        // pod change (the ConfigMaps carry the operator-name label, so only ours are watched).
        let stream = watcher(
            api::<ConfigMap>(&context.client, namespace),
            children.clone(),
        )
        .default_backoff()
        .touched_objects();
        controller = controller.owns_stream(stream);
    }
    // A PodGroup the scheduler admits (Volcano: phase leaves Pending) is what lets the pods
    // be created, and a native one's PodGroupScheduled condition is what the watchdog
    // reports: watch them, as upstream does, rather than wait for a resync.
    if let Some(gang) = &context.config.gang {
        let groups = pod_group_resource(podgroup::api_version(gang));
        let api = dynamic_api(&context.client, namespace, &groups);
        // PodGroups carry no operator label (upstream sets none): the owner reference sorts them.
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .touched_objects();
        controller = controller.owns_stream_with(stream, groups);
    }
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller event");
            }
        })
        .await;
    tracing::info!(kind = kind.kind, namespace = %scope, "controller stopped");
}

/// A watch of `K` in `namespace` (or the cluster) with `config` feeding a cache; the cache,
/// and the stream of changed objects that triggers owners' reconciles.
fn cached<K>(
    client: &kube::Client,
    namespace: Option<&str>,
    config: watcher::Config,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    // managedFields (the apiserver's bookkeeping, as large as the spec it describes) is read
    // by no reconcile: the cache does not keep it (BENCHMARKS.md, "Controller with 1,000 jobs
    // in flight").
    let watch =
        watcher(api::<K>(client, namespace), config).modify(|o| o.meta_mut().managed_fields = None);
    let stream = reflector::reflector(writer, watch)
        .default_backoff()
        .touched_objects();
    (store, stream)
}
