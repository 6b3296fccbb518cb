//! Registry authentication: `WWW-Authenticate` challenges and Bearer tokens cached per scope.
//!
//! Entry points: [`Challenge::parse`] and [`TokenCache`]. The flow (distribution's token
//! spec): a 401 names `Basic realm=…` (send Basic credentials) or `Bearer realm,service,scope`
//! (get a token from the realm, with Basic credentials or anonymously, and send it). Tokens
//! live `expires_in` seconds (60 when unsaid, [`MAX_TOKEN_LIFETIME`] at most); they are
//! reused for their scope until shortly before then. Which realms may be asked is
//! [`super::egress`]'s decision.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use lru::LruCache;

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

/// Bearer tokens by (registry, scope, credential fingerprint): an LRU bounded in count and
/// bytes, each token kept at most [`MAX_TOKEN_LIFETIME`].
///
/// # Guarantees
/// - At most [`MAX_TOKENS`] tokens and [`MAX_TOKEN_CACHE_BYTES`] bytes of keys and tokens;
///   past either, the least recently used go first.
/// - No token longer than [`MAX_TOKEN_BYTES`] is kept (the lookup refuses it before).
/// - A token is used for at most [`MAX_TOKEN_LIFETIME`], whatever `expires_in` said.
#[derive(Debug)]
pub struct TokenCache {
    tokens: Mutex<Tokens>,
}

#[derive(Debug)]
struct Tokens {
    lru: LruCache<String, (String, Instant)>,
    bytes: usize,
}

/// A token this close to expiry is fetched again: the request using it must still arrive
/// while it is valid.
const EXPIRY_MARGIN: Duration = Duration::from_secs(5);
/// Scopes (registry, repository, credential) looked up within one lifetime: a cluster
/// pulling from 500 repositories every 5 minutes is large; past it, an evicted scope costs
/// one token request.
pub const MAX_TOKENS: usize = 512;
/// Registry tokens are JWTs of 1 to 3 KiB (Docker Hub, GHCR, Artifact Registry, ACR); 16
/// KiB leaves room for large claim sets and refuses a token server streaming a body in.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// 512 typical tokens (~3 KiB with their key) fit; the bound holds even if every one is
/// the largest allowed, by evicting.
pub const MAX_TOKEN_CACHE_BYTES: usize = 2 * 1024 * 1024;
/// Docker Hub grants 300 s; some registries grant hours. A token outliving the credential
/// it was got with (a pull secret deleted or rotated) is honoured at most this long: the
/// digest cache's default TTL, and one token request per scope per 5 minutes.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(300);

impl Default for TokenCache {
    fn default() -> TokenCache {
        TokenCache {
            tokens: Mutex::new(Tokens {
                lru: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }
}

impl TokenCache {
    pub fn key(realm: &str, service: Option<&str>, scope: Option<&str>, who: &str) -> String {
        format!(
            "{realm}\0{}\0{}\0{who}",
            service.unwrap_or(""),
            scope.unwrap_or("")
        )
    }

    pub fn get(&self, key: &str) -> Option<String> {
        let mut tokens = self.tokens.lock().ok()?;
        let (token, expires) = tokens.lru.get(key)?;
        (Instant::now() < *expires).then(|| token.clone())
    }

    /// Keeps `token` for `lifetime` (clamped to [`MAX_TOKEN_LIFETIME`], less a margin);
    /// returns how long it is kept, or `None` for a token over [`MAX_TOKEN_BYTES`].
    pub fn put(&self, key: String, token: String, lifetime: Duration) -> Option<Duration> {
        if token.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let kept = lifetime
            .min(MAX_TOKEN_LIFETIME)
            .saturating_sub(EXPIRY_MARGIN)
            .max(Duration::from_secs(1));
        let mut tokens = self.tokens.lock().ok()?;
        let size = key.len() + token.len();
        if let Some((old, _)) = tokens.lru.put(key.clone(), (token, Instant::now() + kept)) {
            tokens.bytes = tokens.bytes.saturating_sub(key.len() + old.len());
        }
        tokens.bytes += size;
        while tokens.lru.len() > MAX_TOKENS || tokens.bytes > MAX_TOKEN_CACHE_BYTES {
            let Some((k, (t, _))) = tokens.lru.pop_lru() else {
                break;
            };
            tokens.bytes = tokens.bytes.saturating_sub(k.len() + t.len());
        }
        Some(kept)
    }

    /// Tokens and bytes held now.
    pub fn usage(&self) -> (usize, usize) {
        self.tokens
            .lock()
            .map(|t| (t.lru.len(), t.bytes))
            .unwrap_or_default()
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

    #[test]
    fn a_year_long_token_is_kept_five_minutes_at_most() {
        let cache = TokenCache::default();
        let year = Duration::from_secs(365 * 24 * 3600);
        let kept = cache.put("k".into(), "t".into(), year);
        assert_eq!(kept, Some(MAX_TOKEN_LIFETIME - EXPIRY_MARGIN));
    }

    #[test]
    fn an_oversized_token_is_not_kept() {
        let cache = TokenCache::default();
        let huge = "x".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(cache.put("k".into(), huge, Duration::from_secs(60)), None);
        assert_eq!(cache.get("k"), None);
        assert_eq!(cache.usage(), (0, 0));
    }

    #[test]
    fn the_cache_is_bounded_in_count_and_bytes_least_recently_used_first() {
        let cache = TokenCache::default();
        let minute = Duration::from_secs(60);
        for i in 0..MAX_TOKENS + 10 {
            cache.put(format!("k{i}"), "t".into(), minute);
        }
        assert_eq!(cache.usage().0, MAX_TOKENS);
        assert_eq!(cache.get("k0"), None, "the oldest went first");
        assert!(cache.get(&format!("k{}", MAX_TOKENS + 9)).is_some());

        let cache = TokenCache::default();
        let big = "x".repeat(MAX_TOKEN_BYTES);
        cache.put("first".into(), big.clone(), minute);
        for i in 0..MAX_TOKEN_CACHE_BYTES / MAX_TOKEN_BYTES + 5 {
            // Touching `first` keeps it the most recently used.
            let _ = cache.get("first");
            cache.put(format!("k{i}"), big.clone(), minute);
        }
        let (count, bytes) = cache.usage();
        assert!(bytes <= MAX_TOKEN_CACHE_BYTES, "{bytes} bytes in {count}");
        assert!(cache.get("first").is_some(), "recently used, kept");
        assert_eq!(cache.get("k0"), None, "least recently used, evicted");
    }
}
