//! Kueue and scheduler-plugins' Coscheduling beside a test control plane: where their
//! binaries, CRDs and configuration are, and the requirement of the suites that run them.
//!
//! Entry points: [`find`] says where the assets are; [`requirement`] (Kueue's suites) and
//! [`coscheduling_requirement`] (the Coscheduling suites) for a suite's harness, which skips
//! every test with the reason printed when the assets are not on the machine.
//!
//! The assets are built once per machine, offline, by
//! `../shared/tools/kueue/kueue-test-assets.sh` into `~/.cache/kube-test-assets/kueue-v<version>/`
//! (or the directory `KUEUE_ASSETS` names): `bin/kueue-manager` (Kueue v0.19.2),
//! `bin/kube-scheduler` (kube-scheduler v1.36.2 with the Coscheduling plugin),
//! `crds/kueue/*.yaml`, `crds/scheduler-plugins/scheduling.x-k8s.io_podgroups.yaml`,
//! `conf/kueue/` (Kueue's config/components) and `conf/coscheduling-scheduler-config.yaml`.

use std::path::{Path, PathBuf};

const HOW_TO_GET: &str = "build them once with ../shared/tools/kueue/kueue-test-assets.sh \
    (MIRROR=<dir of the fetched kubernetes-sigs/kueue, kubernetes-sigs/scheduler-plugins, \
    openshift/microshift and patrickmn/go-cache git trees>; about 40 minutes on 2 cores; it \
    prints `export KUEUE_ASSETS=...`), or put Kueue v0.19.2's kueue-manager and a \
    kube-scheduler with scheduler-plugins' Coscheduling plugin in DIR/bin, Kueue's CRDs \
    (config/components/crd/bases) in DIR/crds/kueue, scheduler-plugins' \
    manifests/crds/scheduling.x-k8s.io_podgroups.yaml in DIR/crds/scheduler-plugins and its \
    manifests/coscheduling/scheduler-config.yaml in DIR/conf/coscheduling-scheduler-config.yaml, \
    and set KUEUE_ASSETS=DIR";

/// A Kueue assets directory (see the module doc).
#[derive(Debug, Clone)]
pub struct KueueAssets {
    pub dir: PathBuf,
}

impl KueueAssets {
    pub fn manager(&self) -> PathBuf {
        self.dir.join("bin/kueue-manager")
    }

    /// kube-scheduler v1.36.2 built with the Coscheduling plugin registered.
    pub fn coscheduling_scheduler(&self) -> PathBuf {
        self.dir.join("bin/kube-scheduler")
    }

    /// Kueue's CRDs, one file each.
    pub fn kueue_crds(&self) -> PathBuf {
        self.dir.join("crds/kueue")
    }

    /// scheduler-plugins' `scheduling.x-k8s.io` PodGroup CRD.
    pub fn pod_group_crd(&self) -> PathBuf {
        self.dir
            .join("crds/scheduler-plugins/scheduling.x-k8s.io_podgroups.yaml")
    }

    /// Upstream's sample KubeSchedulerConfiguration for Coscheduling (its kubeconfig path is
    /// a placeholder, `REPLACE_ME_WITH_KUBE_CONFIG_PATH`).
    pub fn coscheduling_conf(&self) -> PathBuf {
        self.dir.join("conf/coscheduling-scheduler-config.yaml")
    }

    /// Kueue's `config/components` (manager configuration, RBAC, webhook manifests).
    pub fn kueue_conf(&self) -> PathBuf {
        self.dir.join("conf/kueue")
    }

    fn missing(&self) -> Option<String> {
        let needed = [
            self.manager(),
            self.coscheduling_scheduler(),
            self.pod_group_crd(),
            self.coscheduling_conf(),
            self.kueue_crds().join("kueue.x-k8s.io_clusterqueues.yaml"),
            self.kueue_conf().join("webhook/manifests.yaml"),
        ];
        let missing: Vec<String> = needed
            .into_iter()
            .filter(|p| !p.is_file())
            .map(|p| p.display().to_string())
            .collect();
        (!missing.is_empty()).then(|| missing.join(", "))
    }
}

/// The Kueue suites' requirement (see `harness`): kube-scheduler and
/// kube-controller-manager beside the control plane's binaries, and the Kueue assets.
pub fn requirement() -> Result<(), String> {
    super::assets::scheduler_requirement()?;
    find().map(drop)
}

/// The Coscheduling suites' requirement: kube-controller-manager (the garbage collector) and
/// the Kueue assets, which carry the Coscheduling kube-scheduler.
pub fn coscheduling_requirement() -> Result<(), String> {
    requirement()
}

/// `KUEUE_ASSETS`, else the newest complete `~/.cache/kube-test-assets/kueue-v*/`; `Err`
/// saying how to build them when there is none. Panics when `KUEUE_ASSETS` is set but lacks a
/// file (a broken set-up, and a skip would hide it), as `KUBEBUILDER_ASSETS` does.
pub fn find() -> Result<KueueAssets, String> {
    if let Some(dir) = std::env::var_os("KUEUE_ASSETS") {
        let assets = KueueAssets {
            dir: PathBuf::from(dir),
        };
        if let Some(missing) = assets.missing() {
            panic!(
                "KUEUE_ASSETS={} lacks {missing} ({HOW_TO_GET})",
                assets.dir.display()
            );
        }
        return Ok(assets);
    }
    let cache = super::assets::cache().ok_or("KUEUE_ASSETS is not set and HOME is unknown")?;
    newest(&cache).ok_or_else(|| {
        format!(
            "no Kueue: KUEUE_ASSETS is not set and {} holds no kueue-v<version>/ with \
             bin/kueue-manager and bin/kube-scheduler ({HOW_TO_GET})",
            cache.display()
        )
    })
}

fn newest(cache: &Path) -> Option<KueueAssets> {
    let complete = |dir: &Path| {
        KueueAssets {
            dir: dir.to_path_buf(),
        }
        .missing()
        .is_none()
    };
    super::assets::newest_versioned(cache, "kueue-", complete).map(|dir| KueueAssets { dir })
}
