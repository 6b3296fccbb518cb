//! A container image of a Python program with real wheels from PyPI, for the real node:
//! Debian's CPython 3.11 (`/usr/bin/python3.11`, statically linked libpython) with its
//! standard library, the wheels unpacked under `/opt/site` (`PYTHONPATH`), the host libraries
//! their extension modules link, packed by `mkimage.py`.
//!
//! Entry points: [`fetch`] (the pinned wheels, downloaded once into
//! `~/.cache/gangplank-test/wheels` and checked against their sha256), [`build`] (the image
//! tarball, cached under `~/.cache/gangplank-test/images` by the hash of everything in it, so
//! a second run only imports it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A wheel pinned by its exact file (name and version in its URL) and its sha256.
pub struct Wheel {
    pub url: &'static str,
    pub sha256: &'static str,
}

impl Wheel {
    fn file_name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or(self.url)
    }
}

/// The interpreter put in the image; its standard library is `/usr/lib/python3.11`.
const PYTHON: &str = "/usr/bin/python3.11";
const STDLIB: &str = "/usr/lib/python3.11";
/// Where the wheels go in the image.
const SITE: &str = "/opt/site";

fn cache_dir(kind: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
        .join(".cache/gangplank-test")
        .join(kind)
}

/// The wheels' paths in the cache, each downloaded when missing; why not, when one cannot be
/// had (no network and not cached) or does not match its sha256.
pub fn fetch(wheels: &[Wheel]) -> Result<Vec<PathBuf>, String> {
    let dir = cache_dir("wheels");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    wheels.iter().map(|wheel| fetch_one(&dir, wheel)).collect()
}

