//! The policy catalog page, generated from what the policies say of themselves: each
//! policy's `meta` (title, description, action, parameters with their defaults), the comment
//! above each parameter in that `meta`, and what the shipped policies/params.yaml changes.

use std::fmt::Write as _;
use std::path::Path;

use gangplank::policy::load::PolicySources;
use gangplank::policy::{PolicyInfo, PolicySet};
use serde_json::{json, Map, Value};

/// Where the page lives, relative to the repository root.
pub const PAGE: &str = "docs/src/reference/policies.md";

/// The whole page for the policies of `dir`.
pub fn markdown(dir: &Path) -> String {
    let shipped = PolicySet::load(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let defaults = policy_defaults(dir);
    let mut page = header(&shipped);
    for p in shipped.policies() {
        let default = defaults.policy(&p.name).unwrap_or(p);
        section(&mut page, p, default);
    }
    page
}

/// The same policies with an empty params.yaml: what each policy's own `meta` says.
fn policy_defaults(dir: &Path) -> PolicySet {
    let mut sources =
        PolicySources::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    sources.params.policies.clear();
    PolicySet::compile(sources).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

fn header(set: &PolicySet) -> String {
    let mut page = String::from(
        "# Policy catalog\n\n\
         <!-- Generated from each policy's `meta` (policies/*.rego) and policies/params.yaml \
         by `UPDATE_DOCS=1 cargo test --test docs`; do not edit. tests/docs fails when this \
         page drifts from the policies. -->\n\n\
         Every policy gangplank ships in `policies/`, as the shipped `policies/params.yaml` \
         configures it. A policy's **action** says what its violations do: `deny` refuses the \
         job, `warn` admits it with a `Warning:` line, `audit` admits it and records the \
         finding (an audit annotation, and `gangplank audit`). Per policy, \
         `policies/params.yaml` sets `action`, `enabled`, [exemptions](../exemptions.md) and `params` (merged \
         key by key over the defaults below); the server reloads it without a restart. [Troubleshooting](../troubleshooting.md) says how to read a refusal.\n\n",
    );
    page.push_str("| policy | what it ensures | action | changes jobs |\n|---|---|---|---|\n");
    for p in set.policies() {
        let _ = writeln!(
            page,
            "| [`{0}`](#{0}) | {1} | {2} | {3} |",
            p.name,
            cell(&p.title),
            p.action,
            if p.has_mutation { "yes" } else { "no" }
        );
    }
    page
}

/// A table cell's text: one line, no column separator.
fn cell(text: &str) -> String {
    prose(text).replace('|', "\\|").replace('\n', " ")
}

/// Text the policies wrote, as markdown shows it: `<job>-<type>` outside code spans would be
/// read as HTML tags and disappear from the page.
fn prose(text: &str) -> String {
    let mut in_code = false;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '<' if !in_code => out.push_str("&lt;"),
            '>' if !in_code => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

fn section(page: &mut String, p: &PolicyInfo, default: &PolicyInfo) {
    let _ = write!(
        page,
        "\n## {}\n\n**{}.** {}\n\n- File: `{}`\n- Action: `{}`",
        p.name,
        prose(p.title.trim_end_matches('.')),
        prose(&p.description),
        p.path.display(),
        p.action
    );
    if p.action != default.action {
        let _ = write!(
            page,
            " (the shipped params.yaml; the policy's default is `{}`)",
            default.action
        );
    }
    let outputs = [
        (p.has_mutation, "changes jobs (mutation)"),
        (p.has_violation, "refuses or reports (violations)"),
        (p.has_warning, "warns"),
    ];
    let does: Vec<&str> = outputs
        .iter()
        .filter(|(d, _)| *d)
        .map(|(_, w)| *w)
        .collect();
    let _ = write!(page, "\n- Does: {}\n", does.join(", "));
    if !p.enabled {
        page.push_str("- **Disabled** in the shipped params.yaml (`enabled: false`).\n");
    }
    parameters(page, p);
}

fn parameters(page: &mut String, p: &PolicyInfo) {
    if p.params.is_empty() {
        page.push_str("\nNo parameters.\n");
        return;
    }
    let source = std::fs::read_to_string(&p.path).unwrap_or_default();
    let comments = param_comments(&source);
    page.push_str("\n| parameter | what it does |\n|---|---|\n");
    let mut names: Vec<&String> = p.params.keys().collect();
    names.sort();
    for name in &names {
        let comment = comments
            .iter()
            .find(|(n, _)| n == *name)
            .map(|(_, c)| c.as_str())
            .filter(|c| !c.is_empty())
            .unwrap_or("—");
        let _ = writeln!(page, "| `{name}` | {} |", cell(comment));
    }
    let params: Map<String, Value> = names
        .iter()
        .map(|n| ((*n).clone(), p.params[n.as_str()].clone()))
        .collect();
    let shipped = json!({"policies": {&p.name: {"action": p.action.as_str(), "params": params}}});
    let yaml = yaml_serde::to_string(&shipped).unwrap_or_else(|e| panic!("{}: {e}", p.name));
    let _ = write!(
        page,
        "\nShipped values (change them in `policies/params.yaml`):\n\n```yaml\n{}\n```\n",
        yaml.trim_end()
    );
}

/// The comment lines directly above each parameter of `meta.params`, joined: the policy
/// author's words for what the parameter does. The shipped policies write `meta` one key per
/// line, the parameters two tabs in; a parameter written otherwise just gets an empty cell.
fn param_comments(source: &str) -> Vec<(String, String)> {
    let mut lines = source
        .lines()
        .skip_while(|l| !l.starts_with("meta := {"))
        .skip_while(|l| l.trim_start() != "\"params\": {")
        .skip(1);
    let mut found = Vec::new();
    let mut comment: Vec<&str> = Vec::new();
    for line in lines.by_ref() {
        if line.starts_with("\t}") || line == "}" {
            break;
        }
        let Some(own) = line.strip_prefix("\t\t").filter(|l| !l.starts_with('\t')) else {
            continue;
        };
        if let Some(text) = own.strip_prefix('#') {
            comment.push(text.trim());
        } else if let Some((name, _)) = own.strip_prefix('"').and_then(|l| l.split_once('"')) {
            found.push((name.to_string(), comment.join(" ")));
            comment.clear();
        } else {
            comment.clear();
        }
    }
    found
}

#[test]
fn parameter_comments_are_read_from_meta() {
    let source =
        "meta := {\n\t\"title\": \"t\",\n\t\"params\": {\n\t\t# First line\n\t\t# second.\n\
                  \t\t\"a\": {\n\t\t\t# nested, not a parameter\n\t\t\t\"x\": 1,\n\t\t},\n\
                  \t\t\"b\": [],\n\t},\n}\n";
    assert_eq!(
        param_comments(source),
        [
            ("a".to_string(), "First line second.".to_string()),
            ("b".to_string(), String::new())
        ]
    );
}
