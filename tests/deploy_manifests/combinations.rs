//! Every combination of the controller's components, built as a user lists them: the MPI
//! components (deploy/controller-mpi, deploy/controller-mpi-v1) build only after
//! deploy/controller-namespaced, because their rules (Secrets, ConfigMaps, pods/exec, RBAC
//! objects) must never hold cluster-wide (issue 41). kustomize refuses the build otherwise:
//! each MPI component's replacement reads the GANGPLANK_NAMESPACES env only the namespaced
//! component adds.

use std::io::Write as _;
use std::process::Command;

use crate::kustomize::relative_path;
use crate::support::*;

const COMPONENTS: [&str; 4] = [
    "controller",
    "controller-namespaced",
    "controller-mpi",
    "controller-mpi-v1",
];

/// Whether kustomize builds deploy/ with `components` in this order, and its error if not;
/// `None` without kubectl.
fn outcome(components: &[&str]) -> Option<Result<(), String>> {
    let kubectl = gangplank::release::kubectl::find().ok()?;
    let overlay = tempfile::tempdir().expect("temp dir");
    let deploy = relative_path(overlay.path(), &deploy_dir());
    let listed: Vec<String> = components
        .iter()
        .map(|c| deploy.join(c).display().to_string())
        .collect();
    let text = format!(
        "resources: [{}]\ncomponents: [{}]\n",
        deploy.display(),
        listed.join(", ")
    );
    std::fs::write(overlay.path().join("kustomization.yaml"), text).expect("write overlay");
    let output = Command::new(kubectl)
        .arg("kustomize")
        .arg(overlay.path())
        .output()
        .expect("run kubectl kustomize");
    match output.status.success() {
        true => Some(Ok(())),
        false => Some(Err(String::from_utf8_lossy(&output.stderr).into_owned())),
    }
}

/// Every subset of [`COMPONENTS`] in the documented order, and each MPI component listed
/// before controller-namespaced.
fn combinations() -> Vec<Vec<&'static str>> {
    let mut all: Vec<Vec<&str>> = (0..1u32 << COMPONENTS.len())
        .map(|mask| {
            COMPONENTS
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, c)| *c)
                .collect()
        })
        .collect();
    for mpi in ["controller-mpi", "controller-mpi-v1"] {
        all.push(vec!["controller", mpi, "controller-namespaced"]);
    }
    all
}

#[test]
fn mpi_components_build_only_after_controller_namespaced() {
    let mut failures = Vec::new();
    for components in combinations() {
        let Some(outcome) = outcome(&components) else {
            let _ = writeln!(
                std::io::stderr(),
                "skipped: no kubectl on PATH or among the kube test binaries (the component \
                 combinations need its kustomize; no cluster)"
            );
            return;
        };
        // An MPI component reads what controller-namespaced, listed before it, added.
        let confined_before = |mpi: &str| {
            let at = |c: &str| components.iter().position(|x| *x == c);
            match (at("controller-namespaced"), at(mpi), at("controller")) {
                (_, None, _) => true,
                (Some(namespaced), Some(mpi), Some(_)) => namespaced < mpi,
                _ => false,
            }
        };
        let builds = confined_before("controller-mpi") && confined_before("controller-mpi-v1");
        match (builds, outcome) {
            (true, Ok(())) => {}
            (false, Err(error))
                if error.contains("deploy/controller-mpi")
                    && error.contains("GANGPLANK_NAMESPACES") => {}
            (expected, got) => failures.push(format!(
                "{components:?}: expected {}, got {got:?}",
                if expected { "a build" } else { "a refusal" }
            )),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
