//! `params.yaml`: per-policy action, parameters and exemptions.
//!
//! ```yaml
//! defaultAction: audit                     # policies without an `action` below
//! excludedNamespaces: [kube-system, team-*]  # no policy applies here (names or `*` globs)
//! excludedNamespaceSelector: {matchLabels: {gangplank.dev/exempt: "true"}}
//! excludedObjectSelector: {matchLabels: {gangplank.dev/exempt: "true"}}
//! policies:
//!   gang_scheduling:
//!     action: deny                         # deny | warn | audit
//!     enabled: true
//!     allowExistingViolations: true        # UPDATE: old, untouched violations only warn
//!     excludedNamespaces: [sandbox-*]      # and the two selectors, for this policy only
//!     params: {scheduler: volcano}         # merged over the policy's meta.params
//! ```
//!
//! A policy's action is, first found: its `action` here, the `--default-action` flag
//! ([`super::load::LoadOptions`]), `defaultAction` here, its `meta.action`. Exemptions are
//! checked per request by [`super::exemption`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a violation of a policy does to the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Refuse the request.
    Deny,
    /// Admit it, with a warning `kubectl` prints.
    Warn,
    /// Admit it silently; the violation is only recorded (logs, audit annotations, `check`).
    Audit,
}

impl Action {
    pub fn parse(s: &str) -> Option<Action> {
        match s {
            "deny" => Some(Action::Deny),
            "warn" => Some(Action::Warn),
            "audit" => Some(Action::Audit),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "deny",
            Action::Warn => "warn",
            Action::Audit => "audit",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamsFile {
    /// The action of policies whose entry below sets none (after `--default-action`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_action: Option<Action>,
    /// Namespaces (names or `*` globs) no policy applies to (neither mutation nor validation).
    #[serde(default)]
    pub excluded_namespaces: Vec<String>,
    /// Namespaces whose labels this selects: no policy applies (needs the cluster inventory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_namespace_selector: Option<Value>,
    /// Jobs whose own labels this selects: no policy applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_object_selector: Option<Value>,
    #[serde(default)]
    pub policies: BTreeMap<String, PolicyParams>,
    /// Tag → digest pinning by the webhooks (see [`crate::images::settings`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_resolution: Option<crate::images::Settings>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyParams {
    pub action: Option<Action>,
    pub enabled: Option<bool>,
    /// On UPDATE, whether a deny violation the stored object already had, on a field the
    /// update leaves as it was, is only a warning (default true; Kyverno's
    /// `allowExistingViolations`). False: such violations are refused like new ones.
    pub allow_existing_violations: Option<bool>,
    #[serde(default)]
    pub excluded_namespaces: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_namespace_selector: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_object_selector: Option<Value>,
    #[serde(default)]
    pub params: Map<String, Value>,
}

impl ParamsFile {
    /// Parses params YAML; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<ParamsFile, String> {
        if text.trim().is_empty() {
            return Ok(ParamsFile::default());
        }
        yaml_serde::from_str(text).map_err(|e| format!("{origin}: {e}"))
    }

    /// Overlays `other` on `self`: actions and flags replace, params merge key by key,
    /// namespace lists replace when given. Used for per-case overrides in test suites.
    pub fn overlay(&mut self, other: &ParamsFile) {
        if !other.excluded_namespaces.is_empty() {
            self.excluded_namespaces = other.excluded_namespaces.clone();
        }
        self.default_action = other.default_action.or(self.default_action);
        overlay_selector(
            &mut self.excluded_namespace_selector,
            &other.excluded_namespace_selector,
        );
        overlay_selector(
            &mut self.excluded_object_selector,
            &other.excluded_object_selector,
        );
        if other.image_resolution.is_some() {
            self.image_resolution = other.image_resolution.clone();
        }
        for (name, o) in &other.policies {
            let p = self.policies.entry(name.clone()).or_default();
            p.action = o.action.or(p.action);
            p.enabled = o.enabled.or(p.enabled);
            p.allow_existing_violations =
                o.allow_existing_violations.or(p.allow_existing_violations);
            if !o.excluded_namespaces.is_empty() {
                p.excluded_namespaces = o.excluded_namespaces.clone();
            }
            overlay_selector(
                &mut p.excluded_namespace_selector,
                &o.excluded_namespace_selector,
            );
            overlay_selector(&mut p.excluded_object_selector, &o.excluded_object_selector);
            for (k, v) in &o.params {
                p.params.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A selector given in an overlay replaces the base's.
fn overlay_selector(base: &mut Option<Value>, over: &Option<Value>) {
    if over.is_some() {
        base.clone_from(over);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_actions_and_params() {
        let p = ParamsFile::parse(
            "excludedNamespaces: [kube-system]\npolicies:\n  images:\n    action: warn\n    params: {registries: [a]}\n",
            "params.yaml",
        );
        let p = p.unwrap_or_default();
        assert_eq!(p.excluded_namespaces, vec!["kube-system"]);
        assert_eq!(
            p.policies.get("images").and_then(|i| i.action),
            Some(Action::Warn)
        );
    }

    #[test]
    fn rejects_unknown_keys_and_actions_with_the_file_name() {
        let err = ParamsFile::parse("policies:\n  images:\n    acton: warn\n", "params.yaml").err();
        assert!(
            err.as_deref()
                .is_some_and(|e| e.starts_with("params.yaml:") && e.contains("acton")),
            "{err:?}"
        );
        let err = ParamsFile::parse("policies:\n  images:\n    action: block\n", "p.yaml").err();
        assert!(err.is_some_and(|e| e.contains("block")));
    }

    #[test]
    fn overlay_merges_params_and_replaces_actions() {
        let mut base = ParamsFile::parse(
            "policies:\n  g:\n    action: deny\n    params: {a: 1, b: 2}\n",
            "x",
        )
        .unwrap_or_default();
        let over = ParamsFile::parse(
            "policies:\n  g:\n    action: warn\n    params: {b: 3}\n",
            "y",
        )
        .unwrap_or_default();
        base.overlay(&over);
        let g = base.policies.get("g").cloned().unwrap_or_default();
        assert_eq!(g.action, Some(Action::Warn));
        assert_eq!(Value::Object(g.params), serde_json::json!({"a": 1, "b": 3}));
    }
}
