//! Every gangplank ServiceAccount's effective rights, as the apiserver's RBAC authorizer
//! answers them (`kubectl auth can-i --list --as=system:serviceaccount:...`), for deploy/
//! installed with each of its components, compared with the checked-in table
//! tests/data/rbac/effective-rights.txt. Each row of that table names the source file that
//! uses the grant and a string of that file that shows it: a grant nobody uses has no row
//! (and fails the comparison), a row whose code went away fails the mention check.
//!
//! Run: `cargo test --test e2e_rbac` (with KUBEBUILDER_ASSETS or the cached test binaries).
//! `GANGPLANK_RIGHTS_OUT=<file>` also writes the rights measured, in the table's format
//! (with `?` for the columns a person fills in), and each setup's summary.

mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use support::rbac::{self, Install, Rights, SYSTEM_NAMESPACE};
use support::{ControlPlane, Crds};

e2e_suite!(
    "e2e_rbac",
    [every_service_account_holds_exactly_the_rights_the_table_names_and_the_code_uses]
);

/// The namespaces each identity is asked about: a tenant's (where jobs run), the cluster's
/// own and gangplank's.
const NAMESPACES: [&str; 3] = [TENANT, "kube-system", SYSTEM_NAMESPACE];
const TENANT: &str = "tenant";

/// One install of deploy/ and the ServiceAccount whose rights it decides.
struct Setup {
    name: &'static str,
    account: &'static str,
    components: &'static [&'static str],
    /// (directory under deploy/, namespace): a per-namespace binding the overlay includes.
    bindings: &'static [(&'static str, &'static str)],
}

const SETUPS: &[Setup] = &[
    Setup {
        name: "webhook",
        account: "gangplank-webhook",
        components: &[],
        bindings: &[],
    },
    Setup {
        name: "webhook+image-pinning",
        account: "gangplank-webhook",
        components: &["image-pinning"],
        bindings: &[],
    },
    Setup {
        name: "webhook+image-pinning-namespaced",
        account: "gangplank-webhook",
        components: &["image-pinning-namespaced"],
        bindings: &[("image-pinning-namespaced/binding", TENANT)],
    },
    Setup {
        name: "webhook+cluster-inventory",
        account: "gangplank-webhook",
        components: &["cluster-inventory"],
        bindings: &[],
    },
    Setup {
        name: "webhook+trainer",
        account: "gangplank-webhook",
        components: &["trainer"],
        bindings: &[],
    },
    Setup {
        name: "controller",
        account: "gangplank-controller",
        components: &["controller"],
        bindings: &[],
    },
    // The MPI components build only after controller-namespaced (their rules never hold
    // cluster-wide): tests/deploy_manifests/combinations.rs.
    Setup {
        name: "controller+namespaced+mpi",
        account: "gangplank-controller",
        components: &["controller", "controller-namespaced", "controller-mpi"],
        bindings: &[("controller-namespaced/binding", TENANT)],
    },
    Setup {
        name: "controller+namespaced",
        account: "gangplank-controller",
        components: &["controller", "controller-namespaced"],
        bindings: &[("controller-namespaced/binding", TENANT)],
    },
    Setup {
        name: "audit",
        account: "gangplank-audit",
        components: &["audit"],
        bindings: &[],
    },
    Setup {
        name: "controller+mpi-v1+namespaced",
        account: "gangplank-controller",
        components: &["controller", "controller-namespaced", "controller-mpi-v1"],
        bindings: &[("controller-namespaced/binding", TENANT)],
    },
];

/// A row of the table: setup, namespace, resource, resource names (`-`: any), verbs, and
/// the file (and a string in it) that uses the grant.
struct Row {
    key: String,
    setup: String,
    namespace: String,
    file: String,
    mention: String,
}

fn read_table() -> BTreeMap<String, Row> {
    let path = rbac::data("rbac/effective-rights.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rows = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [setup, namespace, resource, names, verbs, file, mention] = fields.as_slice() else {
            panic!("{}:{}: expected 7 columns: {line}", path.display(), n + 1)
        };
        let key = key(setup, namespace, resource, names, verbs);
        let row = Row {
            key: key.clone(),
            setup: setup.to_string(),
            namespace: namespace.to_string(),
            file: file.to_string(),
            mention: mention.to_string(),
        };
        assert!(
            rows.insert(key, row).is_none(),
            "{}:{}: a row twice",
            path.display(),
            n + 1
        );
    }
    rows
}

fn key(setup: &str, namespace: &str, resource: &str, names: &str, verbs: &str) -> String {
    format!("{setup:<36} {namespace:<17} {resource:<44} {names:<22} {verbs}")
}

fn rows_of(setup: &str, namespace: &str, rights: &Rights) -> Vec<String> {
    rights
        .iter()
        .map(|((resource, names), verbs)| {
            let names = if names.is_empty() { "-" } else { names };
            let verbs: Vec<&str> = verbs.iter().map(String::as_str).collect();
            key(setup, namespace, resource, names, &verbs.join(","))
        })
        .collect()
}

