//! Registry credentials: `config.json` / `.dockerconfigjson` documents, merged into a
//! [`Keychain`] looked up by registry.
//!
//! Entry points: [`Keychain::from_docker_config`] (one document, from a pull secret or the
//! `--registry-credentials` file) and [`Keychain::lookup`]. Keys are normalised the way the
//! kubelet matches them: scheme and path dropped, Docker Hub's aliases
//! (`https://index.docker.io/v1/`) folded into `docker.io`.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use serde::Deserialize;

use super::reference::DOCKER_HUB;

/// A user name and password (or token) for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credential {
    /// Never prints the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// A short fingerprint that keys caches, so that a digest or token found with one
    /// credential is never handed to a request that has another (or none).
    pub fn fingerprint(&self) -> String {
        let text = format!("{}\0{}", self.username, self.password);
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes());
        super::digest::hex(digest.as_ref().get(..8).unwrap_or_default())
    }
}

/// Credentials per registry; the first one added for a registry wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keychain {
    entries: BTreeMap<String, Credential>,
}

/// Why a credentials document was not read.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("{origin} is not a docker config.json document")]
    Json {
        origin: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{origin}: the auth of {registry} is not base64 of user:password")]
    Auth { origin: String, registry: String },
    #[error("cannot read {origin}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl Keychain {
    /// Reads `{"auths": {"<registry>": {"auth": "b64(user:pass)"}}}` (or `username` and
    /// `password`); `origin` names the document in errors.
    pub fn from_docker_config(text: &[u8], origin: &str) -> Result<Keychain, CredentialsError> {
        let config: DockerConfig =
            serde_json::from_slice(text).map_err(|source| CredentialsError::Json {
                origin: origin.to_string(),
                source,
            })?;
        let mut keychain = Keychain::default();
        for (key, entry) in config.auths {
            let registry = normalise_key(&key);
            let credential = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => {
                    decode_auth(&auth).ok_or_else(|| CredentialsError::Auth {
                        origin: origin.to_string(),
                        registry: registry.clone(),
                    })?
                }
                (_, Some(username), Some(password)) => Credential { username, password },
                _ => continue,
            };
            keychain.entries.entry(registry).or_insert(credential);
        }
        Ok(keychain)
    }

    /// Reads a `config.json`-format file.
    pub fn from_file(path: &std::path::Path) -> Result<Keychain, CredentialsError> {
        let origin = path.display().to_string();
        let text = std::fs::read(path).map_err(|source| CredentialsError::Read {
            origin: origin.clone(),
            source,
        })?;
        Keychain::from_docker_config(&text, &origin)
    }

    /// Adds `other`'s entries for registries this keychain has none for.
    pub fn merge(&mut self, other: Keychain) {
        for (registry, credential) in other.entries {
            self.entries.entry(registry).or_insert(credential);
        }
    }

    /// The credential for `registry` (as [`super::Reference::registry`] names it).
    pub fn lookup(&self, registry: &str) -> Option<&Credential> {
        self.entries.get(registry)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `https://index.docker.io/v1/` → `docker.io`; `https://reg.io:5000/x` → `reg.io:5000`.
fn normalise_key(key: &str) -> String {
    let host = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = host.split('/').next().unwrap_or(host);
    match host {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            DOCKER_HUB.to_string()
        }
        other => other.to_string(),
    }
}

fn decode_auth(auth: &str) -> Option<Credential> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (username, password) = text.split_once(':')?;
    Some(Credential {
        username: username.to_string(),
        password: password.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_auth_and_username_password_forms_with_normalised_keys() {
        let doc = br#"{"auths": {
            "https://index.docker.io/v1/": {"auth": "dXNlcjpwYTpzcw=="},
            "reg.example.com:5000": {"username": "u", "password": "p"},
            "empty.example.com": {}
        }}"#;
        let keychain = Keychain::from_docker_config(doc, "test").unwrap_or_default();
        let hub = keychain.lookup("docker.io");
        assert_eq!(hub.map(|c| c.username.as_str()), Some("user"));
        assert_eq!(hub.map(|c| c.password.as_str()), Some("pa:ss"));
        assert_eq!(
            keychain
                .lookup("reg.example.com:5000")
                .map(|c| c.password.as_str()),
            Some("p")
        );
        assert!(keychain.lookup("empty.example.com").is_none());
    }

    #[test]
    fn names_the_document_and_registry_of_a_bad_auth() {
        let doc = br#"{"auths": {"r.io": {"auth": "not base64!"}}}"#;
        let err = Keychain::from_docker_config(doc, "secret ns/pull").err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.contains("secret ns/pull") && msg.contains("r.io"),
            "{msg}"
        );
    }

    #[test]
    fn debug_output_hides_the_password() {
        let c = Credential {
            username: "u".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
