//! The Kubeflow Training Python SDK (`kubeflow-training` 1.9.4) as a client of a real
//! kube-apiserver with gangplank's webhooks: `TrainingClient.create_job` of a valid
//! PyTorchJob stores it with our defaults; a job that breaks a policy raises the SDK's error
//! carrying our message.
//!
//! The SDK is installed from the Python package registry into a venv under cargo's
//! target/tmp (once; later runs reuse it). Its tests are ignored, with one line saying why,
//! without python3 with venv and pip, or without the kube test binaries.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

e2e_suite!(
    "e2e_python_sdk",
    [
        the_sdks_create_job_is_admitted_with_gangplanks_defaults,
        a_job_that_breaks_a_policy_raises_the_sdks_error_with_our_message,
    ],
    sdk_available
);

use serde_json::Value;
use support::{jobs, ControlPlane, Crds, Webhooks};

const SDK: &str = "kubeflow-training==1.9.4";

/// The venv's python with the SDK importable, or why not (printed by the caller).
fn sdk_python() -> Result<PathBuf, String> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON.get_or_init(install_sdk).clone()
}

fn install_sdk() -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kubeflow-training-1.9.4-venv");
    let python = venv.join("bin/python");
    if imports_sdk(&python) {
        return Ok(python);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output();
    match made {
        Err(e) => return Err(format!("python3 is not available ({e})")),
        Ok(out) if !out.status.success() => {
            let why = String::from_utf8_lossy(&out.stderr);
            return Err(format!(
                "python3 cannot make a venv with pip: {}",
                why.trim()
            ));
        }
        Ok(_) => {}
    }
    let pip = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            SDK,
        ])
        .output()
        .expect("run pip");
    // pip itself is there (the venv has it): a failed install is a failure, not a skip.
    assert!(
        pip.status.success(),
        "pip install {SDK} failed:\n{}",
        String::from_utf8_lossy(&pip.stderr)
    );
    assert!(imports_sdk(&python), "{SDK} installed but does not import");
    Ok(python)
}

fn imports_sdk(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import kubeflow.training"])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Runs tests/data/sdk/create_pytorchjob.py; its JSON answer.
fn create_with_sdk(
    python: &Path,
    kubeconfig: &Path,
    namespace: &str,
    name: &str,
    masters: u32,
) -> Value {
    let script = support::repo().join("tests/data/sdk/create_pytorchjob.py");
    let output = Command::new(python)
        .arg(script)
        .arg(kubeconfig)
        .args([namespace, name, &masters.to_string(), jobs::IMAGE])
        .env_remove("KUBECONFIG")
        .output()
        .expect("run the SDK script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "SDK script failed:\n{stderr}\n{stdout}"
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"))
}

/// The suite's own requirement: python3 with venv and pip, and the SDK installed.
fn sdk_available() -> Result<(), String> {
    sdk_python().map(drop)
}

/// The SDK's python, the shared control plane with the webhooks, and a namespace.
async fn setup(test: &str) -> (PathBuf, &'static ControlPlane, String) {
    let python = sdk_python().unwrap_or_else(|why| panic!("{why}"));
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    Webhooks::shared(control_plane);
    let namespace = control_plane.namespace(test).await;
    (python, control_plane, namespace)
}

async fn the_sdks_create_job_is_admitted_with_gangplanks_defaults() {
    let (python, control_plane, ns) = setup("sdk-valid").await;
    let answer = create_with_sdk(&python, &control_plane.kubeconfig, &ns, "mnist", 1);
    let job = &answer["created"];
    assert!(job.is_object(), "not created: {answer}");
    // The SDK's own model, read back with TrainingClient.get_job.
    let run_policy = &job["spec"]["runPolicy"];
    assert_eq!(run_policy["cleanPodPolicy"], "Running", "{job}");
    assert_eq!(run_policy["backoffLimit"], 3, "{job}");
    assert_eq!(run_policy["schedulingPolicy"]["minAvailable"], 3, "{job}");
    for replica in ["Master", "Worker"] {
        let pod = &job["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"];
        assert_eq!(pod["schedulerName"], "volcano", "{replica}: {job}");
    }
}

async fn a_job_that_breaks_a_policy_raises_the_sdks_error_with_our_message() {
    let (python, control_plane, ns) = setup("sdk-refused").await;
    let answer = create_with_sdk(&python, &control_plane.kubeconfig, &ns, "two-masters", 2);
    assert_eq!(answer["error_type"], "RuntimeError", "{answer}");
    let error = answer["error"].as_str().unwrap_or_default();
    for expected in [
        "Failed to create PyTorchJob",
        "(403)",
        "validate.gangplank.dev",
        "[coordinator] /spec/pytorchReplicaSpecs/Master/replicas: Master has 2 replicas",
    ] {
        assert!(
            error.contains(expected),
            "{expected:?} not in the SDK's error: {error}"
        );
    }
}
