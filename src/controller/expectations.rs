//! Creates the watch cache has not shown yet ("expectations", as upstream calls them).
//!
//! Every pod or Service a reconcile creates comes back through the watch a moment later. A
//! reconcile that runs in between (triggered by the first of those events) would plan the
//! same creates again: harmless (creates are idempotent by name, 409 is fine) but each one is
//! a wasted API write, and with a gang of dozens of pods most writes would be wasted. So a
//! job with creates still in flight is not planned again until the cache has them all.
//!
//! Entry point: [`Expectations`], shared by one kind's reconciles.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::naming::OPERATOR_NAME;
use super::{Action, Observed};

/// A create the cache never shows (a dropped watch event, a create that failed after all) is
/// forgotten after this long, so the job is planned again and the object made.
const PATIENCE: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct Expectations {
    pending: Mutex<HashMap<String, (Instant, BTreeSet<String>)>>,
}

impl Expectations {
    /// Names of objects created for job `uid` that `observed` does not hold yet.
    pub fn outstanding(&self, uid: &str, observed: &Observed) -> BTreeSet<String> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some((since, names)) = pending.get_mut(uid) else {
            return BTreeSet::new();
        };
        names.retain(|name| observed.pod(name).is_none() && !observed.has_service(name));
        if names.is_empty() || since.elapsed() > PATIENCE {
            pending.remove(uid);
            return BTreeSet::new();
        }
        names.clone()
    }

    /// Records the pods and Services `actions` created for job `uid`.
    pub fn created(&self, uid: &str, actions: &[Action]) {
        let names: BTreeSet<String> = actions
            .iter()
            .filter_map(|a| match a {
                Action::CreatePod(new) => Some(&new.pod.metadata),
                Action::CreateService(service) => Some(&service.metadata),
                _ => None,
            })
            // Only what the caches can show: they watch by the operator-name label, and an
            // object without it would hold its job back for the whole PATIENCE.
            .filter(|meta| {
                meta.labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(OPERATOR_NAME))
            })
            .filter_map(|meta| meta.name.clone())
            .collect();
        if names.is_empty() {
            return;
        }
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.insert(uid.to_string(), (Instant::now(), names));
    }

    /// Forgets job `uid` (it is gone).
    pub fn forget(&self, uid: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(name: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_string());
        let label = (
            OPERATOR_NAME.to_string(),
            "pytorchjob-controller".to_string(),
        );
        pod.metadata.labels = Some([label].into());
        pod
    }

    #[test]
    fn a_create_is_outstanding_until_the_cache_shows_it() {
        let expectations = Expectations::default();
        let actions = [
            Action::CreatePod(Box::new(pod("a-worker-0").into())),
            Action::CreatePod(Box::new(pod("a-worker-1").into())),
        ];
        expectations.created("uid", &actions);
        let mut observed = Observed::default();
        observed.pods.push(pod("a-worker-0"));
        let outstanding = expectations.outstanding("uid", &observed);
        assert_eq!(outstanding, BTreeSet::from(["a-worker-1".to_string()]));
        observed.pods.push(pod("a-worker-1"));
        assert!(expectations.outstanding("uid", &observed).is_empty());
        assert!(expectations
            .outstanding("other", &Observed::default())
            .is_empty());
    }

    #[test]
    fn an_object_the_caches_cannot_show_is_not_expected() {
        let expectations = Expectations::default();
        let mut unlabelled = pod("a-worker-0");
        unlabelled.metadata.labels = None;
        expectations.created("uid", &[Action::CreatePod(Box::new(unlabelled.into()))]);
        assert!(expectations
            .outstanding("uid", &Observed::default())
            .is_empty());
    }
}
