//! Image references as container runtimes read them: `ubuntu` is
//! `docker.io/library/ubuntu:latest`, pulled from `registry-1.docker.io`.
//!
//! Entry point: [`Reference::parse`]. The grammar is distribution's `reference` package
//! (the one containerd and the kubelet use): an optional registry (a first component with a
//! `.` or a `:`, or `localhost`), lowercase path components separated by `/`, then
//! `:tag` and/or `@algorithm:hex`. Names are at most 255 characters, tags 128.

use std::fmt;

/// The registry of references that name none.
pub const DOCKER_HUB: &str = "docker.io";
/// Where Docker Hub's registry API answers (`docker.io` itself serves a web site).
pub const DOCKER_HUB_API: &str = "registry-1.docker.io";
/// Longest repository name, registry included, as distribution limits it: the limit applies
/// to the normalised name (`docker.io/library/ubuntu`), not to the name as written.
const MAX_NAME: usize = 255;
const MAX_TAG: usize = 128;

/// A parsed, normalised image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// `docker.io`, `ghcr.io`, `127.0.0.1:5000`: as written, Docker Hub's aliases folded.
    pub registry: String,
    /// `library/ubuntu`, `team/ml/train`.
    pub repository: String,
    /// The tag; `latest` when neither a tag nor a digest was written.
    pub tag: Option<String>,
    /// `sha256:<64 hex>` when the reference is pinned.
    pub digest: Option<String>,
}

/// Why a string is not an image reference; says which part is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("the reference is empty")]
    Empty,
    #[error("the name is {len} characters long with its registry; at most {MAX_NAME} are allowed")]
    NameTooLong { len: usize },
    #[error("path component {component:?} is not lowercase letters, digits and separators (. _ __ -) between them")]
    BadComponent { component: String },
    #[error("registry {registry:?} is not a host name or IP address with an optional port")]
    BadRegistry { registry: String },
    #[error("tag {tag:?} must be 1 to 128 letters, digits, _ . - and not start with . or -")]
    BadTag { tag: String },
    #[error("digest {digest:?} must be sha256: followed by 64 lowercase hex digits")]
    BadDigest { digest: String },
}

impl Reference {
    /// Parses and normalises `image` (see the module doc).
    pub fn parse(image: &str) -> Result<Reference, ReferenceError> {
        if image.is_empty() {
            return Err(ReferenceError::Empty);
        }
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => (rest, Some(parse_digest(digest)?)),
            None => (image, None),
        };
        // A tag follows the last ':' after the last '/'; a ':' before it is a port.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest.get(last_slash..).and_then(|t| t.rfind(':')) {
            Some(i) => {
                let colon = last_slash + i;
                let name = rest.get(..colon).unwrap_or_default();
                let tag = rest.get(colon + 1..).unwrap_or_default();
                (name, Some(parse_tag(tag)?))
            }
            None => (rest, None),
        };
        if name.len() > MAX_NAME {
            return Err(ReferenceError::NameTooLong { len: name.len() });
        }
        let (registry, repository) = split_registry(name)?;
        // Distribution checks the normalised name: a name under the limit as written can
        // pass it once `docker.io/` (and `library/`) are added. Found by fuzzing
        // (fuzz/fuzz_targets/oci_reference.rs): the full form did not parse back.
        let full = registry.len() + 1 + repository.len();
        if full > MAX_NAME {
            return Err(ReferenceError::NameTooLong { len: full });
        }
        for component in repository.split('/') {
            if !valid_component(component) {
                return Err(ReferenceError::BadComponent {
                    component: component.to_string(),
                });
            }
        }
        let tag = match (tag, &digest) {
            (None, None) => Some("latest".to_string()),
            (tag, _) => tag,
        };
        Ok(Reference {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The host (and port) the registry API answers on.
    pub fn api_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.registry
        }
    }

    /// What to ask the registry for: the digest when pinned, else the tag.
    pub fn manifest_reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }
}

