//! `fn main` of the end-to-end suites: one libtest trial per async test, every trial reported
//! as *ignored* — after one line saying why — when a control plane cannot start here (no
//! test binaries, no upstream CRDs) or the suite's own requirement is missing. A skipped
//! suite never shows up as passed.
//!
//! Use it through [`e2e_suite!`](crate::e2e_suite): `e2e_suite!("e2e_kubectl", [test_a,
//! test_b]);` in a test target declared with `harness = false` in Cargo.toml.

use std::future::Future;
use std::pin::Pin;

use libtest_mimic::{Arguments, Trial};

pub type Test = fn() -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs `tests`, or ignores them all when `requirement` (checked after the control plane's
/// own) says why they cannot run.
pub fn run(
    suite: &str,
    requirement: fn() -> Result<(), String>,
    tests: Vec<(&'static str, Test)>,
) -> ! {
    let args = Arguments::from_args();
    let missing = super::assets::usable()
        .map(drop)
        .and_then(|()| requirement())
        .err();
    if let Some(why) = &missing {
        super::skip(&format!("{suite}: every test ignored: {why}"));
    }
    libtest_mimic::run(&args, trials(tests, missing.is_some())).exit()
}

/// One libtest trial per async test, each on a runtime of its own; all ignored when
/// `ignored` (the caller has printed why).
pub fn trials(tests: Vec<(&'static str, Test)>, ignored: bool) -> Vec<Trial> {
    tests
        .into_iter()
        .map(|(name, test)| {
            Trial::test(name, move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(test());
                Ok(())
            })
            .with_ignored_flag(ignored)
        })
        .collect()
}

/// No requirement beyond the control plane's.
pub fn none() -> Result<(), String> {
    Ok(())
}

/// `fn main` for an end-to-end suite of `async fn` tests (see the module doc). An optional
/// third argument names a `fn() -> Result<(), String>` requirement of the suite's own.
#[macro_export]
macro_rules! e2e_suite {
    ($suite:literal, [$($test:ident),* $(,)?]) => {
        $crate::e2e_suite!($suite, [$($test),*], support::harness::none);
    };
    ($suite:literal, [$($test:ident),* $(,)?], $requirement:path) => {
        fn main() {
            let tests: Vec<(&'static str, support::harness::Test)> =
                vec![$((stringify!($test), || Box::pin($test()))),*];
            support::harness::run($suite, $requirement, tests)
        }
    };
}
