//! The CRDs in crds/: generated from src/crd/ without drift, accepting every example and
//! every upstream manifest of their kinds, and compatible with the upstream CRDs.
//!
//! Tests that need the upstream corpus (`GANGPLANK_CORPUS`, else `../shared/corpus`) are
//! reported ignored without it, after one line saying why.

#[path = "crds/compat.rs"]
mod compat;
mod schemas;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use gangplank::crd::{self, CrdFile};
use gangplank::review::documents::ReadOptions;
use gangplank::review::read_documents;
use schemas::{assert_no_failures, find_corpus, manifests_in, schema_errors, Crds};
use serde_json::Value;

const CRDS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crds");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");

type Test = fn();

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let missing = find_corpus().err();
    if let Some(why) = &missing {
        // Past libtest-mimic's output: a skipped test must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: crds: the tests that read the upstream corpus are ignored: {why}"
        );
    }
    let own: [(&str, Test); 7] = [
        (
            "committed_crds_are_exactly_what_gangplank_crds_generates",
            committed_crds_are_exactly_what_gangplank_crds_generates,
        ),
        (
            "mpijobs_are_checked_against_the_crd_of_their_version",
            mpijobs_are_checked_against_the_crd_of_their_version,
        ),
        (
            "gangplank_crds_writes_the_committed_layout",
            gangplank_crds_writes_the_committed_layout,
        ),
        (
            "applying_crds_installs_each_crd_once_with_the_v2beta1_mpijob",
            applying_crds_installs_each_crd_once_with_the_v2beta1_mpijob,
        ),
        (
            "every_example_job_validates_against_our_crds",
            every_example_job_validates_against_our_crds,
        ),
        (
            "jobs_mutated_by_gangplank_check_validate_against_our_crds",
            jobs_mutated_by_gangplank_check_validate_against_our_crds,
        ),
        (
            "our_schemas_refuse_wrong_types_and_keep_unknown_template_fields",
            our_schemas_refuse_wrong_types_and_keep_unknown_template_fields,
        ),
    ];
    let corpus: [(&str, Test); 3] = [
        (
            "every_upstream_example_of_our_kinds_validates_against_our_crds",
            every_upstream_example_of_our_kinds_validates_against_our_crds,
        ),
        (
            "our_crds_differ_from_upstream_only_as_intended",
            compat::our_crds_differ_from_upstream_only_as_intended,
        ),
        (
            "the_comparison_names_each_difference",
            compat::the_comparison_names_each_difference,
        ),
    ];
    let trial = |(name, test): (&str, Test)| {
        libtest_mimic::Trial::test(name, move || {
            test();
            Ok(())
        })
    };
    let trials = own
        .into_iter()
        .map(trial)
        .chain(
            corpus
                .into_iter()
                .map(|t| trial(t).with_ignored_flag(missing.is_some())),
        )
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// The generated files, rendered once for all tests.
fn generated() -> &'static [CrdFile] {
    static FILES: OnceLock<Vec<CrdFile>> = OnceLock::new();
    FILES.get_or_init(|| crd::generate().expect("the CRDs render"))
}

/// The generated CRDs as JSON values, in [`generated`]'s order.
fn generated_values() -> Vec<Value> {
    generated()
        .iter()
        .map(|f| yaml_serde::from_str(&f.yaml).expect("a generated CRD is YAML"))
        .collect()
}

/// Validators of our CRDs, compiled once.
fn ours() -> &'static Crds {
    static CRDS: OnceLock<Crds> = OnceLock::new();
    CRDS.get_or_init(|| {
        let mut out = Crds::new();
        for (file, value) in generated().iter().zip(generated_values()) {
            schemas::add_crd(&mut out, &file.path, &value);
        }
        out
    })
}

fn committed_crds_are_exactly_what_gangplank_crds_generates() {
    let mut failures = Vec::new();
    for file in generated() {
        let path = Path::new(CRDS_DIR).join(&file.path);
        match std::fs::read_to_string(&path) {
            Err(e) => failures.push(format!("crds/{}: cannot read: {e}", file.path)),
            Ok(text) if text != file.yaml => failures.push(format!(
                "crds/{}: differs from the generated CRD{}",
                file.path,
                first_difference(&text, &file.yaml)
            )),
            Ok(_) => {}
        }
    }
    let paths: Vec<&str> = generated().iter().map(|f| f.path.as_str()).collect();
    for path in manifests_under(Path::new(CRDS_DIR)) {
        if !paths.contains(&path.as_str()) {
            failures.push(format!("crds/{path}: not generated by src/crd/ (stale?)"));
        }
    }
    assert!(
        failures.is_empty(),
        "crds/ is out of date with src/crd/; regenerate it with `{}` and commit the result:\n{}",
        crd::REGENERATE,
        failures.join("\n")
    );
}