async fn every_service_account_holds_exactly_the_rights_the_table_names_and_the_code_uses() {
    let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
    control_plane.ensure_namespace(TENANT).await;
    control_plane.ensure_namespace(SYSTEM_NAMESPACE).await;
    let table = read_table();
    // What an identity with no binding at all may do (discovery, self reviews): not a grant.
    let baseline: BTreeMap<&str, Rights> = NAMESPACES
        .iter()
        .map(|ns| {
            (
                *ns,
                rbac::rights(control_plane, SYSTEM_NAMESPACE, "no-grants", ns),
            )
        })
        .collect();
    let mut measured = Vec::new();
    let mut summaries = String::new();
    for setup in SETUPS {
        let rights = measure(control_plane, setup, &baseline, &table).await;
        let _ = writeln!(summaries, "{}", summary(setup, &rights));
        for (ns, rights) in &rights {
            measured.extend(rows_of(setup.name, ns, rights));
        }
    }
    write_out(&measured, &summaries);
    let expected: Vec<&String> = table.keys().collect();
    let gained: Vec<&String> = measured
        .iter()
        .filter(|k| !table.contains_key(*k))
        .collect();
    let lost: Vec<&&String> = expected.iter().filter(|k| !measured.contains(k)).collect();
    let mut diff = String::new();
    for row in &gained {
        let _ = writeln!(diff, "+ {row}");
    }
    for row in &lost {
        let _ = writeln!(diff, "- {row}");
    }
    assert!(
        diff.is_empty(),
        "effective rights differ from tests/data/rbac/effective-rights.txt (+ held but not in \
         the table: drop the grant or add a row naming the code that uses it; - in the table \
         but not held); each setup's ServiceAccount is in the summaries:\n{diff}\nsetup \
         summaries (setup, ServiceAccount, verb x resource pairs per namespace):\n{summaries}"
    );
    let unused: Vec<String> = table
        .values()
        .filter_map(|row| {
            rbac::file_mentions(Path::new(&row.file), &row.mention)
                .err()
                .map(|e| format!("{}: {e}", row.key))
        })
        .collect();
    assert!(
        unused.is_empty(),
        "rows whose code does not use the grant (remove the grant and its row, or name the \
         code that uses it):\n{}",
        unused.join("\n")
    );
}

/// Installs `setup`, reads its account's rights in each namespace (waiting, with a
/// deadline, until the RBAC authorizer's cache shows the table's rows), removes it and waits
/// until the account holds nothing again.
async fn measure(
    control_plane: &ControlPlane,
    setup: &Setup,
    baseline: &BTreeMap<&str, Rights>,
    table: &BTreeMap<String, Row>,
) -> BTreeMap<&'static str, Rights> {
    let install = Install::render(control_plane, setup.name, setup.components, setup.bindings);
    install.apply(control_plane);
    let read = |ns: &'static str| {
        rbac::without(
            rbac::rights(control_plane, SYSTEM_NAMESPACE, setup.account, ns),
            &baseline[ns],
        )
    };
    let mut out = BTreeMap::new();
    for ns in NAMESPACES {
        let expected = table
            .values()
            .filter(|row| row.setup == setup.name && row.namespace == ns)
            .count();
        let what = format!("{} in {ns} as the table says", setup.name);
        let rights = wait_until(&what, || {
            let rights = read(ns);
            let rows = rows_of(setup.name, ns, &rights);
            let same = rows.len() == expected && rows.iter().all(|r| table.contains_key(r));
            (same, rights)
        })
        .await;
        out.insert(ns, rights);
    }
    install.remove(control_plane);
    for ns in NAMESPACES {
        let what = format!("{} removed: no rights in {ns}", setup.name);
        wait_until(&what, || {
            let rights = read(ns);
            (rights.is_empty(), ())
        })
        .await;
    }
    out
}

/// Polls `probe` until it says done, or gives its last answer after a deadline (the caller
/// compares and reports that answer): the RBAC authorizer reads bindings through an
/// informer, so a fresh binding shows a moment later.
async fn wait_until<T>(what: &str, mut probe: impl FnMut() -> (bool, T)) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (done, value) = probe();
        if done || std::time::Instant::now() >= deadline {
            if !done {
                eprintln!("not reached within 10 s: {what}");
            }
            return value;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `setup: N verb x resource pairs in a tenant namespace; reaches Secrets / pods/exec /
/// RBAC (where)`.
fn summary(setup: &Setup, rights: &BTreeMap<&str, Rights>) -> String {
    let pairs = |ns: &str| {
        rights
            .get(ns)
            .map_or(0, |r| r.values().map(|v| v.len()).sum::<usize>())
    };
    let reach = |what: &dyn Fn(&str) -> bool| -> Vec<&str> {
        NAMESPACES
            .iter()
            .copied()
            .filter(|ns| {
                rights
                    .get(ns)
                    .is_some_and(|r| r.keys().any(|(res, _)| what(res)))
            })
            .collect()
    };
    let secrets = reach(&|r| r == "secrets");
    let exec = reach(&|r| r == "pods/exec");
    let rbac_writes = reach(&|r| r.ends_with(".rbac.authorization.k8s.io"));
    let pods = reach(&|r| r == "pods");
    format!(
        "{:<36} {:<21} {} in {TENANT}, {} in kube-system, {} in {SYSTEM_NAMESPACE}; secrets: {secrets:?}; pods/exec: {exec:?}; rbac: {rbac_writes:?}; pods: {pods:?}",
        setup.name,
        setup.account,
        pairs(TENANT),
        pairs("kube-system"),
        pairs(SYSTEM_NAMESPACE),
    )
}

fn write_out(rows: &[String], summaries: &str) {
    let Some(path) = std::env::var_os("GANGPLANK_RIGHTS_OUT") else {
        return;
    };
    let mut text = String::new();
    for row in rows {
        let _ = writeln!(text, "{row} ? ?");
    }
    let _ = writeln!(text, "\n# summaries\n{summaries}");
    std::fs::write(&path, text).expect("write GANGPLANK_RIGHTS_OUT");
}
