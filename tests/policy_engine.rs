//! The policy engine on policy directories of its own: loading errors name the file and line,
//! a broken set is never half-loaded, parameters and actions apply, intents are deterministic.

use std::fs;
use std::path::Path;

use gangplank::policy::{Action, LoadError, PolicySet};
use gangplank::review::{self, Input};
use serde_json::{json, Value};

const GOOD: &str = r#"package gangplank.policies.backoff

import rego.v1

meta := {"title": "Backoff", "description": "defaults backoffLimit", "action": "deny", "params": {"limit": 3, "max": 10}}

mutation contains {"op": "default", "path": "/spec/runPolicy/backoffLimit", "value": data.params.backoff.limit}

violation contains {"path": "/spec/runPolicy/backoffLimit", "msg": sprintf("backoffLimit %d is over %d", [b, data.params.backoff.max])} if {
	b := input.object.spec.runPolicy.backoffLimit
	b > data.params.backoff.max
}
"#;

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        let path = dir.path().join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(path, text).expect("write policy");
    }
    dir
}

fn job(backoff: Option<i64>) -> Value {
    let mut j = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}}}
    });
    if let Some(b) = backoff {
        j["spec"]["runPolicy"] = json!({"backoffLimit": b});
    }
    j
}

fn load(dir: &Path) -> Result<PolicySet, String> {
    PolicySet::load(dir).map_err(|e| format!("{e}"))
}

#[test]
fn defaults_a_missing_field_and_reports_the_minimal_patch() {
    let dir = dir_with(&[("backoff.rego", GOOD)]);
    let set = load(dir.path()).expect("loads");
    let d = review::review(&set, &Input::create(job(None), "default")).expect("decides");
    assert!(d.allowed());
    let patch = serde_json::to_value(&d.patch).expect("patch json");
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/runPolicy", "value": {"backoffLimit": 3}}])
    );
}

#[test]
fn never_overwrites_a_user_value_with_a_default() {
    let dir = dir_with(&[("backoff.rego", GOOD)]);
    let set = load(dir.path()).expect("loads");
    let d = review::review(&set, &Input::create(job(Some(5)), "default")).expect("decides");
    assert!(d.patch.0.is_empty(), "{:?}", d.patch);
}

#[test]
fn params_yaml_overrides_parameters_and_actions() {
    let params = "policies:\n  backoff:\n    action: warn\n    params: {max: 4}\n";
    let dir = dir_with(&[("backoff.rego", GOOD), ("params.yaml", params)]);
    let set = load(dir.path()).expect("loads");
    assert_eq!(set.policy("backoff").map(|p| p.action), Some(Action::Warn));
    let d = review::review(&set, &Input::create(job(Some(5)), "default")).expect("decides");
    assert!(d.allowed());
    assert_eq!(
        d.warnings(),
        vec!["[backoff] /spec/runPolicy/backoffLimit: backoffLimit 5 is over 4"]
    );
}

#[test]
fn excluded_namespaces_skip_every_policy() {
    let params = "excludedNamespaces: [ns]\n";
    let dir = dir_with(&[("backoff.rego", GOOD), ("params.yaml", params)]);
    let set = load(dir.path()).expect("loads");
    let d = review::review(&set, &Input::create(job(Some(50)), "default")).expect("decides");
    assert!(
        d.skipped
            .as_deref()
            .is_some_and(|s| s.contains("namespace ns")),
        "{:?}",
        d.skipped
    );
}

#[test]
fn disabled_policies_are_not_evaluated() {
    let params = "policies:\n  backoff: {enabled: false}\n";
    let dir = dir_with(&[("backoff.rego", GOOD), ("params.yaml", params)]);
    let set = load(dir.path()).expect("loads");
    let d = review::review(&set, &Input::create(job(Some(50)), "default")).expect("decides");
    assert!(d.violations.is_empty() && d.patch.0.is_empty());
}

#[test]
fn a_syntax_error_names_the_policy_file_and_line() {
    let broken = GOOD.replace(
        "b > data.params.backoff.max",
        "b > > data.params.backoff.max",
    );
    let dir = dir_with(&[("backoff.rego", &broken)]);
    let err = load(dir.path()).expect_err("must not load");
    assert!(err.contains("backoff"), "{err}");
    assert!(
        err.contains("backoff.rego:11:9"),
        "file:line:col expected, got {err}"
    );
    assert!(
        err.contains("^"),
        "the caret under the fault must survive: {err}"
    );
}

