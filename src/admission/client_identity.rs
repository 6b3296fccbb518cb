//! The identity a client certificate must carry besides its CA's signature
//! (`--client-ca-subject`, `--client-san`).
//!
//! Entry points: [`RequiredIdentity::new`], then [`RequiredIdentity::check`] on the leaf a
//! connection presented (after the handshake verified it against `--client-ca`).
//!
//! Why: a CA often signs more than the apiserver's certificate (kubeadm's front-proxy or
//! etcd CA, a company CA). With `--client-ca` alone any certificate it signed is taken for
//! the apiserver; with a required identity only the one named is, and another of the same
//! CA is refused with 403 before its body is read (server.rs).
//!
//! # Guarantees
//! - A certificate passes when its subject's CommonName is one of the subjects, or one of
//!   its DNS or URI subjectAltNames is one of the SANs (exact, case-sensitive match: no
//!   wildcards, as a wildcard here would widen what the flag pins).
//! - A leaf that does not parse carries no identity and is refused.

#![deny(
    clippy::unwrap_used,
    reason = "a client's certificate must never panic the server"
)]
#![deny(
    clippy::indexing_slicing,
    reason = "a client's certificate decides lengths"
)]

use std::fmt;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The CommonNames and SANs of which a client certificate must carry one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredIdentity {
    subjects: Vec<String>,
    sans: Vec<String>,
}

/// What a certificate carries, for the refusal and the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Presented {
    common_names: Vec<String>,
    sans: Vec<String>,
}

impl RequiredIdentity {
    /// `None` when both lists are empty: any certificate the CA signed is the apiserver's.
    pub fn new(subjects: Vec<String>, sans: Vec<String>) -> Option<RequiredIdentity> {
        let keep = |names: Vec<String>| -> Vec<String> {
            names
                .into_iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect()
        };
        let (subjects, sans) = (keep(subjects), keep(sans));
        (!subjects.is_empty() || !sans.is_empty()).then_some(RequiredIdentity { subjects, sans })
    }

    /// `Ok` when the DER leaf `der` carries one of the names; else what it carries.
    pub fn check(&self, der: &[u8]) -> Result<(), Presented> {
        let presented = Presented::of(der);
        let cn = presented
            .common_names
            .iter()
            .any(|n| self.subjects.contains(n));
        let san = presented.sans.iter().any(|n| self.sans.contains(n));
        if cn || san {
            Ok(())
        } else {
            Err(presented)
        }
    }
}

impl fmt::Display for RequiredIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.subjects.is_empty() {
            parts.push(format!("CN {}", self.subjects.join(" or ")));
        }
        if !self.sans.is_empty() {
            parts.push(format!("SAN {}", self.sans.join(" or ")));
        }
        f.write_str(&parts.join(", or "))
    }
}

impl Presented {
    /// The CommonNames and DNS/URI SANs of a DER certificate; none when it does not parse.
    fn of(der: &[u8]) -> Presented {
        let Ok((_, cert)) = X509Certificate::from_der(der) else {
            return Presented::default();
        };
        let common_names = cert
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok())
            .map(str::to_string)
            .collect();
        let sans = match cert.subject_alternative_name() {
            Ok(Some(ext)) => ext
                .value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(n) | GeneralName::URI(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        Presented { common_names, sans }
    }
}

impl fmt::Display for Presented {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |names: &[String]| match names {
            [] => "none".to_string(),
            names => names.join(", "),
        };
        write!(
            f,
            "CN {}, SANs {}",
            list(&self.common_names),
            list(&self.sans)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::certs::Ca;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;

    fn leaf(name: &str) -> Vec<u8> {
        let ca = Ca::generate(1).expect("CA");
        let pem = ca.issue_client(name, 1).expect("client").cert_pem;
        CertificateDer::from_pem_slice(pem.as_bytes())
            .expect("der")
            .to_vec()
    }

    #[test]
    fn no_names_require_nothing() {
        assert_eq!(RequiredIdentity::new(vec![], vec![" ".into()]), None);
    }

    #[test]
    fn a_certificate_passes_on_its_common_name_or_a_san_and_fails_on_neither() {
        // issue_client puts the name in the CN and a DNS SAN.
        let apiserver = leaf("kube-apiserver");
        let by_cn = RequiredIdentity::new(vec!["kube-apiserver".into()], vec![]).expect("some");
        assert_eq!(by_cn.check(&apiserver), Ok(()));
        let by_san = RequiredIdentity::new(vec![], vec!["kube-apiserver".into()]).expect("some");
        assert_eq!(by_san.check(&apiserver), Ok(()));
        let other = by_cn.check(&leaf("tenant")).expect_err("another name");
        assert_eq!(other.to_string(), "CN tenant, SANs tenant");
        assert_eq!(by_cn.check(b"not a certificate"), Err(Presented::default()));
        assert_eq!(by_cn.to_string(), "CN kube-apiserver");
    }
}
