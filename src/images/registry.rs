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
//!   never further; redirects are followed here, not by the client, at most
//!   [`MAX_REDIRECTS`] times and each only where [`Egress`] allows, checked before the
//!   request is sent.
//! - A body whose sha256 differs from the digest header is an error, never a digest.
//! - Credentials go only to the registry's origin and to its allowed token realm, never
//!   across a redirect to another origin ([`Egress::authorizes`]).
//! - An error answer's text never reaches the error: its HTTP status and OCI error codes do
//!   ([`summarise_answer`]).

use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};
use tracing::info;

use super::auth::{Challenge, TokenAnswer, TokenCache, MAX_TOKEN_BYTES};
use super::credentials::Credential;
use super::egress::{Egress, Refusal};
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
    /// Where this lookup may send requests; its base is the registry.
    pub egress: &'a Egress,
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

impl Authorization {
    fn apply(&self, request: RequestBuilder) -> RequestBuilder {
        match self {
            Authorization::Anonymous => request,
            Authorization::Basic(c) => request.basic_auth(&c.username, Some(&c.password)),
            Authorization::Bearer(token) => request.bearer_auth(token),
        }
    }
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
            // HEAD answers carry no body: a GET brings the registry's error code, or the
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

    /// The manifest request, `auth` sent to the registry's origin only.
    async fn send(&self, method: Method, auth: &Authorization) -> Result<Response, ResolveError> {
        let path = format!(
            "v2/{}/manifests/{}",
            self.reference.repository,
            self.reference.manifest_reference()
        );
        let url = self
            .egress
            .base()
            .join(&path)
            .map_err(|_| self.bad(Problem::BadRedirect))?;
        self.follow(url, |url, authorized| {
            let request = self
                .http
                .request(method.clone(), url)
                .header(ACCEPT, MANIFEST_ACCEPT);
            if authorized {
                auth.apply(request)
            } else {
                request
            }
        })
        .await
    }

    /// Sends `build(url, authorized)` and follows redirects by hand: each target is checked
    /// by [`Egress::redirect`] before anything is sent to it, and `authorized` is true only
    /// while the chain stays on the origin it began at.
    async fn follow(
        &self,
        start: Url,
        build: impl Fn(Url, bool) -> RequestBuilder,
    ) -> Result<Response, ResolveError> {
        let mut url = start.clone();
        for _ in 0..=MAX_REDIRECTS {
            let authorized = Egress::authorizes(&start, &url);
            let response = build(url.clone(), authorized)
                .send()
                .await
                .map_err(|e| self.transport(e))?;
            let Some(next) = redirect_target(&url, &response) else {
                return Ok(response);
            };
            let next = next.ok_or_else(|| self.bad(Problem::BadRedirect))?;
            self.egress
                .redirect(&url, &next)
                .map_err(|refusal| self.refused(refusal))?;
            url = next;
        }
        Err(self.bad(Problem::Redirects {
            limit: MAX_REDIRECTS,
        }))
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
                scheme: scheme_of(&text),
            })),
        }
    }

    /// `GET realm?service&scope`, with Basic credentials when there are any: the realm is
    /// the registry's own host or one `authHosts` lists for it ([`Egress::realm`]).
    async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scope: &str,
    ) -> Result<(String, std::time::Duration), ResolveError> {
        let mut url = self
            .egress
            .realm(realm)
            .map_err(|refusal| self.refused(refusal))?;
        url.query_pairs_mut().append_pair("scope", scope);
        if let Some(service) = service {
            url.query_pairs_mut().append_pair("service", service);
        }
        let response = self
            .follow(url, |url, authorized| {
                let request = self.http.get(url);
                match self.credential.filter(|_| authorized) {
                    Some(c) => request.basic_auth(&c.username, Some(&c.password)),
                    None => request,
                }
            })
            .await?;
        let status = response.status();
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(self.unauthorized());
        }
        let body = read_bounded(response, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| self.transport(e))?
            .unwrap_or_default();
        let (token, lifetime) = serde_json::from_slice::<TokenAnswer>(&body)
            .ok()
            .filter(|_| status.is_success())
            .and_then(TokenAnswer::token)
            .ok_or_else(|| {
                self.bad(Problem::NoToken {
                    status: status.as_u16(),
                })
            })?;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(self.bad(Problem::TokenTooLarge {
                limit: MAX_TOKEN_BYTES,
            }));
        }
        Ok((token, lifetime))
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
        TokenCache::key(self.egress.base().as_str(), None, Some(&self.scope()), &who)
    }

    /// The same error with or without credentials; whether there were any is logged here,
    /// for the operator only.
    fn unauthorized(&self) -> ResolveError {
        let had_credentials = self.credential.is_some();
        info!(
            image = self.image,
            registry = %self.reference.registry,
            had_credentials,
            "registry refused the lookup as unauthorized"
        );
        ResolveError::Unauthorized {
            image: self.image.to_string(),
            registry: self.reference.registry.clone(),
            had_credentials,
        }
    }

    fn refused(&self, refusal: Refusal) -> ResolveError {
        ResolveError::Egress {
            image: self.image.to_string(),
            registry: self.reference.registry.clone(),
            refusal,
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
        ResolveError::Transport {
            image: self.image.to_string(),
            registry: self.reference.registry.clone(),
            source: e.without_url(),
        }
    }
}

