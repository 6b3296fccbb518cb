//! The `/mutate` → `/validate` hand-off: `/validate` skips the mutation policies for an
//! object `/mutate` produced.
//!
//! The apiserver calls `/mutate` with the submitted object and `/validate` with the object
//! as patched. Reviewing that object from scratch runs every mutation policy again only to
//! find that they change nothing (the policy suites check, for every case, that a mutated
//! object reviews to no patch and the same violations). So `/mutate` remembers a key of
//! each object it produced with every intent applied, and `/validate` reviews an object
//! with a remembered key with the validation policies alone
//! ([`crate::review::decide::review_mutated`]).
//!
//! The key leaves out what the apiserver sets between the two calls: metadata uid,
//! resourceVersion, creationTimestamp, generation and managedFields, and the fields the
//! training CRDs default (`spec.runPolicy.suspend: false` appears as soon as a patch adds
//! `runPolicy`). It does not depend on key order (the apiserver re-encodes the object). It covers what else the policies read
//! of the request: operation, namespace, name, dry run, user, the old object. A miss
//! (another replica served `/mutate`, the cache forgot, the apiserver's defaulting changed
//! the object) is a full review, as before: the cache only ever saves work. Bounded: the
//! oldest keys go first, and a reload of the policies forgets them all.

use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use serde_json::Value;

use crate::policy::PolicySet;
use crate::review::Input;

/// Objects remembered: far more than the reviews in flight between a `/mutate` and its
/// `/validate`, at 8 bytes each.
pub const CAPACITY: usize = 4096;

/// Fields of `spec` the shipped CRDs (crds/) default, with their defaults: the apiserver
/// writes them after the mutating webhooks when a patch made their parent appear. A field
/// at its default is left out of the key; the validation policies still see it.
const SPEC_DEFAULTS: [(&str, CrdDefault); 5] = [
    ("launcherCreationPolicy", CrdDefault::Text("AtStartup")),
    ("mpiImplementation", CrdDefault::Text("OpenMPI")),
    ("runLauncherAsWorker", CrdDefault::Bool(false)),
    ("slotsPerWorker", CrdDefault::Int(1)),
    ("sshAuthMountPath", CrdDefault::Text("/root/.ssh")),
];

/// Fields of `spec.runPolicy` the shipped CRDs default.
const RUN_POLICY_DEFAULTS: [(&str, CrdDefault); 1] = [("suspend", CrdDefault::Bool(false))];

#[derive(Debug, Clone, Copy)]
enum CrdDefault {
    Text(&'static str),
    Bool(bool),
    Int(i64),
}

impl CrdDefault {
    fn is(self, v: &Value) -> bool {
        match self {
            CrdDefault::Text(t) => v.as_str() == Some(t),
            CrdDefault::Bool(b) => v.as_bool() == Some(b),
            CrdDefault::Int(i) => v.as_i64() == Some(i),
        }
    }
}

fn defaulted(defaults: &[(&str, CrdDefault)], k: &str, v: &Value) -> bool {
    defaults.iter().any(|(name, d)| *name == k && d.is(v))
}

/// Metadata fields the apiserver sets or changes after the mutating webhooks.
const SET_BY_APISERVER: [&str; 5] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
];

#[derive(Debug, Default)]
pub struct Handoff {
    inner: Mutex<Remembered>,
}

#[derive(Debug, Default)]
struct Remembered {
    /// The set the keys were made with. A `Weak` keeps its address from being reused by a
    /// later set while the keys stand.
    set: Weak<PolicySet>,
    keys: HashSet<u64>,
    order: VecDeque<u64>,
}

impl Handoff {
    /// `/mutate` produced `mutated` for `input` with `set`, every intent applied.
    pub fn remember(&self, set: &Arc<PolicySet>, input: &Input, mutated: &Value) {
        let key = key(input, mutated);
        let mut r = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if !std::ptr::eq(r.set.as_ptr(), Arc::as_ptr(set)) {
            *r = Remembered {
                set: Arc::downgrade(set),
                ..Remembered::default()
            };
        }
        if r.keys.insert(key) {
            r.order.push_back(key);
        }
        while r.order.len() > CAPACITY {
            if let Some(old) = r.order.pop_front() {
                r.keys.remove(&old);
            }
        }
    }

