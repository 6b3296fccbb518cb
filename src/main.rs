use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = gangplank::cli::Cli::parse();
    gangplank::cli::init_tracing(&cli.log_format);
    cli.run()
}
