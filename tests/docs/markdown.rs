//! Just enough of CommonMark to check links: fenced code blocks are left out, inline code
//! spans (which may run over a line break) are taken apart from the prose, links are read from
//! the prose, and headings give the anchors GitHub and mdBook make of them.

use regex::Regex;

/// A link of the prose: `[text](target)`, target as written (anchor included).
#[derive(Debug)]
pub struct Link {
    pub target: String,
}

/// The text outside fenced code blocks, lines kept.
fn outside_fences(text: &str) -> Vec<&str> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => lines.push(line),
            _ => {}
        }
    }
    lines
}

/// The prose with every code span replaced by `CODE`, and the code spans' contents.
fn split_code(text: &str) -> (String, Vec<String>) {
    let body = outside_fences(text).join("\n");
    let mut prose = String::new();
    let mut spans = Vec::new();
    let mut rest = body.as_str();
    while let Some(start) = rest.find('`') {
        prose.push_str(&rest[..start]);
        let ticks = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let after = &rest[start + ticks..];
        let closing = "`".repeat(ticks);
        match find_run(after, &closing) {
            Some(end) => {
                spans.push(after[..end].replace('\n', " ").trim().to_string());
                prose.push_str("CODE");
                rest = &after[end + ticks..];
            }
            // An unmatched run of backticks is literal text.
            None => {
                prose.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    prose.push_str(rest);
    (prose, spans)
}

/// Where a run of exactly `run` backticks starts in `text`.
fn find_run(text: &str, run: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(run) {
        let at = from + i;
        let end = at + run.len();
        let longer = text[end..].starts_with('`');
        if !longer {
            return Some(at);
        }
        from = end + text[end..].len() - text[end..].trim_start_matches('`').len();
    }
    None
}

/// The links of the prose (code spans and blocks left out).
pub fn links(text: &str) -> Vec<Link> {
    let (prose, _) = split_code(text);
    let link = Regex::new(r#"\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)"#).expect("a valid regex");
    link.captures_iter(&prose)
        .map(|c| Link {
            target: c[1].to_string(),
        })
        .collect()
}

/// The contents of the inline code spans, line breaks made spaces.
pub fn code_spans(text: &str) -> Vec<String> {
    split_code(text).1
}

/// The anchors of the headings, as GitHub and mdBook make them: lower case, letters, digits,
/// `-` and `_` kept, spaces made `-`, the rest dropped; a repeated anchor gets `-1`, `-2`, ...
pub fn anchors(text: &str) -> Vec<String> {
    let mut bases: Vec<String> = Vec::new();
    let mut anchors = Vec::new();
    for line in outside_fences(text) {
        let Some(title) = heading(line) else { continue };
        let slug = slug(title);
        let anchor = match bases.iter().filter(|b| **b == slug).count() {
            0 => slug.clone(),
            n => format!("{slug}-{n}"),
        };
        bases.push(slug);
        anchors.push(anchor);
    }
    anchors
}

fn heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    let rest = &line[hashes..];
    ((1..=6).contains(&hashes) && rest.starts_with(' ')).then(|| rest.trim())
}

fn slug(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_lowercase().next()?),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

#[test]
fn anchors_are_those_of_github_and_mdbook() {
    let text = "# Cluster inventory (`data.cluster`)\n## gangplank check\n## gangplank check\n\
                ```\n# not a heading\n```\n### Images: pinned, by digest\n#nohash\n";
    assert_eq!(
        anchors(text),
        [
            "cluster-inventory-datacluster",
            "gangplank-check",
            "gangplank-check-1",
            "images-pinned-by-digest"
        ]
    );
}

#[test]
fn code_spans_run_over_line_breaks_and_hide_links() {
    let text = "a `deploy/\nkustomization.yaml` and ``[x](y.md)`` then [z](w.md#a)";
    assert_eq!(
        code_spans(text),
        ["deploy/ kustomization.yaml", "[x](y.md)"]
    );
    let targets: Vec<String> = links(text).into_iter().map(|l| l.target).collect();
    assert_eq!(targets, ["w.md#a"]);
}