    /// Whether `/mutate` produced `input.object` for this request with `set`.
    pub fn produced(&self, set: &Arc<PolicySet>, input: &Input) -> bool {
        let r = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        std::ptr::eq(r.set.as_ptr(), Arc::as_ptr(set))
            && r.keys.contains(&key(input, &input.object))
    }
}

/// The key of `object` in the request `input`.
pub fn key(input: &Input, object: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    input.operation.as_str().hash(&mut h);
    input.namespace.hash(&mut h);
    input.name.hash(&mut h);
    input.dry_run.hash(&mut h);
    h.write_u64(value_hash(&input.user_info, &[]));
    h.write_u64(input.old_object.as_ref().map_or(0, |o| value_hash(o, &[])));
    let object_hash = match object {
        Value::Object(fields) => unordered(fields.iter().map(|(k, v)| match (k.as_str(), v) {
            ("metadata", _) => entry_hash(k, v, &SET_BY_APISERVER),
            ("spec", Value::Object(spec)) => hashed_entry(k, spec_hash(spec)),
            _ => entry_hash(k, v, &[]),
        })),
        other => value_hash(other, &[]),
    };
    h.write_u64(object_hash);
    h.finish()
}

/// The hash of `spec`, fields at their CRD defaults left out.
fn spec_hash(spec: &serde_json::Map<String, Value>) -> u64 {
    unordered(
        spec.iter()
            .filter(|(k, v)| !defaulted(&SPEC_DEFAULTS, k, v))
            .map(|(k, v)| match v {
                Value::Object(run_policy) if k == "runPolicy" => hashed_entry(
                    k,
                    unordered(
                        run_policy
                            .iter()
                            .filter(|(k, v)| !defaulted(&RUN_POLICY_DEFAULTS, k, v))
                            .map(|(k, v)| entry_hash(k, v, &[])),
                    ),
                ),
                _ => entry_hash(k, v, &[]),
            }),
    )
}

/// One hash of entry hashes, the same whatever order they come in.
fn unordered(entries: impl Iterator<Item = u64>) -> u64 {
    let (sum, n) = entries.fold((0u64, 0usize), |(sum, n), e| (sum.wrapping_add(e), n + 1));
    let mut h = DefaultHasher::new();
    5u8.hash(&mut h);
    h.write_u64(sum);
    h.write_usize(n);
    h.finish()
}

/// Hash of a JSON value that does not depend on the order of object keys; `skip` names
/// keys of this (top) level left out.
fn value_hash(v: &Value, skip: &[&str]) -> u64 {
    let mut h = DefaultHasher::new();
    match v {
        Value::Null => 0u8.hash(&mut h),
        Value::Bool(b) => (1u8, b).hash(&mut h),
        Value::Number(n) => {
            2u8.hash(&mut h);
            match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => i.hash(&mut h),
                (_, Some(u), _) => u.hash(&mut h),
                (_, _, f) => f.map(f64::to_bits).hash(&mut h),
            }
        }
        Value::String(s) => (3u8, s).hash(&mut h),
        Value::Array(items) => {
            4u8.hash(&mut h);
            for item in items {
                h.write_u64(value_hash(item, &[]));
            }
            h.write_usize(items.len());
        }
        Value::Object(fields) => {
            return unordered(
                fields
                    .iter()
                    .filter(|(k, _)| !skip.contains(&k.as_str()))
                    .map(|(k, v)| entry_hash(k, v, &[])),
            )
        }
    }
    h.finish()
}

fn entry_hash(k: &str, v: &Value, skip: &[&str]) -> u64 {
    hashed_entry(k, value_hash(v, skip))
}

