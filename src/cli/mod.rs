//! The `gangplank` command line: one module per subcommand, each with its own `run`.

pub mod audit;
pub mod bench;
pub mod certs;
pub mod check;
pub mod completions;
pub mod controller;
pub mod crds;
pub mod explain;
pub mod invocation;
pub mod man;
pub mod policy_flags;
pub mod reference;
pub mod report;
pub mod serve;
pub mod shutdown;
pub mod test;
pub mod version;

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
    /// Serve the admission webhooks (POST /mutate, /validate) over HTTPS, reloading policies
    /// and certificates when their files change.
    Serve(Box<serve::ServeArgs>),
    /// Write a CA and a serving certificate for the webhook Service; print the caBundle.
    Certs(certs::CertsArgs),
    /// Load-test the HTTPS webhooks: reviews/s, p50, p99 and server RSS per concurrency.
    Bench(bench::BenchArgs),
    /// Run the lifecycle controller: pods, Services, PodGroups, status, restarts, deadlines
    /// and the gang watchdog for the kubeflow.org/v1 training kinds.
    Controller(controller::ControllerArgs),
    /// Write the CRDs of the training kinds the controller runs (generated from src/crd/).
    Crds(crds::CrdsArgs),
    /// Judge every existing training job (in the cluster or a snapshot) by the current
    /// policies: a table, JSON or PolicyReports; exit 1 when a job would be denied today.
    Audit(audit::AuditArgs),
    /// Write a shell completion script for this binary to stdout.
    Completions(completions::CompletionsArgs),
    /// Write man pages: the program's to stdout, or all of them (one per subcommand) into
    /// a directory.
    Man(man::ManArgs),
    /// Print the version, source revision, image digest and (with --policies) the
    /// policy-set hash that `serve` exports for a directory.
    Version(version::VersionArgs),
}

impl Command {
    /// Log filter when RUST_LOG is unset: the server logs each decision, the one-shot
    /// commands only problems.
    pub fn default_log_filter(&self) -> &'static str {
        match self {
            Command::Serve(_) | Command::Controller(_) => "info",
            Command::Check(_)
            | Command::Test(_)
            | Command::Certs(_)
            | Command::Bench(_)
            | Command::Crds(_)
            | Command::Audit(_)
            | Command::Completions(_)
            | Command::Man(_)
            | Command::Version(_) => "warn",
        }
    }
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
            Command::Serve(args) => (*args).run(),
            Command::Certs(args) => args.run(),
            Command::Bench(args) => args.run(),
            Command::Crds(args) => args.run(),
            Command::Controller(args) => args.run(),
            Command::Audit(args) => args.run(),
            Command::Completions(args) => args.run(),
            Command::Man(args) => args.run(),
            Command::Version(args) => args.run(),
        };
        ExitCode::from(code)
    }
}

/// Logs go to stderr so that `check -o yaml` output can be piped into kubectl. `RUST_LOG`
/// overrides `default_filter`.
pub fn init_tracing(format: &LogFormat, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// `inventory` as the fixed `data.cluster` of `check` or `audit`, with each object it left
/// out as unreadable printed as a note on stderr (`flag` names where it came from).
pub fn fixed_inventory(
    inventory: &crate::cluster::Inventory,
    flag: &str,
) -> crate::cluster::ClusterHandle {
    let handle = crate::cluster::ClusterHandle::fixed(inventory);
    for problem in handle.current().map(|d| d.problems()).unwrap_or_default() {
        eprintln!("note: {flag}: {problem}");
    }
    handle
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
