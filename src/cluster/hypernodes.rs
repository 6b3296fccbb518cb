//! Volcano's HyperNodes (`topology.volcano.sh/v1alpha1`, cluster-scoped): the network
//! domains (NVLink, leaf and spine switches) a gang with a hard `networkTopology` must stay
//! inside, each resolved to the names of the nodes it holds.
//!
//! Entry point: [`resolve`], which the summary calls with the nodes it knows; the result is
//! `data.cluster.hypernodes` (per HyperNode: `tier`, `tier_name`, `nodes`), and
//! [`view::project`](super::view::project) turns each one's nodes into node classes for a
//! request.
//!
//! # Members
//! A member is `{type: Node|HyperNode, selector}`, the selector one of `exactMatch.name`,
//! `regexMatch.pattern` (Go's `regexp.MatchString`: unanchored, on the name) or
//! `labelMatch` (a label selector, Node members only). A HyperNode holds the nodes of its
//! Node members and of every HyperNode member, down the tree.
//!
//! # Errors
//! A HyperNode that cannot be read, that is in a cycle, that names by `exactMatch` a node or
//! HyperNode that does not exist, or that holds such a HyperNode, is left out, and why is
//! said in the summary's `problems`: its nodes are not known, and a domain judged on part of
//! its nodes would refuse gangs it can hold. The others are judged.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use serde_json::{json, Map, Value};

use super::classes::ClassTable;
use super::selector::Selector;

const HOSTNAME: &str = "kubernetes.io/hostname";

/// A node as a member selector sees it: its name and its labels.
pub(super) struct NodeLabels<'a> {
    pub name: &'a str,
    pub labels: BTreeMap<&'a str, &'a str>,
}

enum Select {
    Exact(String),
    Pattern(Regex),
    Labels(Selector),
}

enum Member {
    Node(Select),
    HyperNode(Select),
}

struct HyperNode {
    tier: i64,
    tier_name: String,
    members: Vec<Member>,
}

