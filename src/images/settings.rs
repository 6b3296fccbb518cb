//! `imageResolution` in `params.yaml`: whether and how the webhook pins tags to digests.
//!
//! ```yaml
//! imageResolution:
//!   enabled: true
//!   allowedRegistries: [registry.example.com, ghcr.io, docker.io]  # required when enabled
//!   authHosts: {docker.io: [auth.docker.io]}  # token realms on other hosts, per registry
//!   redirectHosts: [storage.example.com]      # where manifest requests may be redirected
//!   plainHttpRegistries: [mirror.kube-system.svc:5000]  # spoken to without TLS
//!   caBundle: /etc/gangplank/registry-ca.pem            # extra CAs, PEM
//!   failureMode: deny                                   # deny | allow
//!   budget: 2s
//!   cacheTtl: 5m
//!   negativeCacheTtl: 10s
//!   cacheSize: 1000
//!   maxImagesPerReview: 32
//! ```
//!
//! Reloaded with the rest of the policy directory; [`Settings::check`] runs when a policy
//! set is compiled, so `serve` refuses to start, `check` exits 2 and a reload keeps the
//! previous set when the settings could aim lookups anywhere.

use std::collections::BTreeMap;
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
    /// Registries (`host[:port]`, `docker.io` for Docker Hub) whose images are looked up;
    /// required (non-empty) when enabled. An image names its registry, so without this list
    /// a job author could make the webhook call any host, the cluster's own included.
    pub allowed_registries: Vec<String>,
    /// Per allowed registry, the hosts besides its own where its Bearer token realm may be
    /// (Docker Hub's is `auth.docker.io`). A realm elsewhere is refused; these hosts get the
    /// registry's credentials when a token is asked for.
    pub auth_hosts: BTreeMap<String, Vec<String>>,
    /// Hosts a manifest or token request may be redirected to besides the allowed
    /// registries (storage or CDN hosts; `*.example.com` for any subdomain). They never get
    /// credentials, and images cannot name them.
    pub redirect_hosts: Vec<String>,
    /// Hosts (registries, their auth or redirect hosts) spoken to over plain HTTP, e.g.
    /// in-cluster mirrors; all others use HTTPS, and HTTPS is never followed to HTTP.
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
    /// Images without a digest one review may look up; a job with more is refused (or, with
    /// `failureMode: allow`, warned) without any lookup. Each lookup is up to four requests
    /// to a registry, so this bounds what one review (a `--dry-run=server` too) makes the
    /// webhook send.
    pub max_images_per_review: usize,
}

/// The default of `maxImagesPerReview`. The largest realistic job: a TFJob with its five
/// replica types (Chief, Master, PS, Worker, Evaluator), each running a main container, two
/// sidecars and three init containers, all with different tags: 5 x 6 = 30; rounded up.
pub const DEFAULT_MAX_IMAGES_PER_REVIEW: usize = 32;

/// Settings that would let lookups go anywhere, or that cannot mean what they say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("enabled is true but allowedRegistries is empty: list the registries whose images the webhook may look up (host[:port], docker.io for Docker Hub), e.g. allowedRegistries: [ghcr.io, docker.io]; an empty list allows none")]
    NoAllowedRegistries,
    #[error("{list} entry {entry:?} is not a host[:port] (no scheme, path or spaces; only redirectHosts may start with *.)")]
    NotAHost { list: &'static str, entry: String },
    #[error(
        "authHosts names registry {registry:?}, which is not in allowedRegistries ({allowed})"
    )]
    AuthHostsOfUnknownRegistry { registry: String, allowed: String },
    #[error("maxImagesPerReview is 0: no job with a tagged image could be admitted; set it to at least 1 (default {DEFAULT_MAX_IMAGES_PER_REVIEW})")]
    NoImagesPerReview,
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
            max_images_per_review: DEFAULT_MAX_IMAGES_PER_REVIEW,
            auth_hosts: BTreeMap::new(),
            redirect_hosts: Vec::new(),
        }
    }
}