/// `kubectl apply -f crds/` reads the files directly in crds/: they name each CRD once (two
/// files of one name would replace each other), the MPIJob one being v2beta1; and
/// `kubectl apply -f crds/mpijob-v1/` installs the v1 MPIJob alone.
fn applying_crds_installs_each_crd_once_with_the_v2beta1_mpijob() {
    let installed = |dir: &Path| -> Vec<(String, Vec<String>)> {
        let mut crds: Vec<(String, Vec<String>)> = manifests_in(dir)
            .iter()
            .map(|path| {
                let text = std::fs::read_to_string(path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                let crd: Value = yaml_serde::from_str(&text)
                    .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
                let text = |v: &Value, ptr: &str| {
                    v.pointer(ptr)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
                let versions = versions.into_iter().flatten();
                let versions = versions.map(|v| text(v, "/name")).collect();
                (text(&crd, "/metadata/name"), versions)
            })
            .collect();
        crds.sort();
        crds
    };
    let top = installed(Path::new(CRDS_DIR));
    let names: BTreeSet<&str> = top.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.len(), top.len(), "a CRD name twice in crds/: {top:?}");
    let mpi = top.iter().find(|(name, _)| name == "mpijobs.kubeflow.org");
    assert_eq!(
        mpi.map(|(_, versions)| versions.as_slice()),
        Some(["v2beta1".to_string()].as_slice()),
        "crds/ installs the v2beta1 MPIJob: {top:?}"
    );
    assert_eq!(top.len(), 6, "the five v1 kinds and MPIJob: {top:?}");
    let v1 = installed(&Path::new(CRDS_DIR).join(crd::MPIJOB_V1_DIR));
    assert_eq!(
        v1,
        [("mpijobs.kubeflow.org".to_string(), vec!["v1".to_string()])],
        "crds/{}/ holds the v1 MPIJob alone",
        crd::MPIJOB_V1_DIR
    );
}

/// `gangplank crds --out DIR` into a directory that does not exist yet writes the files that
/// are in crds/, in the same places (`mpijob-v1/` included), and nothing else.
fn gangplank_crds_writes_the_committed_layout() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let out = tmp.path().join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_gangplank"))
        .arg("crds")
        .arg("--out")
        .arg(&out)
        .output()
        .expect("gangplank runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "gangplank crds failed: {stderr}");
    let written = manifests_under(&out);
    assert_eq!(written, manifests_under(Path::new(CRDS_DIR)));
    for path in &written {
        let read = |dir: &Path| {
            std::fs::read_to_string(dir.join(path))
                .unwrap_or_else(|e| panic!("cannot read {path} in {}: {e}", dir.display()))
        };
        assert!(
            read(&out) == read(Path::new(CRDS_DIR)),
            "{path}: written differs from crds/"
        );
        assert!(stderr.contains(path.as_str()), "{path} not named: {stderr}");
    }
}

/// Every manifest under `root`, subdirectories included, as a `/`-separated path relative to
/// it, sorted.
fn manifests_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for path in entries.map(|e| e.expect("readable directory entry").path()) {
            if path.is_dir() {
                dirs.push(path);
            } else if schemas::is_manifest(&path) {
                let relative = path.strip_prefix(root).expect("under the root");
                let parts: Vec<_> = relative.iter().map(|p| p.to_string_lossy()).collect();
                out.push(parts.join("/"));
            }
        }
    }
    out.sort();
    out
}

/// `: line N: committed "…", generated "…"`, for the first line that differs.
fn first_difference(committed: &str, generated: &str) -> String {
    let mut committed_lines = committed.lines();
    let mut generated_lines = generated.lines();
    for n in 1.. {
        match (committed_lines.next(), generated_lines.next()) {
            (None, None) => return " (line endings)".into(),
            (a, b) if a != b => {
                return format!(": line {n}: committed {a:?}, generated {b:?}");
            }
            _ => {}
        }
    }
    String::new()
}

/// What our CRD of an object's kind says about it.
struct Verdict {
    /// `file (version)` of the CRD.
    crd: String,
    /// Schema errors the apiserver would reject the object for (`path: message`).
    invalid: Vec<String>,
    /// Fields the apiserver would silently prune (`path: message`).
    pruned: Vec<String>,
}