#[test]
fn one_broken_file_fails_the_whole_set() {
    let other = GOOD.replace("backoff", "other").replace("if {", "if {{");
    let dir = dir_with(&[("backoff.rego", GOOD), ("other.rego", &other)]);
    assert!(
        load(dir.path()).is_err(),
        "a set with a broken file must not load partly"
    );
}

#[test]
fn a_package_that_does_not_match_the_file_name_is_refused() {
    let dir = dir_with(&[("limits.rego", GOOD)]);
    let err = load(dir.path()).expect_err("must not load");
    assert!(err.contains("package gangplank.policies.limits"), "{err}");
}

#[test]
fn a_policy_without_meta_is_refused() {
    let no_meta = GOOD.replace("meta :=", "not_meta :=");
    let dir = dir_with(&[("backoff.rego", &no_meta)]);
    let err = load(dir.path()).expect_err("must not load");
    assert!(err.contains("meta"), "{err}");
}

#[test]
fn params_naming_an_unknown_policy_are_refused() {
    let dir = dir_with(&[
        ("backoff.rego", GOOD),
        ("params.yaml", "policies:\n  bakoff: {action: warn}\n"),
    ]);
    match PolicySet::load(dir.path()) {
        Err(LoadError::UnknownPolicy { name, .. }) => assert_eq!(name, "bakoff"),
        other => panic!("expected UnknownPolicy, got {other:?}"),
    }
}

#[test]
fn a_runtime_fault_every_request_would_hit_fails_at_load() {
    let faulty =
        format!("{GOOD}\nviolation contains {{\"msg\": no_such_function(input.job.name)}}\n");
    let dir = dir_with(&[("backoff.rego", &faulty)]);
    assert!(load(dir.path()).is_err());
}

#[test]
fn an_empty_directory_is_an_error() {
    let dir = dir_with(&[]);
    let err = load(dir.path()).expect_err("must not load");
    assert!(err.contains("no policies"), "{err}");
}

#[test]
fn intents_apply_in_policy_name_order() {
    let set_to = |name: &str, v: &str| {
        format!(
            "package gangplank.policies.{name}\n\nimport rego.v1\n\nmeta := {{\"title\": \"t\", \"description\": \"d\", \"action\": \"deny\"}}\n\nmutation contains {{\"op\": \"set\", \"path\": \"/metadata/labels/owner\", \"value\": \"{v}\"}}\n"
        )
    };
    let dir = dir_with(&[
        ("b_second.rego", &set_to("b_second", "b")),
        ("a_first.rego", &set_to("a_first", "a")),
    ]);
    let set = load(dir.path()).expect("loads");
    for _ in 0..3 {
        let d = review::review(&set, &Input::create(job(None), "default")).expect("decides");
        assert_eq!(
            d.mutated.pointer("/metadata/labels/owner"),
            Some(&json!("b"))
        );
        let order: Vec<&str> = d.applied.iter().map(|i| i.policy.as_str()).collect();
        assert_eq!(order, vec!["a_first", "b_second"]);
    }
}

#[test]
fn a_malformed_intent_is_an_evaluation_error_naming_the_policy() {
    let bad = GOOD.replace("\"op\": \"default\"", "\"op\": \"replace\"");
    let dir = dir_with(&[("backoff.rego", &bad)]);
    match PolicySet::load(dir.path()) {
        Ok(set) => {
            let e = review::review(&set, &Input::create(job(None), "default"))
                .err()
                .map(|e| e.to_string());
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("backoff") && e.contains("op")),
                "{e:?}"
            );
        }
        Err(e) => panic!("the set itself is valid Rego: {e}"),
    }
}

#[test]
fn non_training_kinds_and_deletes_are_skipped() {
    let dir = dir_with(&[("backoff.rego", GOOD)]);
    let set = load(dir.path()).expect("loads");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let d = review::review(&set, &Input::create(cm, "default")).expect("decides");
    assert!(d.skipped.is_some() && d.patch.0.is_empty());
    let review_json =
        json!({"request": {"uid": "1", "operation": "DELETE", "oldObject": job(Some(99))}});
    let input = Input::from_review(review_json).expect("valid review");
    assert!(review::review(&set, &input)
        .expect("decides")
        .skipped
        .is_some());
}

