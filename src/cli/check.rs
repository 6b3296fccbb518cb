//! `gangplank check`: dry-run manifests through mutation then validation, as the webhooks
//! will, and show verdicts, violations and the exact patch.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::exit;
use super::report::{self, Outcome};
use crate::policy::PolicySet;
use crate::review::documents::{ReadOptions, DEFAULT_MAX_DOCUMENT_BYTES};
use crate::review::{self, read_documents};

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
    /// this many runs), most expensive first. For policy authors; 0 turns it off.
    #[arg(long, default_value_t = 0, env = "GANGPLANK_PROFILE")]
    pub profile: usize,
    /// A cluster inventory for the policies that check jobs against the cluster
    /// (`data.cluster`): `kubectl get nodes -o yaml` output, Volcano Queues optionally in
    /// the same list (`kubectl get nodes,queues -o yaml`). Without it those policies are silent.
    #[arg(long, env = "GANGPLANK_CLUSTER_SNAPSHOT")]
    pub cluster: Option<PathBuf>,
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
            cluster,
        } = self;
        let inventory = match cluster.as_deref().map(crate::cluster::snapshot::read) {
            None => None,
            Some(Ok(inventory)) => Some(crate::cluster::ClusterHandle::fixed(&inventory)),
            Some(Err(message)) => {
                eprintln!("error: --cluster: {message}");
                return exit::UNREADABLE;
            }
        };
        let set = match PolicySet::load(&policies) {
            Ok(set) => match inventory {
                Some(handle) => set.with_cluster(handle),
                None => set,
            },
            Err(e) => {
                eprintln!(
                    "error: cannot load policies from {}: {}",
                    policies.display(),
                    report::error_chain(&e)
                );
                return exit::UNREADABLE;
            }
        };
        if let Some(why) = set.interpreter_reason() {
            eprintln!("note: policies run on the regorus interpreter, not the bytecode VM: {why}");
        }
        let opts = ReadOptions {
            max_document_bytes,
            default_namespace: namespace,
        };
        let outcomes: Vec<Outcome> = read_documents(&paths, &opts)
            .into_iter()
            .map(|doc| match doc {
                Ok(doc) => {
                    if profile > 0 && doc.input.kind().is_some() {
                        print_profile(&set, &doc, profile);
                    }
                    let decision = review::review(&set, &doc.input);
                    Outcome::decided(doc, decision)
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

fn show_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per-rule costs on stderr, most expensive first, with the total.
fn print_profile(set: &PolicySet, doc: &crate::review::Document, runs: usize) {
    let mut costs = set.profile(&doc.input.build_rego_input(), runs);
    costs.sort_by_key(|c| std::cmp::Reverse(c.median.clone().unwrap_or_default()));
    let total: std::time::Duration = costs.iter().filter_map(|c| c.median.clone().ok()).sum();
    eprintln!(
        "profile {} (median of {runs} runs per rule; total {total:.1?}):",
        doc.source
    );
    for c in costs {
        match c.median {
            Ok(d) => eprintln!("  {:>10.1?}  {}", d, c.rule),
            Err(e) => eprintln!("  {:>10}  {}: {e}", "error", c.rule),
        }
    }
}
