//! A deterministic tar writer (POSIX ustar) for the image's one layer: entries sorted by
//! path, owner and times fixed by the caller, so the same files give the same bytes.
//!
//! Entry point: [`Tar`]. Only what an image layer of a static binary needs: directories,
//! regular files, names of at most 100 bytes (or split into ustar's 155-byte prefix).

use std::collections::BTreeMap;

/// One entry's metadata; contents live in [`Tar`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Dir,
    File(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: Kind,
    mode: u32,
    uid: u32,
    gid: u32,
}

/// Files and directories by path (without a leading `/`), written in path order.
#[derive(Debug, Default)]
pub struct Tar {
    entries: BTreeMap<String, Entry>,
    /// Every entry's modification time (seconds since the epoch).
    mtime: u64,
}

/// Why an entry cannot be written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TarError {
    #[error("{path}: a path of {len} bytes does not fit a ustar header (at most 100, or a 155-byte directory and a 100-byte name)")]
    PathTooLong { path: String, len: usize },
    #[error("{path}: {size} bytes is more than a ustar header can record (8 GiB)")]
    TooLarge { path: String, size: u64 },
}

const BLOCK: usize = 512;

impl Tar {
    pub fn new(mtime: u64) -> Tar {
        Tar {
            entries: BTreeMap::new(),
            mtime,
        }
    }

    /// Adds directory `path` (and its parents) owned by root.
    pub fn dir(&mut self, path: &str, mode: u32) {
        self.parents(path);
        self.entries
            .insert(clean(path), entry(Kind::Dir, mode, 0, 0));
    }

    /// Adds file `path` with `contents` (and its parent directories, mode 0755, root's).
    pub fn file(&mut self, path: &str, contents: Vec<u8>, mode: u32, owner: (u32, u32)) {
        self.parents(path);
        let (uid, gid) = owner;
        self.entries
            .insert(clean(path), entry(Kind::File(contents), mode, uid, gid));
    }

    fn parents(&mut self, path: &str) {
        let path = clean(path);
        let mut parent = String::new();
        for part in path
            .split('/')
            .rev()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(part);
            self.entries
                .entry(parent.clone())
                .or_insert_with(|| entry(Kind::Dir, 0o755, 0, 0));
        }
    }

    /// The archive: every entry in path order, then two zero blocks.
    pub fn into_bytes(self) -> Result<Vec<u8>, TarError> {
        let mut out = Vec::new();
        for (path, entry) in &self.entries {
            let (name, size, body): (String, u64, &[u8]) = match &entry.kind {
                Kind::Dir => (format!("{path}/"), 0, &[]),
                Kind::File(bytes) => (path.clone(), bytes.len() as u64, bytes),
            };
            out.extend_from_slice(&header(&name, entry, size, self.mtime)?);
            out.extend_from_slice(body);
            out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
        }
        out.resize(out.len() + 2 * BLOCK, 0);
        Ok(out)
    }
}

fn entry(kind: Kind, mode: u32, uid: u32, gid: u32) -> Entry {
    Entry {
        kind,
        mode,
        uid,
        gid,
    }
}

fn clean(path: &str) -> String {
    path.trim_matches('/').to_string()
}

/// The 512-byte ustar header of one entry.
fn header(name: &str, entry: &Entry, size: u64, mtime: u64) -> Result<[u8; BLOCK], TarError> {
    let mut h = [0u8; BLOCK];
    let (prefix, name_part) = split_name(name)?;
    if size >= 1 << 33 {
        return Err(TarError::TooLarge {
            path: name.to_string(),
            size,
        });
    }
    put(&mut h, 0, 100, name_part.as_bytes());
    put(&mut h, 100, 8, octal(u64::from(entry.mode), 8).as_bytes());
    put(&mut h, 108, 8, octal(u64::from(entry.uid), 8).as_bytes());
    put(&mut h, 116, 8, octal(u64::from(entry.gid), 8).as_bytes());
    put(&mut h, 124, 12, octal(size, 12).as_bytes());
    put(&mut h, 136, 12, octal(mtime, 12).as_bytes());
    let typeflag = match entry.kind {
        Kind::Dir => b'5',
        Kind::File(_) => b'0',
    };
    put(&mut h, 156, 1, &[typeflag]);
    put(&mut h, 257, 6, b"ustar\0");
    put(&mut h, 263, 2, b"00");
    put(&mut h, 345, 155, prefix.as_bytes());
    // The checksum is computed with its own field read as eight spaces.
    put(&mut h, 148, 8, b"        ");
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    put(&mut h, 148, 8, format!("{sum:06o}\0 ").as_bytes());
    Ok(h)
}

