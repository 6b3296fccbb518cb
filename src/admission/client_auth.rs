//! Optional mutual TLS: client certificates signed by `--client-ca`, and its hot reload.
//!
//! Entry points: [`ClientCa::from_file`] (and [`ClientCa::requiring`] an identity:
//! [`super::client_identity`]), [`ClientCa::verifier`] for the listener's rustls
//! configuration ([`super::tls::ServingCert::server_config`]), [`watch`] for reloading, and
//! [`ClientCa::peer`], what the accept loop records of each connection for the routes.
//!
//! Why: without it any pod that reaches the Service can post AdmissionReviews, and with image
//! pinning on, make the webhook read pull secrets of the namespace the review names. The
//! apiserver presents a client certificate to webhooks when its AdmissionConfiguration gives
//! it one (`kubeConfigFile`, docs/src/serve.md, "Mutual TLS").
//!
//! Why the handshake still accepts clients without a certificate: the kubelet's HTTPS probes
//! (`/healthz`, `/readyz`) present none, and a probe that failed at the TLS layer would take
//! every replica out of the Service, which with `failurePolicy: Fail` stops all admissions. So
//! rustls verifies a certificate when one is presented (a certificate of another CA fails the
//! handshake), and the routes decide: `/mutate`, `/validate` and `/metrics` answer only
//! connections whose certificate was verified and carries the required identity, if one is
//! set (403 otherwise, before the body is read: server.rs); the probes answer anyone, and
//! say no more than whether the server is ready.
//!
//! # Guarantees
//! - A new CA file is used for new handshakes only once it parses and holds at least one
//!   certificate; otherwise it is refused (error log, `gangplank_tls_reloads_total{result=
//!   "failure"}`) and the previous CA keeps verifying. Established connections keep the
//!   identity they were verified with.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use tracing::{error, info};

use super::client_identity::RequiredIdentity;
use super::metrics::Metrics;
use super::tls::provider;

/// Why a client CA file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClientCaError {
    #[error("cannot read the client CA {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the client CA {path} is not valid PEM")]
    Pem {
        path: PathBuf,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    #[error("the client CA {path} holds no usable CA certificate; give the PEM of the CA that signs the apiserver's client certificate")]
    NoCertificate {
        path: PathBuf,
        #[source]
        source: Option<rustls::server::VerifierBuilderError>,
    },
}

/// What the accept loop knows of a connection's client, for the routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// No certificate (or no `--client-ca`): not the apiserver, as far as gangplank knows.
    Anonymous,
    /// A certificate `--client-ca` signed, carrying the required identity if one is set.
    Authenticated,
    /// A certificate `--client-ca` signed, without the required identity: what it carries.
    OtherIdentity(Arc<str>),
}

/// The CA client certificates must chain to (swapped whole on reload), and the identity
/// they must carry ([`super::client_identity`]), which does not change.
#[derive(Debug)]
pub struct ClientCa {
    path: PathBuf,
    current: ArcSwap<Arc<dyn ClientCertVerifier>>,
    /// Content of the file last tried, good or bad.
    seen: Mutex<Vec<u8>>,
    identity: Option<RequiredIdentity>,
}

impl ClientCa {
    /// Loads the CA from `path`; [`watch`] reloads it when the file changes.
    pub fn from_file(path: &Path) -> Result<ClientCa, ClientCaError> {
        let pem = read(path)?;
        let verifier = verifier_from(path, &pem)?;
        Ok(ClientCa {
            path: path.to_path_buf(),
            current: ArcSwap::from_pointee(verifier),
            seen: Mutex::new(pem),
            identity: None,
        })
    }

    /// Requires `identity` of every client certificate besides the CA's signature.
    pub fn requiring(self, identity: Option<RequiredIdentity>) -> ClientCa {
        ClientCa { identity, ..self }
    }

    /// The identity required, if any.
    pub fn identity(&self) -> Option<&RequiredIdentity> {
        self.identity.as_ref()
    }

