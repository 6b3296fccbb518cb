//! The shipped policies' own suites (`policies/tests/`), one libtest trial per Rego test rule
//! and per YAML case, so `cargo test` names exactly what failed.

use std::path::Path;
use std::sync::Arc;

use gangplank::suite::Suite;
use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let suite = match Suite::discover(&dir) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("cannot load the policy suites in {}: {e}", dir.display());
            std::process::exit(101);
        }
    };
    assert!(
        !suite.tests().is_empty(),
        "no policy tests found under {}/tests",
        dir.display()
    );
    let trials = suite
        .tests()
        .iter()
        .map(|test| {
            let suite = Arc::clone(&suite);
            let test = test.clone();
            Trial::test(test.name(suite.root()), move || {
                suite.run(&test).map_err(Failed::from)
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