#[test]
fn a_mutation_blocked_by_broken_structure_is_a_violation_not_a_failed_request() {
    let dir = dir_with(&[("backoff.rego", GOOD)]);
    let set = load(dir.path()).expect("loads");
    let mut j = job(None);
    j["spec"]["runPolicy"] = json!("oops");
    let d = review::review(&set, &Input::create(j, "default")).expect("still decides");
    assert!(!d.allowed());
    let v = d.violations.first().expect("one violation");
    assert_eq!(
        (v.policy.as_str(), v.path.as_str()),
        ("backoff", "/spec/runPolicy/backoffLimit")
    );
    assert!(v.msg.contains("/spec/runPolicy is a string"), "{}", v.msg);
}

#[test]
fn the_engine_variable_forces_the_interpreter() {
    let dir = dir_with(&[("backoff.rego", GOOD)]);
    let vm = load(dir.path()).expect("loads");
    assert_eq!(vm.interpreter_reason(), None, "the set compiles for the VM");
    // Only this test touches the variable, and it reads it back before anything else could.
    std::env::set_var("GANGPLANK_ENGINE", "interpreter");
    let forced = load(dir.path());
    std::env::remove_var("GANGPLANK_ENGINE");
    let forced = forced.expect("loads");
    assert_eq!(
        forced.interpreter_reason(),
        Some("GANGPLANK_ENGINE=interpreter")
    );
    let d = review::review(&forced, &Input::create(job(None), "default")).expect("decides");
    assert_eq!(
        d.mutated.pointer("/spec/runPolicy/backoffLimit"),
        Some(&json!(3))
    );
}

/// `every` with a body that indexes by the loop variable: regorus 0.14.1's VM answers it as
/// `some` (here: true, because group 0's demand is 1), the interpreter as OPA does (false).
const EVERY_BY_INDEX: &str = r#"package gangplank.policies.uniform

import rego.v1

meta := {"title": "Uniform", "description": "every", "action": "deny", "params": {}}

demands := [1, 2]

uniform if {
	d := demands[0]
	every i in [0, 1] { demands[i] == d }
}

violation contains {"path": "", "msg": "demands differ"} if not uniform
"#;

#[test]
fn a_set_using_every_runs_on_the_interpreter_and_gets_the_answer_right() {
    let dir = dir_with(&[("uniform.rego", EVERY_BY_INDEX)]);
    let set = load(dir.path()).expect("loads");
    let why = set.interpreter_reason().unwrap_or_default();
    assert!(why.contains("uniform.rego:11 uses `every`"), "{why}");
    let d = review::review(&set, &Input::create(job(None), "default")).expect("decides");
    let found: Vec<&str> = d.violations.iter().map(|v| v.msg.as_str()).collect();
    assert_eq!(found, ["demands differ"]);
}

#[test]
fn the_shipped_policies_use_no_every_and_run_on_the_vm() {
    let set = load(Path::new("policies")).expect("loads");
    assert_eq!(set.interpreter_reason(), None);
}

/// Loops over a 10,000 × 10,000 cross product, but only for jobs labelled `slow`, so the set
/// loads (its smoke test is not labelled) and the shipped policies run beside it.
const CROSS_PRODUCT: &str = r#"package gangplank.policies.cross

import rego.v1

meta := {"title": "Cross", "description": "pathological", "action": "deny", "params": {}}

violation contains "never" if {
	input.object.metadata.labels.slow == "true"
	some i in numbers.range(1, 10000)
	some j in numbers.range(1, 10000)
	i * j < 0
}
"#;

fn labelled(key: &str, value: Value) -> Value {
    let mut j = job(None);
    j["metadata"]["labels"] = json!({ key: value });
    j
}

fn with_shipped_policies(extra: &[(&str, &str)]) -> tempfile::TempDir {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let dir = tempfile::tempdir().expect("temp dir");
    let status = std::process::Command::new("cp")
        .args(["-r", "--"])
        .arg(shipped.join("."))
        .arg(dir.path())
        .status()
        .expect("cp runs");
    assert!(status.success(), "copying policies/ failed");
    for (name, text) in extra {
        fs::write(dir.path().join(name), text).expect("write policy");
    }
    dir
}