impl fmt::Display for Reference {
    /// The fully qualified form, `docker.io/library/ubuntu:latest`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Registry and repository of a name; Docker Hub's when the first component is no host.
/// Unlike distribution, a first component with capitals is not taken for a host: `UPPER/case`
/// is refused as not lowercase rather than pulled from a host named `UPPER`.
fn split_registry(name: &str) -> Result<(String, String), ReferenceError> {
    let (first, rest) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest),
        _ => {
            let repository = if name.contains('/') {
                name.to_string()
            } else {
                format!("library/{name}")
            };
            return Ok((DOCKER_HUB.to_string(), repository));
        }
    };
    if !valid_registry(first) {
        return Err(ReferenceError::BadRegistry {
            registry: first.to_string(),
        });
    }
    let registry = match first {
        "index.docker.io" | "registry-1.docker.io" => DOCKER_HUB,
        other => other,
    };
    let repository = if registry == DOCKER_HUB && !rest.contains('/') {
        format!("library/{rest}")
    } else {
        rest.to_string()
    };
    Ok((registry.to_string(), repository))
}

/// `host[:port]` or `[v6]:port`: labels of letters, digits and inner hyphens.
fn valid_registry(registry: &str) -> bool {
    let (host, port) = match registry.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, rest)) => {
                if addr.parse::<std::net::Ipv6Addr>().is_err() {
                    return false;
                }
                ("", rest.strip_prefix(':'))
            }
            None => return false,
        },
        None => match registry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        },
    };
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    let label_ok = |l: &str| {
        !l.is_empty()
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    port_ok && (registry.starts_with('[') || host.split('.').all(label_ok))
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn valid_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    if !alnum(first) || !alnum(last) {
        return false;
    }
    // Separators between alphanumerics: one '.', one or two '_', or any run of '-'.
    let mut run = String::new();
    for &b in bytes {
        if alnum(&b) {
            if !(run.is_empty()
                || run == "."
                || run == "_"
                || run == "__"
                || run.bytes().all(|c| c == b'-'))
            {
                return false;
            }
            run.clear();
        } else if matches!(b, b'.' | b'_' | b'-') {
            run.push(char::from(b));
        } else {
            return false;
        }
    }
    true
}

fn parse_tag(tag: &str) -> Result<String, ReferenceError> {
    let bad = || ReferenceError::BadTag {
        tag: tag.chars().take(MAX_TAG + 1).collect(),
    };
    let first_ok = tag
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
    let rest_ok = tag
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if first_ok && rest_ok && tag.len() <= MAX_TAG {
        Ok(tag.to_string())
    } else {
        Err(bad())
    }
}

