//! Finding kubectl, whose built-in kustomize renders dist/ ([`super::render`]): on PATH, else
//! in `$KUBEBUILDER_ASSETS`, else the newest `~/.cache/kube-test-assets/<version>/`, where the
//! machine's kube test binaries are built (the same places the e2e suites look).
//!
//! Entry point: [`find`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// No kubectl anywhere it is looked for.
#[derive(Debug, thiserror::Error)]
#[error(
    "no kubectl found (its built-in kustomize renders dist/): put kubectl on PATH, or set \
     KUBEBUILDER_ASSETS to a directory that holds it (looked in: {looked})"
)]
pub struct NotFound {
    pub looked: String,
}

/// The kubectl to run.
pub fn find() -> Result<PathBuf, NotFound> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let candidates = candidates(
        std::env::var_os("PATH"),
        std::env::var_os("KUBEBUILDER_ASSETS"),
        home.as_deref(),
    );
    candidates
        .iter()
        .find(|path| path.is_file())
        .cloned()
        .ok_or_else(|| NotFound {
            looked: candidates
                .iter()
                .filter_map(|p| p.parent())
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Where kubectl may be, in order of preference.
fn candidates(
    path: Option<OsString>,
    assets: Option<OsString>,
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let on_path = path
        .as_deref()
        .map(std::env::split_paths)
        .into_iter()
        .flatten();
    let cache = home.map(|h| h.join(".cache/kube-test-assets"));
    let mut cached: Vec<PathBuf> = cache
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|dir| version(dir).is_some())
        .collect();
    // Newest first: v1.36.2 before v1.9.0 (numerically, not as text).
    cached.sort_by_key(|dir| std::cmp::Reverse(version(dir)));
    on_path
        .chain(assets.map(PathBuf::from))
        .chain(cached)
        .map(|dir| dir.join("kubectl"))
        .collect()
}

/// `v1.36.2` → [1, 36, 2]; other names (volcano-*) are not kube test binaries.
fn version(dir: &Path) -> Option<Vec<u64>> {
    let name = dir.file_name()?.to_str()?.strip_prefix('v')?;
    name.split('.').map(|n| n.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_comes_first_then_assets_then_the_newest_cache() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        for dir in ["v1.9.0", "v1.36.2", "volcano-1.12"] {
            let _ = std::fs::create_dir_all(home.path().join(".cache/kube-test-assets").join(dir));
        }
        let found = candidates(
            Some(OsString::from("/a:/b")),
            Some(OsString::from("/assets")),
            Some(home.path()),
        );
        let cache = home.path().join(".cache/kube-test-assets");
        assert_eq!(
            found,
            vec![
                PathBuf::from("/a/kubectl"),
                PathBuf::from("/b/kubectl"),
                PathBuf::from("/assets/kubectl"),
                cache.join("v1.36.2/kubectl"),
                cache.join("v1.9.0/kubectl"),
            ]
        );
    }
}
