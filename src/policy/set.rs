//! A compiled, immutable policy set.
//!
//! Entry point: [`PolicySet::compile`]. Compiling parses every module once, reads each
//! policy's `meta`, merges parameters into `data.params`, generates one entry module that
//! gathers every policy's output, and prepares the engine. Requests then clone the prepared
//! engine (a few hundred nanoseconds) instead of recompiling, and one query returns the
//! output of every policy — no round trip per policy.
//!
//! The set is shared by `Arc` and never changes; a reload builds a new set beside it and
//! swaps it in whole, so a set that fails to compile never replaces a working one.

use std::path::PathBuf;

use regorus::{Engine, Value as RegoValue};
use serde_json::{json, Map, Value};

use super::applicability::{self, Applicability, Facts, Resolved};
use super::classes::ClassPrograms;
use super::error::LoadError;
use super::exceptions::{self, PolicyException};
use super::exemption::Exemption;
use super::load::{LoadOptions, PolicySources, RegoFile};
use super::params::Action;
use super::vm::{GatheredRule, VmProgram};
use super::vm_hazards::vm_hazard;
use crate::cluster::ClusterHandle;
use crate::trainer::RuntimeCatalog;

/// Package every policy lives under: `gangplank.policies.<name>`.
pub const POLICY_PACKAGE: &str = "gangplank.policies";

/// Escape hatch for platform teams: `GANGPLANK_ENGINE=interpreter` runs policies on the
/// regorus interpreter even when they compile for the bytecode VM (the VM is newer and has
/// known bugs, see policies/README.md). Read at every (re)load, so it applies to `check`,
/// `test` and `serve` alike.
pub const ENGINE_ENV: &str = "GANGPLANK_ENGINE";

fn interpreter_forced() -> bool {
    std::env::var(ENGINE_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("interpreter"))
}

pub use super::rules::{Group, Output, RuleRef};

/// A policy as loaded: its meta, effective action, parameters and which outputs it declares.
#[derive(Debug, Clone)]
pub struct PolicyInfo {
    pub name: String,
    pub path: PathBuf,
    pub title: String,
    pub description: String,
    /// Its action: params.yaml's `action` for it, else `--default-action`, else
    /// params.yaml's `defaultAction`, else its `meta.action`.
    pub action: Action,
    pub enabled: bool,
    /// params.yaml `allowExistingViolations` (default true): see [`crate::review::existing`].
    pub allow_existing_violations: bool,
    /// Its own exemption (params.yaml `excludedNamespaces` and the two selectors).
    pub exemption: Exemption,
    /// `meta.params` overlaid with params.yaml: what the policy sees as `data.params.<name>`.
    pub params: Map<String, Value>,
    pub has_mutation: bool,
    pub has_violation: bool,
    pub has_warning: bool,
    /// Its `# METADATA` `custom.applies_when`, parameters resolved; `None`: always runs.
    pub applies_when: Option<Resolved>,
}

impl PolicyInfo {
    /// Whether this policy is enabled and its `excludedNamespaces` patterns leave
    /// `namespace` alone. The selectors and exceptions need the request: see
    /// [`PolicySet::excuses`].
    pub fn applies_to(&self, namespace: &str) -> bool {
        self.enabled && self.exemption.names_namespace(namespace).is_none()
    }
}

/// Compiled policies plus their configuration. Cheap to share; evaluation never mutates it.
#[derive(Debug, Clone)]
pub struct PolicySet {
    pub(super) engine: Engine,
    /// The bytecode program, or why the policies could not be compiled for it.
    pub(super) vm: Result<VmProgram, String>,
    /// Output rules of enabled policies, in policy-name order: each is its own entry point.
    pub(super) rules: Vec<RuleRef>,
    pub(super) policies: Vec<PolicyInfo>,
    /// params.yaml's top-level exemption: no policy applies to what it holds.
    pub(super) exemption: Exemption,
    /// `exceptions/*.yaml`, checked.
    pub(super) exceptions: Vec<PolicyException>,
    sources: PolicySources,
    /// The cluster inventory policies read as `data.cluster` (empty: no cluster known).
    pub(super) cluster: ClusterHandle,
    /// The Trainer runtimes TrainJobs are rendered with (empty: none known).
    pub(super) runtimes: RuntimeCatalog,
    /// Whether policies whose `applies_when` is false are skipped (see
    /// [`super::applicability`]); off with `GANGPLANK_INDEX=off`.
    pub(super) index: bool,
    /// The programs of the classes of requests seen so far (see [`super::classes`]).
    pub(super) classes: ClassPrograms,
    /// Where interpreter evaluations record the lines they reach (`gangplank test
    /// --coverage`); `None` everywhere else.
    pub(super) coverage: Option<super::coverage::CoverageSink>,
}

