//! Exemptions of params.yaml: who a policy (or every policy) leaves alone, by namespace name
//! pattern, namespace labels or the job's own labels.
//!
//! Entry points: [`Exemption::compile`] (at load: an invalid pattern or selector is a load
//! error) and [`Exemption::check`] (per request, on a [`Subject`]).
//!
//! # Guarantees
//! - An exemption holds when any of its parts holds: a namespace pattern, the namespace
//!   selector, or the object selector (Gatekeeper's `excludedNamespaces` and Kyverno's
//!   `exclude.any` read the same way).
//! - An exemption that cannot be checked never applies: when the namespace's labels are
//!   unknown (no cluster inventory, Namespaces not watched, or a namespace the watch has not
//!   seen yet), a namespace selector does not exempt, and [`Check::Unchecked`] says why, so
//!   the verdict can say so. Exempting by mistake would admit what a policy should refuse.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cluster::selector::Selector;

/// Namespace or job name patterns: exact names, or globs whose `*` matches any run of
/// characters (`team-*`, `*-sandbox`, `*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamePatterns(Vec<String>);

impl NamePatterns {
    /// Checks each pattern: Kubernetes name characters (lower-case letters, digits, `-`, `.`)
    /// and `*`; anything else could never match a name, so it is a mistake worth refusing.
    pub fn parse(patterns: &[String]) -> Result<NamePatterns, String> {
        for p in patterns {
            let valid = !p.is_empty()
                && p.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | '*')
                });
            if !valid {
                return Err(format!(
                    "{p:?} is not a name pattern: lower-case letters, digits, '-', '.' and '*' (any run of characters) only"
                ));
            }
        }
        Ok(NamePatterns(patterns.to_vec()))
    }

    /// The first pattern `name` matches.
    pub fn find(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|p| glob_matches(p.as_bytes(), name.as_bytes()))
            .map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether `text` matches `pattern`, whose `*` matches any run of bytes and `?` one byte;
/// every other byte matches itself.
pub fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => {
            (0..=text.len()).any(|i| text.get(i..).is_some_and(|t| glob_matches(rest, t)))
        }
        Some((b'?', rest)) => text
            .split_first()
            .is_some_and(|(_, t)| glob_matches(rest, t)),
        Some((c, rest)) => text
            .split_first()
            .is_some_and(|(t0, t)| t0 == c && glob_matches(rest, t)),
    }
}

/// Parses an optional label selector; `field` names it in the error.
pub fn selector(value: Option<&Value>, field: &str) -> Result<Option<Selector>, String> {
    value
        .map(|v| Selector::parse(v).map_err(|e| format!("{field}: {e}")))
        .transpose()
}

/// What an exemption or an exception is checked against: one request's job.
#[derive(Debug, Clone, Default)]
pub struct Subject {
    pub namespace: String,
    /// `metadata.name` ("" with only `generateName`).
    pub name: String,
    /// The job's `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// The namespace's labels, `None` when unknown (see the module doc).
    pub namespace_labels: Option<BTreeMap<String, String>>,
}

impl Subject {
    /// The subject of a job `object` in `namespace`; namespace labels are added by whoever
    /// knows them ([`Subject::with_namespace_labels`]).
    pub fn of(namespace: &str, object: &Value) -> Subject {
        let text = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Subject {
            namespace: namespace.to_string(),
            name: text("/metadata/name").to_string(),
            labels,
            namespace_labels: None,
        }
    }

    pub fn with_namespace_labels(mut self, labels: Option<BTreeMap<String, String>>) -> Subject {
        self.namespace_labels = labels;
        self
    }

    /// Whether `selector` selects the job's labels.
    pub fn object_selected(&self, selector: &Selector) -> bool {
        selector.matches(&borrowed(&self.labels))
    }

    /// Whether `selector` selects the namespace's labels; `Err` (why) when they are unknown.
    pub fn namespace_selected(&self, selector: &Selector) -> Result<bool, String> {
        match &self.namespace_labels {
            Some(labels) => Ok(selector.matches(&borrowed(labels))),
            None => Err(format!(
                "the labels of namespace {} are unknown (no cluster inventory with Namespaces, or the namespace is not in it yet)",
                self.namespace
            )),
        }
    }
}

fn borrowed(labels: &BTreeMap<String, String>) -> BTreeMap<&str, &str> {
    labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// What checking an exemption found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Exempt, and by which part: `excludedNamespaces (team-*)`.
    Exempt(String),
    /// Not exempt, but a part could not be checked: why.
    Unchecked(String),
    NotExempt,
}

/// One exemption: params.yaml's top level (every policy) or one policy's.
#[derive(Debug, Clone, Default)]
pub struct Exemption {
    namespaces: NamePatterns,
    namespace_selector: Option<Selector>,
    object_selector: Option<Selector>,
}

impl Exemption {
    /// From params.yaml's `excludedNamespaces`, `excludedNamespaceSelector` and
    /// `excludedObjectSelector`; the error names the key at fault.
    pub fn compile(
        namespaces: &[String],
        namespace_selector: Option<&Value>,
        object_selector: Option<&Value>,
    ) -> Result<Exemption, String> {
        Ok(Exemption {
            namespaces: NamePatterns::parse(namespaces)
                .map_err(|e| format!("excludedNamespaces: {e}"))?,
            namespace_selector: selector(namespace_selector, "excludedNamespaceSelector")?,
            object_selector: selector(object_selector, "excludedObjectSelector")?,
        })
    }

