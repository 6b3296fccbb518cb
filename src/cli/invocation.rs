//! The name the binary was invoked by: `gangplank`, or `kubectl-gangplank`, the file name
//! kubectl looks for on PATH to run `kubectl gangplank ...` (its plugin convention, which krew
//! installs by). Both behave the same; as a plugin, help and usage say `kubectl gangplank`.
//!
//! Entry points: [`parse`] (main's argument parsing) and [`command`] (the clap definition as
//! invoked, for `completions` and `man`).

use std::ffi::OsStr;
use std::path::Path;

use clap::{CommandFactory, FromArgMatches};

use super::Cli;

/// The executable name of the kubectl plugin.
pub const PLUGIN_NAME: &str = "kubectl-gangplank";

/// How kubectl users type it.
const PLUGIN_USAGE: &str = "kubectl gangplank";

/// Whether `argv0` (a path, as the shell passed it) names the plugin; `.exe` is ignored.
pub fn is_plugin(argv0: Option<&OsStr>) -> bool {
    argv0
        .map(Path::new)
        .and_then(Path::file_stem)
        .is_some_and(|stem| stem == PLUGIN_NAME)
}

/// The clap definition of [`Cli`], named for the way this process was invoked.
pub fn command() -> clap::Command {
    command_for(std::env::args_os().next().as_deref())
}

/// The clap definition of [`Cli`] as invoked by `argv0`.
pub fn command_for(argv0: Option<&OsStr>) -> clap::Command {
    let cli = Cli::command();
    if is_plugin(argv0) {
        cli.name(PLUGIN_NAME).bin_name(PLUGIN_USAGE)
    } else {
        cli
    }
}

/// The parsed command line; on bad arguments, clap's message and exit code (2).
pub fn parse() -> Cli {
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_is_recognised_by_its_file_name_only() {
        assert!(is_plugin(Some(OsStr::new(
            "/usr/local/bin/kubectl-gangplank"
        ))));
        assert!(is_plugin(Some(OsStr::new("kubectl-gangplank.exe"))));
        assert!(!is_plugin(Some(OsStr::new(
            "/opt/kubectl-gangplank/gangplank"
        ))));
        assert!(!is_plugin(None));
    }

    #[test]
    fn the_plugin_usage_names_kubectl() {
        let mut cmd = command_for(Some(OsStr::new("kubectl-gangplank")));
        let usage = cmd.render_usage().to_string();
        assert!(usage.contains("kubectl gangplank"), "{usage}");
    }
}
