//! Instructions per review, for comparing engine and policy changes on a busy machine:
//! callgrind counts instructions, not seconds, so the figure does not move with the load
//! the other sessions put on the shared cores. `benches/instructions.sh JOB...` runs this
//! under callgrind twice (10 and 30 reviews) and prints the difference per review, so start
//! up (loading and compiling the policies) cancels out.
//!
//! Usage (what the script does): `review_instructions JOB.yaml N [POLICY_DIR]`.

use std::path::Path;

use gangplank::policy::PolicySet;
use gangplank::review::{self, Input};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    gangplank::no_library_backtraces();
    let args: Vec<String> = std::env::args().collect();
    let (Some(job), Some(n)) = (
        args.get(1),
        args.get(2).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: review_instructions JOB.yaml N (see benches/instructions.sh)");
        std::process::exit(2);
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = args.get(3).map_or(root.join("policies"), Into::into);
    let set = PolicySet::load(&dir).expect("policies load");
    let text = std::fs::read_to_string(job).expect("job file reads");
    let job: serde_json::Value = yaml_serde::from_str(&text).expect("job parses");
    let input = Input::create(job, "default");
    for _ in 0..n {
        std::hint::black_box(review::review(&set, &input).expect("decides"));
    }
}
