//! `gangplank crds`: writes the CRDs of the training kinds the controller runs, generated
//! from the Rust types in `src/crd/`, one YAML file per CRD (`crds/` in the repository; the
//! v1 MPIJob's in its subdirectory `mpijob-v1/`).

use std::path::{Path, PathBuf};

use clap::Args;

use super::report::error_chain;
use crate::crd::{self, CrdFile};
use crate::exit;

#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Directory to write the CRD files into (created if missing, with the `mpijob-v1`
    /// subdirectory); existing files of the same name are replaced.
    #[arg(long, default_value = "crds", env = "GANGPLANK_CRDS_OUT")]
    pub out: PathBuf,
}

impl CrdsArgs {
    /// Writes every CRD and names each file written on stderr.
    pub fn run(self) -> u8 {
        let Self { out } = self;
        let files = match crd::generate() {
            Ok(files) => files,
            Err(e) => {
                eprintln!("error: {}", error_chain(&e));
                return exit::FAILED;
            }
        };
        match write_all(&out, &files) {
            Ok(()) => exit::OK,
            Err(e) => {
                eprintln!("error: {e}");
                exit::UNREADABLE
            }
        }
    }
}

/// Writes `files` into `dir`, creating it and the subdirectories they name.
fn write_all(dir: &Path, files: &[CrdFile]) -> Result<(), String> {
    for file in files {
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, &file.yaml)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