fn hashed_entry(k: &str, value_hash: u64) -> u64 {
    let mut h = DefaultHasher::new();
    k.hash(&mut h);
    h.write_u64(value_hash);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(object: Value) -> Input {
        Input::create(object, "ns")
    }

    fn job() -> Value {
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
               "metadata": {"name": "a", "namespace": "ns", "labels": {"x": "1", "y": "2"}},
               "spec": {"n": [1, 2.5, "three"]}})
    }

    #[test]
    fn the_key_leaves_out_what_the_apiserver_sets_and_key_order() {
        let a = job();
        let b = json!({"spec": {"n": [1, 2.5, "three"]},
               "metadata": {"labels": {"y": "2", "x": "1"}, "namespace": "ns", "name": "a",
                            "uid": "u", "resourceVersion": "9", "generation": 1,
                            "creationTimestamp": "2026-11-26T00:00:00Z", "managedFields": []},
               "kind": "PyTorchJob", "apiVersion": "kubeflow.org/v1"});
        assert_eq!(key(&input(a.clone()), &a), key(&input(b.clone()), &b));
    }

    #[test]
    fn any_other_difference_changes_the_key() {
        let a = job();
        let k = key(&input(a.clone()), &a);
        let mut changed = Vec::new();
        for (pointer, value) in [
            ("/spec/n/1", json!(2.6)),
            ("/metadata/labels/x", json!("2")),
            ("/metadata/annotations", json!({})),
            ("/spec/n/2", json!(3)),
        ] {
            let mut b = a.clone();
            match b.pointer_mut(pointer) {
                Some(slot) => *slot = value,
                None => b["metadata"]["annotations"] = value,
            }
            changed.push(key(&input(b.clone()), &b));
        }
        // The array's order counts, unlike an object's.
        let mut swapped = a.clone();
        swapped["spec"]["n"] = json!([2.5, 1, "three"]);
        changed.push(key(&input(swapped.clone()), &swapped));
        let mut update = input(a.clone());
        update.old_object = Some(a.clone());
        changed.push(key(&update, &a));
        assert!(changed.iter().all(|c| *c != k), "{changed:?}");
    }

    #[test]
    fn fields_at_their_crd_defaults_are_left_out() {
        let a = job();
        let mut b = job();
        b["spec"]["runPolicy"] = json!({"suspend": false});
        let mut c = job();
        c["spec"]["runPolicy"] = json!({});
        c["spec"]["slotsPerWorker"] = json!(1);
        assert_eq!(key(&input(c.clone()), &c), key(&input(b.clone()), &b));
        assert_ne!(key(&input(a.clone()), &a), key(&input(b.clone()), &b));
        let mut suspended = c.clone();
        suspended["spec"]["runPolicy"]["suspend"] = json!(true);
        assert_ne!(
            key(&input(c.clone()), &c),
            key(&input(suspended.clone()), &suspended)
        );
    }

    /// Every default the shipped CRDs declare under spec or spec.runPolicy is in the tables.
    #[test]
    fn the_tables_hold_every_default_of_the_shipped_crds() {
        fn defaults(schema: &Value, path: &str, out: &mut Vec<(String, Value)>) {
            if let Some(d) = schema.get("default") {
                out.push((path.to_string(), d.clone()));
            }
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    defaults(s, &format!("{path}/{k}"), out);
                }
            }
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).expect("crds/") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            let crd: Value = yaml_serde::from_str(&text).expect("CRD YAML");
            for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
                let schema = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
                defaults(schema, "/spec", &mut found);
            }
        }
        assert!(!found.is_empty());
        for (path, value) in found {
            let covered = match path.rsplit_once('/') {
                Some(("/spec", k)) => defaulted(&SPEC_DEFAULTS, k, &value),
                Some(("/spec/runPolicy", k)) => defaulted(&RUN_POLICY_DEFAULTS, k, &value),
                _ => false,
            };
            assert!(covered, "{path} defaults to {value}, not in the tables");
        }
    }

    #[test]
    fn bounded_and_forgotten_with_the_set() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
        let set = Arc::new(PolicySet::load(&dir).expect("policies load"));
        let handoff = Handoff::default();
        let first = job();
        handoff.remember(&set, &input(first.clone()), &first);
        assert!(handoff.produced(&set, &input(first.clone())));
        for i in 0..CAPACITY {
            let mut other = job();
            other["spec"]["i"] = json!(i);
            handoff.remember(&set, &input(other.clone()), &other);
        }
        assert!(
            !handoff.produced(&set, &input(first.clone())),
            "the oldest goes"
        );
        let newest = {
            let mut o = job();
            o["spec"]["i"] = json!(CAPACITY - 1);
            o
        };
        assert!(handoff.produced(&set, &input(newest.clone())));
        // A reloaded set (another Arc) knows nothing of the old keys.
        let reloaded = Arc::new((*set).clone());
        assert!(!handoff.produced(&reloaded, &input(newest)));
    }
}
