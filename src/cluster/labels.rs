//! Label keys and values interned: each distinct string kept once, however many node
//! classes carry it, and a class's labels a sorted slice of id pairs (8 bytes a label).
//!
//! Why: on a GPU cluster whose topology labels (EC2's network nodes, racks, NFD's kernel
//! features during a rolling upgrade) split the nodes into thousands of classes, the classes
//! share almost every label; kept as maps of strings each class cost ~29 KiB (issue 44).
//!
//! Strings are counted: a string no class holds any more is freed and its id reused, so a
//! value that changes on every update does not grow the table. What a published view reads
//! is a frozen copy of the table ([`Interner::strings`]), shared until the next change.
//!
//! Entry points: [`Interner`], [`Strings`], [`LabelIds`].

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// A string's id in its [`Interner`].
pub type Sym = u32;

/// A class's labels: (key, value) ids, sorted by key text.
pub type LabelIds = Arc<[(Sym, Sym)]>;

/// Estimated bytes per distinct string beyond its text: the Arc's counts, its map entry and
/// slot, its entry in the published table (calibrated on benches/inventory_labels.rs).
pub const STRING_OVERHEAD: usize = 96;

/// The strings of a published view, by id (freed ids hold `""`).
pub type Strings = Arc<Vec<Arc<str>>>;

#[derive(Debug, Default)]
pub struct Interner {
    ids: HashMap<Arc<str>, Sym>,
    slots: Vec<Slot>,
    free: Vec<Sym>,
    /// The table as last published; emptied when a string is added or freed.
    frozen: OnceLock<Strings>,
    bytes: usize,
}

#[derive(Debug)]
struct Slot {
    text: Arc<str>,
    refs: u32,
}

impl Interner {
    /// The id of `text`, if some class holds it.
    pub fn get(&self, text: &str) -> Option<Sym> {
        self.ids.get(text).copied()
    }

    /// `text`'s id, held once more (added if new).
    pub fn intern(&mut self, text: &str) -> Sym {
        if let Some(&id) = self.ids.get(text) {
            self.slots[id as usize].refs += 1;
            return id;
        }
        self.frozen = OnceLock::new();
        self.bytes += text.len() + STRING_OVERHEAD;
        let text: Arc<str> = Arc::from(text);
        let slot = Slot {
            text: text.clone(),
            refs: 1,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                // Past u32 ids the API server would have refused the labels long before.
                Sym::try_from(self.slots.len() - 1).unwrap_or(Sym::MAX)
            }
        };
        self.ids.insert(text, id);
        id
    }

    /// Holds `id` once less; freed when nothing holds it.
    pub fn release(&mut self, id: Sym) {
        let Some(slot) = self.slots.get_mut(id as usize) else {
            return;
        };
        slot.refs = slot.refs.saturating_sub(1);
        if slot.refs > 0 {
            return;
        }
        let text = std::mem::replace(&mut slot.text, Arc::from(""));
        self.ids.remove(&text);
        self.free.push(id);
        self.frozen = OnceLock::new();
        self.bytes = self.bytes.saturating_sub(text.len() + STRING_OVERHEAD);
    }

    /// The text of `id` (`""` for a freed or unknown id).
    pub fn text(&self, id: Sym) -> &str {
        self.slots.get(id as usize).map_or("", |s| &s.text)
    }

    /// The table for a published view: copied once per change, shared otherwise.
    pub fn strings(&self) -> Strings {
        self.frozen
            .get_or_init(|| Arc::new(self.slots.iter().map(|s| s.text.clone()).collect()))
            .clone()
    }

    /// Distinct strings held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Estimated bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// What interning `labels` would add: bytes of the strings not yet held (a string repeated
/// within `labels` counted each time: an overestimate, never under).
pub fn new_bytes<'a>(
    interner: &Interner,
    labels: impl Iterator<Item = (&'a str, &'a str)>,
) -> usize {
    labels
        .flat_map(|(k, v)| [k, v])
        .filter(|s| interner.get(s).is_none())
        .map(|s| s.len() + STRING_OVERHEAD)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_is_kept_once_and_freed_when_nothing_holds_it() {
        let mut strings = Interner::default();
        let a = strings.intern("zone-a");
        assert_eq!(strings.intern("zone-a"), a, "the same id");
        let b = strings.intern("zone-b");
        assert_eq!((strings.len(), strings.text(b)), (2, "zone-b"));
        let table = strings.strings();
        assert!(
            Arc::ptr_eq(&table, &strings.strings()),
            "shared until a change"
        );
        strings.release(a);
        assert_eq!(strings.get("zone-a"), Some(a), "still held once");
        strings.release(a);
        assert_eq!(strings.get("zone-a"), None);
        assert_eq!(
            &*table[a as usize], "zone-a",
            "a published table keeps its strings"
        );
        assert_eq!(strings.intern("zone-c"), a, "the id is reused");
        assert_eq!(strings.bytes(), 2 * (6 + STRING_OVERHEAD));
    }

    #[test]
    fn a_value_changing_on_every_update_does_not_grow_the_table() {
        let mut strings = Interner::default();
        let mut held = strings.intern("v0");
        for i in 1..10_000 {
            let next = strings.intern(&format!("v{i}"));
            strings.release(held);
            held = next;
        }
        assert_eq!(strings.len(), 1);
        assert!(strings.slots.len() <= 2, "{} slots", strings.slots.len());
    }
}
