//! The lifecycle controller's pure core: given a training job and what exists in the cluster,
//! decide what to create, delete and write, the way the upstream Kubeflow training operator
//! (v1.9) does, minus its known defects.
//!
//! Entry point: [`plan()`]. The I/O shell (watch, apply [`Action`]s, write status, requeue) is
//! built on top of it and holds no semantics of its own.
//!
//! Table of contents, in the order `plan` consults them:
//! - [`snapshot`]: [`JobSnapshot`], the job object parsed once (kind table row, replicas,
//!   runPolicy, status); [`checks`]: its structural problems and the rules' (elastic, MPI).
//! - [`observed`]: [`Observed`], the owned pods, Services and PodGroup plus cluster facts, and
//!   the [`Foreign`] objects holding names the job's own need.
//! - [`config`]: [`Config`], operator-wide settings (gang scheduler, watchdog, init image);
//!   [`cluster_domain`]: the cluster's DNS domain, checked at start-up.
//! - [`naming`]: names, labels, selectors and owner references of generated objects.
//! - [`env`]: per-framework environment (PyTorch, TF_CONFIG, XGBoost, Paddle, JAX);
//!   [`injected`]: the containers added to users' pods, their pinned images and
//!   securityContext.
//! - [`pods`] and [`services`]: a pod and its headless Service from a replica template.
//! - [`podgroup`]: Volcano and scheduler-plugins PodGroups (minResources summed with
//!   [`crate::job::quantity`]).
//! - [`release`]: a native gang's pods gated and released type by type in the order of the
//!   job's `gangplank.dev/release-order`.
//! - [`elastic`]: PyTorch `elasticPolicy` (bounds, checks, gang size); [`hpa`]: its HPA.
//! - [`mpi`]: MPIJob v2beta1 (launcher, workers, ConfigMap, Service, SSH Secret) and v1
//!   ([`mpi::kubexec`]: ConfigMap with kubexec.sh, the launcher's ServiceAccount and Role).
//! - [`replicas`]: which observed pod fills which slot, and the replicaStatuses counts.
//! - [`status`]: conditions with upstream's bookkeeping, replicaStatuses, timestamps.
//! - [`outcome`]: the per-kind rules that turn replica counts into Running/Succeeded/Failed.
//! - [`restart`]: restart policies (ExitCode included) and the backoffLimit count.
//! - [`deadlines`]: activeDeadlineSeconds, TTL after finish and when to look again.
//! - [`watchdog`]: the gang start deadline and the cause of a stuck gang.
//! - [`action`]: [`Plan`], [`Action`] and [`Event`], the output.
//!
//! The I/O shell around `plan`, holding no semantics of its own:
//! - [`runner`]: one kube-runtime `Controller` per kind (and per namespace with
//!   `--namespaces`, [`scope`]), pods and Services watched into caches;
//! - [`managed`]: `--namespace-selector`, the namespaces acted in, by an opt-in label;
//! - [`reconcile`]: snapshot → [`observe`] → `plan` → [`apply`] → status → Events → requeue;
//! - [`expectations`]: creates the watch cache has not shown yet, so they are not planned twice;
//! - [`ssh_key`]: the MPIJob SSH key pair, generated when its Secret is created;
//! - [`leader`]: a `coordination.k8s.io` Lease, so only one replica reconciles;
//! - [`metrics`]: reconciles, errors by stage, transitions, watchdog firings.

// Data here comes from the cluster (job objects, pods, PodGroups): a panic would stop the
// controller for every job, so every fallible step degrades to a condition or a problem.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod action;
pub mod apply;
pub mod checks;
pub mod cluster_domain;
pub mod config;
pub mod deadlines;
pub mod elastic;
pub mod env;
pub mod expectations;
pub mod hpa;
pub mod injected;
pub mod leader;
pub mod managed;
pub mod metrics;
pub mod mpi;
pub mod naming;
pub mod observe;
pub mod observed;
pub mod outcome;
mod plan;
pub mod podgroup;
pub mod pods;
pub mod reconcile;
pub mod release;
pub mod replicas;
pub mod restart;
pub mod runner;
pub mod scope;
pub mod services;
pub mod snapshot;
pub mod ssh_key;
pub mod status;
pub mod watchdog;

pub use action::{Action, DeleteReason, Event, EventType, NewPod, Plan};
pub use config::{Config, GangScheduler, StuckAction};
pub use observed::{ClusterFacts, Foreign, LauncherRbac, Observed, QueueProblem, SshSecret};
pub use plan::plan;
pub use scope::Scope;
pub use snapshot::{JobSnapshot, SnapshotError};
pub use status::{Condition, ConditionType, JobStatus, ReplicaStatus};

/// Instants are `jiff` timestamps, the type k8s-openapi's `Time` wraps.
pub use k8s_openapi::jiff::Timestamp;
