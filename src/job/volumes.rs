//! The PersistentVolumeClaim volumes of a pod template, with how its containers use them:
//! what the `storage` policy needs to tell a claim several pods would attach from one they
//! only read. Read from the pod spec the pods will run, so a TrainJob's volumes come from its
//! runtime, as rendered.
//!
//! Entry point: [`claim_volumes`].

use serde::Serialize;
use serde_json::{Map, Value};

/// One `persistentVolumeClaim` volume of a pod template.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClaimVolumeView {
    /// Index in the pod spec's `volumes`.
    pub index: usize,
    /// The volume's name, as mounts name it.
    pub name: String,
    pub claim_name: String,
    /// `persistentVolumeClaim.readOnly: true`.
    pub read_only: bool,
    /// Mounts of the volume, in containers and init containers, without `readOnly: true`.
    pub writable_mounts: usize,
    /// `volumeDevices` naming the volume (raw block use; it has no read-only flag).
    pub devices: usize,
}

/// The claim volumes of `pod_spec`; entries that are not well-formed claim volumes (no
/// name, no claimName) are left out: the API server would refuse them anyway.
pub fn claim_volumes(pod_spec: Option<&Map<String, Value>>) -> Vec<ClaimVolumeView> {
    let Some(spec) = pod_spec else {
        return Vec::new();
    };
    let volumes = spec.get("volumes").and_then(Value::as_array);
    volumes
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(index, v)| {
            let name = v.get("name")?.as_str()?;
            let source = v.get("persistentVolumeClaim")?;
            let claim_name = source
                .get("claimName")?
                .as_str()
                .filter(|c| !c.is_empty())?;
            let mounts = uses(spec, "volumeMounts", name);
            Some(ClaimVolumeView {
                index,
                name: name.to_string(),
                claim_name: claim_name.to_string(),
                read_only: source.get("readOnly") == Some(&Value::Bool(true)),
                writable_mounts: mounts
                    .filter(|m| m.get("readOnly") != Some(&Value::Bool(true)))
                    .count(),
                devices: uses(spec, "volumeDevices", name).count(),
            })
        })
        .collect()
}

/// The entries of list `field` (volumeMounts, volumeDevices) of every container and init
/// container of `spec` that name `volume`.
fn uses<'a>(
    spec: &'a Map<String, Value>,
    field: &'a str,
    volume: &'a str,
) -> impl Iterator<Item = &'a Value> + 'a {
    ["containers", "initContainers"]
        .into_iter()
        .filter_map(|list| spec.get(list)?.as_array())
        .flatten()
        .filter_map(move |c| c.get(field)?.as_array())
        .flatten()
        .filter(move |m| m.get("name").and_then(Value::as_str) == Some(volume))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_writable_mounts_and_devices_per_claim_volume() {
        let spec = json!({
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "corpus", "readOnly": true}},
                {"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}},
                {"name": "odd", "persistentVolumeClaim": {}},
            ],
            "initContainers": [{"name": "fetch", "volumeMounts": [{"name": "ckpt", "mountPath": "/c"}]}],
            "containers": [{"name": "main",
                "volumeMounts": [{"name": "data", "mountPath": "/d", "readOnly": true},
                                 {"name": "ckpt", "mountPath": "/c", "readOnly": true}],
                "volumeDevices": [{"name": "ckpt", "devicePath": "/dev/x"}]}],
        });
        let views = claim_volumes(spec.as_object());
        let [corpus, checkpoints] = views.as_slice() else {
            panic!("two claim volumes: {views:?}");
        };
        assert_eq!(
            (
                corpus.index,
                corpus.claim_name.as_str(),
                corpus.read_only,
                corpus.writable_mounts
            ),
            (1, "corpus", true, 0)
        );
        assert_eq!(
            (
                checkpoints.index,
                checkpoints.writable_mounts,
                checkpoints.devices
            ),
            (2, 1, 1)
        );
    }
}
