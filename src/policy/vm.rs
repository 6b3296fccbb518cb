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

/// Upper bound on VM instructions per evaluation. The largest shipped case (8 replica types,
/// several containers each) runs in well under 100,000; this leaves room for bigger jobs and
/// heavier custom policies while still stopping a runaway comprehension. The wall-clock
/// bound of a request is enforced separately by its caller.
const MAX_INSTRUCTIONS: usize = 10_000_000;

/// One compiled program per output rule, plus the data document they run against.
///
/// One program per rule rather than one program with many entry points: regorus compiles
/// what is reachable from the entry rule it is given, and entry points outside that reach
/// evaluated to nothing (caught by the suites' differential check against the interpreter).
#[derive(Debug, Clone)]
pub struct VmProgram {
    programs: Vec<(String, Arc<Program>)>,
    data: RegoValue,
}

impl VmProgram {
    /// Compiles the given rules (full `data....` paths) as the program's entry points. The
    /// error says which construct of which file the RVM does not support.
    pub fn compile_rules(engine: &mut Engine, rules: &[&str]) -> Result<VmProgram, String> {
        let mut programs = Vec::with_capacity(rules.len());
        for rule in rules {
            let compiled = engine
                .compile_with_entrypoint(&(*rule).into())
                .map_err(|e| e.to_string())?;
            let program =
                Compiler::compile_from_policy(&compiled, &[rule]).map_err(|e| e.to_string())?;
            programs.push((rule.to_string(), program));
        }
        Ok(VmProgram {
            programs,
            data: engine.get_data(),
        })
    }

    /// Evaluates one output rule on `input` in a fresh VM (a VM costs a few hundred
    /// nanoseconds to set up, so pooling would buy nothing measurable).
    pub fn eval(&self, rule: &str, input: &RegoValue) -> Result<RegoValue, String> {
        let program = self
            .programs
            .iter()
            .find(|(r, _)| r == rule)
            .map(|(_, p)| p.clone())
            .ok_or_else(|| format!("{rule} is not compiled"))?;
        let mut vm = RegoVM::new();
        vm.set_max_instructions(MAX_INSTRUCTIONS);
        vm.load_program(program);
        vm.set_data(self.data.clone()).map_err(|e| e.to_string())?;
        vm.set_input(input.clone());
        vm.execute().map_err(|e| e.to_string())
    }
}
