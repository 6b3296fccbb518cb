//! Image digest pinning: tag → digest over the OCI distribution API, so that every pod of a
//! job runs the same bytes.
//!
//! - [`reference`]: image references, normalised as container runtimes read them.
//! - [`registry`]: one manifest lookup (HEAD, GET + sha256, auth challenges).
//! - [`egress`]: the hosts a lookup may reach (allowlists, redirects, token realms).
//! - [`auth`]: `WWW-Authenticate` challenges and the Bearer token cache.
//! - [`credentials`]: `config.json` / pull-secret documents as a [`Keychain`].
//! - [`pull_secrets`]: the job's `imagePullSecrets` and ServiceAccounts, from the cluster.
//! - [`cache`]: LRU with TTL, negative entries and single flight.
//! - [`resolver`]: every image of a request at once, within the budget ([`Resolver`]).
//! - [`pin`]: what the webhooks and `check --resolve` call ([`Pinner::pin`]).
//! - [`settings`]: `imageResolution` in params.yaml.
//! - [`error`]: why a digest was not found, per image.

// Request path: registries and manifests are outside data; a panic would drop a request.
#![deny(
    clippy::unwrap_used,
    reason = "registry answers must never panic the webhook"
)]
#![deny(
    clippy::expect_used,
    reason = "registry answers must never panic the webhook"
)]
#![deny(clippy::indexing_slicing, reason = "answers decide lengths; use get()")]

pub mod auth;
pub mod cache;
pub mod credentials;
pub mod digest;
pub mod egress;
pub mod error;
pub mod pin;
pub mod pull_secrets;
pub mod reference;
pub mod registry;
pub mod resolver;
pub mod settings;

pub use credentials::{Credential, Keychain};
pub use error::ResolveError;
pub use pin::{Pinner, Pinning};
pub use reference::Reference;
pub use resolver::Resolver;
pub use settings::{FailureMode, Settings};
