//! Where the etcd, kube-apiserver and kubectl binaries come from (the envtest convention).
//!
//! `KUBEBUILDER_ASSETS` names a directory holding them; set but incomplete is an error, not a
//! skip. Unset, the newest `$HOME/.cache/kube-test-assets/<version>/` that holds all three is
//! used: that is where `../shared/tools/kube-test-assets.sh` builds them.

use std::path::{Path, PathBuf};

const BINARIES: [&str; 3] = ["etcd", "kube-apiserver", "kubectl"];
const HOW_TO_BUILD: &str = "build them with ../shared/tools/kube-test-assets.sh \
    (fetch github:openshift/microshift first), or set KUBEBUILDER_ASSETS";

/// A directory with etcd, kube-apiserver and kubectl.
#[derive(Debug, Clone)]
pub struct Assets {
    pub dir: PathBuf,
}

impl Assets {
    pub fn etcd(&self) -> PathBuf {
        self.dir.join("etcd")
    }

    pub fn kube_apiserver(&self) -> PathBuf {
        self.dir.join("kube-apiserver")
    }

    pub fn kubectl(&self) -> PathBuf {
        self.dir.join("kubectl")
    }

    pub fn kube_scheduler(&self) -> PathBuf {
        self.dir.join("kube-scheduler")
    }

    pub fn kube_controller_manager(&self) -> PathBuf {
        self.dir.join("kube-controller-manager")
    }

    /// Why the scheduling suites cannot run with these assets, if they cannot: envtest's
    /// `setup-envtest` gives etcd, kube-apiserver and kubectl only.
    pub fn scheduler_missing(&self) -> Option<String> {
        let missing: Vec<&str> = SCHEDULING_BINARIES
            .into_iter()
            .filter(|b| !self.dir.join(b).is_file())
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "{} has no {} (setup-envtest does not ship them: {HOW_TO_BUILD_SCHEDULER})",
                self.dir.display(),
                missing.join(" or ")
            )
        })
    }
}

/// The binaries of the suites where pods are really scheduled and garbage collected.
const SCHEDULING_BINARIES: [&str; 2] = ["kube-scheduler", "kube-controller-manager"];
const HOW_TO_BUILD_SCHEDULER: &str = "../shared/tools/kube-test-assets.sh builds them, or copy \
    kube-scheduler and kube-controller-manager of the same Kubernetes version (the release's \
    server binaries, kubernetes-server-linux-amd64.tar.gz) into that directory";

/// The requirement of a suite that schedules pods (see `harness`): the control plane's
/// binaries and kube-scheduler plus kube-controller-manager beside them.
pub fn scheduler_requirement() -> Result<(), String> {
    match find()?.scheduler_missing() {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// The assets, or `None` after printing one line saying why the suite skips.
pub fn require(suite: &str) -> Option<Assets> {
    match usable() {
        Ok(assets) => Some(assets),
        Err(why) => {
            super::skip(&format!("{suite}: {why}"));
            None
        }
    }
}

/// The assets, in a test the harness runs only when they are usable (`harness`).
pub fn get() -> Assets {
    usable().unwrap_or_else(|why| panic!("{why}"))
}

/// The assets when a control plane can start: the binaries. Without the upstream corpus the
/// control plane installs the project's own `crds/` (see `Crds::files`).
pub fn usable() -> Result<Assets, String> {
    find()
}

/// The assets, or why there are none. Panics when `KUBEBUILDER_ASSETS` is set but lacks a
/// binary: that is a broken set-up, and skipping would hide it.
pub fn find() -> Result<Assets, String> {
    if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS") {
        let dir = PathBuf::from(dir);
        if let Some(missing) = missing_binary(&dir) {
            panic!(
                "KUBEBUILDER_ASSETS={} has no {missing} ({HOW_TO_BUILD})",
                dir.display()
            );
        }
        return Ok(Assets { dir });
    }
    let cache = default_cache().ok_or("KUBEBUILDER_ASSETS is not set and HOME is unknown")?;
    newest_complete(&cache)
        .map(|dir| Assets { dir })
        .ok_or_else(|| {
            format!(
                "no kube-apiserver test binaries: KUBEBUILDER_ASSETS is not set and {} holds no \
             version directory with {} ({HOW_TO_BUILD})",
                cache.display(),
                BINARIES.join(", ")
            )
        })
}

fn default_cache() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/kube-test-assets"))
}

fn missing_binary(dir: &Path) -> Option<&'static str> {
    BINARIES.into_iter().find(|b| !dir.join(b).is_file())
}

/// The complete version directory with the highest version (`v1.36.2` > `v1.9.0`).
fn newest_complete(cache: &Path) -> Option<PathBuf> {
    newest_versioned(cache, "", |dir| missing_binary(dir).is_none())
}

/// The directory of `cache` named `<prefix>v<version>` with the highest version among those
/// `complete` accepts (`volcano-v1.16.0-alpha.1` sorts as `[1, 16, 0]`: a pre-release with
/// its release). Shared by every suite that finds its assets in the machine's cache.
pub fn newest_versioned(
    cache: &Path,
    prefix: &str,
    complete: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let entries = std::fs::read_dir(cache).ok()?;
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && complete(p))
        .filter_map(|p| Some((version_key(p.file_name()?.to_str()?, prefix)?, p)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, p)| p)
}

fn version_key(name: &str, prefix: &str) -> Option<Vec<u64>> {
    let version = name.strip_prefix(prefix)?.strip_prefix('v')?;
    let core = version.split('-').next()?;
    core.split('.').map(|n| n.parse().ok()).collect()
}

/// A suite's asset directory: `$<env>`, else the newest complete `<cache>/<prefix>v*/`.
/// `missing` names what a directory lacks (`None`: complete). `Err` says what was looked for
/// (`wanted`: "... holds no kueue-v<version>/ with {wanted}") and how to get them (`how`). Panics when `$<env>` is set but lacks a file: a broken set-up, and a skip would
/// hide it, as with `KUBEBUILDER_ASSETS`.
pub fn find_versioned(
    env: &str,
    prefix: &str,
    wanted: &str,
    how: &str,
    missing: impl Fn(&Path) -> Option<String>,
) -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os(env) {
        let dir = PathBuf::from(dir);
        if let Some(lacks) = missing(&dir) {
            panic!("{env}={} lacks {lacks} ({how})", dir.display());
        }
        return Ok(dir);
    }
    let cache = cache().ok_or(format!("{env} is not set and HOME is unknown"))?;
    newest_versioned(&cache, prefix, |dir| missing(dir).is_none()).ok_or_else(|| {
        format!(
            "{env} is not set and {} holds no {prefix}v<version>/ with {wanted} ({how})",
            cache.display()
        )
    })
}

/// `~/.cache/kube-test-assets`, where `../shared/tools` builds every suite's binaries.
pub fn cache() -> Option<PathBuf> {
    default_cache()
}

/// The files of `needed` that are not there, joined for a message; `None` when all are.
pub fn missing_files(needed: impl IntoIterator<Item = PathBuf>) -> Option<String> {
    let missing: Vec<String> = needed
        .into_iter()
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}
