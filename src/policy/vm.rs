//! The bytecode backend: the generated entry rules compiled into one regorus RVM program.
//!
//! Entry point: [`VmProgram::compile_rules`]. The RVM evaluates our policies 3–5× faster than
//! the tree-walking interpreter, but it supports a subset of Rego (no `with`, no
//! partial-object rules with constant keys). A set whose policies do not compile for the RVM
//! falls back to the interpreter, says why, and keeps working; the policy test suites run
//! every case on both backends and fail if they disagree.
//!
//! Each output rule is an entry point of its own, and each group of outputs a request needs
//! together (mutations; violations and warnings) is also gathered into one generated rule.
//! A request runs the gathered rule: one execution instead of one per policy, so the VM
//! resets its state once and helpers every policy calls (`lib.*`, `readable`, ...) are
//! computed once (BENCHMARKS.md "How it got here").

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use regorus::utils::limits::ExecutionTimerConfig;

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::program::Program;
use regorus::rvm::vm::VmError;
use regorus::rvm::RegoVM;
use regorus::{Engine, Value as RegoValue};

/// Wall-clock bound on one rule's evaluation: below the webhook's `timeoutSeconds` (5 s) and
/// equal to `serve --eval-timeout`'s default, so a runaway policy is stopped by the engine
/// rather than left running after the request has been refused.
pub const TIME_LIMIT: Duration = Duration::from_secs(2);

/// How many VM work units pass between clock reads: cheap, yet checks every few µs.
const TIME_CHECK_INTERVAL: u32 = 1_000;

/// The timer configuration both backends use.
pub fn time_limit() -> ExecutionTimerConfig {
    ExecutionTimerConfig {
        limit: TIME_LIMIT,
        check_interval: NonZeroU32::new(TIME_CHECK_INTERVAL).unwrap_or(NonZeroU32::MIN),
    }
}

/// Upper bound on VM instructions per evaluation. The largest shipped case (8 replica types,
/// several containers each) runs in well under 100,000; this leaves room for bigger jobs and
/// heavier custom policies while still stopping a runaway comprehension. The wall-clock
/// bound of a request is enforced separately by its caller.
const MAX_INSTRUCTIONS: usize = 10_000_000;

const ROOT_PACKAGE: &str = "gangplank_vm_root";

/// Guarded rules per generated chunk of a gathered group: as many as fit the VM's register
/// window with room to spare.
const GUARDS_PER_CHUNK: usize = 8;

/// The data key holding the set of rule indices a request skips (see
/// [`super::applicability`]); absent when it skips none.
pub const SKIP_KEY: &str = "gangplank_skip";

/// One rule of a gathered group: its full `data....` path, and the index the request's skip
/// set names it by, if it can be skipped at all (its policy has `applies_when`).
#[derive(Debug, Clone, Copy)]
pub struct GatheredRule<'a> {
    pub path: &'a str,
    pub guard: Option<usize>,
}

/// `all := [count([x | some x in <rule>]), ...]` over every output rule, and one gathered
/// rule per group: `g0 := [g0_0, g0_1, ...]` with `g0_1 := [v | not
/// data.gangplank_skip[<index>]; v := <rule>]` for each rule of the group that can be
/// skipped, `[v | v := <rule>]` for the others. The root is referenced, never run.
fn root_module(rules: &[&str], groups: &[Vec<GatheredRule>]) -> String {
    let mut refs: Vec<String> = rules
        .iter()
        .map(|r| format!("  count([x | some x in {r}])"))
        .collect();
    let mut gathered = String::new();
    for (g, group) in groups.iter().enumerate() {
        // `[v | v := r]` is `[]` when r is undefined and `[value]` otherwise: an undefined
        // rule must not make the whole array undefined. A skipped rule stops at the
        // lookup, before the VM enters it. Written inline, the guards of thirty rules
        // overflow the VM's 255 registers, so the group is gathered in chunks.
        let mut chunks = Vec::new();
        for (c, chunk) in group.chunks(GUARDS_PER_CHUNK).enumerate() {
            let items: Vec<String> = chunk
                .iter()
                .map(|GatheredRule { path, guard }| match guard {
                    Some(i) => format!("  [v | not data.{SKIP_KEY}[{i}]; v := {path}]"),
                    None => format!("  [v | v := {path}]"),
                })
                .collect();
            gathered.push_str(&format!("\ng{g}_{c} := [\n{}\n]\n", items.join(",\n")));
            chunks.push(format!("g{g}_{c}"));
        }
        let all = chunks.iter().skip(1).fold(
            chunks.first().cloned().unwrap_or_else(|| "[]".into()),
            |acc, c| format!("array.concat({acc}, {c})"),
        );
        gathered.push_str(&format!("\ng{g} := {all}\n"));
        refs.push(format!("  count(g{g})"));
    }
    format!(
        "package {ROOT_PACKAGE}\n\nimport rego.v1\n\nall := [\n{}\n]\n{gathered}",
        refs.join(",\n")
    )
}

/// One program with an entry point per output rule and per gathered group, plus the data
/// document it runs against.
///
/// regorus compiles what is reachable from the one entry rule it is given, so a generated
/// root rule refers to every output rule and group; each request then runs the entry points
/// it needs on a single VM.
#[derive(Debug, Clone)]
pub struct VmProgram {
    program: Arc<Program>,
    data: RegoValue,
}

