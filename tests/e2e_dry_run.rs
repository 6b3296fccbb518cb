//! Offline equals online: `gangplank check` is a trustworthy dry run.
//!
//! Every manifest of a training kind under `examples/` and the upstream example corpus is
//! created with `?dryRun=All` through a real kube-apiserver that calls gangplank's webhooks
//! (deploy/'s configurations). For each object:
//!
//! - allowed or refused, as `gangplank check` says;
//! - a refusal carries exactly `check`'s deny lines;
//! - the object returned equals `check -o yaml`'s mutated object, except for what the
//!   apiserver owns ([`APISERVER_OWNED`]) and the fields the CRD schemas default, each named
//!   in [`SCHEMA_DEFAULTS`] with where it comes from. Any other difference fails.
//!
//! One trial per file. Without test binaries every trial is ignored and one line says why.

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use support::{ControlPlane, Crds, Webhooks};

/// Metadata the apiserver sets on every object it creates.
const APISERVER_OWNED: [&str; 5] = [
    "/metadata/uid",
    "/metadata/resourceVersion",
    "/metadata/creationTimestamp",
    "/metadata/generation",
    "/metadata/managedFields",
];

/// Fields the upstream CRD schemas default, so the apiserver adds them to what gangplank
/// returns: (JSON pointer, `*` for any one segment; the value added; where it comes from).
/// Only an `add` of exactly this value at a matching pointer is accepted; any other
/// difference fails the trial.
const SCHEMA_DEFAULTS: [(&str, &str, &str); 4] = [
    (
        "/spec/runPolicy/suspend",
        "false",
        "RunPolicy.suspend defaults to false in every kubeflow.org CRD; it appears because \
         gangplank persists runPolicy defaults",
    ),
    (
        "/spec/*/*/template/spec/containers/*/ports/*/protocol",
        "\"TCP\"",
        "ContainerPort.protocol defaults to TCP in the CRDs' embedded pod template schema",
    ),
    (
        "/spec/runLauncherAsWorker",
        "false",
        "mpi-operator v2beta1 CRD default",
    ),
    (
        "/spec/sshAuthMountPath",
        "\"/root/.ssh\"",
        "mpi-operator v2beta1 CRD default",
    ),
];

fn main() {
    let args = Arguments::from_args();
    let assets = support::assets::usable();
    let trials = manifests()
        .into_iter()
        .map(|(name, path)| {
            let assets = assets.clone();
            let ignored = assets.is_err();
            Trial::test(name, move || match assets {
                Ok(assets) => check_file(&assets, &path),
                Err(_) => Ok(()),
            })
            .with_ignored_flag(ignored)
        })
        .collect::<Vec<_>>();
    if let Err(why) = &assets {
        support::skip(&format!("e2e_dry_run: every trial ignored: {why}"));
    }
    libtest_mimic::run(&args, trials).exit();
}

/// (trial name, path) of every YAML file under examples/ and the upstream example corpus.
fn manifests() -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    let corpus = support::corpus().join("upstream-examples");
    if corpus.is_dir() {
        yaml_files(&corpus, "corpus", &mut found);
    } else {
        support::skip(&format!(
            "e2e_dry_run: upstream corpus not found at {} (set GANGPLANK_CORPUS); examples/ only",
            corpus.display()
        ));
    }
    yaml_files(&support::repo().join("examples"), "examples", &mut found);
    // Trainer v2 runtimes and TrainJobs: this control plane has no Trainer CRDs, and a
    // TrainJob is judged on a runtime the webhook must have seen stored, which a dry run of
    // the runtime never does. tests/e2e_trainer.rs applies them through a real apiserver.
    found.retain(|(_, path)| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        !text.contains("apiVersion: trainer.kubeflow.org/")
    });
    found.sort();
    found
}

fn yaml_files(dir: &Path, label: &str, found: &mut Vec<(String, PathBuf)>) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                let relative = path.strip_prefix(dir).expect("under dir").display();
                found.push((format!("{label}/{relative}"), path));
            }
        }
    }
}

/// What `check` and the apiserver made of one document of a training kind.
struct Offline {
    allowed: bool,
    deny_lines: Vec<String>,
    /// `check -o yaml`'s object, for allowed documents.
    mutated: Option<Value>,
}