impl Settings {
    /// Whether images of `registry` (as a reference names it) may be looked up.
    pub fn allows(&self, registry: &str) -> bool {
        self.allowed_registries.iter().any(|r| r == registry)
    }

    /// Whether `host` (`host[:port]`) is spoken to over plain HTTP.
    pub fn plain_http(&self, host: &str) -> bool {
        self.plain_http_registries.iter().any(|r| r == host)
    }

    /// Refuses settings that would let a job aim lookups anywhere (pinning on with no
    /// allowlist) or that cannot mean what they say. Off, nothing is checked but the lists'
    /// form: nothing is called.
    pub fn check(&self) -> Result<(), SettingsError> {
        // Only redirect targets may be patterns: a CDN's hosts are many, a registry is one.
        let lists = [
            ("allowedRegistries", &self.allowed_registries, false),
            ("redirectHosts", &self.redirect_hosts, true),
            ("plainHttpRegistries", &self.plain_http_registries, false),
        ];
        let auth = self.auth_hosts.values().map(|h| ("authHosts", h, false));
        for (list, entries, patterns) in lists.into_iter().chain(auth) {
            if let Some(entry) = entries.iter().find(|e| !is_host(e, patterns)) {
                return Err(SettingsError::NotAHost {
                    list,
                    entry: entry.clone(),
                });
            }
        }
        if let Some(registry) = self.auth_hosts.keys().find(|r| !self.allows(r)) {
            return Err(SettingsError::AuthHostsOfUnknownRegistry {
                registry: registry.clone(),
                allowed: self.allowed_registries.join(", "),
            });
        }
        if !self.enabled {
            return Ok(());
        }
        if self.allowed_registries.is_empty() {
            return Err(SettingsError::NoAllowedRegistries);
        }
        if self.max_images_per_review == 0 {
            return Err(SettingsError::NoImagesPerReview);
        }
        Ok(())
    }
}

/// `host` or `host:port` (what a URL's authority holds, without user info), or `*.domain`
/// where `patterns` are allowed.
fn is_host(entry: &str, patterns: bool) -> bool {
    let host = match entry.strip_prefix("*.") {
        Some(domain) if patterns => domain,
        _ => entry,
    };
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']' | '_'))
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

    #[test]
    fn pinning_on_needs_an_allowlist_and_says_so() {
        let on = Settings {
            enabled: true,
            ..Settings::default()
        };
        let err = on.check().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            err.contains("allowedRegistries is empty") && err.contains("allowedRegistries: ["),
            "{err}"
        );
        assert_eq!(Settings::default().check(), Ok(()), "off needs no list");
        let listed = Settings {
            allowed_registries: vec!["ghcr.io".into()],
            ..on
        };
        assert_eq!(listed.check(), Ok(()));
        assert!(!listed.allows("evil.example.com") && listed.allows("ghcr.io"));
    }

    #[test]
    fn entries_must_be_hosts_and_auth_hosts_must_belong_to_allowed_registries() {
        let base = Settings {
            enabled: true,
            allowed_registries: vec!["docker.io".into()],
            ..Settings::default()
        };
        let url = Settings {
            redirect_hosts: vec!["https://cdn.example.com/x".into()],
            ..base.clone()
        };
        assert!(matches!(
            url.check(),
            Err(SettingsError::NotAHost {
                list: "redirectHosts",
                ..
            })
        ));
        let stray = Settings {
            auth_hosts: BTreeMap::from([("quay.io".into(), vec!["auth.quay.io".into()])]),
            ..base.clone()
        };
        let err = stray
            .check()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("\"quay.io\"") && err.contains("docker.io"),
            "{err}"
        );
        let hub = Settings {
            auth_hosts: BTreeMap::from([("docker.io".into(), vec!["auth.docker.io".into()])]),
            redirect_hosts: vec!["*.cloudfront.net".into()],
            ..base
        };
        assert_eq!(hub.check(), Ok(()));
    }
}
