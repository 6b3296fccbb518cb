//! One manifest lookup over the OCI distribution API: tag in, digest out.
//!
//! Entry point: [`Lookup::digest`]. `HEAD /v2/<repo>/manifests/<tag>` with every manifest
//! type in `Accept`, index types first, so that a multi-arch image answers with its index
//! (a registry that is not offered the index types may answer one platform's manifest, and
//! pods on other architectures would then pull the wrong image). The digest is the
//! `Docker-Content-Digest` header; without one, a GET and the sha256 of the body.
//!
//! # Guarantees
//! - Bodies are read up to [`MAX_MANIFEST_BYTES`] (error answers up to [`MAX_ANSWER_BYTES`]),
//!   never further; redirects are followed at most [`MAX_REDIRECTS`] times (the client's
//!   policy, see [`super::resolver`]).
//! - A body whose sha256 differs from the digest header is an error, never a digest.
//! - Credentials go only to the registry (and its token realm); the client drops them on a
//!   redirect to another host.

use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use reqwest::{Method, Response, StatusCode};

use super::auth::{Challenge, TokenAnswer, TokenCache};
use super::credentials::Credential;
use super::error::{Problem, ResolveError};
use super::reference::{is_sha256_digest, Reference};

/// Index types first: see the module doc.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
/// distribution refuses to store manifests over 4 MiB, so a larger answer is not one.
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;
/// Error bodies and token answers are small JSON documents.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
pub const MAX_REDIRECTS: usize = 5;
const DIGEST_HEADER: &str = "docker-content-digest";

/// What one lookup needs.
pub struct Lookup<'a> {
    pub http: &'a reqwest::Client,
    pub tokens: &'a TokenCache,
    /// `https://host[:port]` (or `http://` for plain-HTTP registries).
    pub base: String,
    pub credential: Option<&'a Credential>,
    /// The image as written in the job (for messages).
    pub image: &'a str,
    pub reference: &'a Reference,
}

#[derive(Clone)]
enum Authorization {
    Anonymous,
    Basic(Credential),
    Bearer(String),
}