impl VmProgram {
    /// Compiles the given rules (full `data....` paths) as the program's entry points, and
    /// each group of them as one more (run it with [`Vm::run_group`]). The error says which
    /// construct of which file the RVM does not support.
    pub fn compile_rules(
        engine: &mut Engine,
        rules: &[&str],
        groups: &[Vec<GatheredRule>],
    ) -> Result<VmProgram, String> {
        let mut with_root = engine.clone();
        with_root
            .add_policy("<gangplank vm root>".into(), root_module(rules, groups))
            .map_err(|e| e.to_string())?;
        let root = format!("data.{ROOT_PACKAGE}.all");
        let compiled = with_root
            .compile_with_entrypoint(&root.into())
            .map_err(|e| e.to_string())?;
        let group_entries: Vec<String> = (0..groups.len()).map(group_entry).collect();
        let entries: Vec<&str> = rules
            .iter()
            .copied()
            .chain(group_entries.iter().map(String::as_str))
            .collect();
        let program =
            Compiler::compile_from_policy(&compiled, &entries).map_err(|e| e.to_string())?;
        Ok(VmProgram {
            program,
            data: engine.get_data(),
        })
    }

    /// A VM loaded with the program, its data (with `cluster` as `data.cluster`, and the
    /// indices of the rules a gathered run skips as `data.gangplank_skip`) and `input`,
    /// ready to run entry points.
    pub fn vm(
        &self,
        input: &RegoValue,
        cluster: Option<&RegoValue>,
        skip: Option<RegoValue>,
    ) -> Result<Vm, String> {
        let mut vm = RegoVM::new();
        vm.set_max_instructions(MAX_INSTRUCTIONS);
        vm.set_execution_timer_config(Some(time_limit()));
        vm.load_program(self.program.clone());
        let mut data = self.data.clone();
        if cluster.is_some() || skip.is_some() {
            // Copies the top-level map (one key, `params`), not the documents under it.
            let map = data.as_object_mut().map_err(|e| e.to_string())?;
            if let Some(cluster) = cluster {
                map.insert(RegoValue::from("cluster"), cluster.clone());
            }
            if let Some(skip) = skip {
                map.insert(RegoValue::from(SKIP_KEY), skip);
            }
        }
        vm.set_data(data).map_err(|e| e.to_string())?;
        vm.set_input(input.clone());
        Ok(Vm {
            vm,
            program: self.program.clone(),
        })
    }
}

fn group_entry(i: usize) -> String {
    format!("data.{ROOT_PACKAGE}.g{i}")
}

/// A VM ready to run the program's entry points on one input.
pub struct Vm {
    vm: RegoVM,
    program: Arc<Program>,
}

/// Why a run failed, and where a limit (time or instructions) stopped it, if one did.
#[derive(Debug)]
pub struct RunError {
    pub message: String,
    /// The rule (`data.gangplank.policies.x.violation`, or a library function) and the
    /// source line whose instruction the limit stopped: a gathered run covers every policy,
    /// so the limit alone would not say which one looped.
    pub stopped_in: Option<(String, usize)>,
}

impl Vm {
    /// Runs one output rule.
    pub fn run(&mut self, rule: &str) -> Result<RegoValue, RunError> {
        self.vm
            .execute_entry_point_by_name(rule)
            .map_err(|e| self.run_error(&e))
    }

    /// Runs group `i` as one execution: one value per rule of the group, in order
    /// (`Undefined` for an undefined rule).
    pub fn run_group(&mut self, i: usize, len: usize) -> Result<Vec<RegoValue>, RunError> {
        let value = self.run(&group_entry(i))?;
        let malformed = |message: String| RunError {
            message,
            stopped_in: None,
        };
        let items = value.as_array().map_err(|e| malformed(e.to_string()))?;
        if items.len() != len {
            return Err(malformed(format!(
                "gathered {} outputs where {len} rules were compiled",
                items.len()
            )));
        }
        Ok(items
            .iter()
            .map(|item| match item.as_array() {
                Ok(one) => one.first().cloned().unwrap_or(RegoValue::Undefined),
                Err(_) => RegoValue::Undefined,
            })
            .collect())
    }

    fn run_error(&self, e: &VmError) -> RunError {
        let pc = match e {
            VmError::TimeLimitExceeded { pc, .. }
            | VmError::InstructionLimitExceeded { pc, .. } => Some(*pc),
            _ => None,
        };
        RunError {
            message: e.to_string(),
            stopped_in: pc.and_then(|pc| self.rule_at(pc)),
        }
    }

    /// The rule whose body holds instruction `pc`, and its source line. The compiler emits
    /// each rule body in one piece, so that is the rule with the last body start at or
    /// before `pc`. (The span's file cannot be used: regorus 0.14 numbers span sources in
    /// the order code was emitted but lists `Program::sources` in module order.)
    fn rule_at(&self, pc: usize) -> Option<(String, usize)> {
        let pc = u32::try_from(pc).ok()?;
        let rule = self
            .program
            .rule_infos
            .iter()
            .flat_map(|info| {
                info.definitions
                    .iter()
                    .flatten()
                    .map(move |start| (*start, info))
            })
            .filter(|(start, _)| *start <= pc)
            .max_by_key(|(start, _)| *start)
            .map(|(_, info)| info.name.clone())?;
        let line = self
            .program
            .instruction_spans
            .get(usize::try_from(pc).ok()?)
            .and_then(Option::as_ref)
            .map_or(0, |span| span.line);
        Some((rule, line))
    }
}
