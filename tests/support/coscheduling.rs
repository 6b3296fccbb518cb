//! scheduler-plugins' Coscheduling beside a test control plane: kube-scheduler v1.36.2 built
//! with the Coscheduling plugin (from the Kueue assets, see `kueue`), running upstream's
//! sample configuration, scheduler-plugins' own PodGroup CRD, and kube-controller-manager for
//! the garbage collector.
//!
//! Entry points: [`ControlPlane::shared_with`](super::ControlPlane::shared_with) with
//! [`Scheduling::Coscheduling`](super::Scheduling::Coscheduling) starts them (see
//! [`ControlPlane::start_coscheduling`]); [`pod_group`] is the API resource; [`SCHEDULER_NAME`]
//! the name pods ask for.
//!
//! The sample configuration (manifests/coscheduling/scheduler-config.yaml) is used as upstream
//! ships it, with two lines changed: the kubeconfig path, and the profile's schedulerName,
//! which is `default-scheduler` there and [`SCHEDULER_NAME`] here (the name gang_scheduling's
//! parameters and `gangplank controller --gang-scheduler` give pods). Its Coscheduling args:
//! permitWaitingTimeSeconds 10, and the defaults (podGroupRejectPercentage 10, no backoff).
//! The profile keeps kube-scheduler's default Filter and Score plugins; Coscheduling replaces
//! the queue sort (priority, then the PodGroup's creation or last failure, then
//! `<namespace>/<pod>`) and adds PreFilter (minMember pods exist; the PodGroup's minResources
//! fit the whole cluster's free resources), Permit (a placed pod waits until minMember are)
//! and PostFilter (a pod that fits nowhere rejects its waiting siblings).
//!
//! No PodGroup status is kept: that is scheduler-plugins' controller's, not built here; the
//! plugin says why a gang waits only on its pods' PodScheduled condition.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;

use super::control_plane::FIELD_MANAGER;
use super::kueue::KueueAssets;
use super::ControlPlane;

/// The scheduler name pods ask for, as policies/params.yaml's gang_scheduling names
/// scheduler-plugins' scheduler.
pub const SCHEDULER_NAME: &str = "scheduler-plugins-scheduler";
/// The kube-scheduler process's name on the plane (its log: `coscheduler.log`).
pub const PROCESS: &str = "coscheduler";
const KUBECONFIG_PLACEHOLDER: &str = "REPLACE_ME_WITH_KUBE_CONFIG_PATH";
const SAMPLE_PROFILE: &str = "- schedulerName: default-scheduler\n";

/// scheduler-plugins' PodGroup.
pub fn pod_group() -> ApiResource {
    ApiResource {
        group: "scheduling.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "scheduling.x-k8s.io/v1alpha1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    }
}

impl ControlPlane {
    /// Installs the assets' PodGroup CRD over the plane's (the same name: server-side apply
    /// with force takes it over), starts kube-controller-manager and the Coscheduling
    /// kube-scheduler (leader election off, as the sample says; no serving port: the tests
    /// watch what it does to pods).
    pub(super) async fn start_coscheduling(&self) {
        let assets = super::kueue::find().unwrap_or_else(|why| panic!("{why}"));
        self.install_pod_group_crd(&assets).await;
        let conf = self.coscheduling_conf(&assets);
        self.spawn_controller_manager();
        let mut args = vec![
            format!("--config={}", conf.display()),
            "--secure-port=0".to_string(),
        ];
        // As for kube-scheduler (see `scheduler`): 4 shows each plugin's verdict.
        if let Ok(level) = std::env::var("GANGPLANK_SCHEDULER_VERBOSITY") {
            args.push(format!("-v={level}"));
        }
        self.spawn(PROCESS, &assets.coscheduling_scheduler(), &args);
    }

    /// Upstream's sample configuration with this plane's kubeconfig and [`SCHEDULER_NAME`].
    fn coscheduling_conf(&self, assets: &KueueAssets) -> PathBuf {
        let path = assets.coscheduling_conf();
        let sample =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            sample.contains(KUBECONFIG_PLACEHOLDER) && sample.contains(SAMPLE_PROFILE),
            "{} is not upstream's sample (no {KUBECONFIG_PLACEHOLDER} or {SAMPLE_PROFILE:?}): \
             rebuild the assets",
            path.display()
        );
        let conf = sample
            .replace(
                KUBECONFIG_PLACEHOLDER,
                &self.kubeconfig.display().to_string(),
            )
            .replace(
                SAMPLE_PROFILE,
                &format!("- schedulerName: {SCHEDULER_NAME}\n"),
            );
        let written = self.file("coscheduling-scheduler-config.yaml");
        std::fs::write(&written, conf).unwrap_or_else(|e| panic!("{}: {e}", written.display()));
        written
    }

    async fn install_pod_group_crd(&self, assets: &KueueAssets) {
        let path = assets.pod_group_crd();
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let value: Value = yaml_serde::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
        let crd: CustomResourceDefinition = serde_json::from_value(value)
            .unwrap_or_else(|e| panic!("{}: not a CRD: {e}", path.display()));
        let client = self.client().await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let name = crd.metadata.name.clone().unwrap_or_default();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        crds.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("apply {}: {e}", path.display()));
        let api: Api<DynamicObject> = Api::all_with(client, &pod_group());
        super::wait_for(
            "scheduling.x-k8s.io/v1alpha1 podgroups served",
            Duration::from_secs(30),
            || async {
                let list = api.list(&ListParams::default().limit(1)).await;
                list.map(drop).map_err(|e| e.to_string())
            },
        )
        .await;
    }
}