impl PolicySet {
    /// Reads and compiles a policy directory.
    pub fn load(dir: &std::path::Path) -> Result<PolicySet, LoadError> {
        PolicySet::load_with(dir, LoadOptions::default())
    }

    /// Reads and compiles a policy directory, adjusted by `options` (flags).
    pub fn load_with(dir: &std::path::Path, options: LoadOptions) -> Result<PolicySet, LoadError> {
        let mut sources = PolicySources::read_dir(dir)?;
        sources.options = options;
        PolicySet::compile(sources)
    }

    /// Compiles sources into a ready set. Fails without side effects on the first error.
    pub fn compile(sources: PolicySources) -> Result<PolicySet, LoadError> {
        let mut engine = Engine::new();
        engine.set_execution_timer_config(super::vm::time_limit());
        for lib in sources.libraries.iter().chain(&sources.extra) {
            add_module(&mut engine, lib, &lib.path.display().to_string())?;
        }
        for p in &sources.policies {
            let package = add_module(&mut engine, &p.file, &p.name)?;
            let expected = format!("data.{POLICY_PACKAGE}.{}", p.name);
            if package != expected {
                return Err(LoadError::WrongPackage {
                    path: p.file.path.clone(),
                    name: p.name.clone(),
                    found: format!("package {}", package.trim_start_matches("data.")),
                });
            }
        }
        check_params_names(&sources)?;
        if let Some(settings) = &sources.params.image_resolution {
            settings
                .check()
                .map_err(|source| LoadError::ImageResolution { source })?;
        }
        let exemption = params_exemption(
            "",
            &sources.params.excluded_namespaces,
            sources.params.excluded_namespace_selector.as_ref(),
            sources.params.excluded_object_selector.as_ref(),
        )?;
        let exceptions = check_exceptions(&sources)?;
        let default_action = sources
            .options
            .default_action
            .or(sources.params.default_action);
        let mut policies = Vec::with_capacity(sources.policies.len());
        for p in &sources.policies {
            let (title, description, action, defaults) =
                read_meta(&mut engine, &p.name, &p.file.path)?;
            let configured = sources
                .params
                .policies
                .get(&p.name)
                .cloned()
                .unwrap_or_default();
            let mut params = defaults;
            params.extend(configured.params);
            let applies_when = Applicability::read(&p.file.path, &p.file.text)?
                .map(|a| a.resolve(&params))
                .transpose()
                .map_err(|detail| LoadError::BadMetadata {
                    path: p.file.path.clone(),
                    detail,
                })?;
            let declared = |rule: &str| {
                engine
                    .has_declared_rule_rooted_at(&p.file.path.display().to_string(), rule)
                    .unwrap_or(false)
            };
            policies.push(PolicyInfo {
                name: p.name.clone(),
                path: p.file.path.clone(),
                title,
                description,
                action: configured.action.or(default_action).unwrap_or(action),
                enabled: configured.enabled.unwrap_or(true),
                allow_existing_violations: configured.allow_existing_violations.unwrap_or(true),
                exemption: params_exemption(
                    &format!("policies.{}.", p.name),
                    &configured.excluded_namespaces,
                    configured.excluded_namespace_selector.as_ref(),
                    configured.excluded_object_selector.as_ref(),
                )?,
                params,
                has_mutation: declared("mutation"),
                has_violation: declared("violation"),
                has_warning: declared("warning"),
                applies_when,
            });
        }
        policies.sort_by(|a, b| a.name.cmp(&b.name));
        let data: Map<String, Value> = policies
            .iter()
            .map(|p| (p.name.clone(), Value::Object(p.params.clone())))
            .collect();
        engine
            .add_data(to_rego(&json!({ "params": data })))
            .map_err(|e| LoadError::Params {
                message: format!("cannot load parameters: {e}"),
            })?;
        let rules = output_rules(&policies);
        let paths: Vec<&str> = rules.iter().map(|r| r.path.as_str()).collect();
        // Only the rules of policies with `applies_when` can be skipped, so only they are
        // compiled behind a skip guard (each guard costs the VM about 1.6 K instructions).
        let groups: Vec<Vec<GatheredRule>> = Group::ALL
            .iter()
            .map(|group| {
                group
                    .rules(&rules)
                    .map(|r| GatheredRule {
                        path: r.path.as_str(),
                        guard: policies
                            .get(r.policy)
                            .is_none_or(|p| p.applies_when.is_some())
                            .then_some(r.index),
                    })
                    .collect()
            })
            .collect();
        let hazard = || {
            let modules = sources.policies.iter().map(|p| &p.file);
            vm_hazard(modules.chain(&sources.libraries))
        };
        let vm = if interpreter_forced() {
            Err(format!("{ENGINE_ENV}=interpreter"))
        } else if let Some(why) = hazard() {
            tracing::warn!(reason = %why, "policies run on the regorus interpreter: the bytecode VM would evaluate them wrongly");
            Err(why)
        } else {
            let vm = VmProgram::compile_rules(&mut engine, &paths, &groups);
            if let Err(why) = &vm {
                tracing::warn!(reason = %why, "policies run on the regorus interpreter: the bytecode compiler does not support them");
            }
            vm
        };
        let mut set = PolicySet {
            engine,
            vm,
            rules,
            policies,
            exemption,
            exceptions,
            sources,
            cluster: ClusterHandle::default(),
            runtimes: RuntimeCatalog::default(),
            index: !applicability::index_disabled(),
            classes: ClassPrograms::default(),
            coverage: None,
        };
        set.smoke_test()?;
        Ok(set)
    }

