//! The user documentation stays true to the repository: README.md and the book in docs/src/.
//!
//! - Every relative link resolves to a file (and, for a `#anchor`, to a heading of it), and a
//!   book page links only to other book pages: mdBook turns `.md` links into `.html` ones, so a
//!   link out of docs/src/ would be broken in the built book. Repository files are named as
//!   paths in backticks instead, and every such path (`deploy/...`, `policies/...`,
//!   `src/...`, `tests/...`, ...) must exist.
//! - The policy catalog (docs/src/reference/policies.md) is generated from the policies' own
//!   `meta` and policies/params.yaml; this test fails when it drifts. Regenerate it with
//!   `UPDATE_DOCS=1 cargo test --test docs`.
//!
//! None of this needs mdBook: `.ci/run` builds the book separately.

mod catalog;
mod links;
mod markdown;

use std::path::{Path, PathBuf};

/// The markdown files users read: README.md and every page under docs/src/.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md")];
    collect_markdown(Path::new("docs/src"), &mut files);
    files.sort();
    files
}

fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_markdown(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Fails with every problem at once, one per line, so a broken page is fixed in one pass.
fn report(what: &str, problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{what}:\n  {}\n",
        problems.join("\n  ")
    );
}

/// Runs `check` on every document and fails with all it found.
fn check_documents(what: &str, check: fn(&Path, &str) -> Vec<String>) {
    let problems = documents()
        .iter()
        .flat_map(|doc| check(doc, &read(doc)))
        .collect();
    report(what, problems);
}

#[test]
fn relative_links_resolve() {
    check_documents("links that do not resolve", links::broken_links);
}

#[test]
fn repository_paths_exist() {
    check_documents(
        "paths in backticks that the repository does not have",
        links::missing_paths,
    );
}

#[test]
fn every_page_is_in_the_summary() {
    let summary = Path::new("docs/src/SUMMARY.md");
    let listed: Vec<PathBuf> = markdown::links(&read(summary))
        .into_iter()
        .map(|l| Path::new("docs/src").join(l.target))
        .collect();
    let problems = documents()
        .into_iter()
        .filter(|d| d.starts_with("docs/src") && d.as_path() != summary)
        .filter(|d| !listed.contains(d))
        .map(|d| format!("{} is not listed in docs/src/SUMMARY.md", d.display()))
        .collect();
    report("pages mdBook would not build", problems);
}

#[test]
fn policy_catalog_is_current() {
    let page = Path::new(catalog::PAGE);
    let generated = catalog::markdown(Path::new("policies"));
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(page, &generated).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        return;
    }
    let written = std::fs::read_to_string(page).unwrap_or_default();
    assert!(
        written == generated,
        "{} does not match the policies' meta and policies/params.yaml; regenerate it with \
         `UPDATE_DOCS=1 cargo test --test docs`",
        page.display()
    );
}

/// The checker itself: what it must find and what it must leave alone.
#[test]
fn the_checker_finds_what_is_broken() {
    let doc = Path::new("docs/src/troubleshooting.md");
    let text = "See [ok](install.md), [gone](nowhere.md), [anchor](#no-such-heading), \
                [out](../../deploy/README.md) and [web](https://example.com).\n\
                `deploy/webhooks.yaml`, `deploy/no-such-file.yaml`, `policies/*.rego`, \
                `policies/<policy>.rego`, `kubectl apply -k deploy/`.\n\
                ```sh\ncat src/missing.rs [x](missing.md)\n```\n# A heading\n";
    let broken = links::broken_links(doc, text);
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(broken[0].contains("nowhere.md"), "{broken:#?}");
    assert!(broken[1].contains("#no-such-heading"), "{broken:#?}");
    assert!(broken[2].contains("outside the book"), "{broken:#?}");
    let missing = links::missing_paths(doc, text);
    assert_eq!(missing.len(), 1, "{missing:#?}");
    assert!(
        missing[0].contains("deploy/no-such-file.yaml"),
        "{missing:#?}"
    );
}
