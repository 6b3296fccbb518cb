//! `gangplank test`: run policy test suites.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Policy directory; its tests/ holds *.rego test modules and *.yaml case files.
    #[arg(default_value = "policies", env = "GANGPLANK_POLICIES")]
    pub dir: PathBuf,
    /// Also write a JUnit XML report here.
    #[arg(long, env = "GANGPLANK_JUNIT")]
    pub junit: Option<PathBuf>,
}

impl TestArgs {
    pub fn run(self) -> u8 {
        let Self { dir, junit } = self;
        let _ = (dir, junit);
        2
    }
}
