//! Real manifests: the upstream Kubeflow and MPI operator examples (`shared/corpus`) must be
//! read and reviewed without an input or policy error, and whatever gangplank mutates must
//! stay valid for the upstream CRD schemas, so that the apiserver stores what we patched.
//!
//! The corpus lives outside the repository: `GANGPLANK_CORPUS`, else `../shared/corpus`
//! beside the crate. Without it every test is reported ignored, after one line saying why.
//!
//! Schemas are checked loose and strict (tests/schemas): a mutation must not add a field
//! the apiserver would prune (the default it meant to persist would vanish).

mod schemas;

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gangplank::cluster::ClusterHandle;
use gangplank::policy::PolicySet;
use gangplank::review::documents::ReadOptions;
use gangplank::review::skipped::{skipped_at_stages, Stage};
use gangplank::review::{read_documents, review};
use schemas::{assert_no_failures, find_corpus, manifests_in, schema_errors, to_json_schema, Crds};
use serde_json::{json, Value};

const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");

/// The corpus directory, in a test `main` runs only when there is one.
fn corpus_dir() -> PathBuf {
    find_corpus().unwrap_or_else(|why| panic!("{why}"))
}

/// One trial per test; all ignored, after one line saying why, without the corpus.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let missing = find_corpus().err();
    if let Some(why) = &missing {
        // Past libtest-mimic's output: a skipped suite must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: corpus: every test ignored: {why}"
        );
    }
    let tests: [(&str, fn()); 7] = [
        (
            "reads_and_reviews_every_upstream_example_without_errors",
            reads_and_reviews_every_upstream_example_without_errors,
        ),
        (
            "every_upstream_example_gets_its_reviewed_verdict_and_violations",
            every_upstream_example_gets_its_reviewed_verdict_and_violations,
        ),
        (
            "every_example_gets_the_same_decision_with_the_index_on_and_off",
            every_example_gets_the_same_decision_with_the_index_on_and_off,
        ),
        (
            "mutated_upstream_examples_stay_valid_for_the_upstream_crds",
            mutated_upstream_examples_stay_valid_for_the_upstream_crds,
        ),
        (
            "mutated_good_examples_are_valid_for_the_upstream_crds",
            mutated_good_examples_are_valid_for_the_upstream_crds,
        ),
        (
            "upstream_schemas_catch_wrong_types_and_unknown_fields",
            upstream_schemas_catch_wrong_types_and_unknown_fields,
        ),
        (
            "strict_schemas_refuse_unknown_fields_and_accept_int_or_string",
            strict_schemas_refuse_unknown_fields_and_accept_int_or_string,
        ),
    ];
    let trials = tests
        .into_iter()
        .map(|(name, test)| {
            libtest_mimic::Trial::test(name, move || {
                test();
                Ok(())
            })
            .with_ignored_flag(missing.is_some())
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

fn crds(corpus: &Path) -> &'static Crds {
    static CRDS: OnceLock<Crds> = OnceLock::new();
    CRDS.get_or_init(|| {
        let mut crds = schemas::load_dir(&corpus.join("upstream-crds"));
        // Kubeflow Trainer v2.3.0's, for the TrainJob and runtime examples.
        let trainer = corpus.join("trainer-v2.3.0/crds");
        if trainer.is_dir() {
            crds.extend(schemas::load_dir(&trainer));
        }
        crds
    })
}

/// One training object after review.
struct Reviewed {
    source: String,
    api_version: String,
    kind: String,
    original: Value,
    mutated: Value,
}

/// The shipped policies, compiled once for all tests of this file.
fn shipped() -> &'static PolicySet {
    static SET: OnceLock<PolicySet> = OnceLock::new();
    SET.get_or_init(|| {
        PolicySet::load(Path::new(POLICIES))
            .unwrap_or_else(|e| panic!("policies in {POLICIES} do not load: {e}"))
    })
}

