//! The floor regorus's bytecode VM sets under our evaluation path, measured without any of
//! gangplank's code: what a VM costs to set up for one request, what one entry-point call
//! costs when the rule does nothing, what one call of a helper function costs, and what one
//! iteration of `some x in` costs. BENCHMARKS.md turns these into the cost model that
//! policies/README.md "Performance" states. Command: `cargo bench --bench vm_call_path`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, Criterion};
use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::program::Program;
use regorus::rvm::RegoVM;
use regorus::{Engine, Value};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const POLICY: &str = r#"
package bench
import rego.v1

nothing contains x if { input.kind == "Nope"; x := 1 }

f(x) := x + 1

one_call contains y if { y := f(1) }

loop contains x if { some x in input.items; x < 0 }

loop_call contains x if { some x in input.items; f(x) < 0 }

# Anti-patterns of policies/README.md "Performance", each beside what to write instead.
objects_in_set := {o | some o in input.objects}
objects_in_list := [o | some o in input.objects]
by_regex := [s | some s in input.strings; regex.match(`^img-[0-9]+$`, s)]
by_builtin := [s | some s in input.strings; startswith(s, "img-")]

root := [count(nothing), count(one_call), count(loop), count(loop_call), count(objects_in_set), count(objects_in_list), count(by_regex), count(by_builtin)]
"#;

const ENTRIES: [&str; 8] = [
    "data.bench.nothing",
    "data.bench.one_call",
    "data.bench.loop",
    "data.bench.loop_call",
    "data.bench.objects_in_set",
    "data.bench.objects_in_list",
    "data.bench.by_regex",
    "data.bench.by_builtin",
];

fn program() -> Arc<Program> {
    let mut engine = Engine::new();
    engine
        .add_policy("bench.rego".into(), POLICY.into())
        .expect("policy parses");
    let compiled = engine
        .compile_with_entrypoint(&"data.bench.root".into())
        .expect("compiles");
    Compiler::compile_from_policy(&compiled, &ENTRIES).expect("compiles for the VM")
}

fn input(items: usize) -> Value {
    // 20 container-like objects of 20 fields each, and 20 image-like strings.
    let object = |i: usize| -> serde_json::Value {
        (0..20)
            .map(|f| {
                (
                    format!("field{f}"),
                    serde_json::json!(format!("value-{i}-{f}")),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let json = serde_json::json!({
        "kind": "PyTorchJob",
        "items": (0..items).collect::<Vec<_>>(),
        "objects": (0..20).map(object).collect::<Vec<_>>(),
        "strings": (0..20).map(|i| format!("img-{i}")).collect::<Vec<_>>(),
    });
    Value::from_json_str(&json.to_string()).expect("input")
}

fn vm(program: &Arc<Program>, input: &Value) -> RegoVM {
    let mut vm = RegoVM::new();
    vm.load_program(program.clone());
    vm.set_data(Value::new_object()).expect("data");
    vm.set_input(input.clone());
    vm
}

fn vm_call_path(c: &mut Criterion) {
    let program = program();
    let small = input(0);
    let hundred = input(100);
    let mut g = c.benchmark_group("vm call path");
    g.bench_function("set up a VM (new, load, data, input)", |b| {
        b.iter(|| vm(black_box(&program), black_box(&small)))
    });
    let mut run = |name: &str, entry: &'static str, input: &Value| {
        let mut vm = vm(&program, input);
        g.bench_function(name, |b| {
            b.iter(|| vm.execute_entry_point_by_name(black_box(entry)))
        });
    };
    run("entry point, empty rule", ENTRIES[0], &small);
    run("entry point, one function call", ENTRIES[1], &small);
    run("entry point, 100 iterations", ENTRIES[2], &hundred);
    run(
        "entry point, 100 iterations with a call each",
        ENTRIES[3],
        &hundred,
    );
    run("20 objects collected into a set", ENTRIES[4], &small);
    run("20 objects collected into a list", ENTRIES[5], &small);
    run("regex.match on 20 strings", ENTRIES[6], &small);
    run("startswith on 20 strings", ENTRIES[7], &small);
    g.finish();
}

criterion_group!(benches, vm_call_path);

fn main() {
    gangplank::no_library_backtraces();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
