//! The bytecode backend: the generated entry rules compiled into one regorus RVM program.
//!
//! Entry point: [`VmProgram::compile`]. The RVM evaluates our policies 3–5× faster than the
//! tree-walking interpreter, but it supports a subset of Rego (no `with`, no partial-object
//! rules with constant keys). A set whose policies do not compile for the RVM falls back to
//! the interpreter, says why, and keeps working; the policy test suites run every case on
//! both backends and fail if they disagree.

use std::sync::Arc;

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::program::Program;
use regorus::rvm::RegoVM;
use regorus::{Engine, Value as RegoValue};

use super::set::{MUTATIONS_RULE, VALIDATIONS_RULE};

/// Upper bound on VM instructions per evaluation. The largest shipped case (8 replica types,
/// several containers each) runs in well under 100,000; this leaves room for bigger jobs and
/// heavier custom policies while still stopping a runaway comprehension. The wall-clock
/// bound of a request is enforced separately by its caller.
const MAX_INSTRUCTIONS: usize = 10_000_000;

/// A compiled program plus the data document it runs against.
#[derive(Debug, Clone)]
pub struct VmProgram {
    program: Arc<Program>,
    data: RegoValue,
}

impl VmProgram {
    /// Compiles both entry rules of a prepared engine. The error says which construct of
    /// which file the RVM does not support.
    pub fn compile(engine: &mut Engine) -> Result<VmProgram, String> {
        VmProgram::compile_rules(engine, &[MUTATIONS_RULE, VALIDATIONS_RULE])
    }

    /// Compiles the given rules (full `data....` paths) as the program's entry points.
    pub fn compile_rules(engine: &mut Engine, rules: &[&str]) -> Result<VmProgram, String> {
        let first = rules.first().ok_or("no entry rules")?;
        let compiled = engine
            .compile_with_entrypoint(&(*first).into())
            .map_err(|e| e.to_string())?;
        let program = Compiler::compile_from_policy(&compiled, rules).map_err(|e| e.to_string())?;
        Ok(VmProgram {
            program,
            data: engine.get_data(),
        })
    }

    /// Evaluates one entry rule on `input` in a fresh VM (a VM costs a few hundred
    /// nanoseconds to set up, so pooling would buy nothing measurable).
    pub fn eval(&self, entry: &str, input: &RegoValue) -> Result<RegoValue, String> {
        let mut vm = RegoVM::new();
        vm.set_max_instructions(MAX_INSTRUCTIONS);
        vm.load_program(self.program.clone());
        vm.set_data(self.data.clone()).map_err(|e| e.to_string())?;
        vm.set_input(input.clone());
        vm.execute_entry_point_by_name(entry)
            .map_err(|e| e.to_string())
    }
}