/// Reads and reviews `paths`; input and policy errors are returned as failures.
fn review_paths(paths: &[PathBuf]) -> (Vec<Reviewed>, Vec<String>) {
    let set = shipped();
    let (mut jobs, mut failures) = (Vec::new(), Vec::new());
    for doc in read_documents(paths, &ReadOptions::default()) {
        let doc = match doc {
            Ok(doc) => doc,
            Err(e) => {
                failures.push(format!("{}: input error: {}", e.source, e.message));
                continue;
            }
        };
        match review(set, &doc.input) {
            Err(e) => failures.push(format!("{}: policy error: {e}", doc.source)),
            Ok(d) if d.skipped.is_some() => {}
            Ok(d) => {
                let (api_version, kind) = doc.input.type_meta();
                jobs.push(Reviewed {
                    api_version: api_version.to_string(),
                    kind: kind.to_string(),
                    original: doc.input.object.clone(),
                    source: doc.source,
                    mutated: d.mutated,
                });
            }
        }
    }
    (jobs, failures)
}

/// Schema failures of one reviewed object. With `strict_original`, the object must carry no
/// unknown field at all; otherwise it may keep the unknown fields it came with.
fn validate(job: &Reviewed, crds: &Crds, strict_original: bool) -> Vec<String> {
    let Some(schemas) = crds.get(&(job.api_version.clone(), job.kind.clone())) else {
        return vec![format!(
            "{}: no upstream CRD for {} {}",
            job.source, job.api_version, job.kind
        )];
    };
    let invalid = schema_errors(&schemas.loose, &job.mutated);
    let before = if strict_original {
        Vec::new()
    } else {
        schema_errors(&schemas.strict, &job.original)
    };
    let pruned: Vec<String> = schema_errors(&schemas.strict, &job.mutated)
        .into_iter()
        .filter(|e| !invalid.contains(e) && !before.contains(e))
        .collect();
    let crd = &schemas.crd;
    let mut out: Vec<String> = invalid
        .iter()
        .map(|e| format!("{}: mutated object is invalid for {crd}: {e}", job.source))
        .collect();
    out.extend(pruned.iter().map(|e| {
        format!(
            "{}: field unknown to {crd} (the apiserver would prune it): {e}",
            job.source
        )
    }));
    out
}

fn reads_and_reviews_every_upstream_example_without_errors() {
    let corpus = corpus_dir();
    let (jobs, failures) = review_paths(&[corpus.join("upstream-examples")]);
    assert_no_failures("upstream examples", &failures);
    assert!(
        jobs.len() >= 20,
        "expected the upstream training jobs, found {}",
        jobs.len()
    );
}

/// The reviewed verdicts: `GANGPLANK_BLESS=1 cargo test --test corpus` rewrites it; read
/// every change before committing it.
const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/corpus-verdicts.yaml"
);

/// Each upstream example document's verdict and violations, as `gangplank check` shows them.
fn verdicts(examples: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for doc in read_documents(&[examples.to_path_buf()], &ReadOptions::default()) {
        let (source, entry) = match doc {
            Err(e) => (
                e.source,
                json!({"verdict": "UNREADABLE", "error": e.message}),
            ),
            Ok(doc) => {
                let (_, kind) = doc.input.type_meta();
                let object = format!("{kind} {}/{}", doc.input.namespace, doc.input.name);
                let entry = match review(shipped(), &doc.input) {
                    Err(e) => json!({"object": object, "verdict": "ERROR", "error": e.to_string()}),
                    Ok(d) => {
                        let verdict = match (&d.skipped, d.allowed()) {
                            (Some(_), _) => "SKIPPED",
                            (None, true) => "ALLOWED",
                            (None, false) => "DENIED",
                        };
                        let found: Vec<String> = d
                            .violations
                            .iter()
                            .map(|v| format!("{} {}", v.action, v.render()))
                            .collect();
                        json!({"object": object, "verdict": verdict, "violations": found})
                    }
                };
                (doc.source, entry)
            }
        };
        let relative = Path::new(&source)
            .strip_prefix(examples)
            .map_or(source.clone(), |p| p.display().to_string());
        let mut entry = entry;
        entry["source"] = json!(relative);
        out.push(entry);
    }
    out.sort_by_key(|e| e["source"].as_str().unwrap_or_default().to_string());
    out
}

