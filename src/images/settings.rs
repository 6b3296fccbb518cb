//! `imageResolution` in `params.yaml`: whether and how the webhook pins tags to digests.
//!
//! ```yaml
//! imageResolution:
//!   enabled: true
//!   allowedRegistries: [registry.example.com, ghcr.io]  # [] allows any
//!   plainHttpRegistries: [mirror.kube-system.svc:5000]  # spoken to without TLS
//!   caBundle: /etc/gangplank/registry-ca.pem            # extra CAs, PEM
//!   failureMode: deny                                   # deny | allow
//!   budget: 2s
//!   cacheTtl: 5m
//!   negativeCacheTtl: 10s
//!   cacheSize: 1000
//! ```
//!
//! Reloaded with the rest of the policy directory.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What happens to a job when an image's digest cannot be found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureMode {
    /// Refuse the job with the registry's answer (Kyverno's Enforce).
    #[default]
    Deny,
    /// Admit with a warning, image left as written; the `images` policy then decides
    /// (sigstore policy-controller's mutate step).
    Allow,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Settings {
    /// Off by default: turning it on makes the webhook call registries.
    pub enabled: bool,
    /// Registries (`host[:port]`, `docker.io` for Docker Hub) the resolver may call; `[]`
    /// allows any. Keeps the webhook from fetching from hosts a manifest names at will.
    pub allowed_registries: Vec<String>,
    /// Registries spoken to over plain HTTP (in-cluster mirrors); all others use HTTPS.
    pub plain_http_registries: Vec<String>,
    /// PEM file of CA certificates trusted besides the system's.
    pub ca_bundle: Option<PathBuf>,
    pub failure_mode: FailureMode,
    /// Time for resolving all images of one request, lookups running concurrently. Below the
    /// webhook's 5 s timeout, with room left for policy evaluation.
    #[serde(with = "duration_text")]
    pub budget: Duration,
    /// How long a digest is reused before its tag is looked up again.
    #[serde(with = "duration_text")]
    pub cache_ttl: Duration,
    /// How long a failed lookup is remembered, so that a job resubmitted at once (or its
    /// /validate call after /mutate) does not wait on the registry again.
    #[serde(with = "duration_text")]
    pub negative_cache_ttl: Duration,
    /// Digests kept (least recently used dropped first).
    pub cache_size: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            enabled: false,
            allowed_registries: Vec::new(),
            plain_http_registries: Vec::new(),
            ca_bundle: None,
            failure_mode: FailureMode::Deny,
            budget: Duration::from_secs(2),
            cache_ttl: Duration::from_secs(300),
            negative_cache_ttl: Duration::from_secs(10),
            cache_size: 1000,
        }
    }
}

impl Settings {
    pub fn allows(&self, registry: &str) -> bool {
        self.allowed_registries.is_empty() || self.allowed_registries.iter().any(|r| r == registry)
    }

    pub fn plain_http(&self, registry: &str) -> bool {
        self.plain_http_registries.iter().any(|r| r == registry)
    }
}

/// `500ms`, `2s`, `5m`: the duration syntax of the CLI flags.
mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ms", d.as_millis()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        crate::duration::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_durations_and_refuses_unknown_keys() {
        let s: Result<Settings, _> = yaml_serde::from_str(
            "enabled: true\nbudget: 750ms\ncacheTtl: 5m\nfailureMode: allow\n",
        );
        let s = s.unwrap_or_default();
        assert!(s.enabled);
        assert_eq!(s.budget, Duration::from_millis(750));
        assert_eq!(s.cache_ttl, Duration::from_secs(300));
        assert_eq!(s.failure_mode, FailureMode::Allow);
        assert_eq!(s.negative_cache_ttl, Duration::from_secs(10));
        let typo: Result<Settings, _> = yaml_serde::from_str("enabeld: true\n");
        assert!(typo.is_err());
    }
}
