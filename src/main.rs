use std::process::ExitCode;

// Policy evaluation allocates and frees many small values per request; mimalloc serves
// that pattern about 15 % faster than glibc malloc (benches/admission.rs, BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gangplank::no_library_backtraces();
    // One crypto provider for every TLS user in the process, installed before any is built
    // (reference: rust-stack.md §1). Err only means one is installed already.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    // As `gangplank` or as the kubectl plugin `kubectl-gangplank` (src/cli/invocation.rs).
    let cli = gangplank::cli::invocation::parse();
    gangplank::cli::init_tracing(&cli.log_format, cli.command.default_log_filter());
    cli.run()
}
