//! Reading manifests for `gangplank check`: files, directories, stdin; YAML or JSON;
//! multi-document; bare objects, `kind: List` or whole AdmissionReviews.
//!
//! Entry point: [`read_documents`]. Every problem becomes a [`DocumentError`] naming the file,
//! the document number and, for syntax errors, the line: one bad document never hides the
//! others.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::input::Input;
use crate::job::problem::type_name;

/// The apiserver refuses request bodies over 3 MiB, so no admission request can carry a
/// larger object; `check` applies the same limit per document.
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 3 * 1024 * 1024;

/// Documents read from one file (YAML documents or items of a top-level JSON array). The
/// largest real manifest bundles hold hundreds; past this the file is refused whole, before
/// any document is parsed, so that a file of millions of tiny documents cannot exhaust memory.
pub const MAX_DOCUMENTS_PER_FILE: usize = 10_000;

#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub max_document_bytes: usize,
    /// Namespace of manifests that name none (kubectl's current namespace).
    pub default_namespace: String,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            default_namespace: "default".into(),
        }
    }
}

/// One object to decide on, and where it came from (`file.yaml#2`, `file.yaml#2/items/0`).
#[derive(Debug, Clone)]
pub struct Document {
    pub source: String,
    pub input: Input,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DocumentError {
    pub source: String,
    pub message: String,
}

type Outcome = Result<Document, DocumentError>;

/// Reads every path (`-` is stdin) into documents, in order; directories are walked
/// recursively for `*.yaml`, `*.yml` and `*.json` in name order.
pub fn read_documents(paths: &[PathBuf], opts: &ReadOptions) -> Vec<Outcome> {
    let mut out = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            match std::io::stdin().read_to_string(&mut text) {
                Ok(_) => parse_text("<stdin>", &text, opts, &mut out),
                Err(e) => out.push(Err(err(
                    "<stdin>",
                    format!("cannot read standard input: {e}"),
                ))),
            }
        } else if path.is_dir() {
            match manifest_files(path) {
                Ok(files) => files.iter().for_each(|f| read_file(f, opts, &mut out)),
                Err(e) => out.push(Err(err(&path.display().to_string(), e))),
            }
        } else {
            read_file(path, opts, &mut out);
        }
    }
    out
}

fn read_file(path: &Path, opts: &ReadOptions, out: &mut Vec<Outcome>) {
    let name = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => parse_text(&name, &text, opts, out),
            Err(e) => out.push(Err(err(&name, format!("not UTF-8 text ({e})")))),
        },
        Err(e) => out.push(Err(err(&name, format!("cannot read: {e}")))),
    }
}

fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read directory: {e}"))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot read directory: {e}"))?
            .path();
        if path.is_dir() {
            files.extend(manifest_files(&path)?);
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Parses a whole file: JSON when it starts with `{` or `[`, YAML documents otherwise.
pub fn parse_text(name: &str, text: &str, opts: &ReadOptions, out: &mut Vec<Outcome>) {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let source = format!("{name}#1");
        if text.len() > opts.max_document_bytes {
            return out.push(Err(too_large(&source, text.len(), opts)));
        }
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(items)) if items.len() > MAX_DOCUMENTS_PER_FILE => {
                out.push(Err(too_many(name, items.len())));
            }
            Ok(Value::Array(items)) => {
                for (i, item) in items.into_iter().enumerate() {
                    push_value(&format!("{name}#{}", i + 1), item, opts, out);
                }
            }
            Ok(v) => push_value(&source, v, opts, out),
            Err(e) => out.push(Err(err(
                &source,
                format!(
                    "invalid JSON at line {} column {}: {}",
                    e.line(),
                    e.column(),
                    without_locations(&e.to_string())
                ),
            ))),
        }
        return;
    }
    let docs = split_yaml(text);
    if docs.len() > MAX_DOCUMENTS_PER_FILE {
        return out.push(Err(too_many(name, docs.len())));
    }
    for (n, (first_line, doc)) in docs.into_iter().enumerate() {
        let source = format!("{name}#{}", n + 1);
        if doc.len() > opts.max_document_bytes {
            out.push(Err(too_large(&source, doc.len(), opts)));
            continue;
        }
        if flow_depth(doc) > MAX_FLOW_DEPTH {
            out.push(Err(err(
                &source,
                format!("document nests deeper than {MAX_FLOW_DEPTH} levels"),
            )));
            continue;
        }
        match yaml_serde::from_str::<Value>(doc) {
            Ok(Value::Null) => {} // empty document, e.g. a trailing `---`
            Ok(v) => push_value(&source, v, opts, out),
            Err(e) => out.push(Err(err(&source, yaml_error(&e, first_line)))),
        }
    }
}

/// Splits YAML text at `---` / `...` markers; returns each document with its first line
/// number (1-based) so errors can point into the file rather than into the document.
pub fn split_yaml(text: &str) -> Vec<(usize, &str)> {
    let mut docs = Vec::new();
    let mut start = 0;
    let mut start_line = 1;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end();
        let is_marker = bare == "---" || bare.starts_with("--- ") || bare == "...";
        if is_marker {
            docs.push((start_line, &text[start..offset]));
            start = offset + line.len();
            start_line = i + 2;
        }
        offset += line.len();
    }
    docs.push((start_line, &text[start..]));
    docs.retain(|(_, d)| !d.trim().is_empty());
    docs
}