fn fetch_one(dir: &Path, wheel: &Wheel) -> Result<PathBuf, String> {
    let path = dir.join(wheel.file_name());
    if path.is_file() && sha256(&path)? == wheel.sha256 {
        return Ok(path);
    }
    let partial = path.with_extension("part");
    let out = Command::new("curl")
        .args([
            "-fsSL",
            "--connect-timeout",
            "10",
            "--max-time",
            "300",
            "-o",
        ])
        .arg(&partial)
        .arg(wheel.url)
        .output()
        .map_err(|e| format!("cannot run curl to download {}: {e}", wheel.url))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(format!(
            "{} is not cached in {} and could not be downloaded (PyPI unreachable?): {}",
            wheel.file_name(),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let got = sha256(&partial)?;
    if got != wheel.sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(format!(
            "{} downloaded with sha256 {got}, pinned {}: refused",
            wheel.url, wheel.sha256
        ));
    }
    std::fs::rename(&partial, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

fn sha256(path: &Path) -> Result<String, String> {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .map_err(|e| format!("sha256sum {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .filter(|_| out.status.success())
        .map(String::from)
        .ok_or_else(|| format!("sha256sum {} failed", path.display()))
}

/// Why an image cannot be built on this machine, or `Ok`.
pub fn requirement() -> Result<(), String> {
    for (path, what) in [
        (PYTHON, "Debian's python3.11 (apt-get install python3)"),
        (STDLIB, "its standard library"),
    ] {
        if !Path::new(path).exists() {
            return Err(format!("no {path}: {what} goes into the image"));
        }
    }
    Ok(())
}

/// The image tarball (docker archive, tag `tag`) running `program` at `/app/<its name>` with
/// the `wheels`; from the cache when the same inputs built it before. `mkimage` is the tool's
/// `mkimage.py`.
pub fn build(
    tag: &str,
    program: &Path,
    wheels: &[PathBuf],
    mkimage: &Path,
) -> Result<PathBuf, String> {
    let mut inputs: Vec<PathBuf> = vec![PathBuf::from(PYTHON), program.into(), mkimage.into()];
    inputs.extend_from_slice(wheels);
    let mut key = format!("{tag}\n");
    for input in &inputs {
        key.push_str(&sha256(input)?);
    }
    let key_file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    std::fs::write(key_file.path(), key).map_err(|e| e.to_string())?;
    let key = sha256(key_file.path())?;
    let dir = cache_dir("images");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tarball = dir.join(format!("python-{}.tar", &key[..16]));
    if tarball.is_file() {
        return Ok(tarball);
    }
    let rootfs = tempfile::Builder::new()
        .prefix("gangplank-python-rootfs-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    fill_rootfs(rootfs.path(), program, wheels)?;
    let partial = tarball.with_extension("part");
    let name = program
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("program without a file name")?;
    let entrypoint = format!(r#"["/usr/bin/python3", "/app/{name}"]"#);
    run(Command::new("python3")
        .arg(mkimage)
        .arg(rootfs.path())
        .arg(&partial)
        .args([
            "--binary",
            &format!("{PYTHON}:/usr/bin/python3"),
            "--with-libs",
        ])
        .args(["--entrypoint", &entrypoint, "--tag", tag])
        .args(["--env", &format!("PYTHONPATH={SITE}")])
        .args(["--env", "PYTHONDONTWRITEBYTECODE=1"]))?;
    std::fs::rename(&partial, &tarball).map_err(|e| format!("{}: {e}", tarball.display()))?;
    Ok(tarball)
}

/// The standard library (symlinks followed: Debian points some into /etc), the wheels, the
/// program, the libraries the extension modules link, a passwd file and /tmp.
fn fill_rootfs(root: &Path, program: &Path, wheels: &[PathBuf]) -> Result<(), String> {
    let usr_lib = root.join("usr/lib");
    std::fs::create_dir_all(&usr_lib).map_err(|e| e.to_string())?;
    run(Command::new("cp").arg("-rL").arg(STDLIB).arg(&usr_lib))?;
    // The C headers and static library of python3-dev, and the test suite: not for running.
    for unused in [
        "config-3.11-x86_64-linux-gnu",
        "test",
        "idlelib",
        "ensurepip",
    ] {
        let _ = std::fs::remove_dir_all(usr_lib.join("python3.11").join(unused));
    }
    let site = root.join(SITE.trim_start_matches('/'));
    for wheel in wheels {
        // A wheel is a zip whose root is the site directory.
        run(Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(wheel)
            .arg(&site))?;
    }
    let app = root.join("app");
    std::fs::create_dir_all(&app).map_err(|e| e.to_string())?;
    let name = program.file_name().ok_or("program without a file name")?;
    std::fs::copy(program, app.join(name)).map_err(|e| format!("{}: {e}", program.display()))?;
    for library in linked_libraries(root)? {
        let dest = root.join(library.trim_start_matches('/'));
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        // Copied as the file it resolves to, at the name the loader looks for.
        std::fs::copy(&library, &dest).map_err(|e| format!("{library}: {e}"))?;
    }
    let etc = root.join("etc");
    std::fs::create_dir_all(&etc).map_err(|e| e.to_string())?;
    std::fs::write(
        etc.join("passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    )
    .map_err(|e| e.to_string())?;
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))
        .map_err(|e| e.to_string())
}

/// The host libraries (`ldd`) of every shared object under `root` that the rootfs does not
/// already hold (wheels bring their own in `*.libs`, found through their rpath).
fn linked_libraries(root: &Path) -> Result<std::collections::BTreeSet<String>, String> {
    let out = Command::new("find")
        .arg(root)
        .args(["-name", "*.so*", "-type", "f"])
        .output()
        .map_err(|e| format!("find: {e}"))?;
    let root_text = root.display().to_string();
    let mut libraries = std::collections::BTreeSet::new();
    for object in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(ldd) = Command::new("ldd").arg(object).output() else {
            continue;
        };
        for line in String::from_utf8_lossy(&ldd.stdout).lines() {
            // "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)"
            let resolved = line.split("=> ").nth(1).and_then(|r| r.split(' ').next());
            if let Some(path) = resolved.filter(|p| p.starts_with('/')) {
                if !path.starts_with(&root_text) {
                    libraries.insert(path.to_string());
                }
            }
        }
    }
    Ok(libraries)
}

fn run(command: &mut Command) -> Result<(), String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
