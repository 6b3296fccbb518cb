//! The `gangplank` command line: one module per subcommand, each with its own `run`.

pub mod check;
pub mod report;
pub mod test;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Admission policies and lifecycle control for Kubeflow distributed training jobs.
#[derive(Debug, Parser)]
#[command(name = "gangplank", version, about)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(
        long,
        value_enum,
        default_value = "text",
        env = "GANGPLANK_LOG_FORMAT",
        global = true
    )]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Dry-run manifests through the policies: verdicts, violations and the exact patch.
    Check(check::CheckArgs),
    /// Run policy test suites: Rego `test_*` rules and YAML case files.
    Test(test::TestArgs),
}

/// Exit codes shared by the subcommands.
pub mod exit {
    /// Everything allowed / every test passed.
    pub const OK: u8 = 0;
    /// A job was denied / a test failed.
    pub const FAILED: u8 = 1;
    /// Input or policies could not be read.
    pub const UNREADABLE: u8 = 2;
}

impl Cli {
    pub fn run(self) -> ExitCode {
        let Self {
            log_format: _,
            command,
        } = self;
        let code = match command {
            Command::Check(args) => args.run(),
            Command::Test(args) => args.run(),
        };
        ExitCode::from(code)
    }
}

/// Logs go to stderr so that `check -o yaml` output can be piped into kubectl.
pub fn init_tracing(format: &LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
