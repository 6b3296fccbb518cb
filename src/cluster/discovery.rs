//! Whether the API server serves Kubernetes' native gang API: `podgroups` in
//! `scheduling.k8s.io/v1alpha2` (1.36). It is alpha and off by default: kube-apiserver serves
//! it only with `--feature-gates=GenericWorkload=true` and
//! `--runtime-config=scheduling.k8s.io/v1alpha2=true`. Without it a native gang's PodGroup
//! cannot be created, and kube-scheduler never releases the pods that name it.
//!
//! Entry point: [`native_gang_api`], asked by the inventory watch (for `data.cluster`), by
//! `gangplank audit` and by the controller at start with `--gang-scheduler kubernetes`.
//! Discovery (`GET /apis/<group>/<version>`) is open to every authenticated identity through
//! the default `system:discovery` ClusterRole, so it needs no grant of its own.

/// The group/version of the native PodGroup.
pub const NATIVE_GANG_GROUP_VERSION: &str = "scheduling.k8s.io/v1alpha2";

/// `Ok(true)` when `podgroups` is served, `Ok(false)` when the group/version is not (404) or
/// serves no `podgroups`; `Err` when the API server could not say (unreachable, 5xx, 403).
pub async fn native_gang_api(client: &kube::Client) -> Result<bool, kube::Error> {
    match client
        .list_api_group_resources(NATIVE_GANG_GROUP_VERSION)
        .await
    {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "podgroups")),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}