/// The target of a redirect answer: `None` for any other answer, `Some(None)` when its
/// `Location` is not a URL.
fn redirect_target(url: &Url, response: &Response) -> Option<Option<Url>> {
    let redirect = matches!(
        response.status(),
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    );
    if !redirect {
        return None;
    }
    let location = header(response.headers(), LOCATION.as_str())?;
    Some(url.join(&location).ok())
}

/// The scheme of a challenge gangplank cannot answer, as letters only: the registry's text
/// goes no further.
fn scheme_of(challenge: &str) -> String {
    challenge
        .trim()
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .take(20)
        .collect()
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

/// Error codes of the OCI distribution spec and of distribution (docker) registries: the
/// only words of an error answer that reach a message.
const OCI_ERROR_CODES: [&str; 17] = [
    "BLOB_UNKNOWN",
    "BLOB_UPLOAD_INVALID",
    "BLOB_UPLOAD_UNKNOWN",
    "DIGEST_INVALID",
    "MANIFEST_BLOB_UNKNOWN",
    "MANIFEST_INVALID",
    "MANIFEST_UNKNOWN",
    "MANIFEST_UNVERIFIED",
    "NAME_INVALID",
    "NAME_UNKNOWN",
    "SIZE_INVALID",
    "TAG_INVALID",
    "UNAUTHORIZED",
    "DENIED",
    "UNSUPPORTED",
    "TOOMANYREQUESTS",
    "UNKNOWN",
];

/// What an error answer was, in words that are not the answer's: the OCI error codes of
/// `{"errors":[{code,…}]}` (from the closed set above), "an HTML page", or nothing. The
/// body's text is never quoted: the host may not be a registry at all (a redirect, a
/// misconfigured proxy), and the message goes back to whoever named the image.
pub fn summarise_answer(content_type: &str, body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: Option<String>,
    }
    if let Ok(Errors { errors }) = serde_json::from_slice::<Errors>(body) {
        let mut codes: Vec<&str> = Vec::new();
        for entry in &errors {
            let known = entry
                .code
                .as_deref()
                .and_then(|c| OCI_ERROR_CODES.iter().find(|k| **k == c).copied())
                .unwrap_or("an error code outside the OCI distribution spec");
            if !codes.contains(&known) {
                codes.push(known);
            }
        }
        return (!codes.is_empty()).then(|| codes.join(", "));
    }
    if content_type.starts_with("text/html") || body.trim_ascii_start().starts_with(b"<") {
        return Some("an HTML page".to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::summarise_answer;

    #[test]
    fn summarises_error_answers_by_their_oci_codes_and_never_quotes_them() {
        let json = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"v9"}}]}"#;
        assert_eq!(
            summarise_answer("application/json", json).as_deref(),
            Some("MANIFEST_UNKNOWN")
        );
        let two = br#"{"errors":[{"code":"DENIED","message":"a"},{"code":"s3cr3t"},{"code":"x"}]}"#;
        assert_eq!(
            summarise_answer("application/json", two).as_deref(),
            Some("DENIED, an error code outside the OCI distribution spec")
        );
        assert_eq!(
            summarise_answer("text/html", b"<html><body>login</body></html>").as_deref(),
            Some("an HTML page")
        );
        assert_eq!(summarise_answer("text/plain", b"AKIA-secret-key"), None);
        assert_eq!(summarise_answer("", b""), None);
    }

    #[test]
    fn an_unanswerable_challenge_is_named_by_its_scheme_only() {
        assert_eq!(
            super::scheme_of(r#"Negotiate realm="http://169.254.169.254/secret""#),
            "Negotiate"
        );
    }
}