impl Verdict {
    /// Each finding as one line naming the source.
    fn failures(&self, source: &str) -> Vec<String> {
        let crd = &self.crd;
        let invalid = self
            .invalid
            .iter()
            .map(|e| format!("{source}: invalid for {crd}: {e}"));
        let pruned = self
            .pruned
            .iter()
            .map(|e| format!("{source}: {crd} would prune {e}"));
        invalid.chain(pruned).collect()
    }
}

/// Our CRD's verdict on an object; `None` when its kind is not one of ours (ConfigMap, a
/// v1alpha1 XGBoostJob).
fn check_against_ours(object: &Value) -> Option<Verdict> {
    let schemas = ours().get(&type_meta(object))?;
    let invalid = schema_errors(&schemas.loose, object);
    let pruned = schema_errors(&schemas.strict, object)
        .into_iter()
        .filter(|e| !invalid.contains(e))
        .collect();
    Some(Verdict {
        crd: schemas.crd.clone(),
        invalid,
        pruned,
    })
}

fn type_meta(object: &Value) -> (String, String) {
    let text = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or_default();
    (text("apiVersion").to_string(), text("kind").to_string())
}

/// Every document of `paths`, with its source, as `gangplank check` reads them.
fn documents(paths: &[PathBuf]) -> Vec<(String, Value)> {
    read_documents(paths, &ReadOptions::default())
        .into_iter()
        .map(|doc| {
            let doc = doc.unwrap_or_else(|e| panic!("{}: unreadable: {}", e.source, e.message));
            (doc.source, doc.input.object)
        })
        .collect()
}

/// Checks every document of our kinds; returns how many there were.
fn check_all(what: &str, docs: &[(String, Value)]) -> usize {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (source, object) in docs {
        if let Some(verdict) = check_against_ours(object) {
            checked += 1;
            failures.extend(verdict.failures(source));
        }
    }
    assert_no_failures(what, &failures);
    checked
}

fn every_example_job_validates_against_our_crds() {
    let docs = documents(&manifests_in(Path::new(EXAMPLES)));
    let checked = check_all("examples/", &docs);
    // pytorchjob x2, sweep x2, tfjob, xgboostjob, paddlejob, jaxjob, mpijob v1 and v2beta1.
    assert!(
        checked >= 10,
        "expected the example jobs, checked {checked}"
    );
}