    /// The same set reading `data.cluster` from `cluster` (whose contents may change
    /// between evaluations without recompiling anything).
    pub fn with_cluster(mut self, cluster: ClusterHandle) -> PolicySet {
        self.cluster = cluster;
        self
    }

    pub fn cluster(&self) -> &ClusterHandle {
        &self.cluster
    }

    /// The same set rendering TrainJobs with the runtimes of `runtimes` (which may change
    /// between evaluations).
    pub fn with_runtimes(mut self, runtimes: RuntimeCatalog) -> PolicySet {
        self.runtimes = runtimes;
        self
    }

    pub fn runtimes(&self) -> &RuntimeCatalog {
        &self.runtimes
    }

    pub fn policies(&self) -> &[PolicyInfo] {
        &self.policies
    }

    pub fn policy(&self, name: &str) -> Option<&PolicyInfo> {
        self.policies.iter().find(|p| p.name == name)
    }

    pub fn sources(&self) -> &PolicySources {
        &self.sources
    }

    /// params.yaml's top-level exemption: no policy applies to what it holds.
    pub fn exemption(&self) -> &Exemption {
        &self.exemption
    }

    /// The exceptions of `exceptions/`, checked.
    pub fn exceptions(&self) -> &[PolicyException] {
        &self.exceptions
    }

    /// Whether any verdict of this set can refuse a request: an enabled policy whose action
    /// is deny. With none (audit-first), a request the policies could not judge (a fault, a
    /// timeout) is admitted with a warning: refusing it would refuse what no verdict could.
    pub fn can_refuse(&self) -> bool {
        self.policies
            .iter()
            .any(|p| p.enabled && p.action == Action::Deny)
    }

    /// Why the set runs on the interpreter rather than the bytecode VM, if it does.
    pub fn interpreter_reason(&self) -> Option<&str> {
        self.vm.as_ref().err().map(String::as_str)
    }

    /// The same set forced onto the interpreter: the reference the VM is checked against.
    pub fn interpreter_only(&self) -> PolicySet {
        PolicySet {
            vm: Err("forced: reference evaluation".into()),
            ..self.clone()
        }
    }

    /// The same set evaluating every policy on every request, whatever its
    /// `applies_when` says: the reference the index is checked against.
    pub fn without_index(&self) -> PolicySet {
        PolicySet {
            index: false,
            ..self.clone()
        }
    }

    /// Whether policies that cannot apply to a request are skipped.
    pub fn index_enabled(&self) -> bool {
        self.index
    }

    /// How many classes of requests (sets of skipped rules) have a program of their own
    /// (see [`super::classes`]).
    pub fn class_programs(&self) -> usize {
        self.classes.len()
    }

    /// Waits (at most `limit`) until no class program is compiling; whether none is. Requests
    /// never wait for one: for tests and benchmarks.
    pub fn settle_class_programs(&self, limit: std::time::Duration) -> bool {
        self.classes.settle(limit)
    }

