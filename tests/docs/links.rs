//! Links and repository paths of one document, checked against the working tree.

use std::path::{Component, Path, PathBuf};

use super::markdown;

/// Where the book's pages are; mdBook publishes nothing else.
const BOOK: &str = "docs/src";

/// Top-level directories whose paths documents name in backticks.
const ROOTS: &[&str] = &[
    ".ci", "benches", "certs", "crds", "deploy", "dist", "docs", "examples", "fuzz", "policies",
    "src", "tests",
];

/// Each relative link of `text` (the contents of `doc`) that does not resolve, as a line
/// naming the document, the link and why.
pub fn broken_links(doc: &Path, text: &str) -> Vec<String> {
    markdown::links(text)
        .into_iter()
        .filter(|l| !l.target.contains("://") && !l.target.starts_with("mailto:"))
        .filter_map(|l| {
            why_broken(doc, text, &l.target)
                .map(|why| format!("{}: ({}) {why}", doc.display(), l.target))
        })
        .collect()
}

fn why_broken(doc: &Path, text: &str, target: &str) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let resolved = if path.is_empty() {
        doc.to_path_buf()
    } else {
        normalize(&doc.parent().unwrap_or(Path::new("")).join(path))
    };
    if !resolved.exists() {
        return Some(format!("{} does not exist", resolved.display()));
    }
    if doc.starts_with(BOOK) && !resolved.starts_with(BOOK) {
        return Some(format!(
            "{} is outside the book (mdBook would leave a broken link): name it as a path in backticks",
            resolved.display()
        ));
    }
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if resolved.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let target_text = if resolved == doc {
        text.to_string()
    } else {
        std::fs::read_to_string(&resolved).ok()?
    };
    let anchors = markdown::anchors(&target_text);
    (!anchors.iter().any(|a| a == anchor)).then(|| {
        format!(
            "{} has no heading #{anchor} (it has: {})",
            resolved.display(),
            anchors.join(", ")
        )
    })
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Each repository path named in a code span of `text` that does not exist.
pub fn missing_paths(doc: &Path, text: &str) -> Vec<String> {
    markdown::code_spans(text)
        .iter()
        .filter_map(|span| repository_path(span))
        .filter(|path| !exists(path))
        .map(|path| format!("{}: `{path}` does not exist", doc.display()))
        .collect()
}

/// The path a code span names, if it is one: a single word under one of [`ROOTS`], or a
/// top-level document (`RELIABILITY.md`); an anchor or `:line` suffix left out. Placeholders
/// (`policies/<policy>.rego`, `deploy/...`) are not paths.
fn repository_path(span: &str) -> Option<String> {
    let placeholder = ["<", ">", "{", "}", "$", "...", "…"];
    if span.contains(char::is_whitespace) || placeholder.iter().any(|p| span.contains(p)) {
        return None;
    }
    let path = span.split('#').next().unwrap_or(span);
    let path = match path.split_once(':') {
        Some((p, line)) if line.chars().all(|c| c.is_ascii_digit() || c == '-') => p,
        Some(_) => return None,
        None => path,
    };
    let under_root = path
        .split_once('/')
        .is_some_and(|(root, _)| ROOTS.contains(&root));
    let top_level_doc = !path.contains('/')
        && path.ends_with(".md")
        && path
            .trim_end_matches(".md")
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_');
    (under_root || top_level_doc).then(|| path.to_string())
}

/// Whether `path` exists; `*` and `?` in a component match as in a shell glob.
fn exists(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    matches_from(Path::new("."), &parts)
}

fn matches_from(dir: &Path, parts: &[&str]) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return dir.exists();
    };
    if !first.contains(['*', '?']) {
        return matches_from(&dir.join(first), rest);
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        wildcard(first, &name.to_string_lossy()) && matches_from(&e.path(), rest)
    })
}

/// Shell-style matching of one path component: `*` any run, `?` one character.
fn wildcard(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let mut table = vec![vec![false; n.len() + 1]; p.len() + 1];
    table[0][0] = true;
    for i in 1..=p.len() {
        table[i][0] = table[i - 1][0] && p[i - 1] == '*';
        for j in 1..=n.len() {
            table[i][j] = match p[i - 1] {
                '*' => table[i - 1][j] || table[i][j - 1],
                '?' => table[i - 1][j - 1],
                c => table[i - 1][j - 1] && c == n[j - 1],
            };
        }
    }
    table[p.len()][n.len()]
}

#[test]
fn wildcards_match_as_a_shell_does() {
    assert!(wildcard("upstream_*.yaml", "upstream_pytorch.yaml"));
    assert!(wildcard("e2e_?ocker*", "e2e_docker_x"));
    assert!(!wildcard("*.rego", "params.yaml"));
    assert!(exists("policies/*.rego"));
    assert!(!exists("policies/*.nothing"));
}

#[test]
fn spans_that_are_paths() {
    assert_eq!(
        repository_path("src/admission/server.rs:120").as_deref(),
        Some("src/admission/server.rs")
    );
    assert_eq!(
        repository_path("RELIABILITY.md").as_deref(),
        Some("RELIABILITY.md")
    );
    assert_eq!(
        repository_path("deploy/README.md#image").as_deref(),
        Some("deploy/README.md")
    );
    assert_eq!(repository_path("kubectl apply -k deploy/"), None);
    assert_eq!(repository_path("gangplank.dev/release-order"), None);
    assert_eq!(repository_path("policies/<policy>.rego"), None);
    assert_eq!(repository_path("params.yaml"), None);
}
