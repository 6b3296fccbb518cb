//! `gangplank audit`: every existing training job, in the cluster or in a snapshot, judged
//! by the current policies as if it were created today (see [`crate::audit`]).

mod reports;

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::report::error_chain;
use crate::audit::{self, live, report, Audit};
use crate::cluster::Inventory;
use crate::exit;
use crate::policy::PolicySet;
use crate::trainer::RuntimeCatalog;

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// A snapshot to audit instead of the cluster: a YAML or JSON file or a directory of
    /// them, as `kubectl get pytorchjobs,tfjobs,mpijobs,xgboostjobs,paddlejobs,jaxjobs -A
    /// -o yaml` prints. Without it, the cluster of the in-cluster config or KUBECONFIG.
    pub source: Option<PathBuf>,
    /// Policy directory: *.rego, lib/, params.yaml.
    #[arg(long, default_value = "policies", env = "GANGPLANK_POLICIES")]
    pub policies: PathBuf,
    /// A cluster inventory for the cluster-aware policies (`kubectl get nodes,namespaces,pvc,
    /// storageclasses,networkpolicies,queues -A -o yaml`, any subset: a kind left out is
    /// unknown). With a live cluster, they are listed from it instead, unless this is given.
    #[arg(long, env = "GANGPLANK_CLUSTER_SNAPSHOT")]
    pub cluster_snapshot: Option<PathBuf>,
    /// `table`: one row per violation. `json`: the documented audit document.
    /// `policyreport`: wgpolicyk8s.io/v1alpha2 PolicyReports, one per namespace (YAML).
    #[arg(
        short,
        long,
        value_enum,
        default_value = "table",
        env = "GANGPLANK_AUDIT_OUTPUT"
    )]
    pub output: Output,
    /// Audit only this namespace.
    #[arg(short, long, env = "GANGPLANK_AUDIT_NAMESPACE")]
    pub namespace: Option<String>,
    /// Audit every namespace (the default; kubectl's spelling, for scripts that pass it).
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Write the findings back to the cluster as wgpolicyk8s.io/v1alpha2 PolicyReports, one
    /// per job with findings, labelled app.kubernetes.io/managed-by=gangplank: new ones
    /// created, changed ones updated, stale ones (the job fixed or gone) deleted, other
    /// tools' reports untouched. Prints what it wrote and a summary instead of `--output`;
    /// exits 0 when every write succeeded, whatever the jobs' verdicts.
    #[arg(
        long,
        env = "GANGPLANK_AUDIT_WRITE_REPORTS",
        conflicts_with_all = ["source", "output"]
    )]
    pub write_reports: bool,
    /// Objects per list request to the API server (limit and continue), for the jobs, the
    /// inventory and the reports: a large cluster is read in bounded responses.
    #[arg(
        long,
        default_value_t = live::PAGE,
        value_parser = clap::value_parser!(u32).range(1..),
        env = "GANGPLANK_AUDIT_PAGE_SIZE"
    )]
    pub page_size: u32,
    #[command(flatten)]
    pub policy_flags: super::policy_flags::PolicyFlags,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
    Policyreport,
}

impl AuditArgs {
    pub fn run(self) -> u8 {
        let Self {
            source,
            policies,
            cluster_snapshot,
            output,
            namespace,
            all_namespaces: _,
            write_reports,
            page_size,
            policy_flags,
        } = self;
        let set = match PolicySet::load_with(&policies, policy_flags.options()) {
            Ok(set) => set,
            Err(e) => {
                eprintln!(
                    "error: cannot load policies from {}: {}",
                    policies.display(),
                    error_chain(&e)
                );
                return exit::UNREADABLE;
            }
        };
        let snapshot_inventory = match cluster_snapshot
            .as_deref()
            .map(crate::cluster::snapshot::read)
        {
            None => None,
            Some(Ok(inventory)) => Some(inventory),
            Some(Err(message)) => {
                eprintln!("error: --cluster-snapshot: {message}");
                return exit::UNREADABLE;
            }
        };
        let namespace = namespace.as_deref();
        let (audit, set) = match source {
            Some(path) => snapshot_audit(set, snapshot_inventory, &path, namespace),
            None => {
                let then = if write_reports {
                    Then::WriteReports
                } else {
                    Then::Print(output)
                };
                let live = Live {
                    namespace,
                    page: page_size,
                    then,
                };
                return live.run(set, snapshot_inventory);
            }
        };
        write(&audit, &set, output)
    }
}

fn snapshot_audit(
    set: PolicySet,
    inventory: Option<Inventory>,
    path: &std::path::Path,
    namespace: Option<&str>,
) -> (Audit, PolicySet) {
    let (set, inventory_source) = with_inventory(set, inventory.clone());
    let mut audit = audit::snapshot::read(&set, path, namespace, inventory.as_ref());
    audit.inventory = inventory_source;
    (audit, set)
}