/// `data.cluster.hypernodes` (name → `tier`, `tier_name`, sorted `nodes`) from the HyperNode
/// objects `items` and the cluster's `nodes`, with what was left out, and why, in `problems`.
pub(super) fn resolve(
    items: &[Value],
    nodes: &[NodeLabels<'_>],
    problems: &mut Vec<String>,
) -> Map<String, Value> {
    let mut parsed: BTreeMap<String, HyperNode> = BTreeMap::new();
    for item in items {
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match parse(item) {
            Ok(hn) if !name.is_empty() => {
                parsed.insert(name.to_string(), hn);
            }
            Ok(_) => problems.push("a HyperNode without a name; left out".into()),
            Err(why) => problems.push(format!("HyperNode {name}: {why}; left out")),
        }
    }
    let mut resolver = Resolver {
        parsed: &parsed,
        nodes,
        done: BTreeMap::new(),
        path: Vec::new(),
    };
    let mut out = Map::new();
    for (name, hn) in &parsed {
        match resolver.nodes_of(name) {
            Ok(members) => {
                out.insert(
                    name.clone(),
                    json!({"tier": hn.tier, "tier_name": hn.tier_name, "nodes": members}),
                );
            }
            Err(why) => problems.push(format!("HyperNode {name}: {why}; left out")),
        }
    }
    out
}

fn parse(item: &Value) -> Result<HyperNode, String> {
    let spec = item.get("spec").ok_or("no spec")?;
    let tier = spec
        .get("tier")
        .and_then(Value::as_i64)
        .ok_or("spec.tier is not a whole number")?;
    let tier_name = spec
        .get("tierName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let listed = spec
        .get("members")
        .and_then(Value::as_array)
        .ok_or("spec.members is not a list")?;
    let members = listed
        .iter()
        .enumerate()
        .map(|(i, m)| member(m).map_err(|why| format!("spec.members[{i}]: {why}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HyperNode {
        tier,
        tier_name,
        members,
    })
}

fn member(m: &Value) -> Result<Member, String> {
    let selector = m.get("selector").ok_or("no selector")?;
    let select = if let Some(name) = selector.pointer("/exactMatch/name") {
        Select::Exact(
            name.as_str()
                .ok_or("exactMatch.name is not a string")?
                .into(),
        )
    } else if let Some(pattern) = selector.pointer("/regexMatch/pattern") {
        let pattern = pattern
            .as_str()
            .ok_or("regexMatch.pattern is not a string")?;
        let re = Regex::new(pattern).map_err(|e| {
            format!("regexMatch.pattern {pattern:?} is not a regular expression: {e}")
        })?;
        Select::Pattern(re)
    } else if let Some(labels) = selector.get("labelMatch") {
        Select::Labels(Selector::parse(labels).map_err(|e| format!("labelMatch {e}"))?)
    } else {
        return Err("the selector has none of exactMatch, regexMatch, labelMatch".into());
    };
    match m.get("type").and_then(Value::as_str) {
        Some("Node") => Ok(Member::Node(select)),
        Some("HyperNode") if matches!(select, Select::Labels(_)) => {
            Err("labelMatch selects Node members only".into())
        }
        Some("HyperNode") => Ok(Member::HyperNode(select)),
        other => Err(format!("type {other:?} is neither Node nor HyperNode")),
    }
}

/// Resolves HyperNodes depth first, each once; `path` is the chain being resolved, so a
/// HyperNode met again on it closes a cycle.
struct Resolver<'a> {
    parsed: &'a BTreeMap<String, HyperNode>,
    nodes: &'a [NodeLabels<'a>],
    done: BTreeMap<String, Result<BTreeSet<String>, String>>,
    path: Vec<String>,
}

impl Resolver<'_> {
    fn nodes_of(&mut self, name: &str) -> Result<BTreeSet<String>, String> {
        if let Some(done) = self.done.get(name) {
            return done.clone();
        }
        if let Some(at) = self.path.iter().position(|p| p == name) {
            let mut cycle: Vec<&str> = self.path[at..].iter().map(String::as_str).collect();
            cycle.push(name);
            return Err(format!("in a cycle ({})", cycle.join(" → ")));
        }
        let Some(hn) = self.parsed.get(name) else {
            return Err(format!("HyperNode {name} does not exist"));
        };
        self.path.push(name.to_string());
        let result = self.members_of(hn);
        self.path.pop();
        self.done.insert(name.to_string(), result.clone());
        result
    }

    fn members_of(&mut self, hn: &HyperNode) -> Result<BTreeSet<String>, String> {
        let mut out = BTreeSet::new();
        for member in &hn.members {
            match member {
                Member::Node(Select::Exact(n)) => {
                    if !self.nodes.iter().any(|node| node.name == n) {
                        return Err(format!("member node {n} does not exist"));
                    }
                    out.insert(n.clone());
                }
                Member::Node(Select::Pattern(re)) => {
                    let matched = self.nodes.iter().filter(|n| re.is_match(n.name));
                    out.extend(matched.map(|n| n.name.to_string()));
                }
                Member::Node(Select::Labels(selector)) => {
                    let matched = self.nodes.iter().filter(|n| selector.matches(&n.labels));
                    out.extend(matched.map(|n| n.name.to_string()));
                }
                Member::HyperNode(Select::Exact(child)) => {
                    if !self.parsed.contains_key(child) && !self.done.contains_key(child) {
                        return Err(format!("member HyperNode {child} does not exist"));
                    }
                    let nodes = self
                        .nodes_of(child)
                        .map_err(|why| member_left_out(child, &why))?;
                    out.extend(nodes);
                }
                Member::HyperNode(Select::Pattern(re)) => {
                    let children: Vec<String> = self
                        .parsed
                        .keys()
                        .filter(|k| re.is_match(k))
                        .cloned()
                        .collect();
                    for child in children {
                        let nodes = self
                            .nodes_of(&child)
                            .map_err(|why| member_left_out(&child, &why))?;
                        out.extend(nodes);
                    }
                }
                Member::HyperNode(Select::Labels(_)) => {}
            }
        }
        Ok(out)
    }
}