    /// The policies the index skips for `input` (a Rego input document), each with why:
    /// what `gangplank check --explain` and `--profile` show.
    pub fn skipped_policies(&self, input: &RegoValue) -> Vec<(String, String)> {
        let cluster = self.cluster_view(input);
        self.policy_skips(input, cluster.as_ref())
            .filter_map(|(i, why)| Some((self.policies.get(i)?.name.clone(), why)))
            .collect()
    }

    /// The enabled policies the index skips for `input` and its view of the cluster: each
    /// policy's index in the set, and why. Empty with the index off.
    pub(super) fn policy_skips<'a>(
        &'a self,
        input: &RegoValue,
        cluster: Option<&RegoValue>,
    ) -> impl Iterator<Item = (usize, String)> + 'a {
        let facts = self.index.then(|| Facts::of(input, cluster));
        self.policies
            .iter()
            .enumerate()
            .filter(|(_, p)| p.enabled)
            .filter_map(move |(i, p)| {
                let why = p.applies_when.as_ref()?.skip_reason(facts.as_ref()?)?;
                Some((i, why))
            })
    }

    /// This request's view of the cluster inventory (`data.cluster`), if one is known.
    pub(super) fn cluster_view(&self, input: &RegoValue) -> Option<RegoValue> {
        self.cluster.current().map(|doc| doc.view(input))
    }

    /// A clone of the prepared engine, for evaluating extra rules (Rego tests).
    pub fn engine(&self) -> Engine {
        self.engine.clone()
    }

    /// Evaluates both entry rules once on a sample job: this prepares the engine (so
    /// requests never pay for it) and turns runtime faults that every request would hit
    /// (a missing function, a conflicting complete rule) into a load error.
    fn smoke_test(&mut self) -> Result<(), LoadError> {
        let sample: Value = serde_json::from_str(SAMPLE_JOB).map_err(|e| LoadError::Smoke {
            message: e.to_string(),
        })?;
        let input = crate::review::Input::create(sample, "default").build_rego_input();
        let all: Vec<&RuleRef> = self.rules.iter().collect();
        self.eval_rules_on(&all, &input, None, true)
            .map_err(|e| LoadError::Smoke {
                message: e.to_string(),
            })?;
        if let Ok(program) = &self.vm {
            self.eval_rules_on(&all, &input, None, false)
                .map_err(|e| LoadError::Smoke {
                    message: e.to_string(),
                })?;
            // Requests run the gathered groups; one that fails where its rules alone do
            // not would make every request pay twice.
            for group in Group::ALL {
                let len = group.rules(&self.rules).count();
                program
                    .vm(&input, None, None)
                    .and_then(|mut vm| vm.run_group(group.index(), len).map_err(|e| e.message))
                    .map_err(|message| LoadError::Smoke { message })?;
            }
        }
        Ok(())
    }
}

/// Smallest job that exercises every JobView field a policy may read.
const SAMPLE_JOB: &str = r#"{"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob",
 "metadata":{"name":"sample","namespace":"default"},
 "spec":{"pytorchReplicaSpecs":{
   "Master":{"replicas":1,"template":{"spec":{"containers":[{"name":"pytorch","image":"example/train:1",
     "resources":{"limits":{"nvidia.com/gpu":1}}}]}}},
   "Worker":{"replicas":2,"template":{"spec":{"containers":[{"name":"pytorch","image":"example/train:1",
     "resources":{"limits":{"nvidia.com/gpu":1}}}]}}}}}}"#;

fn add_module(engine: &mut Engine, file: &RegoFile, policy: &str) -> Result<String, LoadError> {
    engine
        .add_policy(file.path.display().to_string(), file.text.clone())
        .map_err(|e| LoadError::Compile {
            policy: policy.to_string(),
            message: e.to_string(),
        })
}

fn check_params_names(sources: &PolicySources) -> Result<(), LoadError> {
    let known: Vec<&str> = sources.policies.iter().map(|p| p.name.as_str()).collect();
    match sources
        .params
        .policies
        .keys()
        .find(|k| !known.contains(&k.as_str()))
    {
        Some(name) => Err(LoadError::UnknownPolicy {
            name: name.clone(),
            known: known.join(", "),
        }),
        None => Ok(()),
    }
}

type Meta = (String, String, Action, Map<String, Value>);