/// The policies reading `inventory` as `data.cluster`, and where it came from.
fn with_inventory(set: PolicySet, inventory: Option<Inventory>) -> (PolicySet, Option<String>) {
    match inventory {
        Some(inventory) => {
            let source = inventory.source.clone();
            (
                set.with_cluster(super::fixed_inventory(&inventory, "inventory")),
                Some(source),
            )
        }
        None => (set, None),
    }
}

/// What a live audit does with its findings.
enum Then {
    Print(Output),
    WriteReports,
}

/// A live audit's settings.
struct Live<'a> {
    namespace: Option<&'a str>,
    page: u32,
    then: Then,
}

impl Live<'_> {
    /// Connects, audits, then prints or writes the reports; the exit code.
    fn run(self, set: PolicySet, inventory: Option<Inventory>) -> u8 {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                return exit::UNREADABLE;
            }
        };
        runtime.block_on(async {
            let (client, url) = match live::connect().await {
                Ok(connected) => connected,
                Err(e) => {
                    eprintln!("error: {}", error_chain(&e));
                    return exit::UNREADABLE;
                }
            };
            let (audit, set) = self.audit(&client, url, set, inventory).await;
            match self.then {
                Then::Print(output) => write(&audit, &set, output),
                Then::WriteReports => {
                    reports::write(&client, &audit, &set, self.namespace, self.page).await
                }
            }
        })
    }

    /// Every job of the cluster (of `namespace`), judged.
    async fn audit(
        &self,
        client: &kube::Client,
        url: String,
        set: PolicySet,
        inventory: Option<Inventory>,
    ) -> (Audit, PolicySet) {
        let mut audit = Audit {
            source: format!("cluster {url}"),
            ..Audit::default()
        };
        let inventory = match inventory {
            Some(inventory) => Some(inventory),
            None => match live::inventory(client, self.page).await {
                Ok(inventory) => Some(inventory),
                Err(why) => {
                    audit.notes.push(format!(
                        "{why}; the cluster-aware policies (capacity, volcano_queue, mig_inventory) found nothing"
                    ));
                    None
                }
            },
        };
        let (set, inventory_source) = with_inventory(set, inventory);
        audit.inventory = inventory_source;
        let jobs = live::jobs(client, self.namespace, self.page, &mut audit).await;
        // TrainJobs are judged on the runtimes stored now (not the snapshot the Trainer took
        // when it started them): a runtime edited since shows in its TrainJobs' verdicts.
        let runtimes = RuntimeCatalog::default();
        jobs.iter().for_each(|(object, _)| {
            runtimes.insert(object);
        });
        runtimes.mark_listed("the cluster");
        let set = set.with_runtimes(runtimes);
        let mut seen = std::collections::HashSet::new();
        for (object, source) in jobs {
            // A CRD serving two versions (MPIJob v1 and v2beta1) lists each job under both.
            let uid = object.pointer("/metadata/uid").and_then(|u| u.as_str());
            if uid.is_some_and(|uid| !seen.insert(uid.to_string())) {
                continue;
            }
            audit.jobs.push(audit::judge(&set, object, source));
        }
        audit.sort();
        (audit, set)
    }
}

/// The notes of `audit`, on stderr.
pub(super) fn print_notes(audit: &Audit) {
    for note in &audit.notes {
        eprintln!("note: {note}");
    }
}

fn write(audit: &Audit, set: &PolicySet, output: Output) -> u8 {
    print_notes(audit);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written = match output {
        Output::Table => report::write_table(&mut out, audit),
        // Rendered first: serde_json's writer would turn a closed pipe into a JSON error.
        Output::Json => serde_json::to_string_pretty(&report::to_json(audit))
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(out, "{text}")),
        Output::Policyreport => write_policy_reports(&mut out, audit, set),
    };
    match written.and_then(|()| out.flush()) {
        // `audit ... | head` closed the pipe: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            eprintln!("error: cannot write output: {e}");
            return exit::UNREADABLE;
        }
        Ok(()) => {}
    }
    audit.exit_code()
}

/// YAML documents for `kubectl apply -f -`; what could not be read goes to stderr, since
/// a PolicyReport has no place for a file that is not a resource.
fn write_policy_reports(w: &mut impl Write, audit: &Audit, set: &PolicySet) -> std::io::Result<()> {
    for e in &audit.unreadable {
        eprintln!("unreadable: {}: {}", e.source, e.message);
    }
    for report in report::policy_reports(audit, set, now()) {
        let text = yaml_serde::to_string(&report).map_err(std::io::Error::other)?;
        write!(w, "---\n{text}")?;
    }
    Ok(())
}

/// Seconds since the epoch: the results' timestamp.
pub(super) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