/// Why a HyperNode is left out when one it holds is: a cycle is said as it is, anything else
/// names the member.
fn member_left_out(child: &str, why: &str) -> String {
    if why.starts_with("in a cycle") {
        why.to_string()
    } else {
        format!("holds HyperNode {child}, which is left out ({why})")
    }
}

/// The nodes of a published view as member selectors see them: each one's class's labels,
/// and its hostname.
pub(super) fn node_labels(table: &ClassTable) -> Vec<NodeLabels<'_>> {
    let mut out: Vec<NodeLabels<'_>> = table
        .hostnames()
        .iter()
        .map(|(name, &i)| {
            let mut labels: BTreeMap<&str, &str> = table.labels(i).collect();
            labels.insert(HOSTNAME, name);
            NodeLabels { name, labels }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hn(name: &str, tier: i64, members: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": {"tier": tier, "tierName": format!("t{tier}"), "members": members}})
    }

    fn nodes<'a>(names: &[&'a str]) -> Vec<NodeLabels<'a>> {
        names
            .iter()
            .map(|&name| NodeLabels {
                name,
                labels: BTreeMap::from([("rack", if name < "n2" { "r0" } else { "r1" })]),
            })
            .collect()
    }

    #[test]
    fn a_tree_resolves_to_the_nodes_below_each_hypernode() {
        let items = [
            hn(
                "leaf-0",
                1,
                json!([{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}, {"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}]),
            ),
            hn(
                "leaf-1",
                1,
                json!([{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}}]),
            ),
            hn(
                "spine",
                2,
                json!([{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^leaf-"}}}]),
            ),
        ];
        let mut problems = vec![];
        let out = resolve(&items, &nodes(&["n0", "n1", "n2", "n3"]), &mut problems);
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(
            out["leaf-0"],
            json!({"tier": 1, "tier_name": "t1", "nodes": ["n0", "n1"]})
        );
        assert_eq!(out["leaf-1"]["nodes"], json!(["n2", "n3"]));
        assert_eq!(out["spine"]["nodes"], json!(["n0", "n1", "n2", "n3"]));
    }

    #[test]
    fn a_cycle_or_a_missing_member_is_left_out_with_a_note_and_the_rest_judged() {
        let items = [
            hn(
                "a",
                2,
                json!([{"type": "HyperNode", "selector": {"exactMatch": {"name": "b"}}}]),
            ),
            hn(
                "b",
                2,
                json!([{"type": "HyperNode", "selector": {"exactMatch": {"name": "a"}}}]),
            ),
            hn(
                "gone",
                1,
                json!([{"type": "Node", "selector": {"exactMatch": {"name": "n9"}}}]),
            ),
            hn(
                "above-gone",
                2,
                json!([{"type": "HyperNode", "selector": {"exactMatch": {"name": "gone"}}}]),
            ),
            hn(
                "orphan",
                2,
                json!([{"type": "HyperNode", "selector": {"exactMatch": {"name": "nowhere"}}}]),
            ),
            hn(
                "bad-regex",
                1,
                json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}]),
            ),
            hn(
                "fine",
                1,
                json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "n[01]"}}}]),
            ),
        ];
        let mut problems = vec![];
        let out = resolve(&items, &nodes(&["n0", "n1"]), &mut problems);
        assert_eq!(out.keys().collect::<Vec<_>>(), ["fine"]);
        assert_eq!(out["fine"]["nodes"], json!(["n0", "n1"]));
        let said = problems.join("\n");
        for expected in [
            "HyperNode a: in a cycle (a → b → a); left out",
            "HyperNode b: in a cycle (a → b → a); left out",
            "HyperNode gone: member node n9 does not exist; left out",
            "HyperNode above-gone: holds HyperNode gone, which is left out (member node n9 does not exist); left out",
            "HyperNode orphan: member HyperNode nowhere does not exist; left out",
            "HyperNode bad-regex: spec.members[0]: regexMatch.pattern \"(\" is not a regular expression",
        ] {
            assert!(said.contains(expected), "{expected}\nnot in:\n{said}");
        }
    }
}