impl Lookup<'_> {
    /// The digest the reference's tag points to now.
    pub async fn digest(&self) -> Result<String, ResolveError> {
        let token_key = self.token_key();
        let mut auth = match self.tokens.get(&token_key) {
            Some(token) => Authorization::Bearer(token),
            None => Authorization::Anonymous,
        };
        let mut response = self.send(Method::HEAD, &auth).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            auth = self
                .answer_challenge(response.headers(), &token_key)
                .await?;
            response = self.send(Method::HEAD, &auth).await?;
            if matches!(
                response.status(),
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
            ) {
                return Err(self.unauthorized());
            }
        }
        if !response.status().is_success() {
            // HEAD answers carry no body: a GET brings the registry's explanation, or the
            // manifest itself from a server that does not allow HEAD (405).
            return self.digest_of_body(&auth).await;
        }
        self.check_content_type(response.headers())?;
        match header(response.headers(), DIGEST_HEADER) {
            Some(digest) if is_sha256_digest(&digest) => Ok(digest),
            _ => self.digest_of_body(&auth).await,
        }
    }

    /// GET the manifest and hash it; a digest header, if sent, must agree.
    async fn digest_of_body(&self, auth: &Authorization) -> Result<String, ResolveError> {
        let response = self.send(Method::GET, auth).await?;
        if !response.status().is_success() {
            return Err(self.status_error(response).await);
        }
        self.check_content_type(response.headers())?;
        let claimed = header(response.headers(), DIGEST_HEADER);
        let body = read_bounded(response, MAX_MANIFEST_BYTES)
            .await
            .map_err(|e| self.transport(e))?
            .ok_or_else(|| {
                self.bad(Problem::TooLarge {
                    limit: MAX_MANIFEST_BYTES,
                })
            })?;
        let digest = super::digest::sha256(&body);
        match claimed {
            Some(header) if header != digest => Err(self.bad(Problem::DigestMismatch {
                header,
                body: digest,
            })),
            _ => Ok(digest),
        }
    }

    async fn send(&self, method: Method, auth: &Authorization) -> Result<Response, ResolveError> {
        let url = format!(
            "{}/v2/{}/manifests/{}",
            self.base,
            self.reference.repository,
            self.reference.manifest_reference()
        );
        let request = self
            .http
            .request(method, url)
            .header(ACCEPT, MANIFEST_ACCEPT);
        let request = match auth {
            Authorization::Anonymous => request,
            Authorization::Basic(c) => request.basic_auth(&c.username, Some(&c.password)),
            Authorization::Bearer(token) => request.bearer_auth(token),
        };
        request.send().await.map_err(|e| self.transport(e))
    }

    /// What to send after a 401, per its challenge.
    async fn answer_challenge(
        &self,
        headers: &HeaderMap,
        token_key: &str,
    ) -> Result<Authorization, ResolveError> {
        let text = header(headers, WWW_AUTHENTICATE.as_str()).unwrap_or_default();
        match Challenge::parse(&text) {
            Some(Challenge::Basic) => self
                .credential
                .cloned()
                .map(Authorization::Basic)
                .ok_or_else(|| self.unauthorized()),
            Some(Challenge::Bearer {
                realm,
                service,
                scope,
            }) => {
                let scope = scope.unwrap_or_else(|| self.scope());
                let (token, lifetime) =
                    self.fetch_token(&realm, service.as_deref(), &scope).await?;
                self.tokens
                    .put(token_key.to_string(), token.clone(), lifetime);
                Ok(Authorization::Bearer(token))
            }
            None => Err(self.bad(Problem::Challenge {
                challenge: text.chars().take(200).collect(),
            })),
        }
    }

    /// `GET realm?service&scope`, with Basic credentials when there are any.
    async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scope: &str,
    ) -> Result<(String, std::time::Duration), ResolveError> {
        let Ok(mut url) = reqwest::Url::parse(realm) else {
            return Err(self.bad(Problem::Challenge {
                challenge: format!(
                    "realm {:?} is not a URL",
                    realm.chars().take(200).collect::<String>()
                ),
            }));
        };
        url.query_pairs_mut().append_pair("scope", scope);
        if let Some(service) = service {
            url.query_pairs_mut().append_pair("service", service);
        }
        let mut request = self.http.get(url);
        if let Some(c) = self.credential {
            request = request.basic_auth(&c.username, Some(&c.password));
        }
        let response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(self.unauthorized());
        }
        let body = read_bounded(response, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| self.transport(e))?
            .unwrap_or_default();
        serde_json::from_slice::<TokenAnswer>(&body)
            .ok()
            .filter(|_| status.is_success())
            .and_then(TokenAnswer::token)
            .ok_or_else(|| {
                self.bad(Problem::NoToken {
                    status: status.as_u16(),
                })
            })
    }

    /// An error page, an HTML login page or a proxy's answer is never a manifest.
    fn check_content_type(&self, headers: &HeaderMap) -> Result<(), ResolveError> {
        let content_type = header(headers, CONTENT_TYPE.as_str()).unwrap_or_default();
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        if essence.is_empty() || essence.contains("json") || essence.contains("prettyjws") {
            Ok(())
        } else {
            Err(self.bad(Problem::NotAManifest {
                content_type: essence.chars().take(100).collect(),
            }))
        }
    }

    async fn status_error(&self, response: Response) -> ResolveError {
        let status = response.status();
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return self.unauthorized();
        }
        let content_type = header(response.headers(), CONTENT_TYPE.as_str()).unwrap_or_default();
        let body = read_prefix(response, MAX_ANSWER_BYTES).await;
        ResolveError::Status {
            image: self.image.to_string(),
            registry: self.reference.registry.clone(),
            status: status.as_u16(),
            answer: body.and_then(|b| summarise_answer(&content_type, &b)),
        }
    }

    fn scope(&self) -> String {
        format!("repository:{}:pull", self.reference.repository)
    }

    fn token_key(&self) -> String {
        let who = self
            .credential
            .map_or_else(|| "anonymous".to_string(), Credential::fingerprint);
        TokenCache::key(&self.base, None, Some(&self.scope()), &who)
    }

    fn unauthorized(&self) -> ResolveError {
        ResolveError::Unauthorized {
            image: self.image.to_string(),
            registry: self.reference.registry.clone(),
            had_credentials: self.credential.is_some(),
        }
    }

    fn bad(&self, problem: Problem) -> ResolveError {
        ResolveError::BadAnswer {
            image: self.image.to_string(),
            registry: self.reference.registry.clone(),
            problem,
        }
    }

    fn transport(&self, e: reqwest::Error) -> ResolveError {
        if e.is_redirect() {
            return self.bad(Problem::Redirects {
                limit: MAX_REDIRECTS,
            });
        }
        ResolveError::Transport {
            image: self.image.to_string(),
            registry: self.reference.registry.clone(),
            source: e.without_url(),
        }
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The body, or `None` when it is longer than `limit` (read no further than that).
async fn read_bounded(
    mut response: Response,
    limit: usize,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Ok(None);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The first `limit` bytes of the body (all of it when shorter): enough to say what an
/// error answer is, however long it goes on.
async fn read_prefix(mut response: Response, limit: usize) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = limit.saturating_sub(body.len());
        body.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
        if body.len() >= limit {
            break;
        }
    }
    Some(body)
}

/// The registry's `{"errors":[{code,message}]}` as `CODE: message; …`, or a short note on
/// what else came back.
pub fn summarise_answer(content_type: &str, body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: Option<String>,
        message: Option<String>,
    }
    if let Ok(Errors { errors }) = serde_json::from_slice::<Errors>(body) {
        let parts: Vec<String> = errors
            .into_iter()
            .take(3)
            .map(|e| match (e.code, e.message) {
                (Some(c), Some(m)) => format!("{c}: {m}"),
                (c, m) => c.or(m).unwrap_or_default(),
            })
            .collect();
        return Some(clip(&parts.join("; ")));
    }
    if content_type.starts_with("text/html") || body.trim_ascii_start().starts_with(b"<") {
        return Some("an HTML page".to_string());
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    (!text.is_empty()).then(|| clip(text))
}

/// At most 200 characters, control characters blanked: a registry's text ends up in a
/// denial message and a log line.
fn clip(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(200).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::summarise_answer;

    #[test]
    fn summarises_registry_errors_html_and_text() {
        let json = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"v9"}}]}"#;
        assert_eq!(
            summarise_answer("application/json", json).as_deref(),
            Some("MANIFEST_UNKNOWN: manifest unknown")
        );
        assert_eq!(
            summarise_answer("text/html", b"<html><body>login</body></html>").as_deref(),
            Some("an HTML page")
        );
        let long = "x".repeat(5000);
        let s = summarise_answer("text/plain", long.as_bytes()).unwrap_or_default();
        assert!(s.chars().count() <= 201, "{}", s.len());
        assert_eq!(summarise_answer("", b""), None);
    }
}
