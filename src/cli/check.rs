//! `gangplank check`: dry-run manifests through mutation then validation, as the webhooks
//! will, and show verdicts, violations and the exact patch.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::report::{self, Outcome, Unresolved};
use crate::exit;
use crate::images::{pin, Keychain, Pinner};
use crate::policy::profile::{Cost, RuleCost};
use crate::policy::{EvalError, PolicySet};
use crate::review::documents::{ReadOptions, DEFAULT_MAX_DOCUMENT_BYTES};
use crate::review::{self, read_documents};
use crate::review::{Decision, Input};
use crate::trainer::RuntimeCatalog;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Manifests: YAML or JSON files, directories (searched recursively), `-` for stdin.
    /// Bare objects are treated as CREATE; AdmissionReviews are used as they are.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Policy directory: *.rego, lib/, params.yaml.
    #[arg(long, default_value = "policies", env = "GANGPLANK_POLICIES")]
    pub policies: PathBuf,
    /// `text`: report per object. `yaml`: the mutated objects on stdout (report on stderr).
    /// `json`: the full report as JSON.
    #[arg(
        short,
        long,
        value_enum,
        default_value = "text",
        env = "GANGPLANK_OUTPUT"
    )]
    pub output: Output,
    /// Namespace for manifests that name none.
    #[arg(short, long, default_value = "default", env = "GANGPLANK_NAMESPACE")]
    pub namespace: String,
    /// Largest document accepted, in bytes (the apiserver's request limit is 3 MiB).
    #[arg(long, default_value_t = DEFAULT_MAX_DOCUMENT_BYTES, env = "GANGPLANK_MAX_DOCUMENT_BYTES")]
    pub max_document_bytes: usize,
    /// Also print, per training job, what each policy rule costs to evaluate (median of
    /// this many runs, on the submitted object), most expensive first, then the rules of
    /// the policies the applicability index skips for it, with why. For policy authors; 0
    /// turns it off.
    #[arg(long, default_value_t = 0, env = "GANGPLANK_PROFILE")]
    pub profile: usize,
    /// Also print on stderr, per training job, how many policies were evaluated and which
    /// were skipped, with why: by the applicability index (a policy's `# METADATA`
    /// `custom.applies_when` is false for this job, e.g. "kind PyTorchJob is not one of
    /// MPIJob", or "cluster does not hold" without --cluster) or by params.yaml
    /// `excludedNamespaces`. Mutation policies are explained on the submitted object,
    /// validation policies on the mutated one (facts can differ between them).
    /// With GANGPLANK_INDEX=off every policy is evaluated.
    #[arg(long, env = "GANGPLANK_EXPLAIN")]
    pub explain: bool,
    /// Look image tags up in their registries and pin them, as the webhook would (with
    /// `imageResolution` of params.yaml, turned on). Without it, check makes no network call
    /// and lists the images it left unresolved.
    #[arg(long, env = "GANGPLANK_RESOLVE")]
    pub resolve: bool,
    /// Registry credentials for --resolve, docker `config.json` format
    /// (`{"auths": {"<registry>": {"auth": "<base64 user:password>"}}}`).
    #[arg(long, env = "GANGPLANK_REGISTRY_CREDENTIALS", requires = "resolve")]
    pub registry_credentials: Option<PathBuf>,
    /// A cluster inventory for the policies that check jobs against the cluster
    /// (`data.cluster`), as `kubectl get nodes,namespaces,pvc,storageclasses,networkpolicies,
    /// queues -A -o yaml` prints it (any subset: a kind left out is unknown, and the policies
    /// that need it are silent; an item that cannot be read is noted and left out). Without
    /// it those policies are silent.
    /// Kubeflow Trainer runtimes in it (`kubectl get nodes,clustertrainingruntimes,
    /// trainingruntimes -A -o yaml`) are the runtimes TrainJobs are rendered with, besides
    /// those given as manifests.
    #[arg(long, alias = "cluster-snapshot", env = "GANGPLANK_CLUSTER_SNAPSHOT")]
    pub cluster: Option<PathBuf>,
    #[command(flatten)]
    pub policy_flags: super::policy_flags::PolicyFlags,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Yaml,
    Json,
}

