//! The CLI reference page of the book (docs/src/reference/cli.md), generated from the clap
//! definition: the help of the program and of every subcommand, as `--help` prints it.
//!
//! Entry point: [`markdown`]. The test below fails when the page no longer matches the code;
//! `UPDATE_DOCS=1 cargo test --lib cli::reference` writes it again (the convention of the
//! policy catalog's `UPDATE_DOCS=1 cargo test --test docs`).

use std::fmt::Write as _;

use clap::CommandFactory;

use super::Cli;

/// Where the page lives, relative to the repository root.
pub const PAGE: &str = "docs/src/reference/cli.md";

/// The whole page.
pub fn markdown() -> String {
    let mut root = Cli::command().term_width(100);
    root.build();
    let mut page = String::from(
        "# CLI reference\n\n\
         <!-- Generated from the clap definitions in src/cli/ by \
         `UPDATE_DOCS=1 cargo test --lib cli::reference`; do not edit. That test fails when \
         this page drifts from the code. -->\n\n\
         Every subcommand's `--help`. The same text is in the man pages (`gangplank man`) \
         and in the shell completions (`gangplank completions <shell>`). Installed as a \
         kubectl plugin (`kubectl-gangplank` on PATH), each command is also `kubectl gangplank \
         <subcommand>`.\n",
    );
    section(&mut page, &mut root);
    page
}

/// `cmd`'s help, then each visible subcommand's (but `help`), depth first.
fn section(page: &mut String, cmd: &mut clap::Command) {
    // Environment values would make the page depend on the shell it was generated in.
    let mut cmd = cmd.clone().mut_args(|arg| arg.hide_env_values(true));
    let title = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string();
    // clap indents the blank lines between paragraphs; the page keeps no trailing spaces.
    let help = cmd.render_long_help().to_string();
    let help: Vec<&str> = help.lines().map(str::trim_end).collect();
    let _ = write!(
        page,
        "\n## `{title}`\n\n```text\n{}\n```\n",
        help.join("\n").trim_end()
    );
    for sub in cmd.get_subcommands_mut() {
        if !sub.is_hide_set() && sub.get_name() != "help" {
            section(page, sub);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Unit tests run in the crate's root, where [`super::PAGE`] is relative to.
    #[test]
    fn the_cli_reference_page_matches_the_code() {
        let page = Path::new(super::PAGE);
        let generated = super::markdown();
        if std::env::var_os("UPDATE_DOCS").is_some() {
            let written = std::fs::write(page, &generated);
            assert!(written.is_ok(), "{}: {written:?}", page.display());
            return;
        }
        let committed = std::fs::read_to_string(page).unwrap_or_default();
        assert!(
            committed == generated,
            "{} does not match the CLI's clap definitions; regenerate it with \
             `UPDATE_DOCS=1 cargo test --lib cli::reference`",
            page.display()
        );
    }

    #[test]
    fn every_subcommand_has_a_section() {
        let page = super::markdown();
        for sub in ["check", "test", "serve", "completions", "man"] {
            assert!(page.contains(&format!("## `gangplank {sub}`")), "{sub}");
        }
        assert!(!page.contains("## `gangplank help`"));
    }
}
