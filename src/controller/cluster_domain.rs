//! The cluster's DNS domain (the kubelet's `clusterDomain`, `cluster.local` unless the
//! platform chose another), parsed once at start-up.
//!
//! Entry point: [`ClusterDomain::parse`]. The controller needs it to write names that resolve
//! whatever a pod's search list holds: `<service>.<namespace>.svc.<domain>.`, with the
//! trailing dot that tells every resolver the name is complete ([`ClusterDomain::fqdn`]).
//! busybox's `nslookup` (1.28 and later) asks a short name under every search domain and
//! fails when any of them answers NXDOMAIN, so a short name never "resolves" for it.

use std::fmt;
use std::str::FromStr;

/// A DNS domain of one or more labels, lower case, without a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDomain(String);

/// RFC 1035: a label is at most 63 octets, a name at most 253 in text form.
const MAX_LABEL: usize = 63;
const MAX_NAME: usize = 253;

impl ClusterDomain {
    /// `domain`, one trailing dot allowed, checked as the kubelet checks `clusterDomain`
    /// (RFC 1123 labels); upper case is folded, since DNS names compare without case.
    pub fn parse(domain: &str) -> Result<ClusterDomain, String> {
        let trimmed = domain.trim();
        let name = trimmed.strip_suffix('.').unwrap_or(trimmed);
        let fix = "a cluster domain is DNS labels joined by dots, as the kubelet's \
                   clusterDomain (default cluster.local)";
        if name.is_empty() {
            return Err(format!("{domain:?} is empty: {fix}"));
        }
        if name.len() > MAX_NAME {
            return Err(format!(
                "{domain:?} is {} characters long, more than DNS allows ({MAX_NAME}): {fix}",
                name.len()
            ));
        }
        for (i, label) in name.split('.').enumerate() {
            label_problem(label).map_or(Ok(()), |why| {
                Err(format!("{domain:?}: label {} {why}: {fix}", i + 1))
            })?;
        }
        Ok(ClusterDomain(name.to_ascii_lowercase()))
    }

    /// `<host>.<namespace>.svc.<domain>.`: the complete name of a Service (or of a pod under a
    /// headless Service, when `host` is `<pod>.<service>`), which no search list changes.
    pub fn fqdn(&self, host: &str, namespace: &str) -> String {
        format!("{host}.{namespace}.svc.{}.", self.0)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why `label` is not an RFC 1123 label, or `None`.
fn label_problem(label: &str) -> Option<String> {
    if label.is_empty() {
        return Some("is empty (two dots in a row, or a leading dot)".to_string());
    }
    if label.len() > MAX_LABEL {
        return Some(format!(
            "{label:?} is {} characters long, more than {MAX_LABEL}",
            label.len()
        ));
    }
    if let Some(c) = label
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
    {
        return Some(format!(
            "{label:?} holds {c:?}; only letters, digits and '-' are allowed"
        ));
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Some(format!("{label:?} starts or ends with '-'"));
    }
    None
}

impl Default for ClusterDomain {
    fn default() -> Self {
        ClusterDomain("cluster.local".to_string())
    }
}

impl FromStr for ClusterDomain {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ClusterDomain::parse(s)
    }
}

impl fmt::Display for ClusterDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_with_or_without_its_trailing_dot_is_the_same_domain() {
        for text in ["cluster.local", "cluster.local.", " Cluster.LOCAL "] {
            assert_eq!(ClusterDomain::parse(text), Ok(ClusterDomain::default()));
        }
        let corp = ClusterDomain::parse("k8s.example-corp.internal").unwrap_or_default();
        assert_eq!(corp.as_str(), "k8s.example-corp.internal");
    }

    #[test]
    fn the_fqdn_ends_with_a_dot_so_no_search_list_applies() {
        let domain = ClusterDomain::default();
        assert_eq!(
            domain.fqdn("rdv-master-0", "team-run"),
            "rdv-master-0.team-run.svc.cluster.local."
        );
    }

    #[test]
    fn domains_that_do_not_parse_say_which_label_is_wrong() {
        let long_label = format!("{}.local", "a".repeat(64));
        let long_name = ["abc"; 70].join(".");
        let cases = [
            ("", "is empty"),
            (".", "is empty"),
            ("cluster..local", "label 2 is empty"),
            (".cluster.local", "label 1 is empty"),
            ("cluster_local", "holds '_'"),
            ("cluster.local/", "holds '/'"),
            ("-cluster.local", "starts or ends with '-'"),
            ("cluster.local-", "starts or ends with '-'"),
            (long_label.as_str(), "64 characters long, more than 63"),
            (long_name.as_str(), "more than DNS allows (253)"),
        ];
        for (text, expected) in cases {
            let err = ClusterDomain::parse(text).err().unwrap_or_default();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(
                err.contains("clusterDomain"),
                "{text:?}: says what is expected: {err}"
            );
        }
    }
}