impl CheckArgs {
    pub fn run(self) -> u8 {
        let Self {
            paths,
            policies,
            output,
            namespace,
            max_document_bytes,
            profile,
            explain,
            resolve,
            registry_credentials,
            cluster,
            policy_flags,
        } = self;
        let snapshot = match cluster.as_deref().map(crate::cluster::snapshot::read) {
            None => None,
            Some(Ok(inventory)) => Some(inventory),
            Some(Err(message)) => {
                eprintln!("error: --cluster: {message}");
                return exit::UNREADABLE;
            }
        };
        // With --resolve, recompiled with imageResolution on; before the inventory is
        // attached, which a recompile would not keep.
        let loaded = PolicySet::load_with(&policies, policy_flags.options())
            .map_err(|e| report::error_chain(&e));
        let loaded = match (loaded, resolve) {
            (Ok(set), true) => with_resolution(&set),
            (loaded, _) => loaded,
        };
        let set = match loaded {
            Ok(set) => match &snapshot {
                Some(inventory) => set.with_cluster(super::fixed_inventory(inventory, "--cluster")),
                None => set,
            },
            Err(e) => {
                eprintln!(
                    "error: cannot load policies from {}: {e}",
                    policies.display()
                );
                return exit::UNREADABLE;
            }
        };
        if let Some(why) = set.interpreter_reason() {
            eprintln!("note: policies run on the regorus interpreter, not the bytecode VM: {why}");
        }
        let resolving = match resolve.then(|| Resolving::new(registry_credentials.as_deref())) {
            Some(Ok(r)) => Some(r),
            Some(Err(message)) => {
                eprintln!("error: {message}");
                return exit::UNREADABLE;
            }
            None => None,
        };
        let opts = ReadOptions {
            max_document_bytes,
            default_namespace: namespace,
        };
        let documents = read_documents(&paths, &opts);
        // TrainJobs are rendered with the runtimes given beside them or in the snapshot.
        let set = set.with_runtimes(RuntimeCatalog::offline(
            snapshot.as_ref(),
            documents.iter().flatten().map(|d| &d.input.object),
        ));
        let outcomes: Vec<Outcome> = documents
            .into_iter()
            .map(|doc| match doc {
                Ok(mut doc) => {
                    if profile > 0 && doc.input.is_job() {
                        print_profile(&set, &doc, profile);
                    }
                    let (decision, unresolved) = match &resolving {
                        Some(resolving) => resolving.review(&set, &mut doc.input),
                        None => {
                            let unresolved = Unresolved {
                                images: pin::wanted(&set, &doc.input),
                                looked_up: false,
                            };
                            (review::review(&set, &doc.input), unresolved)
                        }
                    };
                    // After the review: with --resolve, on the input with its images pinned.
                    if explain && doc.input.is_job() {
                        eprint!("{}", super::explain::explain(&set, &doc));
                    }
                    Outcome::decided(doc, decision, unresolved)
                }
                Err(e) => Outcome::unreadable(e),
            })
            .collect();
        if outcomes.is_empty() {
            // kubectl refuses this too ("no objects passed to apply"): an empty input is
            // almost always a wrong path or an empty pipe, not a job that passed.
            eprintln!("error: no objects found in {}", show_paths(&paths));
            return exit::UNREADABLE;
        }
        let stdout = std::io::stdout();
        let stderr = std::io::stderr();
        let written = match output {
            Output::Text => report::write_text(&mut stdout.lock(), &outcomes),
            Output::Json => report::write_json(&mut stdout.lock(), &outcomes),
            Output::Yaml => report::write_text(&mut stderr.lock(), &outcomes)
                .and_then(|()| report::write_mutated_yaml(&mut stdout.lock(), &outcomes)),
        };
        match written.and_then(|()| stdout.lock().flush()) {
            // `check ... | head` closed the pipe: the reader has what it wanted.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => {
                eprintln!("error: cannot write output: {e}");
                return exit::UNREADABLE;
            }
            Ok(()) => {}
        }
        report::exit_code(&outcomes)
    }
}

