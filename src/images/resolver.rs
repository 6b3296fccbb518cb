//! The resolver the webhooks and `gangplank check --resolve` share: every image of a request
//! looked up at once, within one time budget, through the cache.
//!
//! Entry point: [`Resolver::resolve_all`].
//!
//! # Guarantees
//! - [`Resolver::resolve_all`] returns within [`Settings::budget`] (plus scheduling noise),
//!   whatever the registries do: each image not resolved by then is a
//!   [`ResolveError::Timeout`].
//! - Every image gets an outcome: a digest or an error naming the image.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::auth::TokenCache;
use super::cache::{Cache, Outcome, Ttls};
use super::credentials::Keychain;
use super::egress::Egress;
use super::error::{ClientError, ResolveError};
use super::reference::Reference;
use super::registry::Lookup;
use super::settings::Settings;

/// Shared by every request; cheap to call concurrently.
#[derive(Debug)]
pub struct Resolver {
    cache: Arc<Cache>,
    tokens: Arc<TokenCache>,
    /// The HTTP client for the current CA bundle and budget, rebuilt when they change.
    client: Mutex<Option<BuiltClient>>,
}

#[derive(Debug)]
struct BuiltClient {
    ca_bundle: Option<PathBuf>,
    budget: Duration,
    client: Result<reqwest::Client, Arc<ClientError>>,
}

/// One image's outcome.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// As written in the job.
    pub image: String,
    pub outcome: Outcome,
}

impl Default for Resolver {
    fn default() -> Resolver {
        Resolver::new()
    }
}

impl Resolver {
    pub fn new() -> Resolver {
        Resolver {
            cache: Arc::new(Cache::new(Settings::default().cache_size)),
            tokens: Arc::new(TokenCache::default()),
            client: Mutex::new(None),
        }
    }

    /// What the caches hold: digests (and cached failures), registry tokens, token bytes.
    pub fn cache_sizes(&self) -> [usize; 3] {
        let (tokens, bytes) = self.tokens.usage();
        [self.cache.entries(), tokens, bytes]
    }

    /// Looks up every image in `images` (written without a digest) concurrently, until
    /// `deadline` (at most `settings.budget` after the request began).
    pub async fn resolve_all(
        &self,
        settings: &Settings,
        images: &[String],
        keychain: &Keychain,
        deadline: tokio::time::Instant,
    ) -> Vec<Resolved> {
        self.cache.resize(settings.cache_size);
        let lookups = images.iter().map(|image| async move {
            let lookup = self.resolve_one(settings, image, keychain);
            let outcome = match tokio::time::timeout_at(deadline, lookup).await {
                Ok(outcome) => outcome,
                Err(_) => Err(Arc::new(timeout(image, settings.budget))),
            };
            Resolved {
                image: image.clone(),
                outcome,
            }
        });
        futures::future::join_all(lookups).await
    }

    async fn resolve_one(&self, settings: &Settings, image: &str, keychain: &Keychain) -> Outcome {
        let reference = Reference::parse(image).map_err(|source| {
            Arc::new(ResolveError::Reference {
                image: image.to_string(),
                source,
            })
        })?;
        if !settings.allows(&reference.registry) {
            return Err(Arc::new(ResolveError::NotAllowed {
                image: image.to_string(),
                registry: reference.registry,
            }));
        }
        let credential = keychain.lookup(&reference.registry).cloned();
        let who = credential
            .as_ref()
            .map_or_else(|| "anonymous".to_string(), |c| c.fingerprint());
        let key = format!("{reference}\0{who}");
        if let Some(outcome) = self.cache.get(&key) {
            return outcome;
        }
        let http = self.client(settings).map_err(|source| {
            Arc::new(ResolveError::Client {
                image: image.to_string(),
                source,
            })
        })?;
        let egress = Egress::for_image(settings, &reference).map_err(|refusal| {
            Arc::new(ResolveError::Egress {
                image: image.to_string(),
                registry: reference.registry.clone(),
                refusal,
            })
        })?;
        let tokens = Arc::clone(&self.tokens);
        let budget = settings.budget;
        let owned_image = image.to_string();
        let lookup = async move {
            let lookup = Lookup {
                http: &http,
                tokens: &tokens,
                egress: &egress,
                credential: credential.as_ref(),
                image: &owned_image,
                reference: &reference,
            };
            // The task outlives the request that started it (see cache.rs), never the budget.
            match tokio::time::timeout(budget, lookup.digest()).await {
                Ok(result) => result.map_err(Arc::new),
                Err(_) => Err(Arc::new(timeout(&owned_image, budget))),
            }
        };
        let ttls = Ttls {
            positive: settings.cache_ttl,
            negative: settings.negative_cache_ttl,
        };
        self.cache
            .resolve(&key, ttls, lookup, || timeout(image, budget))
            .await
    }

    /// The client for the settings' CA bundle and budget.
    fn client(&self, settings: &Settings) -> Result<reqwest::Client, Arc<ClientError>> {
        let Ok(mut slot) = self.client.lock() else {
            return build_client(settings).map_err(Arc::new);
        };
        match slot.as_ref() {
            Some(built)
                if built.ca_bundle == settings.ca_bundle && built.budget == settings.budget =>
            {
                built.client.clone()
            }
            _ => {
                let client = build_client(settings).map_err(Arc::new);
                *slot = Some(BuiltClient {
                    ca_bundle: settings.ca_bundle.clone(),
                    budget: settings.budget,
                    client: client.clone(),
                });
                client
            }
        }
    }
}

fn timeout(image: &str, budget: Duration) -> ResolveError {
    let registry = Reference::parse(image)
        .map(|r| r.registry)
        .unwrap_or_default();
    ResolveError::Timeout {
        image: image.to_string(),
        registry,
        budget,
    }
}

/// rustls with the system's roots plus the CA bundle; no proxy from the environment (the
/// webhook talks to registries directly), bounded time. Redirects are not followed by the
/// client: [`Lookup`] follows them, each checked against the allowlists first.
fn build_client(settings: &Settings) -> Result<reqwest::Client, ClientError> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(settings.budget)
        .timeout(settings.budget)
        .user_agent(concat!("gangplank/", env!("CARGO_PKG_VERSION")))
        .no_proxy();
    if let Some(path) = &settings.ca_bundle {
        let shown = path.display().to_string();
        let pem = std::fs::read(path).map_err(|source| ClientError::CaBundle {
            path: shown.clone(),
            source,
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
            ClientError::CaBundlePem {
                path: shown.clone(),
                source,
            }
        })?;
        if certs.is_empty() {
            return Err(ClientError::CaBundleEmpty { path: shown });
        }
        builder = builder.tls_certs_merge(certs);
    }
    builder.build().map_err(ClientError::Build)
}
