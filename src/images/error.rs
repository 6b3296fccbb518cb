//! Why a digest could not be found, per image: what the denial or warning says.

use std::time::Duration;

use super::egress::Refusal;
use super::reference::ReferenceError;

/// A failed lookup. Each variant names the image and, once known, the registry, and what
/// to change.
///
/// Nothing a registry (or a host it points at) wrote reaches the message beyond its HTTP
/// status and OCI error codes: the message goes back to the job's author, who chose the
/// registry. Nor does the message say whether credentials were found for it (see
/// [`ResolveError::Unauthorized`]).
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("image {image:?} is not a valid reference")]
    Reference {
        image: String,
        #[source]
        source: ReferenceError,
    },
    #[error("failed to resolve digest for {image}: registry {registry} is not in imageResolution.allowedRegistries")]
    NotAllowed { image: String, registry: String },
    #[error("failed to resolve digest for {image}: cannot reach registry {registry}")]
    Transport {
        image: String,
        registry: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("failed to resolve digest for {image}: registry {registry} {refusal}")]
    Egress {
        image: String,
        registry: String,
        refusal: Refusal,
    },
    #[error("failed to resolve digest for {image}: registry {registry} answered {status}{}", answer.as_ref().map(|a| format!(": {a}")).unwrap_or_default())]
    Status {
        image: String,
        registry: String,
        status: u16,
        /// The registry's OCI error codes, or a short note on the body (never its text).
        answer: Option<String>,
    },
    /// One message whether or not credentials were found: otherwise a job author could
    /// learn which registries the namespace's pull secrets or the webhook's credentials
    /// file cover. `had_credentials` goes to the server log only.
    #[error("failed to resolve digest for {image}: registry {registry} refused the lookup as unauthorized: give the job's pods an imagePullSecret (in their templates or their ServiceAccount) that this registry accepts")]
    Unauthorized {
        image: String,
        registry: String,
        had_credentials: bool,
    },
    #[error("failed to resolve digest for {image}: registry {registry} sent an unusable answer")]
    BadAnswer {
        image: String,
        registry: String,
        #[source]
        problem: Problem,
    },
    #[error("failed to resolve digest for {image}: registry {registry} did not answer within {} ms", budget.as_millis())]
    Timeout {
        image: String,
        registry: String,
        budget: Duration,
    },
    #[error("failed to resolve digest for {image}: cannot set up the registry client")]
    Client {
        image: String,
        #[source]
        source: std::sync::Arc<ClientError>,
    },
}

/// What was wrong with an answer that came back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("a {content_type} page instead of a manifest (a proxy or login page?)")]
    NotAManifest { content_type: String },
    #[error("the manifest is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("Docker-Content-Digest {header} does not match the sha256 of the manifest, {body}")]
    DigestMismatch { header: String, body: String },
    #[error("a redirect loop or more than {limit} redirects")]
    Redirects { limit: usize },
    #[error("a redirect whose Location is not a URL")]
    BadRedirect,
    #[error("an authentication challenge gangplank cannot answer (scheme {scheme:?}; Basic and Bearer are understood)")]
    Challenge { scheme: String },
    #[error("the token server answered {status} without a token")]
    NoToken { status: u16 },
    #[error("the token server sent a token larger than {limit} bytes")]
    TokenTooLarge { limit: usize },
}

/// The registry client could not be built from the settings.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot read the CA bundle {path}")]
    CaBundle {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the CA bundle {path} holds no PEM certificate")]
    CaBundleEmpty { path: String },
    #[error("the CA bundle {path} is not PEM")]
    CaBundlePem {
        path: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("cannot build the HTTP client")]
    Build(#[source] reqwest::Error),
}

impl ResolveError {
    /// The image the error is about, as written in the job.
    pub fn image(&self) -> &str {
        match self {
            ResolveError::Reference { image, .. }
            | ResolveError::NotAllowed { image, .. }
            | ResolveError::Egress { image, .. }
            | ResolveError::Transport { image, .. }
            | ResolveError::Status { image, .. }
            | ResolveError::Unauthorized { image, .. }
            | ResolveError::BadAnswer { image, .. }
            | ResolveError::Timeout { image, .. }
            | ResolveError::Client { image, .. } => image,
        }
    }

    /// Whether the outcome may be remembered in the negative cache. A malformed reference
    /// costs nothing to find again; everything from a registry is worth remembering briefly.
    pub fn cacheable(&self) -> bool {
        !matches!(
            self,
            ResolveError::Reference { .. } | ResolveError::Client { .. }
        )
    }

    /// A fixed label per variant, for metrics (never the message: it carries request data).
    pub fn metric_label(&self) -> &'static str {
        match self {
            ResolveError::Reference { .. } => "bad_reference",
            // A host outside the allowlists, reached through the registry: the same remedy.
            ResolveError::NotAllowed { .. } | ResolveError::Egress { .. } => "not_allowed",
            ResolveError::Transport { .. } => "unreachable",
            ResolveError::Status { .. } => "registry_error",
            ResolveError::Unauthorized { .. } => "unauthorized",
            ResolveError::BadAnswer { .. } => "bad_answer",
            ResolveError::Timeout { .. } => "timeout",
            ResolveError::Client { .. } => "client",
        }
    }

    /// Every value [`ResolveError::metric_label`] can return, and `pinned` for a success.
    pub const OUTCOME_LABELS: [&'static str; 9] = [
        "pinned",
        "bad_reference",
        "not_allowed",
        "unreachable",
        "registry_error",
        "unauthorized",
        "bad_answer",
        "timeout",
        "client",
    ];

    /// The full message with its causes, one line.
    pub fn message(&self) -> String {
        crate::error_chain(self)
    }
}