/// Reads `meta := {"title", "description", "action", "params"}`, which must not depend on input.
fn read_meta(engine: &mut Engine, name: &str, path: &std::path::Path) -> Result<Meta, LoadError> {
    let bad = |detail: String| LoadError::BadMeta {
        policy: name.to_string(),
        path: path.to_path_buf(),
        detail,
    };
    let rule = format!("data.{POLICY_PACKAGE}.{name}.meta");
    let value = engine
        .eval_rule(rule)
        .map_err(|e| bad(format!("evaluating meta failed: {e}")))?;
    let meta = from_rego(&value);
    let Some(obj) = meta.as_object() else {
        return Err(bad("must define `meta := {\"title\": ..., \"description\": ..., \"action\": \"deny\"|\"warn\"|\"audit\"}`".into()));
    };
    let text = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    let title = text("title").ok_or_else(|| bad("meta.title must be a string".into()))?;
    let description =
        text("description").ok_or_else(|| bad("meta.description must be a string".into()))?;
    let action = text("action")
        .as_deref()
        .and_then(Action::parse)
        .ok_or_else(|| bad("meta.action must be \"deny\", \"warn\" or \"audit\"".into()))?;
    let params = match obj.get("params") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(bad("meta.params must be an object".into())),
    };
    Ok((title, description, action, params))
}

/// An exemption of params.yaml; `at` (`""` or `policies.<name>.`) names where in errors.
fn params_exemption(
    at: &str,
    namespaces: &[String],
    namespace_selector: Option<&Value>,
    object_selector: Option<&Value>,
) -> Result<Exemption, LoadError> {
    Exemption::compile(namespaces, namespace_selector, object_selector).map_err(|e| {
        LoadError::Params {
            message: format!("params.yaml: {at}{e}"),
        }
    })
}

/// The exception files, each checked against the set's policy names; names unique. An
/// expired one still loads (it stops applying, and verdicts say so), but is logged.
fn check_exceptions(sources: &PolicySources) -> Result<Vec<PolicyException>, LoadError> {
    let known: Vec<&str> = sources.policies.iter().map(|p| p.name.as_str()).collect();
    let exceptions = sources
        .exceptions
        .iter()
        .map(|f| PolicyException::parse(f, &known))
        .collect::<Result<Vec<_>, _>>()?;
    exceptions::check_unique(&exceptions)?;
    let now = time::OffsetDateTime::now_utc();
    for e in exceptions.iter().filter(|e| e.expires <= now) {
        tracing::warn!(exception = %e.name, file = %e.path.display(), expired = %e.expires_text(),
            "policy exception has expired and no longer applies; delete its file");
    }
    Ok(exceptions)
}

/// Every declared output rule of every enabled policy, in policy-name order. Each is
/// evaluated as its own entry point: gathering them in one generated rule in another package
/// made regorus evaluate each policy's virtual document from outside, ~10× the cost.
fn output_rules(policies: &[PolicyInfo]) -> Vec<RuleRef> {
    let mut rules = Vec::new();
    for (i, p) in policies.iter().enumerate().filter(|(_, p)| p.enabled) {
        let declared = [
            (Output::Mutation, p.has_mutation),
            (Output::Violation, p.has_violation),
            (Output::Warning, p.has_warning),
        ];
        for (output, _) in declared.into_iter().filter(|(_, d)| *d) {
            rules.push(RuleRef {
                index: rules.len(),
                policy: i,
                output,
                path: format!("data.{POLICY_PACKAGE}.{}.{}", p.name, output.rule()),
            });
        }
    }
    rules
}

pub use super::to_rego::to_rego;

/// regorus → serde_json. Undefined becomes null.
pub fn from_rego(v: &RegoValue) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

impl PolicySet {
    /// The same set recording, into `sink`, the lines every interpreter evaluation reaches.
    pub fn with_coverage(mut self, sink: super::coverage::CoverageSink) -> PolicySet {
        self.coverage = Some(sink);
        self
    }

    /// Turns coverage on for an interpreter about to evaluate, when the set records it.
    pub(super) fn start_coverage(&self, engine: &mut Engine) {
        if self.coverage.is_some() {
            engine.set_enable_coverage(true);
        }
    }

    /// Adds what `engine` reached to the set's sink, if it has one.
    pub(super) fn finish_coverage(&self, engine: &Engine) {
        if let Some(sink) = &self.coverage {
            sink.record(engine);
        }
    }
}
