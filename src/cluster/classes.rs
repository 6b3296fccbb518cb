//! Node classes kept compact: a class is its labels as interned ids ([`labels`](super::labels))
//! and a shared [`Shape`] (taints, allocatable, cordon), and a published view reads them as a
//! [`ClassTable`] — no class is ever kept as JSON. The projections of `data.cluster` a
//! request reads ([`view`](super::view)) are built from the table, with only the labels the
//! request's nodeSelectors name.
//!
//! Entry points: [`Shape`], [`ClassKey`], [`ClassTable`].

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde_json::{json, Value};

use super::inventory::Class;
use super::labels::{Interner, LabelIds, Strings, Sym};
use super::view::Hostnames;

/// What a class is besides its labels: taints, allocatable, whether cordoned. A cluster has
/// a few (one per instance type and taint set), shared by all the classes that differ only in
/// their labels.
#[derive(Debug)]
pub struct Shape {
    /// Its identity: `[taints, allocatable, preferred taints, cordoned]` as JSON.
    key: Box<str>,
    /// NoSchedule and NoExecute taints, as the summary lists them.
    pub taints: Value,
    /// PreferNoSchedule taints; `null` when none (the summary then leaves them out).
    pub preferred_taints: Value,
    pub allocatable: BTreeMap<String, i64>,
    pub allocatable_json: Value,
    pub cordoned: bool,
}

impl Shape {
    /// The identity of `class`'s shape (see [`Shape::key`]).
    pub(super) fn key_of(class: &Class) -> String {
        json!([
            class.taints,
            class.allocatable,
            class.preferred_taints,
            class.cordoned
        ])
        .to_string()
    }

    fn of(class: &Class, key: String) -> Shape {
        let preferred = if class.preferred_taints.is_empty() {
            Value::Null
        } else {
            json!(class.preferred_taints)
        };
        Shape {
            key: key.into_boxed_str(),
            taints: json!(class.taints),
            preferred_taints: preferred,
            allocatable_json: json!(class.allocatable),
            allocatable: class.allocatable.clone(),
            cordoned: class.cordoned,
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The allocatable amount of `resource` per node (0 when not reported).
    pub fn amount(&self, resource: &str) -> i64 {
        self.allocatable.get(resource).copied().unwrap_or(0)
    }

    /// Estimated bytes held: the key, the JSON values, the map (calibrated like the rest).
    pub fn bytes(&self) -> usize {
        4 * self.key.len() + 512
    }
}

/// The shapes of an index, by key: each kept once, with how many classes hold it, and
/// dropped with the last.
#[derive(Debug, Default)]
pub struct Shapes(HashMap<Box<str>, (Arc<Shape>, usize)>);

impl Shapes {
    pub fn get(&self, key: &str) -> Option<&Arc<Shape>> {
        self.0.get(key).map(|(shape, _)| shape)
    }

    /// The shape of `class` (whose key is `key`), held by one class more (added if new).
    pub(super) fn intern(&mut self, class: &Class, key: &str) -> Arc<Shape> {
        if let Some((shape, holders)) = self.0.get_mut(key) {
            *holders += 1;
            return shape.clone();
        }
        let shape = Arc::new(Shape::of(class, key.to_string()));
        self.0.insert(key.into(), (shape.clone(), 1));
        shape
    }

    /// `shape` is held by one class less; dropped when none holds it.
    pub fn release(&mut self, shape: &Shape) {
        if let Some((_, holders)) = self.0.get_mut(shape.key()) {
            *holders = holders.saturating_sub(1);
            if *holders == 0 {
                self.0.remove(shape.key());
            }
        }
    }

    pub fn bytes(&self) -> usize {
        self.0.values().map(|(s, _)| s.bytes()).sum()
    }
}

/// A class as an index and a published view keep it: its labels' ids and its shape. Equal
/// when the labels and the shape are (shapes are interned: one `Arc` per key).
#[derive(Debug, Clone)]
pub struct ClassKey {
    pub labels: LabelIds,
    pub shape: Arc<Shape>,
}

impl PartialEq for ClassKey {
    fn eq(&self, other: &ClassKey) -> bool {
        self.labels == other.labels && Arc::ptr_eq(&self.shape, &other.shape)
    }
}

impl Eq for ClassKey {}

impl Hash for ClassKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.labels.hash(h);
        Arc::as_ptr(&self.shape).hash(h);
    }
}

/// The node classes of a published view: their labels (ids into `strings`), shapes and
/// sizes, and which class each node is in.
#[derive(Debug, Default)]
pub struct ClassTable {
    strings: Strings,
    classes: Vec<(ClassKey, usize)>,
    hostnames: Hostnames,
}

impl ClassTable {
    pub fn new(strings: Strings, classes: Vec<(ClassKey, usize)>, hostnames: Hostnames) -> Self {
        ClassTable {
            strings,
            classes,
            hostnames,
        }
    }

    /// The classes of a list of nodes already grouped (a snapshot's), with their names.
    pub(super) fn of_classes<'a>(classes: impl Iterator<Item = &'a Class>) -> ClassTable {
        let mut strings = Interner::default();
        let mut shapes = Shapes::default();
        let mut out = Vec::new();
        let mut hostnames = Hostnames::new();
        for (i, class) in classes.enumerate() {
            let shape = shapes.intern(class, &Shape::key_of(class));
            let labels = class
                .labels
                .iter()
                .map(|(k, v)| (strings.intern(k), strings.intern(v)))
                .collect();
            out.push((ClassKey { labels, shape }, class.size));
            hostnames.extend(class.names.iter().map(|n| (Arc::from(n.as_str()), i)));
        }
        ClassTable::new(strings.strings(), out, hostnames)
    }

    pub fn len(&self) -> usize {
        self.classes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// Class `i`'s key and how many nodes it has.
    pub fn class(&self, i: usize) -> Option<(&ClassKey, usize)> {
        self.classes.get(i).map(|(k, n)| (k, *n))
    }

    pub fn classes(&self) -> impl Iterator<Item = (&ClassKey, usize)> {
        self.classes.iter().map(|(k, n)| (k, *n))
    }

    pub fn text(&self, id: Sym) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// Class `i`'s labels as text, sorted by key.
    pub fn labels(&self, i: usize) -> impl Iterator<Item = (&str, &str)> {
        let ids = self.classes.get(i).map(|(k, _)| &*k.labels);
        ids.unwrap_or_default()
            .iter()
            .map(|&(k, v)| (self.text(k), self.text(v)))
    }

    /// The value of label `key` on class `i`, if it has it.
    pub fn label(&self, i: usize, key: &str) -> Option<&str> {
        self.labels(i).find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The id of `text`, if some class holds it (a walk of the strings: once per summary,
    /// not per class).
    pub fn id_of(&self, text: &str) -> Option<Sym> {
        let i = self.strings.iter().position(|s| &**s == text)?;
        Sym::try_from(i).ok()
    }

    /// The value of the label whose key is `key` on class `i`, by ids.
    pub fn value_of(&self, i: usize, key: Sym) -> Option<&str> {
        let (class, _) = self.class(i)?;
        let (_, v) = class.labels.iter().find(|(k, _)| *k == key)?;
        Some(self.text(*v))
    }

    /// All the strings, by id (for a projection to tell the kept keys once).
    pub fn strings(&self) -> &[Arc<str>] {
        &self.strings
    }

    pub fn hostnames(&self) -> &Hostnames {
        &self.hostnames
    }
}
