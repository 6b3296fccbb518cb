//! [`ClusterHandle`]: the latest cluster inventory, shared between whoever keeps it current
//! (the watch in `serve`, a snapshot file in `check`) and the policy engine, which reads it
//! as `data.cluster` on every evaluation. Publishing never recompiles the policies, and
//! reading never waits on the cluster.

use std::sync::{Arc, RwLock};

use regorus::Value as RegoValue;
use serde_json::Value;

use super::inventory::Inventory;
use crate::policy::to_rego::to_rego;

/// `data.cluster`, as JSON (for reports) and as the engine's value (converted once).
#[derive(Debug)]
pub struct ClusterDoc {
    pub json: Value,
    pub rego: RegoValue,
}

/// Empty until an inventory is published: then policies see `data.cluster`.
#[derive(Debug, Clone, Default)]
pub struct ClusterHandle(Arc<RwLock<Option<Arc<ClusterDoc>>>>);

impl ClusterHandle {
    /// A handle holding `inventory` for good (a snapshot file, a test case).
    pub fn fixed(inventory: &Inventory) -> ClusterHandle {
        let handle = ClusterHandle::default();
        handle.publish(inventory);
        handle
    }

    /// Makes `inventory` what every following evaluation sees.
    pub fn publish(&self, inventory: &Inventory) {
        let json = inventory.summary();
        let doc = Arc::new(ClusterDoc {
            rego: to_rego(&json),
            json,
        });
        // A poisoned lock only means a publisher panicked mid-swap of an Arc: the value
        // inside is still whole, so keep using it.
        let mut slot = self.0.write().unwrap_or_else(|e| e.into_inner());
        *slot = Some(doc);
    }

    /// The inventory evaluations see now, if any.
    pub fn current(&self) -> Option<Arc<ClusterDoc>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
