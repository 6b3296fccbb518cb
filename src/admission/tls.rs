//! The serving certificate and its hot reload.
//!
//! Entry points: [`ServingCert::from_files`] / [`ServingCert::from_pem`], then
//! [`ServingCert::server_config`] for the listener and [`watch`] for reloading.
//!
//! rustls asks [`ServingCert`] for a certificate on every handshake; it answers with
//! whatever pair is current in an `ArcSwap`. Reloading swaps a new pair in, so new handshakes
//! use it while established connections (and requests in flight on them) keep theirs.
//!
//! # Guarantees
//! - A new pair is used only once both files parse and the key matches the certificate;
//!   otherwise it is refused (error log, `gangplank_tls_reloads_total{result="failure"}`,
//!   `/readyz` detail) and the previous pair keeps serving.
//! - A refused pair is not retried until a file changes again.
//!
//! # Assumptions
//! Files are compared by content, not by modification time or inotify events: a Secret
//! volume replaces them through an atomic `..data` symlink swap, which leaves the file
//! paths (symlinks) untouched. Polling every second costs two small reads.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tracing::{error, info};

use super::metrics::Metrics;

/// Why a certificate/key pair cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} is not valid PEM")]
    Pem {
        what: &'static str,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    #[error("the certificate file holds no certificate")]
    NoCertificate,
    #[error("the key does not fit the certificate, or cannot sign")]
    Pair(#[source] rustls::Error),
    #[error("cannot build the TLS configuration")]
    Config(#[source] rustls::Error),
}

/// Paths of the PEM certificate chain (leaf first) and private key.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The pair served on new handshakes, and how its last reload went.
#[derive(Debug)]
pub struct ServingCert {
    current: ArcSwap<CertifiedKey>,
    files: Option<CertFiles>,
    state: Mutex<ReloadState>,
}

#[derive(Debug, Default)]
struct ReloadState {
    /// Content hash of the files last tried, good or bad.
    seen: u64,
    /// Why the newest content was refused, while the older pair serves.
    refused: Option<String>,
}

/// What `/readyz` reports about the certificate.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TlsStatus {
    /// `files` (reloaded on change) or `ephemeral` (generated at start).
    pub source: &'static str,
    /// Why the newest files were refused, while the previous pair keeps serving.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The one crypto provider gangplank links (aws-lc-rs). Configurations name it explicitly,
/// so the library does not depend on `main` having installed a process default.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// Parses a PEM chain and key into a pair rustls can serve, checking that they match.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            what: "the certificate",
            source,
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| TlsError::Pem {
        what: "the private key",
        source,
    })?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(TlsError::Pair)
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn content_hash(cert: &[u8], key: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    cert.hash(&mut h);
    key.hash(&mut h);
    h.finish()
}

impl ServingCert {
    /// A fixed pair (the ephemeral certificate of a local run); never reloaded.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<ServingCert, TlsError> {
        Ok(ServingCert {
            current: ArcSwap::from_pointee(certified_key(cert_pem, key_pem)?),
            files: None,
            state: Mutex::new(ReloadState::default()),
        })
    }

    /// Loads the pair from files; [`watch`] reloads it when they change.
    pub fn from_files(files: CertFiles) -> Result<ServingCert, TlsError> {
        let cert = read(&files.cert)?;
        let key = read(&files.key)?;
        let pair = certified_key(&cert, &key)?;
        Ok(ServingCert {
            current: ArcSwap::from_pointee(pair),
            files: Some(files),
            state: Mutex::new(ReloadState {
                seen: content_hash(&cert, &key),
                refused: None,
            }),
        })
    }

    /// A rustls configuration serving whatever pair is current: TLS 1.2 and 1.3, ALPN h2 and
    /// http/1.1. Client certificates are verified by `clients` when given (`--client-ca`,
    /// [`super::client_auth`]); without it no client is authenticated, as before.
    pub fn server_config(
        self: &Arc<Self>,
        clients: Option<Arc<dyn ClientCertVerifier>>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(TlsError::Config)?;
        let builder = match clients {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// The leaf certificate served on new handshakes.
    pub fn leaf(&self) -> Option<CertificateDer<'static>> {
        self.current.load().cert.first().cloned()
    }

    pub fn status(&self) -> TlsStatus {
        let refused = self
            .state
            .lock()
            .map(|s| s.refused.clone())
            .unwrap_or_default();
        TlsStatus {
            source: if self.files.is_some() {
                "files"
            } else {
                "ephemeral"
            },
            refused,
        }
    }

    /// Re-reads the files and swaps in the pair they hold if it changed and is good.
    /// Returns `Some(true)` on a swap, `Some(false)` on a refusal, `None` if nothing changed
    /// (or the certificate is not file-backed). Blocking: reads files.
    pub fn reload_if_changed(&self, metrics: &Metrics) -> Option<bool> {
        let files = self.files.as_ref()?;
        // Read the certificate again after the key: if it changed in between (a swap
        // between the two reads), look again next time rather than refuse a torn pair.
        let read_both = read(&files.cert)
            .and_then(|c| Ok((c, read(&files.key)?)))
            .and_then(|(c, k)| Ok((read(&files.cert)? == c).then_some((c, k))));
        let (cert, key) = match read_both {
            Ok(None) => return None,
            Ok(Some(pair)) => pair,
            Err(e) => {
                // A file briefly missing mid-update: keep serving, look again next time.
                let message = super::error_chain(&e);
                let mut state = self.state.lock().ok()?;
                // Whatever content comes back is looked at again, even the old pair.
                state.seen = 0;
                if state.refused.as_deref() != Some(message.as_str()) {
                    error!(error = %message, "serving certificate unreadable; the previous one keeps serving");
                    metrics.tls_reload(false);
                    state.refused = Some(message);
                    return Some(false);
                }
                return None;
            }
        };
        let hash = content_hash(&cert, &key);
        let mut state = self.state.lock().ok()?;
        if hash == state.seen {
            return None;
        }
        state.seen = hash;
        match certified_key(&cert, &key) {
            Ok(pair) => {
                self.current.store(Arc::new(pair));
                state.refused = None;
                metrics.tls_reload(true);
                info!(cert = %files.cert.display(), key = %files.key.display(), "serving certificate reloaded; new handshakes use it");
                Some(true)
            }
            Err(e) => {
                let message = super::error_chain(&e);
                error!(cert = %files.cert.display(), key = %files.key.display(), error = %message,
                    "new serving certificate refused; the previous one keeps serving");
                metrics.tls_reload(false);
                state.refused = Some(message);
                Some(false)
            }
        }
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// Polls the certificate files every `interval` until `shutdown` resolves.
pub async fn watch(
    cert: Arc<ServingCert>,
    metrics: Arc<Metrics>,
    interval: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    if cert.files.is_none() {
        return;
    }
    super::poll::every(interval, shutdown, move || {
        cert.reload_if_changed(&metrics);
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::certs::Bundle;

    fn bundle() -> Bundle {
        Bundle::generate(&["localhost".to_string()], 1).expect("generates")
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let (a, b) = (bundle(), bundle());
        let err = certified_key(a.cert_pem.as_bytes(), b.key_pem.as_bytes())
            .expect_err("mismatched pair");
        assert!(matches!(err, TlsError::Pair(_)), "{err:?}");
    }

    #[test]
    fn garbage_is_refused_with_what_was_wrong() {
        let a = bundle();
        let err = certified_key(b"not pem", a.key_pem.as_bytes()).expect_err("no cert");
        assert!(matches!(err, TlsError::NoCertificate), "{err:?}");
        let err = certified_key(a.cert_pem.as_bytes(), b"").expect_err("no key");
        assert!(matches!(err, TlsError::Pem { .. }), "{err:?}");
    }

    #[test]
    fn reload_swaps_a_good_pair_and_keeps_the_old_one_on_a_bad_pair() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = CertFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let (first, second) = (bundle(), bundle());
        first.write_to(dir.path()).expect("writes");
        let serving = ServingCert::from_files(files).expect("loads");
        let metrics = Metrics::new();
        assert_eq!(serving.reload_if_changed(&metrics), None);

        std::fs::write(dir.path().join("tls.crt"), &second.cert_pem).expect("write");
        assert_eq!(serving.reload_if_changed(&metrics), Some(false));
        assert!(serving.status().refused.is_some());
        let first_leaf = certified_key(first.cert_pem.as_bytes(), first.key_pem.as_bytes())
            .expect("pair")
            .cert[0]
            .clone();
        assert_eq!(serving.leaf(), Some(first_leaf));
        // The same bad content is not retried.
        assert_eq!(serving.reload_if_changed(&metrics), None);

        std::fs::write(dir.path().join("tls.key"), &second.key_pem).expect("write");
        assert_eq!(serving.reload_if_changed(&metrics), Some(true));
        assert!(serving.status().refused.is_none());
        assert_eq!(metrics.tls_reloads_with(true), 1);
        assert_eq!(metrics.tls_reloads_with(false), 1);
    }
}