fn every_upstream_example_gets_its_reviewed_verdict_and_violations() {
    let corpus = corpus_dir();
    let got = verdicts(&corpus.join("upstream-examples"));
    if std::env::var_os("GANGPLANK_BLESS").is_some() {
        let yaml = yaml_serde::to_string(&got).expect("verdicts serialize");
        let header = "# Verdicts of gangplank check on corpus/upstream-examples (tests/corpus.rs).\n# Regenerate with GANGPLANK_BLESS=1 cargo test --test corpus; review every change.\n";
        std::fs::write(GOLDEN, format!("{header}{yaml}")).expect("golden written");
        let _ = writeln!(std::io::stderr(), "blessed: {GOLDEN} rewritten");
        return;
    }
    let text = std::fs::read_to_string(GOLDEN).expect("the golden verdicts exist");
    let golden: Vec<Value> = yaml_serde::from_str(&text).expect("the golden verdicts parse");
    let key = |e: &Value| e["source"].as_str().unwrap_or_default().to_string();
    let expected: HashMap<String, &Value> = golden.iter().map(|e| (key(e), e)).collect();
    let mut failures = Vec::new();
    for entry in &got {
        match expected.get(&key(entry)) {
            Some(want) if *want == entry => {}
            Some(want) => failures.push(format!(
                "{}:\n  golden: {want}\n  now:    {entry}",
                key(entry)
            )),
            None => failures.push(format!("{}: not in the golden file: {entry}", key(entry))),
        }
    }
    let seen: Vec<String> = got.iter().map(key).collect();
    failures.extend(
        expected
            .keys()
            .filter(|k| !seen.contains(k))
            .map(|k| format!("{k}: in the golden file, no longer in the corpus")),
    );
    assert!(
        golden.len() >= 20,
        "expected the upstream examples in {GOLDEN}"
    );
    assert_no_failures(
        "verdicts against tests/data/corpus-verdicts.yaml (GANGPLANK_BLESS=1 to rewrite)",
        &failures,
    );
}

/// A cluster for the index differential: with it, `cluster` holds and the facts read from
/// the inventory decide (NetworkPolicies select every pod in `default` only).
const INVENTORY: &str = r#"apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: gpu-0, labels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}}, status: {allocatable: {cpu: "96", memory: 1000Gi, pods: "110", nvidia.com/gpu: "8"}}}
- {apiVersion: v1, kind: Node, metadata: {name: cpu-0}, status: {allocatable: {cpu: "64", memory: 256Gi, pods: "110"}}}
- {apiVersion: v1, kind: Namespace, metadata: {name: default}}
- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: deny-all, namespace: default}, spec: {podSelector: {}, policyTypes: [Ingress]}}
- {apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: standard}, provisioner: example.com/disk}
- {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: default}, spec: {weight: 1}}
"#;

/// Decisions with the index on and off, for every document of `paths`; adds the policy
/// evaluations (one policy at one stage it has rules for) the index skipped, and all of
/// them, to `counts`.
fn index_differential(
    set: &PolicySet,
    paths: &[PathBuf],
    counts: &mut (usize, usize),
    failures: &mut Vec<String>,
) {
    let reference = set.without_index();
    let decided = |set: &PolicySet, input: &gangplank::review::Input| match review(set, input) {
        Ok(d) => serde_json::to_value(&d).expect("decisions serialize"),
        Err(e) => json!({"error": e.to_string()}),
    };
    for doc in read_documents(paths, &ReadOptions::default()) {
        let Ok(doc) = doc else { continue };
        let (indexed, all) = (decided(set, &doc.input), decided(&reference, &doc.input));
        if indexed != all {
            failures.push(format!(
                "{}: the index changes the decision\n  index on:  {indexed}\n  index off: {all}",
                doc.source
            ));
        }
        if gangplank::review::decide::skip_reason(set, &doc.input).is_some() {
            continue;
        }
        let Ok(stages) = skipped_at_stages(set, &doc.input) else {
            continue;
        };
        for p in set
            .policies()
            .iter()
            .filter(|p| p.applies_to(&doc.input.namespace))
        {
            let (m, v) = stages.of(&p.name, p.has_mutation, p.has_violation || p.has_warning);
            for stage in [m, v] {
                counts.1 += usize::from(stage != Stage::Absent);
                counts.0 += usize::from(matches!(stage, Stage::Skipped(_)));
            }
        }
    }
}