#[test]
fn a_runaway_custom_policy_is_cut_off_by_the_bound_naming_the_policy() {
    let dir = with_shipped_policies(&[("cross.rego", CROSS_PRODUCT)]);
    let set = load(dir.path()).expect("loads");
    let started = std::time::Instant::now();
    let err = review::review(&set, &Input::create(labelled("slow", json!("true")), "ns"))
        .expect_err("a 10^8-step rule cannot finish within the bound");
    let message = err.to_string();
    assert!(
        message.contains("policy cross (data.gangplank.policies.cross.violation, line "),
        "the message must name the policy and its line: {message}"
    );
    assert!(
        message.contains("limit"),
        "the message must say a limit stopped it: {message}"
    );
    // Printed, not asserted (no timing thresholds in tests).
    eprintln!("cut off after {:?}: {message}", started.elapsed());
    // The same set still decides other jobs.
    let d = review::review(&set, &Input::create(job(None), "ns")).expect("decides");
    assert!(d.violations.iter().all(|v| v.policy != "cross"));
}

/// GOOD with a `# METADATA` block above its package line.
fn annotated(metadata: &str) -> String {
    format!("# Backoff defaults.\n# METADATA\n{metadata}{GOOD}")
}

fn reviewed(set: &PolicySet, job: Value) -> review::Decision {
    review::review(set, &Input::create(job, "default")).expect("decides")
}

#[test]
fn a_policy_whose_kinds_exclude_the_job_is_skipped_and_says_why() {
    let text = annotated("# custom:\n#   applies_when:\n#     kinds: [MPIJob]\n");
    let dir = dir_with(&[("backoff.rego", &text)]);
    let set = load(dir.path()).expect("loads");
    let d = reviewed(&set, job(Some(50)));
    assert!(d.violations.is_empty() && d.patch.0.is_empty(), "{d:?}");
    let input = Input::create(job(Some(50)), "default").build_rego_input();
    assert_eq!(
        set.skipped_policies(&input),
        vec![(
            "backoff".to_string(),
            "kind PyTorchJob is not one of MPIJob".to_string()
        )]
    );
    // The reference: the same set with the index off evaluates it.
    let d = reviewed(&set.without_index(), job(Some(50)));
    assert_eq!(d.violations.len(), 1, "{d:?}");
    assert!(set.without_index().skipped_policies(&input).is_empty());
}

#[test]
fn requests_that_skip_the_same_rules_share_one_program_of_their_own() {
    let mpi_only = annotated("# custom:\n#   applies_when:\n#     kinds: [MPIJob]\n");
    let always = GOOD
        .replace("policies.backoff", "policies.always")
        .replace("params.backoff", "params.always");
    let dir = dir_with(&[("backoff.rego", &mpi_only), ("always.rego", &always)]);
    let set = load(dir.path()).expect("loads");
    assert_eq!(set.class_programs(), 0);
    // Mutation and validation of a PyTorchJob skip the same rules: one class, whose program
    // the first review starts compiling (beside it: the review runs the guarded program) and
    // the second runs, with the same answer.
    for _ in 0..2 {
        let d = reviewed(&set, job(Some(50)));
        assert!(set.settle_class_programs(std::time::Duration::from_secs(60)));
        assert_eq!(set.class_programs(), 1);
        let policies: Vec<&str> = d.violations.iter().map(|v| v.policy.as_str()).collect();
        assert_eq!(policies, ["always"], "{d:?}");
        let reference = reviewed(&set.without_index(), job(Some(50)));
        assert_eq!(reference.violations.len(), 2, "{reference:?}");
    }
    let d = reviewed(&set, job(None));
    assert_eq!(set.class_programs(), 1);
    assert_eq!(d.patch, reviewed(&set.without_index(), job(None)).patch);
    // A set whose rules are never skipped compiles no class.
    let dir = dir_with(&[("always.rego", &always)]);
    let set = load(dir.path()).expect("loads");
    reviewed(&set, job(Some(50)));
    assert!(set.settle_class_programs(std::time::Duration::from_secs(60)));
    assert_eq!(set.class_programs(), 0);
}

#[test]
fn a_policy_whose_kinds_include_the_job_runs() {
    let text = annotated("# custom:\n#   applies_when:\n#     kinds: [MPIJob, PyTorchJob]\n");
    let dir = dir_with(&[("backoff.rego", &text)]);
    let set = load(dir.path()).expect("loads");
    assert_eq!(reviewed(&set, job(Some(50))).violations.len(), 1);
    assert!(!reviewed(&set, job(None)).patch.0.is_empty());
}

