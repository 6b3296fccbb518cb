//! The git questions a release asks: run git, and refuse a tree with uncommitted changes.
//!
//! Entry points: [`run`], [`require_clean_tree`]. A release command (`gangplank-release pin`,
//! `render`) writes files that claim to be this commit's; on a dirty tree that claim would be
//! false, so it refuses. Their `--check` modes write nothing and run on any tree.

/// Why git could not answer, or why the tree cannot be released from.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("git {args}: {stderr}")]
    Failed { args: String, stderr: String },
    #[error(
        "the tree has uncommitted changes, so what {command} writes cannot be said to be this \
         commit's: commit or stash them first:\n{changes}"
    )]
    Dirty {
        command: &'static str,
        changes: String,
    },
}

/// git's stdout for `args`, run in the current directory.
pub fn run(args: &[&str]) -> Result<String, GitError> {
    let out = std::process::Command::new("git")
        .args(args)
        .output()
        .map_err(GitError::Spawn)?;
    if !out.status.success() {
        return Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Ok when no tracked file has uncommitted changes (untracked files do not count: they are
/// no input of a release); `command` names the refusing command in the error.
pub fn require_clean_tree(command: &'static str) -> Result<(), GitError> {
    let changes = run(&["status", "--porcelain", "--untracked-files=no"])?;
    if changes.trim().is_empty() {
        Ok(())
    } else {
        Err(GitError::Dirty {
            command,
            changes: changes.trim_end().to_string(),
        })
    }
}
