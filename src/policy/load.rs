//! Reading a policy directory: `*.rego` policies, `lib/` helpers, `params.yaml`,
//! `exceptions/*.yaml`, `tests/`.
//!
//! Entry point: [`PolicySources::read_dir`]. Reading only gathers text; compiling it into a
//! [`PolicySet`](super::PolicySet) is a separate step so that a test runner can add test
//! modules or override parameters and compile again.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::LoadError;
use super::exceptions::{self, ExceptionFile};
use super::params::{Action, ParamsFile};
use super::set_hash::SetHasher;

/// Name of the parameters file inside a policy directory.
pub const PARAMS_FILE: &str = "params.yaml";

/// How the caller (a flag of `serve`, `check`, `audit`) adjusts what a directory says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// `--default-action`: the action of every policy whose params.yaml entry sets none;
    /// above params.yaml's `defaultAction`, below a policy's own `action` there (so a
    /// policy promoted in params.yaml stays promoted whatever the deployment says).
    pub default_action: Option<Action>,
}

/// One Rego file and its text.
#[derive(Debug, Clone)]
pub struct RegoFile {
    pub path: PathBuf,
    pub text: String,
}

/// A policy file: `<name>.rego` declaring `package gangplank.policies.<name>`.
#[derive(Debug, Clone)]
pub struct PolicyFile {
    pub name: String,
    pub file: RegoFile,
}

/// Everything a policy directory holds, read but not compiled.
#[derive(Debug, Clone)]
pub struct PolicySources {
    pub dir: PathBuf,
    pub policies: Vec<PolicyFile>,
    /// Helper modules under `lib/`: shared functions, no verdicts of their own.
    pub libraries: Vec<RegoFile>,
    /// Extra modules compiled alongside (Rego test files); never part of a verdict.
    pub extra: Vec<RegoFile>,
    pub params: ParamsFile,
    /// The policy-set hash of the files read (sha256 hex, [`super::set_hash`]).
    pub hash: String,
    /// `exceptions/*.yaml`, read but not checked (compiling checks them).
    pub exceptions: Vec<ExceptionFile>,
    pub options: LoadOptions,
}

impl PolicySources {
    /// Reads `dir`: its top-level `*.rego` files are policies, `lib/**/*.rego` helpers,
    /// `params.yaml` the parameters, `exceptions/*.yaml` the exceptions. `tests/` is left
    /// to the test runner.
    pub fn read_dir(dir: &Path) -> Result<PolicySources, LoadError> {
        if !dir.is_dir() {
            return Err(LoadError::NotADirectory {
                dir: dir.to_path_buf(),
            });
        }
        let mut policies = Vec::new();
        for path in rego_files(dir, false)? {
            let name = policy_name(&path)?;
            policies.push(PolicyFile {
                name,
                file: read_rego(path)?,
            });
        }
        if policies.is_empty() {
            return Err(LoadError::NoPolicies {
                dir: dir.to_path_buf(),
            });
        }
        let lib = dir.join("lib");
        let libraries = if lib.is_dir() {
            rego_files(&lib, true)?
                .into_iter()
                .map(read_rego)
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let params_path = dir.join(PARAMS_FILE);
        let params_text = if params_path.is_file() {
            Some(read_text(&params_path)?)
        } else {
            None
        };
        let params = match &params_text {
            Some(text) => ParamsFile::parse(text, &params_path.display().to_string())
                .map_err(|message| LoadError::Params { message })?,
            None => ParamsFile::default(),
        };
        let mut hasher = SetHasher::default();
        let rego = policies.iter().map(|p| &p.file).chain(&libraries);
        for file in rego {
            hasher.add(dir, &file.path, file.text.as_bytes());
        }
        if let Some(text) = &params_text {
            hasher.add(dir, &params_path, text.as_bytes());
        }
        let exceptions = exceptions::read_dir(dir)?;
        for file in &exceptions {
            hasher.add(dir, &file.path, file.text.as_bytes());
        }
        Ok(PolicySources {
            dir: dir.to_path_buf(),
            policies,
            libraries,
            extra: Vec::new(),
            params,
            hash: hasher.finish(),
            exceptions,
            options: LoadOptions::default(),
        })
    }
}

/// `*.rego` files of a directory in name order, optionally recursing.
pub fn rego_files(dir: &Path, recursive: bool) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).map_err(|source| LoadError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let path = entry
            .map_err(|source| LoadError::Io {
                path: dir.to_path_buf(),
                source,
            })?
            .path();
        if path.is_dir() {
            if recursive {
                out.extend(rego_files(&path, true)?);
            }
        } else if path.extension().is_some_and(|e| e == "rego") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

pub fn read_rego(path: PathBuf) -> Result<RegoFile, LoadError> {
    let text = read_text(&path)?;
    Ok(RegoFile { path, text })
}

fn read_text(path: &Path) -> Result<String, LoadError> {
    fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A policy is named after its file; the name must be a Rego identifier because it is
/// also the last segment of the package.
fn policy_name(path: &Path) -> Result<String, LoadError> {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let valid = stem
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && stem
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if valid {
        Ok(stem.to_string())
    } else {
        Err(LoadError::BadPolicyName {
            path: path.to_path_buf(),
        })
    }
}