/// `name` as ustar's (prefix, name): the whole of it when it fits 100 bytes, else split at a
/// `/` so that the prefix holds at most 155 and the rest at most 100.
fn split_name(name: &str) -> Result<(&str, &str), TarError> {
    if name.len() <= 100 {
        return Ok(("", name));
    }
    let too_long = || TarError::PathTooLong {
        path: name.to_string(),
        len: name.len(),
    };
    let trimmed = name.trim_end_matches('/');
    let cut = trimmed
        .char_indices()
        .filter(|(i, c)| *c == '/' && *i <= 155 && name.len() - i - 1 <= 100)
        .map(|(i, _)| i)
        .next()
        .ok_or_else(too_long)?;
    Ok((&name[..cut], &name[cut + 1..]))
}

/// `value` in octal, zero-padded to `width - 1` digits and NUL-terminated.
fn octal(value: u64, width: usize) -> String {
    format!("{value:0w$o}\0", w = width - 1)
}

fn put(header: &mut [u8; BLOCK], at: usize, len: usize, bytes: &[u8]) {
    let n = bytes.len().min(len);
    if let Some(field) = header.get_mut(at..at + n) {
        field.copy_from_slice(&bytes[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(mtime: u64) -> Vec<u8> {
        let mut tar = Tar::new(mtime);
        tar.file(
            "usr/local/bin/tool",
            b"#!/bin/true\n".to_vec(),
            0o755,
            (0, 0),
        );
        tar.file(
            "/etc/passwd",
            b"root:x:0:0::/:/sbin/nologin\n".to_vec(),
            0o644,
            (0, 0),
        );
        tar.into_bytes().unwrap_or_default()
    }

    #[test]
    fn the_same_files_give_the_same_bytes_whatever_the_order_they_were_added_in() {
        let mut other = Tar::new(0);
        other.file(
            "/etc/passwd",
            b"root:x:0:0::/:/sbin/nologin\n".to_vec(),
            0o644,
            (0, 0),
        );
        other.file(
            "usr/local/bin/tool",
            b"#!/bin/true\n".to_vec(),
            0o755,
            (0, 0),
        );
        assert_eq!(archive(0), other.into_bytes().unwrap_or_default());
        assert_ne!(archive(0), archive(1), "the mtime is in every header");
    }

    #[test]
    fn gnu_tar_lists_the_entries_with_their_parents_owner_and_mode() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("layer.tar");
        std::fs::write(&path, archive(1_700_000_000)).unwrap_or_else(|e| panic!("{e}"));
        let out = std::process::Command::new("tar")
            .args(["--numeric-owner", "--full-time", "-tvf"])
            .arg(&path)
            .env("TZ", "UTC")
            .output();
        let Ok(out) = out else {
            eprintln!("skipped: no tar binary to read the archive back");
            return;
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listing = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = listing.lines().collect();
        let names: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.split_whitespace().last())
            .collect();
        assert_eq!(
            names,
            [
                "etc/",
                "etc/passwd",
                "usr/",
                "usr/local/",
                "usr/local/bin/",
                "usr/local/bin/tool"
            ]
        );
        let tool = lines.last().copied().unwrap_or_default();
        assert!(tool.starts_with("-rwxr-xr-x 0/0"), "{tool}");
        assert!(tool.contains("2023-11-14 22:13:20"), "{tool}");
    }

    #[test]
    fn long_paths_use_the_prefix_field_and_overlong_ones_are_refused() {
        let deep = format!("{}/{}/{}", "d".repeat(60), "e".repeat(60), "f".repeat(90));
        let mut tar = Tar::new(0);
        tar.file(&deep, vec![1], 0o644, (0, 0));
        assert!(tar.into_bytes().is_ok());
        let mut tar = Tar::new(0);
        tar.file(&"x".repeat(300), vec![1], 0o644, (0, 0));
        assert!(matches!(
            tar.into_bytes(),
            Err(TarError::PathTooLong { .. })
        ));
    }
}
