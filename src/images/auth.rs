//! Registry authentication: `WWW-Authenticate` challenges and Bearer tokens cached per scope.
//!
//! Entry points: [`Challenge::parse`] and [`TokenCache`]. The flow (distribution's token
//! spec): a 401 names `Basic realm=…` (send Basic credentials) or `Bearer realm,service,scope`
//! (get a token from the realm, with Basic credentials or anonymously, and send it). Tokens
//! live `expires_in` seconds (60 when unsaid); they are reused for their scope until shortly
//! before then.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a 401 asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

impl Challenge {
    /// Reads a `WWW-Authenticate` value; `None` for schemes other than Basic and Bearer.
    pub fn parse(header: &str) -> Option<Challenge> {
        let (scheme, params) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Some(Challenge::Basic);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let params = parse_params(params);
        let get = |k: &str| {
            params
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.clone())
        };
        Some(Challenge::Bearer {
            realm: get("realm")?,
            service: get("service"),
            scope: get("scope"),
        })
    }
}

/// `a="x, y",b=z` → [(a, "x, y"), (b, z)]: quoted values may hold commas.
fn parse_params(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while let Some((name, after)) = rest.split_once('=') {
        let name = name.trim().trim_start_matches(',').trim().to_string();
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (
                    quoted.get(..end).unwrap_or_default(),
                    quoted.get(end + 1..).unwrap_or_default(),
                ),
                None => (quoted, ""),
            },
            None => match after.find(',') {
                Some(end) => (
                    after.get(..end).unwrap_or_default(),
                    after.get(end..).unwrap_or_default(),
                ),
                None => (after, ""),
            },
        };
        out.push((name, value.to_string()));
        rest = next.trim_start().trim_start_matches(',');
    }
    out
}

/// The token server's answer (distribution token spec).
#[derive(Debug, serde::Deserialize)]
pub struct TokenAnswer {
    pub token: Option<String>,
    pub access_token: Option<String>,
    pub expires_in: Option<u64>,
}

impl TokenAnswer {
    pub fn token(self) -> Option<(String, Duration)> {
        let lifetime = Duration::from_secs(self.expires_in.unwrap_or(60).max(1));
        self.token
            .filter(|t| !t.is_empty())
            .or(self.access_token)
            .map(|t| (t, lifetime))
    }
}

/// Bearer tokens by (realm, service, scope, credential fingerprint).
#[derive(Debug, Default)]
pub struct TokenCache {
    tokens: Mutex<HashMap<String, (String, Instant)>>,
}

/// A token this close to expiry is fetched again: the request using it must still arrive
/// while it is valid.
const EXPIRY_MARGIN: Duration = Duration::from_secs(5);
/// Past this many tokens, expired ones are dropped on insert.
const PRUNE_AT: usize = 1024;

impl TokenCache {
    pub fn key(realm: &str, service: Option<&str>, scope: Option<&str>, who: &str) -> String {
        format!(
            "{realm}\0{}\0{}\0{who}",
            service.unwrap_or(""),
            scope.unwrap_or("")
        )
    }

    pub fn get(&self, key: &str) -> Option<String> {
        let tokens = self.tokens.lock().ok()?;
        let (token, expires) = tokens.get(key)?;
        (Instant::now() < *expires).then(|| token.clone())
    }

    pub fn put(&self, key: String, token: String, lifetime: Duration) {
        let expires = Instant::now()
            + lifetime
                .saturating_sub(EXPIRY_MARGIN)
                .max(Duration::from_secs(1));
        if let Ok(mut tokens) = self.tokens.lock() {
            if tokens.len() >= PRUNE_AT {
                let now = Instant::now();
                tokens.retain(|_, (_, e)| *e > now);
            }
            tokens.insert(key, (token, expires));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bearer_challenges_with_quoted_commas() {
        let c = Challenge::parse(
            r#"Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(
            c,
            Some(Challenge::Bearer {
                realm: "https://auth.example.com/token".into(),
                service: Some("registry.example.com".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(
            Challenge::parse(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(Challenge::parse("Negotiate"), None);
        assert_eq!(Challenge::parse("Bearer service=x"), None);
    }

    #[test]
    fn tokens_are_kept_per_key_until_expiry() {
        let cache = TokenCache::default();
        let key = TokenCache::key("r", Some("s"), Some("repository:a:pull"), "anon");
        cache.put(key.clone(), "t".into(), Duration::from_secs(60));
        assert_eq!(cache.get(&key).as_deref(), Some("t"));
        let other = TokenCache::key("r", Some("s"), Some("repository:b:pull"), "anon");
        assert_eq!(cache.get(&other), None);
    }
}