    /// Who a connection is, from the certificates its handshake verified (a certificate of
    /// another CA fails the handshake, so having one is being signed by this CA).
    pub fn peer(&self, certificates: Option<&[CertificateDer<'_>]>) -> Peer {
        let Some(leaf) = certificates.and_then(<[_]>::first) else {
            return Peer::Anonymous;
        };
        match self.identity.as_ref().map(|id| id.check(leaf)) {
            None | Some(Ok(())) => Peer::Authenticated,
            Some(Err(presented)) => Peer::OtherIdentity(presented.to_string().into()),
        }
    }

    /// The verifier for rustls: verifies with whatever CA is current.
    pub fn verifier(self: &Arc<Self>) -> Arc<dyn ClientCertVerifier> {
        Arc::new(Current(self.clone()))
    }

    /// Re-reads the file and swaps in the CA it holds if it changed and is good. Returns
    /// `Some(true)` on a swap, `Some(false)` on a refusal, `None` if nothing changed.
    /// Blocking: reads a file.
    pub fn reload_if_changed(&self, metrics: &Metrics) -> Option<bool> {
        let pem = match read(&self.path) {
            Ok(pem) => pem,
            // Briefly missing mid-update (a Secret volume's symlink swap): look again later.
            Err(_) => return None,
        };
        let mut seen = self.seen.lock().ok()?;
        if *seen == pem {
            return None;
        }
        let outcome = verifier_from(&self.path, &pem);
        *seen = pem;
        match outcome {
            Ok(verifier) => {
                self.current.store(Arc::new(verifier));
                metrics.tls_reload(true);
                info!(client_ca = %self.path.display(), "client CA reloaded; new handshakes use it");
                Some(true)
            }
            Err(e) => {
                metrics.tls_reload(false);
                error!(error = %super::error_chain(&e), "new client CA refused; the previous one keeps verifying");
                Some(false)
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ClientCaError> {
    std::fs::read(path).map_err(|source| ClientCaError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// A verifier of certificates chaining to the CAs in `pem`; clients without a certificate
/// pass the handshake (see the module doc).
fn verifier_from(path: &Path, pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, ClientCaError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ClientCaError::Pem {
            path: path.to_path_buf(),
            source,
        })?;
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    let no_ca = |source| ClientCaError::NoCertificate {
        path: path.to_path_buf(),
        source,
    };
    if added == 0 {
        return Err(no_ca(None));
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| no_ca(Some(e)))
}

/// Delegates to the current CA's verifier, so that a reload reaches new handshakes.
#[derive(Debug)]
struct Current(Arc<ClientCa>);

impl ClientCertVerifier for Current {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    /// None: the hints would have to outlive a reload. Clients send their certificate
    /// anyway (Go's TLS client sends its only one).
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.0
            .current
            .load()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0
            .current
            .load()
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0
            .current
            .load()
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.current.load().supported_verify_schemes()
    }
}

/// Polls the CA file every `interval` until `shutdown` resolves.
pub async fn watch(
    ca: Arc<ClientCa>,
    metrics: Arc<Metrics>,
    interval: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    super::poll::every(interval, shutdown, move || {
        ca.reload_if_changed(&metrics);
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::certs::Ca;

    #[test]
    fn a_file_without_a_ca_is_refused_with_what_to_give() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, "").expect("write");
        let err = ClientCa::from_file(&path).expect_err("empty file");
        assert!(
            super::super::error_chain(&err).contains("holds no usable CA certificate"),
            "{err}"
        );
        let err = ClientCa::from_file(&dir.path().join("missing")).expect_err("no file");
        assert!(matches!(err, ClientCaError::Read { .. }), "{err:?}");
    }

    #[test]
    fn a_changed_ca_is_swapped_in_and_a_broken_one_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ca.crt");
        let (first, second) = (Ca::generate(1).expect("CA"), Ca::generate(1).expect("CA"));
        std::fs::write(&path, first.pem()).expect("write");
        let ca = ClientCa::from_file(&path).expect("loads");
        let metrics = Metrics::new();
        assert_eq!(ca.reload_if_changed(&metrics), None);
        std::fs::write(&path, "not pem").expect("write");
        assert_eq!(ca.reload_if_changed(&metrics), Some(false));
        assert_eq!(ca.reload_if_changed(&metrics), None, "not retried");
        std::fs::write(&path, second.pem()).expect("write");
        assert_eq!(ca.reload_if_changed(&metrics), Some(true));
    }
}
