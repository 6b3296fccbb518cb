//! `gangplank man`: man pages generated from the clap definition (clap_mangen): `gangplank(1)`
//! and one page per subcommand, `gangplank-<subcommand>(1)`, as git names its own.

use std::path::{Path, PathBuf};

use clap::Args;

use super::invocation;
use crate::exit;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page (`gangplank.1`, `gangplank-check.1`, ...) into this directory
    /// (created), e.g. /usr/local/share/man/man1; without it, the main page goes to stdout
    /// (`gangplank man | man -l -`).
    #[arg(long, value_name = "DIR", env = "GANGPLANK_MAN_DIR")]
    pub out_dir: Option<PathBuf>,
}

impl ManArgs {
    pub fn run(self) -> u8 {
        let Self { out_dir } = self;
        let result = match out_dir {
            None => render(invocation::command())
                .and_then(|page| std::io::Write::write_all(&mut std::io::stdout(), &page)),
            Some(dir) => write_pages(&dir),
        };
        match result {
            Ok(()) => exit::OK,
            Err(e) => {
                eprintln!("error: man: {e}");
                exit::UNREADABLE
            }
        }
    }
}

/// Every page into `dir`, each path printed on stderr.
fn write_pages(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    for page in pages(invocation::command()) {
        let path = page
            .generate_to(dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// The program's page, then one per visible subcommand, depth first: clap names them
/// `gangplank-check` and so on (its display names), and so do the pages' files.
pub fn pages(root: clap::Command) -> Vec<clap_mangen::Man> {
    fn collect(cmd: clap::Command, out: &mut Vec<clap_mangen::Man>) {
        let subcommands: Vec<clap::Command> = cmd
            .get_subcommands()
            .filter(|sub| !sub.is_hide_set())
            .cloned()
            .collect();
        out.push(clap_mangen::Man::new(cmd));
        for sub in subcommands {
            collect(sub, out);
        }
    }
    // Building names the subcommands and copies the global flags (--log-format) into them.
    let mut root = root.disable_help_subcommand(true);
    root.build();
    let mut out = Vec::new();
    collect(root, &mut out);
    out
}

/// One page in roff.
pub fn render(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut page)?;
    Ok(page)
}