/// The index may only skip a policy that could not have fired: every upstream example and
/// every shipped example (rejected ones too) gets the same decision (skip reason,
/// violations, patch, mutated object) with it on and off, with and without a cluster.
fn every_example_gets_the_same_decision_with_the_index_on_and_off() {
    let corpus = corpus_dir();
    let inventory =
        gangplank::cluster::snapshot::parse(INVENTORY, "corpus.rs").expect("the inventory parses");
    let with_cluster = shipped()
        .clone()
        .with_cluster(ClusterHandle::fixed(&inventory));
    if !shipped().index_enabled() {
        let _ = writeln!(
            std::io::stderr(),
            "note: the index is off (GANGPLANK_INDEX=off): the differential compares the reference with itself"
        );
    }
    let mut failures = Vec::new();
    for (what, paths) in [
        ("upstream examples", vec![corpus.join("upstream-examples")]),
        ("examples/", vec![PathBuf::from(EXAMPLES)]),
    ] {
        for (cluster, set) in [("no cluster", shipped()), ("a cluster", &with_cluster)] {
            let mut counts = (0, 0);
            index_differential(set, &paths, &mut counts, &mut failures);
            let (skipped, all) = counts;
            eprintln!(
                "index: {what}, {cluster}: {skipped} of {all} policy evaluations skipped ({:.0}%)",
                100.0 * skipped as f64 / all.max(1) as f64
            );
            assert!(all > 0, "{what}: no policy evaluated");
        }
    }
    assert_no_failures("decisions with the index on and off", &failures);
}

fn mutated_upstream_examples_stay_valid_for_the_upstream_crds() {
    let corpus = corpus_dir();
    let crds = crds(&corpus);
    let (jobs, mut failures) = review_paths(&[corpus.join("upstream-examples")]);
    for job in &jobs {
        failures.extend(validate(job, crds, false));
    }
    assert_no_failures("mutated upstream examples", &failures);
}

fn mutated_good_examples_are_valid_for_the_upstream_crds() {
    let corpus = corpus_dir();
    let crds = crds(&corpus);
    let files = manifests_in(Path::new(EXAMPLES));
    let (jobs, mut failures) = review_paths(&files);
    assert!(
        jobs.len() >= 8,
        "expected the example jobs, found {}",
        jobs.len()
    );
    for job in &jobs {
        failures.extend(validate(job, crds, true));
    }
    assert_no_failures("mutated examples", &failures);
}

fn upstream_schemas_catch_wrong_types_and_unknown_fields() {
    let corpus = corpus_dir();
    let crds = crds(&corpus);
    let text = std::fs::read_to_string(format!("{EXAMPLES}/pytorchjob-gpu.yaml")).expect("example");
    let job: Value = yaml_serde::from_str(&text).expect("the example is YAML");
    let with = |ptr: &str, key: &str, value: Value| {
        let mut j = job.clone();
        let target = j
            .pointer_mut(ptr)
            .and_then(Value::as_object_mut)
            .expect("pointer into the example");
        target.insert(key.into(), value);
        Reviewed {
            source: format!("{ptr}/{key}"),
            api_version: "kubeflow.org/v1".into(),
            kind: "PyTorchJob".into(),
            original: job.clone(),
            mutated: j,
        }
    };
    let spec = "/spec/pytorchReplicaSpecs/Worker";
    let wrong_type = with(spec, "replicas", Value::from("eight"));
    let unknown = with(spec, "gangSize", Value::from(9));
    let fine = with(spec, "restartPolicy", Value::from("ExitCode"));
    assert!(validate(&wrong_type, crds, true)
        .iter()
        .any(|e| e.contains("invalid")));
    assert!(validate(&unknown, crds, true)
        .iter()
        .any(|e| e.contains("prune")));
    assert_no_failures("a valid change", &validate(&fine, crds, true));
}

fn strict_schemas_refuse_unknown_fields_and_accept_int_or_string() {
    let schema: Value = serde_json::json!({
        "type": "object",
        "properties": {
            "cpu": {"x-kubernetes-int-or-string": true, "type": "string", "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {}},
        },
    });
    let strict = jsonschema::draft4::new(&to_json_schema(&schema, true)).expect("compiles");
    let ok = serde_json::json!({"cpu": 8, "free": {"anything": 1}, "dropped": null});
    assert!(
        schema_errors(&strict, &ok).is_empty(),
        "{:?}",
        schema_errors(&strict, &ok)
    );
    let unknown = serde_json::json!({"cpu": "8", "typo": 1});
    assert_eq!(schema_errors(&strict, &unknown).len(), 1);
}
