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
//!
//! The key is an HMAC-SHA256, cut to 128 bits, of a canonical encoding of those parts under a
//! key drawn at random when the server starts ([`Handoff::default`]). The encoding gives
//! every string and container its length and every value its type, and sorts object keys:
//! two different inputs are two different byte strings, so only a collision of the keyed
//! hash could make them one key, and nobody outside the process can compute a key to aim
//! for one. (The first key summed the entries' 64-bit SipHash values under a fixed, public
//! key, and wrote an i64 and a u64 alike: `-1` and `18446744073709551615` were one key.)

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use aws_lc_rs::hmac;
use serde_json::Value;

use crate::policy::PolicySet;
use crate::review::Input;

/// Objects remembered: far more than the reviews in flight between a `/mutate` and its
/// `/validate`, at 16 bytes each.
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

/// The hand-off cache of one server process.
#[derive(Debug)]
pub struct Handoff {
    /// The HMAC key of this process's keys; `None` when the system had no randomness to
    /// give, and then nothing is handed over (every `/validate` is a full review).
    secret: Option<hmac::Key>,
    inner: Mutex<Remembered>,
}

impl Default for Handoff {
    /// A cache with a fresh random key.
    fn default() -> Self {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let secret = hmac::Key::generate(hmac::HMAC_SHA256, &rng).ok();
        if secret.is_none() {
            tracing::warn!("no randomness for the /mutate → /validate hand-off key: every /validate reviews in full");
        }
        Handoff {
            secret,
            inner: Mutex::default(),
        }
    }
}

#[derive(Debug, Default)]
struct Remembered {
    /// The set the keys were made with. A `Weak` keeps its address from being reused by a
    /// later set while the keys stand.
    set: Weak<PolicySet>,
    keys: HashSet<u128>,
    order: VecDeque<u128>,
}

impl Handoff {
    /// `/mutate` produced `mutated` for `input` with `set`, every intent applied.
    pub fn remember(&self, set: &Arc<PolicySet>, input: &Input, mutated: &Value) {
        let Some(key) = self.key(input, mutated) else {
            return;
        };
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
        let Some(key) = self.key(input, &input.object) else {
            return false;
        };
        let r = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        std::ptr::eq(r.set.as_ptr(), Arc::as_ptr(set)) && r.keys.contains(&key)
    }

    /// The key of `object` in the request `input`; `None` without a secret.
    pub fn key(&self, input: &Input, object: &Value) -> Option<u128> {
        let secret = self.secret.as_ref()?;
        let tag = hmac::sign(secret, &canonical(input, object));
        let first: [u8; 16] = tag.as_ref().get(..16)?.try_into().ok()?;
        Some(u128::from_le_bytes(first))
    }
}

/// The bytes the key is made of: the parts of the request the policies read, then the
/// object without what the apiserver sets between the two calls.
fn canonical(input: &Input, object: &Value) -> Vec<u8> {
    let mut out = Canonical(Vec::with_capacity(1024));
    out.text(input.operation.as_str());
    out.text(&input.namespace);
    out.text(&input.name);
    out.0.push(u8::from(input.dry_run));
    out.value(&input.user_info, Level::Plain);
    match &input.old_object {
        None => out.0.push(0),
        Some(old) => {
            out.0.push(1);
            out.value(old, Level::Plain);
        }
    }
    out.value(object, Level::Object);
    out.0
}

/// Where in the object a value sits: what of it the key leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Anywhere else: nothing left out.
    Plain,
    /// The object itself: its `metadata`, `spec` and `spec.runPolicy` have rules.
    Object,
    Metadata,
    Spec,
    RunPolicy,
}

impl Level {
    /// Whether the member `k: v` of a value at this level counts.
    fn keeps(self, k: &str, v: &Value) -> bool {
        match self {
            Level::Metadata => !SET_BY_APISERVER.contains(&k),
            Level::Spec => !defaulted(&SPEC_DEFAULTS, k, v),
            Level::RunPolicy => !defaulted(&RUN_POLICY_DEFAULTS, k, v),
            Level::Plain | Level::Object => true,
        }
    }

    /// The level of member `k` of a value at this level.
    fn child(self, k: &str) -> Level {
        match (self, k) {
            (Level::Object, "metadata") => Level::Metadata,
            (Level::Object, "spec") => Level::Spec,
            (Level::Spec, "runPolicy") => Level::RunPolicy,
            _ => Level::Plain,
        }
    }
}

