//! What the cluster can run, for policies: Nodes and Volcano Queues summarised as
//! `data.cluster`, so a gang that can never be scheduled is refused at `kubectl apply`.
//!
//! Entry points: [`Inventory`] (nodes and queues → the summary policies read),
//! [`ClusterHandle`] (the current summary, shared with the policy engine), [`snapshot`]
//! (an inventory from `kubectl get nodes -o yaml` output, for `check --cluster`) and
//! [`watch`] (kept current from the API server by watches, for `serve`).

pub mod cache;
pub mod classes;
pub mod discovery;
pub mod handle;
pub mod hypernodes;
pub mod inventory;
pub mod kueue;
pub mod labels;
pub mod nodes;
pub mod objects;
pub mod priority_classes;
pub mod selector;
pub mod snapshot;
pub mod strip;
pub mod view;
pub mod watch;

pub use handle::{ClusterDoc, ClusterHandle};
pub use inventory::Inventory;
