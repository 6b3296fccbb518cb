//! The bytecode backend: the generated entry rules compiled into one regorus RVM program.
//!
//! Entry point: [`VmProgram::compile`]. The RVM evaluates our policies 3–5× faster than the
//! tree-walking interpreter, but it supports a subset of Rego (no `with`, no partial-object
//! rules with constant keys). A set whose policies do not compile for the RVM falls back to
//! the interpreter, says why, and keeps working; the policy test suites run every case on
//! both backends and fail if they disagree.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use regorus::utils::limits::ExecutionTimerConfig;

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::program::Program;
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

const ROOT_RULE: &str = "data.gangplank_vm_root.all";

/// `all := [count([x | some x in <rule>]), ...]` over every output rule: referenced, never run.
fn root_module(rules: &[&str]) -> String {
    let refs: Vec<String> = rules
        .iter()
        .map(|r| format!("  count([x | some x in {r}])"))
        .collect();
    format!(
        "package gangplank_vm_root\n\nimport rego.v1\n\nall := [\n{}\n]\n",
        refs.join(",\n")
    )
}

/// One program with an entry point per output rule, plus the data document it runs against.
///
/// regorus compiles what is reachable from the one entry rule it is given, so a generated
/// root rule refers to every output rule; each request then runs the entry points it needs
/// on a single VM.
#[derive(Debug, Clone)]
pub struct VmProgram {
    program: Arc<Program>,
    data: RegoValue,
}

impl VmProgram {
    /// Compiles the given rules (full `data....` paths) as the program's entry points. The
    /// error says which construct of which file the RVM does not support.
    pub fn compile_rules(engine: &mut Engine, rules: &[&str]) -> Result<VmProgram, String> {
        let mut with_root = engine.clone();
        with_root
            .add_policy("<gangplank vm root>".into(), root_module(rules))
            .map_err(|e| e.to_string())?;
        let compiled = with_root
            .compile_with_entrypoint(&ROOT_RULE.into())
            .map_err(|e| e.to_string())?;
        let program = Compiler::compile_from_policy(&compiled, rules).map_err(|e| e.to_string())?;
        Ok(VmProgram {
            program,
            data: engine.get_data(),
        })
    }

    /// A VM loaded with the program, its data (with `cluster` as `data.cluster`) and
    /// `input`, ready to run entry points.
    pub fn vm(&self, input: &RegoValue, cluster: Option<&RegoValue>) -> Result<RegoVM, String> {
        let mut vm = RegoVM::new();
        vm.set_max_instructions(MAX_INSTRUCTIONS);
        vm.set_execution_timer_config(Some(time_limit()));
        vm.load_program(self.program.clone());
        let mut data = self.data.clone();
        if let Some(cluster) = cluster {
            // Copies the top-level map (one key, `params`), not the documents under it.
            let map = data.as_object_mut().map_err(|e| e.to_string())?;
            map.insert(RegoValue::from("cluster"), cluster.clone());
        }
        vm.set_data(data).map_err(|e| e.to_string())?;
        vm.set_input(input.clone());
        Ok(vm)
    }
}
