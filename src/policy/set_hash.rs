//! The policy-set hash: one sha256 that names the exact files a policy set was loaded from.
//!
//! Entry point: [`SetHasher`], fed by [`PolicySources::read_dir`](super::load::PolicySources)
//! with every file it reads. `gangplank version --policies DIR` prints the hash,
//! `/readyz` reports it and `/metrics` exports it as `gangplank_policy_set_info{hash}`, so an
//! operator can tell which set each replica serves after a ConfigMap change.
//!
//! # Guarantees
//! - It depends only on the files' paths (relative to the policy directory) and bytes: not on
//!   modification times, directory order or the absolute path the directory is mounted at.
//! - It is reproducible with coreutils. The hashed text is the `sha256sum` listing of the
//!   files in byte order of their relative paths, so, in the policy directory:
//!   `sha256sum $(ls *.rego lib/**/*.rego params.yaml exceptions/*.yaml exceptions/*.yml
//!   2>/dev/null | LC_ALL=C sort) | sha256sum` (bash with `shopt -s globstar`) prints the
//!   same hex.
//!
//! # Assumptions
//! Every file the loader reads passes through [`SetHasher::add`]; a new kind of file in the
//! policy directory (data, say; `exceptions/*.yaml` are) must be added there too, or two
//! different sets could share a hash.

use std::path::Path;

use crate::images::digest::hex;

/// Collects `(relative path, content digest)` pairs; [`SetHasher::finish`] orders them.
#[derive(Debug, Default)]
pub struct SetHasher {
    entries: Vec<(String, String)>,
}

impl SetHasher {
    /// Records one file read from the policy directory `dir`.
    pub fn add(&mut self, dir: &Path, path: &Path, bytes: &[u8]) {
        let relative = path.strip_prefix(dir).unwrap_or(path);
        let name = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        self.entries.push((name, sha256_hex(bytes)));
    }

    /// The hash: sha256 (lowercase hex) of the `sha256sum`-style listing, sorted by path.
    pub fn finish(mut self) -> String {
        self.entries.sort();
        let listing: String = self
            .entries
            .iter()
            .map(|(name, digest)| format!("{digest}  {name}\n"))
            .collect();
        sha256_hex(listing.as_bytes())
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes).as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_of(files: &[(&str, &str)]) -> String {
        let dir = Path::new("/etc/gangplank/policies");
        let mut h = SetHasher::default();
        for (name, text) in files {
            h.add(dir, &dir.join(name), text.as_bytes());
        }
        h.finish()
    }

    #[test]
    fn the_order_files_are_read_in_does_not_change_the_hash() {
        let a = hash_of(&[("a.rego", "package a"), ("lib/u.rego", "package u")]);
        let b = hash_of(&[("lib/u.rego", "package u"), ("a.rego", "package a")]);
        assert_eq!(a, b);
    }

    #[test]
    fn content_and_names_change_the_hash() {
        let base = hash_of(&[("a.rego", "package a")]);
        assert_ne!(base, hash_of(&[("a.rego", "package a\n")]));
        assert_ne!(base, hash_of(&[("b.rego", "package a")]));
    }

    #[test]
    fn matches_the_sha256sum_listing_it_documents() {
        // printf 'x' | sha256sum; then the listing line hashed again (coreutils).
        let expected_line = format!("{}  a.rego\n", sha256_hex(b"x"));
        assert_eq!(
            hash_of(&[("a.rego", "x")]),
            sha256_hex(expected_line.as_bytes())
        );
        assert_eq!(
            sha256_hex(b"x"),
            "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
        );
    }
}