fn check_file(assets: &support::assets::Assets, path: &Path) -> Result<(), Failed> {
    let documents = read_documents(path);
    let offline = run_check(path, documents.len());
    let mut problems = Vec::new();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut training = 0;
    for (index, (document, offline)) in documents.iter().zip(offline).enumerate() {
        let Some(offline) = offline else { continue };
        training += 1;
        let label = format!("{}#{}", path.display(), index + 1);
        let online = runtime.block_on(create_dry_run(assets, document));
        problems.extend(compare(&label, &offline, online));
    }
    if training == 0 {
        // Not a test of anything: PVCs, v1alpha1 jobs no CRD serves. Said, not hidden.
        eprintln!("{}: no training job in this file", path.display());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// The file's documents as `check` reads them (empty documents dropped).
fn read_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("manifest readable");
    yaml_serde::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("manifest is YAML"))
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// `gangplank check -o json` and `-o yaml` on the file: per document, `None` when it is not a
/// training job (check skips it; the webhooks never see it).
fn run_check(path: &Path, documents: usize) -> Vec<Option<Offline>> {
    let report: Value =
        serde_json::from_slice(&check_output(path, "json")).expect("check -o json output");
    let yaml = String::from_utf8(check_output(path, "yaml")).expect("UTF-8");
    let mut mutated = yaml_serde::Deserializer::from_str(&yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("check -o yaml output"));
    let outcomes = report.as_array().expect("a list of outcomes");
    assert_eq!(
        outcomes.len(),
        documents,
        "check read another number of documents"
    );
    outcomes
        .iter()
        .map(|outcome| {
            assert_eq!(outcome["result"], "decided", "check: {outcome}");
            let decision = &outcome["decision"];
            let allowed = !decision["violations"]
                .as_array()
                .expect("violations")
                .iter()
                .any(|v| v["action"] == "deny");
            // -o yaml writes every allowed object, skipped ones included, in order.
            let object: Option<Value> = if allowed { mutated.next() } else { None };
            if !decision["skipped"].is_null() {
                return None;
            }
            Some(Offline {
                allowed,
                deny_lines: deny_lines(decision),
                mutated: object,
            })
        })
        .collect()
}

/// `[policy] path: message` of each deny violation, as the webhook writes them.
fn deny_lines(decision: &Value) -> Vec<String> {
    let violations = decision["violations"].as_array().expect("violations");
    violations
        .iter()
        .filter(|v| v["action"] == "deny")
        .map(|v| {
            let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            format!("[{}] {}: {}", text("policy"), text("path"), text("msg"))
        })
        .collect()
}

fn check_output(path: &Path, format: &str) -> Vec<u8> {
    let output = std::process::Command::new(support::gangplank())
        .args(["check", "-o", format, "--policies"])
        .arg(support::repo().join("policies"))
        .arg(path)
        .output()
        .expect("run gangplank check");
    let code = output.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "gangplank check {} exited {code:?}: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Server-side dry-run create on the control plane whose CRDs serve the document's version.
async fn create_dry_run(
    assets: &support::assets::Assets,
    document: &Value,
) -> Result<Value, kube::Error> {
    let crds = if document["apiVersion"] == "kubeflow.org/v2beta1" {
        Crds::MpiV2beta1
    } else {
        Crds::TrainingV1
    };
    let control_plane = ControlPlane::shared(assets, crds);
    Webhooks::shared(control_plane);
    let namespace = document["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    control_plane.ensure_namespace(namespace).await;
    let client = control_plane.client().await;
    support::jobs::create(&client, namespace, document, true).await
}

fn compare(label: &str, offline: &Offline, online: Result<Value, kube::Error>) -> Vec<String> {
    match (offline.allowed, online) {
        (true, Ok(returned)) => {
            let expected = offline
                .mutated
                .as_ref()
                .expect("allowed objects are written");
            object_differences(label, expected, returned)
        }
        (false, Err(kube::Error::Api(status))) if status.code == 403 => {
            let lines = refusal_lines(&status.message);
            if lines == offline.deny_lines {
                Vec::new()
            } else {
                vec![format!(
                    "{label}: refused with other lines\n  check:     {:?}\n  apiserver: {lines:?}",
                    offline.deny_lines
                )]
            }
        }
        (true, Err(e)) => vec![format!("{label}: check allows it, the apiserver says {e}")],
        (false, Ok(_)) => vec![format!(
            "{label}: check denies it ({:?}), the apiserver admitted it",
            offline.deny_lines
        )],
        (false, Err(e)) => vec![format!("{label}: expected gangplank's refusal, got {e}")],
    }
}

/// The apiserver's `admission webhook "<name>" denied the request: <message>`, as lines.
fn refusal_lines(message: &str) -> Vec<String> {
    let body = message
        .split_once("denied the request: ")
        .map_or(message, |(_, body)| body);
    body.lines().map(str::to_string).collect()
}

fn object_differences(label: &str, expected: &Value, mut returned: Value) -> Vec<String> {
    for owned in APISERVER_OWNED {
        remove_pointer(&mut returned, owned);
    }
    // A manifest that names no namespace gets the one of the request's URL.
    if expected["metadata"].get("namespace").is_none() {
        remove_pointer(&mut returned, "/metadata/namespace");
    }
    json_patch::diff(expected, &returned)
        .0
        .iter()
        .filter(|op| !is_schema_default(op))
        .map(|op| {
            let op = serde_json::to_string(op).unwrap_or_default();
            format!("{label}: the apiserver's object differs from check -o yaml: {op}")
        })
        .collect()
}

/// An `add` of a value the CRD schema defaults ([`SCHEMA_DEFAULTS`]).
fn is_schema_default(op: &json_patch::PatchOperation) -> bool {
    let json_patch::PatchOperation::Add(add) = op else {
        return false;
    };
    let pointer = add.path.to_string();
    SCHEMA_DEFAULTS.iter().any(|(pattern, value, _)| {
        let value: Value = serde_json::from_str(value).expect("SCHEMA_DEFAULTS value is JSON");
        add.value == value && pointer_matches(pattern, &pointer)
    })
}

fn pointer_matches(pattern: &str, pointer: &str) -> bool {
    let (pattern, pointer): (Vec<&str>, Vec<&str>) =
        (pattern.split('/').collect(), pointer.split('/').collect());
    pattern.len() == pointer.len()
        && pattern
            .iter()
            .zip(&pointer)
            .all(|(p, s)| *p == "*" || p == s)
}

fn remove_pointer(value: &mut Value, pointer: &str) {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return;
    };
    if let Some(Value::Object(map)) = value.pointer_mut(parent) {
        map.remove(key);
    }
}