fn yaml_error(e: &yaml_serde::Error, first_line: usize) -> String {
    let message = without_locations(&e.to_string());
    match e.location() {
        Some(loc) => format!(
            "invalid YAML at line {} column {}: {message}",
            loc.line() + first_line - 1,
            loc.column()
        ),
        None => format!("invalid YAML: {message}"),
    }
}

/// Parser messages carry locations counted from the start of the *document*; we report one
/// location counted from the start of the file instead, so drop theirs.
fn without_locations(message: &str) -> String {
    static LOCATION: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let re = LOCATION.get_or_init(|| regex::Regex::new(r" at line \d+ column \d+").ok());
    match re {
        Some(re) => re.replace_all(message, "").into_owned(),
        None => message.to_string(),
    }
}

/// Deepest nesting of flow collections (`[`, `{`) outside quotes. The YAML parser takes
/// quadratic time on pathological nesting before its own recursion limit triggers, so
/// documents nested deeper than any Kubernetes object are refused up front.
fn flow_depth(text: &str) -> usize {
    let (mut depth, mut max, mut quote) = (0usize, 0usize, None);
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => {
                depth += 1;
                max = max.max(depth);
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Kubernetes objects nest a few dozen levels at most; serde_json stops at 128 too.
const MAX_FLOW_DEPTH: usize = 128;

fn push_value(source: &str, v: Value, opts: &ReadOptions, out: &mut Vec<Outcome>) {
    let Value::Object(ref obj) = v else {
        return out.push(Err(err(
            source,
            format!(
                "not a Kubernetes object: the document is a {}",
                type_name(&v)
            ),
        )));
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.is_empty() || obj.get("apiVersion").and_then(Value::as_str).is_none() {
        return out.push(Err(err(
            source,
            "not a Kubernetes object: apiVersion and kind are required".into(),
        )));
    }
    match kind {
        "List" => match obj.get("items") {
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    push_value(&format!("{source}/items/{i}"), item.clone(), opts, out);
                }
            }
            _ => out.push(Err(err(source, "kind List needs an items list".into()))),
        },
        "AdmissionReview" => out.push(
            Input::from_review(v)
                .map(|input| Document {
                    source: source.to_string(),
                    input,
                })
                .map_err(|m| err(source, m)),
        ),
        _ => out.push(Ok(Document {
            source: source.to_string(),
            input: Input::create(v, &opts.default_namespace),
        })),
    }
}

fn too_large(source: &str, len: usize, opts: &ReadOptions) -> DocumentError {
    err(
        source,
        format!(
            "document is {len} bytes, over the {} byte limit (the apiserver refuses request bodies over 3 MiB)",
            opts.max_document_bytes
        ),
    )
}

fn too_many(name: &str, count: usize) -> DocumentError {
    err(
        name,
        format!("file has {count} documents; at most {MAX_DOCUMENTS_PER_FILE} are read from one file: split it"),
    )
}

fn err(source: &str, message: String) -> DocumentError {
    DocumentError {
        source: source.to_string(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<Outcome> {
        let mut out = Vec::new();
        parse_text("f.yaml", text, &ReadOptions::default(), &mut out);
        out
    }

    #[test]
    fn splits_multi_document_yaml_and_skips_empty_ones() {
        let out = parse("---\napiVersion: v1\nkind: A\n---\n---\napiVersion: v1\nkind: B\n...\n");
        let sources: Vec<String> = out
            .iter()
            .map(|d| {
                d.as_ref()
                    .map_or_else(|e| e.source.clone(), |d| d.source.clone())
            })
            .collect();
        assert_eq!(sources, vec!["f.yaml#1", "f.yaml#2"]);
    }

    #[test]
    fn yaml_errors_name_the_file_line() {
        let out = parse("apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: [\n");
        let e = out
            .get(1)
            .and_then(|d| d.as_ref().err())
            .map(|e| e.message.clone())
            .unwrap_or_default();
        assert!(e.contains("line 5") || e.contains("line 6"), "{e}");
    }

    #[test]
    fn non_objects_and_missing_kind_are_errors() {
        assert!(parse("- a\n- b\n").iter().all(Result::is_err));
        assert!(parse("metadata: {name: x}\n").iter().all(Result::is_err));
    }

    #[test]
    fn pathological_nesting_is_refused_quickly() {
        let deep = format!(
            "apiVersion: v1\nkind: A\ndata: {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let e = parse(&deep)
            .into_iter()
            .next()
            .and_then(Result::err)
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(e.contains("deeper than 128"), "{e}");
        assert_eq!(flow_depth("a: '[[[' \"{{\" [x]"), 1);
    }

    #[test]
    fn yaml_errors_carry_one_location_counted_from_the_file() {
        let out = parse("apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: \"unterminated\n");
        let e = out
            .get(1)
            .and_then(|d| d.as_ref().err())
            .map(|e| e.message.clone())
            .unwrap_or_default();
        assert_eq!(e.matches(" at line ").count(), 1, "{e}");
    }

    #[test]
    fn lists_expand_into_items() {
        let out = parse("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: A}\n- {apiVersion: v1, kind: B}\n");
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(Result::is_ok));
    }

    #[test]
    fn oversized_documents_are_refused_with_the_limit() {
        let mut out = Vec::new();
        let opts = ReadOptions {
            max_document_bytes: 10,
            ..ReadOptions::default()
        };
        parse_text(
            "big.yaml",
            "apiVersion: v1\nkind: ConfigMap\n",
            &opts,
            &mut out,
        );
        let e = out
            .first()
            .and_then(|d| d.as_ref().err())
            .map(|e| e.message.clone())
            .unwrap_or_default();
        assert!(e.contains("over the 10 byte limit"), "{e}");
    }
}
