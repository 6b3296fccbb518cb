//! `gangplank completions <shell>`: the shell completion script, generated from the clap
//! definition (clap_complete), so it always knows every subcommand and flag of this binary.

use clap::Args;
use clap_complete::Shell;

use super::invocation;
use crate::exit;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write the script for. Load it with, e.g., bash:
    /// `source <(gangplank completions bash)`; zsh: `gangplank completions zsh >
    /// "${fpath[1]}/_gangplank"`; fish: `gangplank completions fish >
    /// ~/.config/fish/completions/gangplank.fish`.
    #[arg(value_enum)]
    pub shell: Shell,
}

impl CompletionsArgs {
    pub fn run(self) -> u8 {
        let Self { shell } = self;
        let mut cmd = invocation::command();
        // The word the shell completes: the executable's name (`kubectl-gangplank` as a
        // plugin; kubectl completes its plugins itself).
        let name = cmd.get_name().to_string();
        let mut out = std::io::stdout().lock();
        clap_complete::generate(shell, &mut cmd, name, &mut out);
        exit::OK
    }
}
