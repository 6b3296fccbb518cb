//! One gathered program per applicability class: the set of rules a request skips.
//!
//! The set's own program gathers every output rule behind a skip guard (see
//! [`super::vm`]); a request that skips rules still pays for each guard and for entering
//! the skipped rules' comprehensions, about 4 % of a review of the 1 + 8 job with no cluster
//! inventory (BENCHMARKS.md "Evaluating only what applies, once"). So the first request of
//! each class compiles a program that gathers only the rules it runs, and later requests of
//! the class run that one. A class is compiled once per policy load (a reload starts a new
//! set, with an empty cache); the cache holds at most [`MAX_CLASSES`] classes, past which
//! requests run the guarded program, which gives the same answers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use regorus::Engine;

use super::set::{Group, RuleRef};
use super::vm::{GatheredRule, VmProgram};

/// Classes compiled per policy load. A class is a combination of kinds and facts, so a
/// cluster sees a handful (`gangplank check` of examples/ and the upstream examples: 11). A
/// class program of the shipped set takes 74 M instructions (some 25 ms) to compile and
/// about 0.5 MB to hold (11 classes added 5.3 MB to `check`'s peak RSS), so the bound keeps
/// a stream of unusual requests from compiling without end and from taking the server past
/// its memory target.
pub const MAX_CLASSES: usize = 16;

/// The class programs of one policy set, shared by its clones.
#[derive(Debug, Clone, Default)]
pub struct ClassPrograms {
    /// Skipped rule indices (sorted) → the class's program, or why there is none yet.
    compiled: Arc<Mutex<HashMap<Vec<usize>, Class>>>,
}

#[derive(Debug, Clone)]
enum Class {
    /// A request of the class is compiling its program; the others do not wait for it.
    Compiling,
    /// The program, or `None` when the class did not compile.
    Ready(Option<Arc<VmProgram>>),
}

impl ClassPrograms {
    /// The program of the class that skips `skipped` (sorted rule indices), compiled now if
    /// the class is new, the cache has room and no other class is compiling; `None`: run the
    /// guarded program. One request compiles at a time (some 25 ms): requests that arrive
    /// meanwhile run the guarded program rather than wait or compile too, so a burst of new
    /// classes (a server's first seconds) holds one compilation's memory at once, not one
    /// per evaluation slot; the next request of a class left out compiles it.
    pub fn program(
        &self,
        engine: &Engine,
        rules: &[RuleRef],
        skipped: &[usize],
    ) -> Option<Arc<VmProgram>> {
        {
            let mut compiled = self.lock();
            match compiled.get(skipped) {
                Some(Class::Ready(program)) => return program.clone(),
                Some(Class::Compiling) => return None,
                None if compiled.len() >= MAX_CLASSES => return None,
                None if compiled.values().any(|c| matches!(c, Class::Compiling)) => return None,
                None => compiled.insert(skipped.to_vec(), Class::Compiling),
            };
        }
        let program = compile(engine, rules, skipped);
        self.lock()
            .insert(skipped.to_vec(), Class::Ready(program.clone()));
        program
    }

    /// How many classes have a program (or were found not to compile).
    pub fn len(&self) -> usize {
        self.lock()
            .values()
            .filter(|c| matches!(c, Class::Ready(_)))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<usize>, Class>> {
        // A panic while holding the lock leaves a map that is still whole.
        self.compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A program whose gathered groups hold the rules not in `skipped`, unguarded, and no
/// entry point per rule (a failure is attributed on the set's own program).
fn compile(engine: &Engine, rules: &[RuleRef], skipped: &[usize]) -> Option<Arc<VmProgram>> {
    let groups: Vec<Vec<GatheredRule>> = Group::ALL
        .iter()
        .map(|group| {
            group
                .rules(rules)
                .filter(|r| !skipped.contains(&r.index))
                .map(|r| GatheredRule {
                    path: r.path.as_str(),
                    guard: None,
                })
                .collect()
        })
        .collect();
    match VmProgram::compile_rules(&mut engine.clone(), &[], &groups) {
        Ok(program) => Some(Arc::new(program)),
        Err(why) => {
            tracing::warn!(reason = %why, "a class of requests runs the guarded program: its own did not compile");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_class_waits_for_no_compilation_while_another_compiles() {
        let classes = ClassPrograms::default();
        classes.lock().insert(vec![1], Class::Compiling);
        // Another class arriving meanwhile runs the guarded program, and is not marked.
        assert!(classes.program(&Engine::new(), &[], &[2]).is_none());
        assert!(!classes.lock().contains_key(&vec![2]));
        // Once the compilation is done, the next request of that class compiles it (an
        // empty set of rules compiles to an empty program).
        classes.lock().insert(vec![1], Class::Ready(None));
        assert!(classes.program(&Engine::new(), &[], &[2]).is_some());
        assert_eq!(classes.len(), 2);
    }
}