/// `set` recompiled with `imageResolution` turned on (its other settings kept).
fn with_resolution(set: &PolicySet) -> Result<PolicySet, String> {
    let mut sources = set.sources().clone();
    let mut settings = sources.params.image_resolution.take().unwrap_or_default();
    settings.enabled = true;
    sources.params.image_resolution = Some(settings);
    PolicySet::compile(sources).map_err(|e| report::error_chain(&e))
}

/// `--resolve`: a resolver with the credentials file, and a runtime to run it on.
struct Resolving {
    pinner: Pinner,
    runtime: tokio::runtime::Runtime,
}

impl Resolving {
    fn new(credentials: Option<&Path>) -> Result<Resolving, String> {
        let credentials = match credentials {
            Some(path) => Keychain::from_file(path).map_err(|e| report::error_chain(&e))?,
            None => Keychain::default(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        Ok(Resolving {
            pinner: Pinner {
                credentials,
                ..Pinner::default()
            },
            runtime,
        })
    }

    /// What the webhooks decide: pin, review, add the failed lookups.
    fn review(
        &self,
        set: &PolicySet,
        input: &mut Input,
    ) -> (Result<Decision, EvalError>, Unresolved) {
        if review::decide::skip_reason(set, input).is_some() {
            return (review::review(set, input), Unresolved::default());
        }
        let pinning = self.runtime.block_on(self.pinner.pin(set, input));
        let failures = pin::failure_violations(&pinning, input);
        let unresolved = Unresolved {
            images: pinning.unresolved(),
            looked_up: true,
        };
        let decision = review::review(set, input).map(|mut d| {
            d.add_violations(failures);
            d
        });
        (decision, unresolved)
    }
}

fn show_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per-rule costs on stderr, most expensive first, with the total; then the rules of the
/// policies the index skips (they cost nothing), and the whole review.
fn print_profile(set: &PolicySet, doc: &crate::review::Document, runs: usize) {
    let costs = set.profile(&doc.input.build_rego_input(), runs);
    let median = |c: &RuleCost| match &c.cost {
        Cost::Median(d) => Some(*d),
        Cost::Failed(_) | Cost::Skipped(_) => None,
    };
    let (mut run, skipped): (Vec<&RuleCost>, Vec<&RuleCost>) = costs
        .iter()
        .partition(|c| !matches!(c.cost, Cost::Skipped(_)));
    run.sort_by_key(|c| std::cmp::Reverse(median(c).unwrap_or_default()));
    let total: std::time::Duration = run.iter().filter_map(|c| median(c)).sum();
    eprintln!(
        "profile {} (median of {runs} runs per rule; total {total:.1?}):",
        doc.source
    );
    for c in run {
        match &c.cost {
            Cost::Median(d) => eprintln!("  {:>10.1?}  {}", d, c.rule),
            Cost::Failed(e) => eprintln!("  {:>10}  {}: {e}", "error", c.rule),
            Cost::Skipped(_) => {}
        }
    }
    for c in skipped {
        if let Cost::Skipped(why) = &c.cost {
            eprintln!("  {:>10}  {} skipped ({why})", "-", c.rule);
        }
    }
    match set.profile_review(&doc.input, runs) {
        Ok(d) => eprintln!(
            "  {d:>10.1?}  whole review as a request runs it (mutation, then validation; each in one execution)"
        ),
        Err(e) => eprintln!("  {:>10}  whole review: {e}", "error"),
    }
}
