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
//! The key leaves out what the apiserver sets between the two calls (metadata uid,
//! resourceVersion, creationTimestamp, generation, managedFields) and does not depend on
//! key order (the apiserver re-encodes the object). It covers what else the policies read
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
        Value::Object(fields) => unordered(fields.iter().map(|(k, v)| {
            let skip: &[&str] = if k == "metadata" {
                &SET_BY_APISERVER
            } else {
                &[]
            };
            entry_hash(k, v, skip)
        })),
        other => value_hash(other, &[]),
    };
    h.write_u64(object_hash);
    h.finish()
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
    let mut h = DefaultHasher::new();
    k.hash(&mut h);
    h.write_u64(value_hash(v, skip));
    h.finish()
}