    /// Whether `namespace` matches one of the name patterns (the part needing no labels).
    pub fn names_namespace(&self, namespace: &str) -> Option<&str> {
        self.namespaces.find(namespace)
    }

    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
            && self.namespace_selector.is_none()
            && self.object_selector.is_none()
    }

    pub fn check(&self, subject: &Subject) -> Check {
        if let Some(p) = self.namespaces.find(&subject.namespace) {
            return Check::Exempt(format!("excludedNamespaces ({p})"));
        }
        if self
            .object_selector
            .as_ref()
            .is_some_and(|s| subject.object_selected(s))
        {
            return Check::Exempt("excludedObjectSelector (the job's labels)".into());
        }
        match self
            .namespace_selector
            .as_ref()
            .map(|s| subject.namespace_selected(s))
        {
            Some(Ok(true)) => Check::Exempt(format!(
                "excludedNamespaceSelector (the labels of namespace {})",
                subject.namespace
            )),
            Some(Err(why)) => Check::Unchecked(format!("excludedNamespaceSelector: {why}")),
            Some(Ok(false)) | None => Check::NotExempt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patterns(p: &[&str]) -> NamePatterns {
        let owned: Vec<String> = p.iter().map(|s| s.to_string()).collect();
        NamePatterns::parse(&owned).unwrap_or_else(|e| panic!("{e}"))
    }

    fn subject(namespace: &str, labels: Value, ns_labels: Option<Value>) -> Subject {
        let object = json!({"metadata": {"name": "j", "labels": labels}});
        let to_map = |v: Value| -> BTreeMap<String, String> {
            serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
        };
        Subject::of(namespace, &object).with_namespace_labels(ns_labels.map(to_map))
    }

    #[test]
    fn name_patterns_match_exact_names_prefixes_suffixes_and_everything() {
        let p = patterns(&["kube-system", "team-*", "*-sandbox", "a*b*c"]);
        assert_eq!(p.find("kube-system"), Some("kube-system"));
        assert_eq!(p.find("kube-system2"), None);
        assert_eq!(p.find("team-a"), Some("team-*"));
        assert_eq!(p.find("team-"), Some("team-*"));
        assert_eq!(p.find("steam-a"), None);
        assert_eq!(p.find("ml-sandbox"), Some("*-sandbox"));
        assert_eq!(p.find("axxbyyc"), Some("a*b*c"));
        assert_eq!(p.find("axxbyy"), None);
        assert_eq!(patterns(&["*"]).find("anything"), Some("*"));
    }

    #[test]
    fn name_patterns_refuse_what_can_never_match_a_name() {
        for bad in ["", "Team-A", "team-?", "team/[a]", "team a"] {
            let err = NamePatterns::parse(&[bad.to_string()])
                .err()
                .unwrap_or_default();
            assert!(err.contains("not a name pattern"), "{bad}: {err}");
        }
    }

    #[test]
    fn an_exemption_holds_when_any_part_holds() {
        let e = Exemption::compile(
            &["team-*".into()],
            Some(&json!({"matchLabels": {"gangplank.dev/exempt": "true"}})),
            Some(&json!({"matchExpressions": [{"key": "canary", "operator": "Exists"}]})),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let by_name = e.check(&subject("team-a", json!({}), None));
        assert_eq!(by_name, Check::Exempt("excludedNamespaces (team-*)".into()));
        let by_object = e.check(&subject("prod", json!({"canary": "1"}), None));
        assert!(matches!(by_object, Check::Exempt(w) if w.contains("excludedObjectSelector")));
        let labels = json!({"gangplank.dev/exempt": "true"});
        let by_ns = e.check(&subject("prod", json!({}), Some(labels)));
        assert!(matches!(by_ns, Check::Exempt(w) if w.contains("namespace prod")));
        let other = e.check(&subject("prod", json!({}), Some(json!({"x": "y"}))));
        assert_eq!(other, Check::NotExempt);
    }

    #[test]
    fn a_namespace_selector_with_unknown_labels_does_not_exempt_and_says_why() {
        let e = Exemption::compile(&[], Some(&json!({"matchLabels": {"a": "b"}})), None)
            .unwrap_or_else(|e| panic!("{e}"));
        let got = e.check(&subject("prod", json!({}), None));
        assert!(
            matches!(&got, Check::Unchecked(w) if w.contains("labels of namespace prod are unknown")),
            "{got:?}"
        );
    }

    #[test]
    fn invalid_selectors_and_patterns_name_the_key() {
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Near"}]});
        let err = Exemption::compile(&[], Some(&bad), None)
            .err()
            .unwrap_or_default();
        assert!(err.starts_with("excludedNamespaceSelector:"), "{err}");
        let err = Exemption::compile(&[], None, Some(&json!({"matchLabels": [1]})))
            .err()
            .unwrap_or_default();
        assert!(err.starts_with("excludedObjectSelector:"), "{err}");
        let err = Exemption::compile(&["Bad".into()], None, None)
            .err()
            .unwrap_or_default();
        assert!(err.starts_with("excludedNamespaces:"), "{err}");
    }

    #[test]
    fn globs_match_like_the_policy_library() {
        assert!(glob_matches(
            b"*/busybox:*",
            b"docker.io/library/busybox:1.36"
        ));
        assert!(!glob_matches(b"*/busybox:*", b"busybox"));
        assert!(glob_matches(b"ghcr.io/?/x", b"ghcr.io/a/x"));
    }
}