#[test]
fn facts_and_parameters_decide_applicability() {
    let gated = |cond: &str| annotated(&format!("# custom:\n#   applies_when:\n#     {cond}\n"));
    // Not a GPU job, no inventory: skipped.
    for cond in ["all: [gpus]", "all: [cluster]", "any: [mig, kueue, update]"] {
        let dir = dir_with(&[("backoff.rego", &gated(cond))]);
        let d = reviewed(&load(dir.path()).expect("loads"), job(Some(50)));
        assert!(d.violations.is_empty(), "{cond}: {d:?}");
    }
    // A parameter that is set (limit: 3) holds; a fact that holds in `any` is enough.
    for cond in ["all: [params.limit]", "any: [gpus, params.max]"] {
        let dir = dir_with(&[("backoff.rego", &gated(cond))]);
        let d = reviewed(&load(dir.path()).expect("loads"), job(Some(50)));
        assert_eq!(d.violations.len(), 1, "{cond}: {d:?}");
    }
    // The kueue label is a fact of the object.
    let dir = dir_with(&[("backoff.rego", &gated("all: [kueue]"))]);
    let mut queued = job(Some(50));
    queued["metadata"]["labels"] = json!({"kueue.x-k8s.io/queue-name": "q"});
    let d = reviewed(&load(dir.path()).expect("loads"), queued);
    assert_eq!(d.violations.len(), 1, "{d:?}");
}

#[test]
fn a_fact_that_cannot_be_read_lets_the_policy_run() {
    // A replica map the JobView cannot read leaves it without the replicas a fact is
    // about: the index cannot tell, so the policy runs.
    let text = annotated("# custom:\n#   applies_when:\n#     all: [gpus]\n");
    let dir = dir_with(&[("backoff.rego", &text)]);
    let set = load(dir.path()).expect("loads");
    let mut broken = job(Some(50));
    broken["spec"]["pytorchReplicaSpecs"] = json!("not a map");
    let d = reviewed(&set, broken);
    assert_eq!(
        d.violations
            .iter()
            .filter(|v| v.policy == "backoff")
            .count(),
        1,
        "{d:?}"
    );
}

#[test]
fn unreadable_metadata_is_a_load_error_naming_the_file() {
    let cases = [
        ("# custom:\n#   applies_when: [unclosed\n", "is not YAML"),
        (
            "# custom:\n#   applies_when:\n#     all: [gpu]\n",
            "unknown fact \"gpu\"",
        ),
        (
            "# custom:\n#   applies_when:\n#     kind: [PyTorchJob]\n",
            "unknown field `kind`",
        ),
        (
            "# custom:\n#   applies_when:\n#     all: [params.nope]\n",
            "params.nope, which meta.params does not declare",
        ),
    ];
    for (metadata, says) in cases {
        let dir = dir_with(&[("backoff.rego", &annotated(metadata))]);
        match PolicySet::load(dir.path()) {
            Err(e @ LoadError::BadMetadata { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains("backoff.rego") && text.contains(says),
                    "{text}"
                );
            }
            other => panic!("{metadata}: expected a metadata error, got {other:?}"),
        }
    }
    // applies_when in a block that is not the package's would be ignored: refused.
    let misplaced = GOOD.replace(
        "violation contains",
        "# METADATA\n# custom:\n#   applies_when:\n#     all: [gpus]\nviolation contains",
    );
    let dir = dir_with(&[("backoff.rego", &misplaced)]);
    let e = load(dir.path()).expect_err("refused");
    assert!(e.contains("directly above the package line"), "{e}");
}

#[test]
fn a_policy_without_metadata_always_runs() {
    let dir = dir_with(&[("backoff.rego", GOOD)]);
    let set = load(dir.path()).expect("loads");
    let input = Input::create(job(Some(50)), "default").build_rego_input();
    assert!(set.skipped_policies(&input).is_empty());
    assert_eq!(reviewed(&set, job(Some(50))).violations.len(), 1);
}

