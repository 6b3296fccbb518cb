//! What `kubectl apply -k deploy/` applies: every manifest, in gangplank's namespace, with
//! the crate's image.

use std::collections::BTreeSet;

use crate::support::*;

#[test]
fn every_manifest_is_a_named_kubernetes_object() {
    let manifests = Manifests::get();
    assert!(manifests.objects.len() >= 8, "deploy/ looks empty");
    for (path, object) in &manifests.objects {
        for field in ["apiVersion", "kind"] {
            assert!(object[field].is_string(), "{}: no {field}", path.display());
        }
        assert!(
            object["metadata"]["name"].is_string(),
            "{}: a {} without metadata.name",
            path.display(),
            object["kind"]
        );
    }
}

#[test]
fn kustomization_applies_every_manifest_into_gangplanks_namespace() {
    let dir = deploy_dir();
    let kustomization = &documents(&dir.join("kustomization.yaml"))[0];
    assert_eq!(kustomization["namespace"], NAMESPACE);
    let listed: BTreeSet<&str> = strings(&kustomization["resources"]).into_iter().collect();
    let mut present: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("deploy/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    // The policies ConfigMaps: the sibling kustomization policies/kustomization.yaml.
    present.insert("../policies".to_string());
    let present: BTreeSet<&str> = present.iter().map(String::as_str).collect();
    assert_eq!(
        listed, present,
        "deploy/kustomization.yaml resources must list every manifest in deploy/ and ../policies \
         (and only those)"
    );
    assert_eq!(
        Manifests::get().one("Namespace")["metadata"]["name"],
        NAMESPACE
    );

    // The component lists each of its files once.
    let component_dir = dir.join("cert-manager");
    let component = &documents(&component_dir.join("kustomization.yaml"))[0];
    assert_eq!(component["kind"], "Component");
    let mut used: BTreeSet<&str> = strings(&component["resources"]).into_iter().collect();
    for patch in component["patches"].as_array().expect("patches") {
        used.insert(patch["path"].as_str().expect("patch path"));
    }
    let files: BTreeSet<String> = yaml_files(&component_dir)
        .iter()
        .filter(|p| !is_kustomize_file(p))
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    let files: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    assert_eq!(used, files, "deploy/cert-manager/kustomization.yaml");
}

#[test]
fn the_image_is_named_by_the_digest_the_release_command_wrote() {
    let kustomization = &documents(&deploy_dir().join("kustomization.yaml"))[0];
    let image = &kustomization["images"][0];
    assert_eq!(image["name"], "gangplank");
    assert!(
        image.get("newTag").is_none(),
        "a digest, not a tag: {image}"
    );
    let digest = image["digest"].as_str().unwrap_or_default();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    assert_eq!(
        format!("{}@{digest}", image["newName"].as_str().unwrap_or_default()),
        crate::support::pinned_image()
    );
    // The base names the placeholder kustomize replaces.
    let container_image = Manifests::get().container()["image"]
        .as_str()
        .expect("image");
    assert!(
        container_image.starts_with("gangplank:"),
        "{container_image}"
    );
}