/// Only sha256 digests: the one algorithm registries and kubelets agree on.
fn parse_digest(digest: &str) -> Result<String, ReferenceError> {
    if is_sha256_digest(digest) {
        Ok(digest.to_string())
    } else {
        Err(ReferenceError::BadDigest {
            digest: digest.chars().take(80).collect(),
        })
    }
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_limit_applies_to_the_name_with_its_registry() {
        // 250 characters as written, 260 as docker.io/<name>.
        let name = format!("team/{}", "a".repeat(245));
        assert_eq!(
            Reference::parse(&name),
            Err(ReferenceError::NameTooLong { len: 260 })
        );
        let fits = format!("team/{}", "a".repeat(255 - "docker.io/team/".len()));
        let r = Reference::parse(&fits).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Reference::parse(&r.to_string()), Ok(r));
    }

    fn parsed(image: &str) -> (String, String, Option<String>, Option<String>) {
        let r = Reference::parse(image).unwrap_or_else(|e| panic!("{image}: {e}"));
        (r.registry, r.repository, r.tag, r.digest)
    }

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn normalises_like_container_runtimes() {
        let hub = |repo: &str, tag: &str| {
            (
                DOCKER_HUB.to_string(),
                repo.to_string(),
                Some(tag.to_string()),
                None,
            )
        };
        assert_eq!(parsed("ubuntu"), hub("library/ubuntu", "latest"));
        assert_eq!(parsed("ubuntu:22.04"), hub("library/ubuntu", "22.04"));
        assert_eq!(parsed("pytorch/pytorch:2.3"), hub("pytorch/pytorch", "2.3"));
        assert_eq!(parsed("docker.io/ubuntu"), hub("library/ubuntu", "latest"));
        assert_eq!(
            parsed("index.docker.io/library/ubuntu:x"),
            hub("library/ubuntu", "x")
        );
        let r = Reference::parse("ubuntu").ok();
        assert_eq!(r.as_ref().map(Reference::api_host), Some(DOCKER_HUB_API));
        assert_eq!(
            r.map(|r| r.to_string()).as_deref(),
            Some("docker.io/library/ubuntu:latest")
        );
    }

    #[test]
    fn reads_ports_nested_paths_and_digests() {
        assert_eq!(
            parsed("127.0.0.1:5000/team/ml/train:v3"),
            (
                "127.0.0.1:5000".into(),
                "team/ml/train".into(),
                Some("v3".into()),
                None
            )
        );
        assert_eq!(
            parsed("localhost/app"),
            (
                "localhost".into(),
                "app".into(),
                Some("latest".into()),
                None
            )
        );
        assert_eq!(
            parsed(&format!("ghcr.io/a/b:v1@{D}")),
            (
                "ghcr.io".into(),
                "a/b".into(),
                Some("v1".into()),
                Some(D.into())
            )
        );
        assert_eq!(
            parsed(&format!("ghcr.io/a/b@{D}")),
            ("ghcr.io".into(), "a/b".into(), None, Some(D.into()))
        );
        assert_eq!(
            parsed("[::1]:5000/a:b"),
            ("[::1]:5000".into(), "a".into(), Some("b".into()), None)
        );
        assert_eq!(parsed("a/b__c.d-e--f").1, "a/b__c.d-e--f");
    }

    #[test]
    fn refuses_malformed_references_saying_which_part_is_wrong() {
        let err = |image: &str| Reference::parse(image).err();
        assert!(matches!(
            err("UPPER/case"),
            Some(ReferenceError::BadComponent { .. })
        ));
        assert!(matches!(
            err("team/Train"),
            Some(ReferenceError::BadComponent { .. })
        ));
        assert!(matches!(
            err("a@sha256:short"),
            Some(ReferenceError::BadDigest { .. })
        ));
        assert!(matches!(
            err("a@md5:abc"),
            Some(ReferenceError::BadDigest { .. })
        ));
        assert!(matches!(err("repo:"), Some(ReferenceError::BadTag { .. })));
        assert!(matches!(
            err("repo:-x"),
            Some(ReferenceError::BadTag { .. })
        ));
        assert!(matches!(err(""), Some(ReferenceError::Empty)));
        assert!(matches!(
            err("a//b"),
            Some(ReferenceError::BadComponent { .. })
        ));
        assert!(matches!(
            err("a/b_"),
            Some(ReferenceError::BadComponent { .. })
        ));
        assert!(matches!(
            err("a/b___c"),
            Some(ReferenceError::BadComponent { .. })
        ));
        assert!(matches!(
            err("reg.io:port/a"),
            Some(ReferenceError::BadRegistry { .. })
        ));
        let long = format!("registry.example.com/{}:v1", "a".repeat(4096));
        assert_eq!(err(&long), Some(ReferenceError::NameTooLong { len: 4117 }));
        let long_tag = format!("a:{}", "t".repeat(129));
        assert!(matches!(
            err(&long_tag),
            Some(ReferenceError::BadTag { .. })
        ));
    }

    #[test]
    fn error_messages_stay_short_for_huge_input() {
        let huge = format!("a:{}", "-".repeat(4096));
        let msg = Reference::parse(&huge)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.len() < 300, "{msg}");
    }
}