/// The `gangplank.dev/*` annotations gangplank's code writes or reads (every
/// `*ANNOTATION: &str` constant under src/), found by reading the sources.
fn annotation_constants() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).expect("read source");
                for line in text.lines() {
                    let Some((head, value)) = line.split_once("ANNOTATION: &str = \"") else {
                        continue;
                    };
                    if head.contains("const") && value.starts_with("gangplank.dev/") {
                        out.push(value.trim_end_matches("\";").to_string());
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

#[test]
fn a_job_carrying_every_annotation_gangplank_writes_gets_no_annotation_warning() {
    let keys = annotation_constants();
    for expected in [
        "gangplank.dev/defaulted",
        "gangplank.dev/native-gang-min-count",
        "gangplank.dev/restarts",
    ] {
        assert!(
            keys.iter().any(|k| k == expected),
            "{expected} not found in {keys:?}"
        );
    }
    let set = load(Path::new("policies")).expect("loads");
    let mut j = job(None);
    // Written on pods only (the controller's release time, src/controller/release.rs): on
    // a job's metadata it is rightly "not an annotation gangplank reads".
    const ON_PODS_ONLY: [&str; 1] = ["gangplank.dev/released-at"];
    let marks: serde_json::Map<String, Value> = keys
        .iter()
        .filter(|k| !ON_PODS_ONLY.contains(&k.as_str()))
        .map(|k| (k.clone(), json!("1")))
        .collect();
    j["metadata"]["annotations"] = Value::Object(marks);
    let d = review::review(&set, &Input::create(j, "default")).expect("decides");
    let said: Vec<&str> = d
        .violations
        .iter()
        .filter(|f| f.policy == "annotations")
        .map(|f| f.msg.as_str())
        .collect();
    assert!(said.is_empty(), "{said:?}");
}

#[test]
fn an_exception_excuses_a_policy_until_its_expiry_at_the_instant_given() {
    use time::format_description::well_known::Rfc3339;
    let exception = "name: ml-7\npolicies: [backoff]\nmatch: {namespaces: [n*]}\nreason: r\nexpires: 2030-06-01T00:00:00Z\n";
    let dir = dir_with(&[("backoff.rego", GOOD), ("exceptions/ml-7.yaml", exception)]);
    let set = load(dir.path()).expect("loads");
    let subject = set.subject("ns", &job(Some(50)));
    let at = |t: &str| time::OffsetDateTime::parse(t, &Rfc3339).expect("a date-time");
    let before = set.excuses(&subject, at("2030-05-31T23:59:59Z"));
    let exempted = before.of(0).expect("backoff is excused before the expiry");
    assert_eq!(
        exempted.describe(),
        "exempted by exception ml-7 until 2030-06-01T00:00:00Z"
    );
    assert!(before.notes.is_empty(), "{:?}", before.notes);
    let after = set.excuses(&subject, at("2030-06-01T00:00:00Z"));
    assert!(after.of(0).is_none(), "expired: excuses nothing");
    let note = after
        .notes
        .first()
        .map(|n| n.message.as_str())
        .unwrap_or_default();
    assert!(
        note.contains("exception ml-7") && note.contains("expired at 2030-06-01T00:00:00Z"),
        "{note}"
    );
    let elsewhere = set.excuses(
        &set.subject("prod", &job(Some(50))),
        at("2030-01-01T00:00:00Z"),
    );
    assert!(elsewhere.of(0).is_none() && elsewhere.notes.is_empty());
}

#[test]
fn an_excused_policy_does_not_mutate_and_its_finding_refuses_nothing() {
    let params = "policies:\n  backoff: {excludedNamespaces: [n*]}\n";
    let dir = dir_with(&[("backoff.rego", GOOD), ("params.yaml", params)]);
    let set = load(dir.path()).expect("loads");
    let d = review::review(&set, &Input::create(job(Some(50)), "default")).expect("decides");
    assert!(d.allowed(), "{:?}", d.violations);
    let [finding] = d.violations.as_slice() else {
        panic!("one finding, exempted: {:?}", d.violations);
    };
    assert_eq!(finding.action, Action::Deny, "the policy's action is kept");
    assert!(finding.exempted.is_some());
    let mut elsewhere = job(None);
    elsewhere["metadata"]["namespace"] = json!("prod");
    let unexcused = review::review(&set, &Input::create(elsewhere, "default")).expect("decides");
    assert!(
        !unexcused.patch.0.is_empty(),
        "elsewhere the policy still mutates"
    );
    let excused = review::review(&set, &Input::create(job(None), "default")).expect("decides");
    assert!(excused.patch.0.is_empty(), "{:?}", excused.patch);
}