/// A prefix-free encoding of JSON values: a type byte, lengths before contents, object
/// members sorted by key (the apiserver re-encodes the object in an order of its own).
struct Canonical(Vec<u8>);

impl Canonical {
    fn len(&mut self, n: usize) {
        self.0.extend_from_slice(&(n as u64).to_le_bytes());
    }

    fn text(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }

    fn value(&mut self, v: &Value, level: Level) {
        match v {
            Value::Null => self.0.push(b'n'),
            Value::Bool(b) => self.0.extend_from_slice(&[b'b', u8::from(*b)]),
            // One form per number: an integer that fits i64 as one, a larger one as u64,
            // anything else as the bits of its f64.
            Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => {
                    self.0.push(b'i');
                    self.0.extend_from_slice(&i.to_le_bytes());
                }
                (_, Some(u), _) => {
                    self.0.push(b'u');
                    self.0.extend_from_slice(&u.to_le_bytes());
                }
                (_, _, f) => {
                    self.0.push(b'f');
                    self.0
                        .extend_from_slice(&f.map_or(u64::MAX, f64::to_bits).to_le_bytes());
                }
            },
            Value::String(s) => {
                self.0.push(b's');
                self.text(s);
            }
            Value::Array(items) => {
                self.0.push(b'a');
                self.len(items.len());
                for item in items {
                    self.value(item, Level::Plain);
                }
            }
            Value::Object(fields) => {
                let mut kept: Vec<(&String, &Value)> =
                    fields.iter().filter(|(k, v)| level.keeps(k, v)).collect();
                kept.sort_unstable_by(|a, b| a.0.cmp(b.0));
                self.0.push(b'o');
                self.len(kept.len());
                for (k, v) in kept {
                    self.text(k);
                    self.value(v, level.child(k));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(object: Value) -> Input {
        Input::create(object, "ns")
    }

    /// One process's keys.
    fn key(input: &Input, object: &Value) -> u128 {
        static HANDOFF: std::sync::LazyLock<Handoff> = std::sync::LazyLock::new(Handoff::default);
        HANDOFF
            .key(input, object)
            .expect("a key (the system has randomness)")
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

    /// The unkeyed 64-bit key wrote an i64 and a u64 with the same bytes under one tag, so
    /// -1 and 2^64-1 were one key: a job could be handed over as another object.
    #[test]
    fn numbers_of_different_values_never_share_a_key() {
        let mut a = job();
        a["spec"]["n"] = json!(-1);
        let mut b = job();
        b["spec"]["n"] = json!(u64::MAX);
        assert_ne!(key(&input(a.clone()), &a), key(&input(b.clone()), &b));
    }

    /// Lengths before contents: text moved across the border of two strings, or of a key and
    /// its value, or a value moved between nesting levels, is another input.
    #[test]
    fn parts_moved_across_borders_are_other_keys() {
        let mut a = input(job());
        a.namespace = "ab".into();
        a.name = "c".into();
        let mut b = input(job());
        b.namespace = "a".into();
        b.name = "bc".into();
        assert_ne!(key(&a, &job()), key(&b, &job()));
        let pairs = [
            (json!({"ab": "c"}), json!({"a": "bc"})),
            (json!({"a": {"b": 1}}), json!({"a": {}, "b": 1})),
            (json!({"a": [1, [2]]}), json!({"a": [[1], 2]})),
            (json!({"a": "1"}), json!({"a": 1})),
            (json!({"a": null}), json!({"a": false})),
        ];
        for (x, y) in pairs {
            let (mut jx, mut jy) = (job(), job());
            jx["spec"] = x.clone();
            jy["spec"] = y.clone();
            assert_ne!(
                key(&input(jx.clone()), &jx),
                key(&input(jy.clone()), &jy),
                "{x} and {y}"
            );
        }
    }

    /// Same input, same key within a process; another process (another random secret) keys
    /// it differently, so a key seen or computed elsewhere says nothing here.
    #[test]
    fn the_key_is_stable_in_a_process_and_secret_to_it() {
        let a = job();
        let here = Handoff::default();
        let first = here.key(&input(a.clone()), &a);
        assert!(first.is_some());
        assert_eq!(first, here.key(&input(a.clone()), &a));
        let elsewhere = Handoff::default();
        assert_ne!(first, elsewhere.key(&input(a.clone()), &a));
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
