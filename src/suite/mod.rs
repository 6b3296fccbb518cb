//! Policy test suites: Rego `test_*` rules and YAML case files under `<policies>/tests/`.
//!
//! Entry point: [`Suite::discover`], then [`Suite::tests`] and [`Suite::run`]. The same code
//! backs `gangplank test` and the crate's own `cargo test` (one libtest trial per test).
//!
//! # Guarantees
//! - A test passes only on a positive result: a Rego test must evaluate to `true` (undefined
//!   fails), and a case must state at least one expectation.
//! - Cases run exactly the production path ([`crate::review::review`]) on a policy set
//!   compiled from the same sources, with the case's parameter overlay if it has one.
//! - With coverage on ([`Suite::record_coverage`]) the verdicts checked are the same: the
//!   lines are recorded by an extra interpreter evaluation (see [`coverage`]).

pub mod case;
pub mod coverage;
pub mod expect;
pub mod json;
pub mod junit;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use regex::Regex;

use crate::policy::coverage::CoverageSink;
use crate::policy::load::{read_rego, rego_files, PolicySources};
use crate::policy::set::{from_rego, POLICY_PACKAGE};
use crate::policy::{EvalError, LoadError, ParamsFile, PolicySet};
use crate::review::Decision;
use case::{Case, CaseFile};

/// One runnable test.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per test case, built once per suite run: its size costs nothing"
)]
pub enum TestCase {
    Rego {
        file: PathBuf,
        package: String,
        rule: String,
    },
    Case {
        file: PathBuf,
        index: usize,
        case: Box<Case>,
        file_params: Option<ParamsFile>,
        fixtures: Arc<CaseFixtures>,
    },
}

pub type CaseFixtures = std::collections::BTreeMap<String, serde_json::Value>;

impl TestCase {
    /// `tests/coordinator.yaml: two masters are refused` / `tests/lib_test.rego: test_ptr`.
    pub fn name(&self, root: &Path) -> String {
        match self {
            TestCase::Rego { file, rule, .. } => format!("{}: {rule}", relative(file, root)),
            TestCase::Case { file, case, .. } => format!("{}: {}", relative(file, root), case.note),
        }
    }
}

/// The result of one test: `Ok(())` or the reasons it failed.
pub type TestResult = Result<(), String>;

/// A loaded suite: the compiled base set plus every test found.
pub struct Suite {
    root: PathBuf,
    base: Arc<PolicySet>,
    tests: Vec<TestCase>,
    /// Sets compiled with a case's params overlay, keyed by the overlay's JSON.
    variants: Mutex<HashMap<String, Arc<PolicySet>>>,
    /// With coverage on ([`Suite::record_coverage`]): where every test leaves the lines
    /// it evaluated on the interpreter.
    coverage: Option<CoverageSink>,
}

