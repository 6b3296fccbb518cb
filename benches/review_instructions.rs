//! Instructions per review, for comparing engine and policy changes on a busy machine:
//! callgrind counts instructions, not seconds, so the figure does not move with the load
//! the other sessions put on the shared cores. `benches/instructions.sh JOB...` runs this
//! under callgrind twice (10 and 30 reviews) and prints the difference per review, so start
//! up (loading and compiling the policies) cancels out.
//!
//! Usage (what the script does): `review_instructions JOB.yaml N [POLICY_DIR] [--admission]`.
//! `--admission` counts what the two webhooks run per admission instead of one `review`:
//! `/mutate`'s patch of the job, then `/validate` of the object it produced, handed over
//! (the validation policies alone, see `admission::handoff`); `--admission-missed` the same
//! when the hand-off misses (`/validate` reviews the object in full).

use std::path::Path;

use gangplank::policy::PolicySet;
use gangplank::review::{self, Input};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    gangplank::no_library_backtraces();
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    // `cargo test --all-targets` and `cargo bench` run this without a job: one review of
    // the admission bench's job, so the tool is known to work.
    let job = args
        .first()
        .map_or("benches/data/pytorchjob-9.yaml", String::as_str);
    let Some(n) = args.get(1).map_or(Some(1), |n| n.parse::<usize>().ok()) else {
        eprintln!(
            "usage: review_instructions JOB.yaml N [POLICY_DIR] (see benches/instructions.sh)"
        );
        std::process::exit(2);
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = args.get(2).map_or(root.join("policies"), Into::into);
    let set = PolicySet::load(&dir).expect("policies load");
    let text = std::fs::read_to_string(root.join(job)).expect("job file reads");
    let job: serde_json::Value = yaml_serde::from_str(&text).expect("job parses");
    let input = Input::create(job, "default");
    let flag = |f: &str| std::env::args().any(|a| a == f);
    let (admission, missed) = (flag("--admission"), flag("--admission-missed"));
    // Class programs compile beside the requests: two rounds, each left to settle, so that
    // every counted review runs its class's program (the difference of two counts cancels
    // these rounds out).
    for _ in 0..2 {
        std::hint::black_box(review::review(&set, &input).expect("decides"));
        set.settle_class_programs(std::time::Duration::from_secs(600));
    }
    for _ in 0..n {
        if admission || missed {
            let (patched, _) = review::decide::patch(&set, &input).expect("patches");
            let mut validated = input.clone();
            validated.object = patched.mutated;
            let decision = if missed {
                review::review(&set, &validated)
            } else {
                review::decide::review_mutated(&set, &validated)
            };
            std::hint::black_box(decision.expect("decides"));
        } else {
            std::hint::black_box(review::review(&set, &input).expect("decides"));
        }
    }
}
