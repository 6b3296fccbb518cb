//! One gathered program per applicability class: the set of rules a request skips.
//!
//! The set's own program gathers every output rule behind a skip guard (see
//! [`super::vm`]); a request that skips rules still pays for each guard and for entering
//! the skipped rules' comprehensions, about 4 % of a review of the 1 + 8 job with no cluster
//! inventory (BENCHMARKS.md "Evaluating only what applies, once"). So the first request of
//! each class starts the compilation of a program that gathers only the rules it runs, on a
//! thread of its own, and the requests of the class that come after it is ready run that
//! one. Compiling beside the requests keeps the 25 ms off the request that found the class,
//! and one thread compiling at a time keeps the memory of a burst of new classes to one
//! compilation: the bench mix peaked at 64.8 MiB with compilations on the request threads
//! (one at a time) and 74.4 MiB with them in parallel, against 54–56 MiB now (BENCHMARKS.md).
//! A class is compiled once per policy load (a reload starts a new set, with an empty
//! cache); the cache holds at most [`MAX_CLASSES`] classes, past which requests run the
//! guarded program, which gives the same answers.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use regorus::Engine;

use super::rules::{Group, RuleRef};
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
    /// Skipped rule indices (sorted) → the class's program, or why there is none yet; and
    /// the signal that a compilation ended.
    compiled: Arc<(Mutex<Classes>, Condvar)>,
}

/// Skipped rule indices (sorted) → what there is of the class's program.
type Classes = HashMap<Vec<usize>, Class>;

#[derive(Debug, Clone)]
enum Class {
    /// The class's program is compiling on a thread of its own; requests do not wait for it.
    Compiling,
    /// The program, or `None` when the class did not compile.
    Ready(Option<Arc<VmProgram>>),
}

impl ClassPrograms {
    /// The program of the class that skips `skipped` (sorted rule indices); `None`: run the
    /// guarded program. The first request of a new class starts its compilation on a thread
    /// of its own (some 25 ms) and does not wait for it; neither do the requests that arrive
    /// meanwhile. One class compiles at a time, so a burst of new classes (a server's first
    /// seconds) holds one compilation's memory at once, on one thread, and the next request
    /// of a class left out starts it.
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
                None if compiling(&compiled) => return None,
                None => compiled.insert(skipped.to_vec(), Class::Compiling),
            };
        }
        let (classes, engine, rules, key) = (
            self.clone(),
            engine.clone(),
            rules.to_vec(),
            skipped.to_vec(),
        );
        let started = std::thread::Builder::new()
            .name("gangplank-class".into())
            .spawn(move || {
                // A compiler panic must not leave the class compiling for good: no other
                // class would ever compile.
                let compiled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    compile(&engine, &rules, &key)
                }));
                let program = compiled.unwrap_or_else(|_| {
                    tracing::warn!(
                        "a class of requests runs the guarded program: compiling its own panicked"
                    );
                    None
                });
                classes.lock().insert(key, Class::Ready(program));
                classes.compiled.1.notify_all();
            });
        if let Err(e) = started {
            tracing::warn!(error = %e, "a class of requests runs the guarded program: no thread to compile its own");
            self.lock().insert(skipped.to_vec(), Class::Ready(None));
        }
        None
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

    /// Waits until no class is compiling, at most `limit`; whether none is. For tests and
    /// benchmarks that count what a class program costs: requests never wait.
    pub fn settle(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut compiled = self.lock();
        loop {
            if !compiling(&compiled) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            compiled = match self.compiled.1.wait_timeout(compiled, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Classes> {
        // A panic while holding the lock leaves a map that is still whole.
        self.compiled
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether a class program is compiling (on its thread).
fn compiling(classes: &Classes) -> bool {
    classes.values().any(|c| matches!(c, Class::Compiling))
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
        // Once the compilation is done, the next request of that class starts its own (an
        // empty set of rules compiles to an empty program), and does not wait for it.
        classes.lock().insert(vec![1], Class::Ready(None));
        assert!(classes.program(&Engine::new(), &[], &[2]).is_none());
        assert!(classes.settle(Duration::from_secs(60)), "compiled");
        assert!(classes.program(&Engine::new(), &[], &[2]).is_some());
        assert_eq!(classes.len(), 2);
    }
}