fn jobs_mutated_by_gangplank_check_validate_against_our_crds() {
    let files = manifests_in(Path::new(EXAMPLES));
    let output = Command::new(env!("CARGO_BIN_EXE_gangplank"))
        .args(["check", "--policies", POLICIES, "-o", "yaml"])
        .args(&files)
        .output()
        .expect("gangplank runs");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    assert!(
        output.status.success(),
        "gangplank check failed on examples/: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let docs: Vec<(String, Value)> = yaml_serde::Deserializer::from_str(&stdout)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("check -o yaml output is YAML"))
        .enumerate()
        .map(|(i, doc)| (format!("check -o yaml document {}", i + 1), doc))
        .collect();
    let mutated = docs
        .iter()
        .filter(|(_, d)| {
            d.pointer("/metadata/annotations/gangplank.dev~1defaulted")
                .is_some()
        })
        .count();
    assert!(mutated >= 6, "expected mutated jobs, found {mutated}");
    let checked = check_all("gangplank check -o yaml examples/", &docs);
    assert!(
        checked >= 10,
        "expected the example jobs, checked {checked}"
    );
}

fn our_schemas_refuse_wrong_types_and_keep_unknown_template_fields() {
    let text = std::fs::read_to_string(format!("{EXAMPLES}/pytorchjob-gpu.yaml")).expect("example");
    let job: Value = yaml_serde::from_str(&text).expect("the example is YAML");
    let with = |ptr: &str, value: Value| {
        let mut j = job.clone();
        *j.pointer_mut(ptr).expect("pointer into the example") = value;
        check_against_ours(&j).expect("PyTorchJob is ours")
    };
    let worker = "/spec/pytorchReplicaSpecs/Worker";
    let wrong = with(&format!("{worker}/replicas"), Value::from("eight"));
    assert!(
        wrong.invalid.iter().any(|e| e.starts_with(worker)),
        "{:?}",
        wrong.failures("wrong type")
    );
    let mut unknown = job.clone();
    unknown["spec"]["pytorchReplicaSpecs"]["Worker"]["gangSize"] = Value::from(9);
    let pruned = check_against_ours(&unknown).expect("ours");
    assert!(
        pruned.invalid.is_empty(),
        "{:?}",
        pruned.failures("gangSize")
    );
    assert!(
        pruned.pruned.iter().any(|e| e.contains("gangSize")),
        "{:?}",
        pruned.failures("gangSize")
    );
    let mut template = job.clone();
    template["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["newerPodField"] =
        Value::from(true);
    assert_no_failures(
        "a template field newer than the CRD",
        &check_against_ours(&template)
            .expect("ours")
            .failures("newerPodField"),
    );
    let no_specs = with("/spec", serde_json::json!({"runPolicy": {}}));
    assert!(
        no_specs
            .invalid
            .iter()
            .any(|e| e.contains("pytorchReplicaSpecs")),
        "{:?}",
        no_specs.failures("no replica specs")
    );
}

/// A v2beta1 MPIJob meets the v2beta1 CRD (its enum), and the same spec sent as v1 meets the
/// v1 CRD, which does not know the v2beta1 fields.
fn mpijobs_are_checked_against_the_crd_of_their_version() {
    let text = std::fs::read_to_string(format!("{EXAMPLES}/mpijob-v2beta1.yaml")).expect("example");
    let job: Value = yaml_serde::from_str(&text).expect("the example is YAML");
    let verdict = check_against_ours(&job).expect("MPIJob v2beta1 is ours");
    assert_no_failures(
        "examples/mpijob-v2beta1.yaml",
        &verdict.failures("as written"),
    );
    assert!(verdict.crd.contains("v2beta1"), "{}", verdict.crd);

    let mut unknown_mpi = job.clone();
    unknown_mpi["spec"]["mpiImplementation"] = Value::from("MVAPICH");
    let verdict = check_against_ours(&unknown_mpi).expect("ours");
    assert!(
        verdict
            .invalid
            .iter()
            .any(|e| e.starts_with("/spec/mpiImplementation")),
        "{:?}",
        verdict.failures("MVAPICH")
    );

    let mut as_v1 = job.clone();
    as_v1["apiVersion"] = Value::from("kubeflow.org/v1");
    let verdict = check_against_ours(&as_v1).expect("MPIJob v1 is ours");
    assert!(
        verdict.crd.starts_with(crd::MPIJOB_V1_DIR),
        "{}",
        verdict.crd
    );
    assert!(
        verdict.invalid.is_empty(),
        "{:?}",
        verdict.failures("as v1")
    );
    for field in ["launcherCreationPolicy", "mpiImplementation"] {
        assert!(
            verdict.pruned.iter().any(|e| e.contains(field)),
            "v1 prunes {field}: {:?}",
            verdict.failures("as v1")
        );
    }
}

/// Upstream examples of our kinds: ours must accept each (as upstream's CRD does), and must
/// not prune a field that upstream's CRD keeps. The MPIJobs go to the CRD of their version:
/// the mpi-operator's examples (v2beta1) to crds/kubeflow.org_mpijobs.v2beta1.yaml, the
/// training-operator's (v1) to crds/mpijob-v1/.
fn every_upstream_example_of_our_kinds_validates_against_our_crds() {
    let corpus = find_corpus().unwrap_or_else(|why| panic!("{why}"));
    let upstream = schemas::load_dir(&corpus.join("upstream-crds"));
    let docs = documents(&[corpus.join("upstream-examples")]);
    let (mut checked, mut failures) = (0, Vec::new());
    let mut mpi_checked: BTreeMap<String, usize> = BTreeMap::new();
    for (source, object) in &docs {
        let Some(mut verdict) = check_against_ours(object) else {
            continue;
        };
        checked += 1;
        let (api_version, kind) = type_meta(object);
        if kind == "MPIJob" {
            *mpi_checked.entry(api_version).or_default() += 1;
        }
        // Unknown fields upstream's CRD prunes as well are the manifest's, not ours.
        let upstream_prunes = schema_errors(&upstream[&type_meta(object)].strict, object);
        verdict.pruned.retain(|e| !upstream_prunes.contains(e));
        failures.extend(verdict.failures(source));
    }
    assert_no_failures("upstream examples against our CRDs", &failures);
    assert!(
        checked >= 22,
        "expected the upstream PyTorch/TF/XGBoost/Paddle/JAX/MPI examples, checked {checked}"
    );
    // The corpus has 5 mpi-operator (v2beta1) and 2 training-operator (v1) MPIJobs.
    let count = |version: &str| mpi_checked.get(version).copied().unwrap_or_default();
    assert!(
        count("kubeflow.org/v2beta1") >= 5 && count("kubeflow.org/v1") >= 2,
        "expected the upstream MPIJob examples of both versions, checked {mpi_checked:?}"
    );
}