/// Rule heads of Rego tests: `test_name if ...`, `test_name := ...`, `test_name { ... }`.
fn test_rule_names(text: &str) -> Vec<String> {
    let re = Regex::new(r"(?m)^(test_[A-Za-z0-9_]*)\b").ok();
    let mut names: Vec<String> = re
        .map(|re| {
            re.captures_iter(text)
                .filter_map(|c| c.get(1))
                .map(|m| m.as_str().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.dedup();
    names
}

impl Suite {
    /// Reads the policies in `dir` and the tests in `dir/tests`; compiles once.
    pub fn discover(dir: &Path) -> Result<Suite, String> {
        let mut sources = PolicySources::read_dir(dir).map_err(|e| load_error(&e))?;
        let tests_dir = dir.join("tests");
        let mut tests = Vec::new();
        let mut rego_tests = Vec::new();
        if tests_dir.is_dir() {
            for path in rego_files(&tests_dir, true).map_err(|e| load_error(&e))? {
                let file = read_rego(path).map_err(|e| load_error(&e))?;
                let package = package_of(&file.path, &file.text)?;
                rego_tests.push((file.path.clone(), package, test_rule_names(&file.text)));
                sources.extra.push(file);
            }
        }
        let base = PolicySet::compile(sources).map_err(|e| load_error(&e))?;
        for (file, package, rules) in rego_tests {
            tests.extend(rules.into_iter().map(|rule| TestCase::Rego {
                file: file.clone(),
                package: package.clone(),
                rule,
            }));
        }
        if tests_dir.is_dir() {
            tests.extend(case_tests(&tests_dir)?);
        }
        Ok(Suite {
            root: dir.to_path_buf(),
            base: Arc::new(base),
            tests,
            variants: Mutex::new(HashMap::new()),
            coverage: None,
        })
    }

    /// From now on every test also records the policy lines it evaluates: each case is
    /// evaluated once more on the interpreter with coverage on (where the VM runs it, that
    /// run is the reference the VM is checked against), each Rego test with coverage on.
    /// The verdicts checked are those of the production path, as without coverage.
    /// Every policy's `meta` counts as evaluated: compiling a set evaluates it.
    pub fn record_coverage(&mut self) -> CoverageSink {
        if let Some(sink) = &self.coverage {
            return sink.clone();
        }
        let sink = CoverageSink::default();
        let mut engine = self.base.engine();
        engine.set_enable_coverage(true);
        for policy in self.base.policies() {
            let meta = format!("data.{POLICY_PACKAGE}.{}.meta", policy.name);
            // Compiling the set evaluated it already: it cannot fail here.
            let _ = engine.eval_rule(meta);
        }
        sink.record(&engine);
        self.coverage = Some(sink.clone());
        sink
    }

    /// The coverage of the tests run since [`Suite::record_coverage`]; `tests` is how
    /// many ran.
    pub fn coverage_report(
        &self,
        tests: usize,
    ) -> Option<Result<coverage::CoverageReport, String>> {
        let sink = self.coverage.as_ref()?;
        Some(coverage::CoverageReport::build(
            self.base.sources(),
            sink,
            tests,
        ))
    }

    pub fn tests(&self) -> &[TestCase] {
        &self.tests
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn run(&self, test: &TestCase) -> TestResult {
        match test {
            TestCase::Rego { package, rule, .. } => self.run_rego(package, rule),
            TestCase::Case {
                file,
                case,
                file_params,
                fixtures,
                ..
            } => self.run_case(file, case, file_params.as_ref(), fixtures),
        }
    }

    fn run_rego(&self, package: &str, rule: &str) -> TestResult {
        let mut engine = self.base.engine();
        if self.coverage.is_some() {
            engine.set_enable_coverage(true);
        }
        let result = engine.eval_rule(format!("{package}.{rule}"));
        if let Some(sink) = &self.coverage {
            sink.record(&engine);
        }
        match result {
            Ok(regorus::Value::Bool(true)) => Ok(()),
            Ok(regorus::Value::Undefined) => {
                Err("undefined: some expression in the test body was false".into())
            }
            Ok(v) => Err(format!("expected true, got {}", from_rego(&v))),
            Err(e) => Err(format!("evaluation failed: {e}")),
        }
    }

    fn run_case(
        &self,
        file: &Path,
        case: &Case,
        file_params: Option<&ParamsFile>,
        fixtures: &CaseFixtures,
    ) -> TestResult {
        if case.expect.is_empty() {
            return Err("the case has no expectations, so it could never fail".into());
        }
        let set = self.set_for(file_params, case.params.as_ref())?;
        let dir = file.parent().unwrap_or(Path::new("."));
        let set = match case.cluster(dir)? {
            Some(cluster) => Arc::new((*set).clone().with_cluster(cluster)),
            None => set,
        };
        let runtimes: Vec<&serde_json::Value> = case.runtimes.iter().collect();
        let set = match case::runtime_catalog(&runtimes, dir, fixtures)? {
            Some(catalog) => {
                catalog.set_stale(case.runtimes_stale.clone());
                Arc::new((*set).clone().with_runtimes(catalog))
            }
            None if case.runtimes_stale.is_some() => {
                return Err("runtimesStale needs runtimes to mark".into())
            }
            None => set,
        };
        let input = case.input(fixtures, dir)?;
        let result = crate::review::review(&set, &input);
        let mut mismatches = expect::compare(&case.expect, &result);
        // The interpreter's decision: the reference the VM is checked against and, with
        // coverage on, the evaluation whose lines count.
        let interpreted = match (&self.coverage, set.interpreter_reason()) {
            (Some(sink), _) => Some(crate::review::review(
                &set.interpreter_only().with_coverage(sink.clone()),
                &input,
            )),
            (None, None) => Some(crate::review::review(&set.interpreter_only(), &input)),
            (None, Some(_)) => None,
        };
        mismatches.extend(backend_disagreement(&set, &result, interpreted.as_ref()));
        mismatches.extend(revalidation_disagreement(&set, &input, &result));
        mismatches.extend(index_disagreement(&set, &input, &result));
        if mismatches.is_empty() {
            Ok(())
        } else {
            Err(mismatches.join("\n"))
        }
    }

    /// The base set, or one compiled with the file's and the case's parameter overlays.
    fn set_for(
        &self,
        file_params: Option<&ParamsFile>,
        case_params: Option<&ParamsFile>,
    ) -> Result<Arc<PolicySet>, String> {
        if file_params.is_none() && case_params.is_none() {
            return Ok(self.base.clone());
        }
        let mut sources = self.base.sources().clone();
        for overlay in [file_params, case_params].into_iter().flatten() {
            sources.params.overlay(overlay);
        }
        let key = serde_json::to_string(&sources.params).unwrap_or_default();
        let mut variants = self.variants.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(set) = variants.get(&key) {
            return Ok(set.clone());
        }
        let set = Arc::new(PolicySet::compile(sources).map_err(|e| load_error(&e))?);
        variants.insert(key, set.clone());
        Ok(set)
    }
}

/// What `/validate` answers for an object `/mutate` handed over (the validation policies
/// alone) must be what a full review of it answers.
fn handoff_disagreement(
    set: &PolicySet,
    input: &crate::review::Input,
    mutated: &crate::review::Input,
    full: &Decision,
) -> Option<String> {
    let complete = match crate::review::decide::patch(set, input) {
        Ok((_, complete)) => complete,
        Err(e) => {
            return Some(format!(
                "/mutate's path fails where the review does not: {e}"
            ))
        }
    };
    if !complete {
        return None;
    }
    let handed = crate::review::decide::review_mutated(set, mutated);
    let (a, b) = (
        decision_summary(&Ok(full.clone())),
        decision_summary(&handed),
    );
    (a != b).then(|| {
        format!(
            "validating the object /mutate handed over (validation policies alone) differs from its full review\n{}",
            expect::diff_lines(&expect::pretty(&a), &expect::pretty(&b))
        )
    })
}

/// When the set runs on the bytecode VM, the interpreter must reach the same decision:
/// the VM is newer, so every case doubles as a differential test.
fn backend_disagreement(
    set: &PolicySet,
    vm: &Result<Decision, EvalError>,
    reference: Option<&Result<Decision, EvalError>>,
) -> Option<String> {
    // A set on the interpreter was checked on it: there is no VM decision to compare.
    let reference = reference.filter(|_| set.interpreter_reason().is_none())?;
    let summary = |r: &Result<Decision, EvalError>| match r {
        Ok(d) => {
            serde_json::json!({"skipped": d.skipped, "violations": d.violations, "patch": d.patch})
        }
        Err(_) => serde_json::json!("evaluation error"),
    };
    let (a, b) = (summary(vm), summary(reference));
    (a != b).then(|| {
        format!(
            "bytecode VM and interpreter disagree\n{}",
            expect::diff_lines(&expect::pretty(&b), &expect::pretty(&a))
        )
    })
}

/// The applicability index may only skip policies that would have said nothing: every case
/// must get the same decision, violations and patch with every policy evaluated.
fn index_disagreement(
    set: &PolicySet,
    input: &crate::review::Input,
    indexed: &Result<Decision, EvalError>,
) -> Option<String> {
    if !set.index_enabled() {
        return None;
    }
    let reference = crate::review::review(&set.without_index(), input);
    let (a, b) = (decision_summary(indexed), decision_summary(&reference));
    (a != b).then(|| {
        format!(
            "the applicability index changes the decision (skipped here: {:?})\n{}",
            set.skipped_policies(&input.build_rego_input()),
            expect::diff_lines(&expect::pretty(&b), &expect::pretty(&a))
        )
    })
}

fn decision_summary(r: &Result<Decision, EvalError>) -> serde_json::Value {
    match r {
        Ok(d) => {
            serde_json::json!({"skipped": d.skipped, "violations": d.violations, "patch": d.patch})
        }
        Err(e) => serde_json::json!(format!("evaluation error: {e}")),
    }
}

/// The apiserver sends `/validate` the object `/mutate` produced: reviewing that object must
/// change nothing more and reach the same verdict, or the two webhooks would disagree with
/// `check` (and a later hand-off of the `/mutate` verdict to `/validate` would be wrong).
fn revalidation_disagreement(
    set: &PolicySet,
    input: &crate::review::Input,
    first: &Result<Decision, EvalError>,
) -> Option<String> {
    let Ok(first) = first else { return None };
    if first.skipped.is_some() {
        return None;
    }
    let mut again = input.clone();
    again.object = first.mutated.clone();
    let second = match crate::review::review(set, &again) {
        Ok(d) => d,
        Err(e) => return Some(format!("reviewing the mutated object fails: {e}")),
    };
    if let Some(differs) = handoff_disagreement(set, input, &again, &second) {
        return Some(differs);
    }
    // What /mutate told the user with its patch (the applied intents' notes) the mutated
    // object no longer shows: /validate does not say it again.
    let told = crate::review::decide::patch(set, input)
        .map(|(d, _)| d.violations)
        .unwrap_or_default();
    let expected: Vec<_> = first
        .violations
        .iter()
        .filter(|v| !told.contains(v))
        .collect();
    let summary = |d: &Decision| serde_json::json!({"violations": d.violations, "patch": d.patch});
    let (a, b) = (
        serde_json::json!({"violations": expected, "patch": json_patch::Patch(Vec::new())}),
        summary(&second),
    );
    (a != b).then(|| {
        format!(
            "reviewing the mutated object again gives another answer (expected no patch and the same violations)\n{}",
            expect::diff_lines(&expect::pretty(&a), &expect::pretty(&b))
        )
    })
}

fn case_tests(dir: &Path) -> Result<Vec<TestCase>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    let mut tests = Vec::new();
    for file in files {
        let cf = CaseFile::read(&file)?;
        let fixtures = Arc::new(cf.fixtures);
        for (index, mut case) in cf.cases.into_iter().enumerate() {
            if case.cluster.is_none() {
                case.cluster = cf.cluster.clone();
            }
            case.runtimes = cf.runtimes.iter().cloned().chain(case.runtimes).collect();
            tests.push(TestCase::Case {
                file: file.clone(),
                index,
                case: Box::new(case),
                file_params: cf.params.clone(),
                fixtures: fixtures.clone(),
            });
        }
    }
    Ok(tests)
}

/// The package a test module declares (`data.gangplank.lib_test`).
fn package_of(file: &Path, text: &str) -> Result<String, String> {
    Regex::new(r"(?m)^package\s+([A-Za-z0-9_.]+)")
        .ok()
        .and_then(|re| {
            re.captures(text)?
                .get(1)
                .map(|m| format!("data.{}", m.as_str()))
        })
        .ok_or_else(|| format!("{}: no package declaration", file.display()))
}

fn load_error(e: &LoadError) -> String {
    crate::error_chain(e)
}

fn relative(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}
