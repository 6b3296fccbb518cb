//! Where one lookup may send requests, and which of them may carry credentials.
//!
//! Entry point: [`Egress::for_image`], then [`Egress::redirect`] for each redirect and
//! [`Egress::realm`] for a Bearer challenge's token realm. A job author names the image, so
//! the registry; its answers (a `Location`, a `WWW-Authenticate` realm) name further hosts.
//! None of those is trusted to be outside the cluster: the allowlists of
//! [`Settings`] say where lookups may go.
//!
//! # Guarantees
//! - The registry is one of `allowedRegistries` (checked before an `Egress` exists).
//! - A redirect is followed only to the host it came from, another allowed registry, or a
//!   host matching `redirectHosts`.
//! - A token realm is on the registry's own host, or on a host `authHosts` lists for that
//!   registry: the only hosts besides the registry that ever get its credentials.
//! - Plain HTTP only to hosts in `plainHttpRegistries`, and never after HTTPS.
//! - Credentials: see [`Egress::authorizes`].

use reqwest::Url;

use super::reference::Reference;
use super::settings::Settings;

/// The hosts one lookup may reach.
#[derive(Debug, Clone)]
pub struct Egress {
    /// The registry as references name it (`docker.io`), for `authHosts`.
    registry: String,
    /// `scheme://api-host/`: where the lookup starts.
    base: Url,
    settings: Settings,
}

/// Why a request was not sent; each says which parameter would allow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("redirected to {host}, which is in neither imageResolution.allowedRegistries nor imageResolution.redirectHosts (add it to redirectHosts if this registry keeps its manifests there)")]
    RedirectHost { host: String },
    #[error("names a token realm on {host}, which is neither the registry's own host nor listed for it in imageResolution.authHosts (add `{registry}: [{host}]` there if it is the registry's auth server)")]
    RealmHost { host: String, registry: String },
    #[error("redirected from https to http://{host}: a lookup is never downgraded to plain HTTP")]
    Downgrade { host: String },
    #[error("{what} http://{host}: plain HTTP is used only for hosts in imageResolution.plainHttpRegistries, and never after HTTPS")]
    PlainHttp { what: &'static str, host: String },
    #[error("{what} something that is not an http(s) URL")]
    NotHttp { what: &'static str },
    #[error("registry address {host} is not a valid URL host")]
    BadRegistry { host: String },
}

const REDIRECT: &str = "redirected to";
const REALM: &str = "names a token realm at";

impl Egress {
    /// The lookups of `reference`, whose registry `settings` allows.
    pub fn for_image(settings: &Settings, reference: &Reference) -> Result<Egress, Refusal> {
        let host = reference.api_host();
        let scheme = if settings.plain_http(&reference.registry) {
            "http"
        } else {
            "https"
        };
        let base =
            Url::parse(&format!("{scheme}://{host}/")).map_err(|_| Refusal::BadRegistry {
                host: host.to_string(),
            })?;
        Ok(Egress {
            registry: reference.registry.clone(),
            base,
            settings: settings.clone(),
        })
    }

    /// `scheme://api-host/`.
    pub fn base(&self) -> &Url {
        &self.base
    }

    /// Whether a redirect from `from` (already allowed) to `to` may be followed.
    pub fn redirect(&self, from: &Url, to: &Url) -> Result<(), Refusal> {
        http_or_https(REDIRECT, to)?;
        let host = authority(to);
        let allowed = host == authority(from)
            || host == authority(&self.base)
            || self.settings.allows(&host)
            || (self.settings.redirect_hosts.iter()).any(|p| host_matches(p, &host));
        if !allowed {
            return Err(Refusal::RedirectHost { host });
        }
        self.plain_http_allowed(REDIRECT, from, to)
    }

    /// The token realm a Bearer challenge of the registry names, if it may be asked.
    pub fn realm(&self, realm: &str) -> Result<Url, Refusal> {
        let url = Url::parse(realm).map_err(|_| Refusal::NotHttp { what: REALM })?;
        http_or_https(REALM, &url)?;
        let host = authority(&url);
        let listed = self
            .settings
            .auth_hosts
            .get(&self.registry)
            .is_some_and(|hosts| hosts.contains(&host));
        if host != authority(&self.base) && !listed {
            return Err(Refusal::RealmHost {
                host,
                registry: self.registry.clone(),
            });
        }
        self.plain_http_allowed(REALM, &self.base, &url)?;
        Ok(url)
    }

    /// Whether a request to `url`, in a chain that began at `start`, may carry the
    /// credentials (or token) of that chain: only while it stays on `start`'s origin (scheme,
    /// host and port), and only when `start` is the registry or its realm. A redirect to
    /// another host, even an allowed one, is followed without them, as container runtimes
    /// do: pre-signed storage URLs need none.
    pub fn authorizes(start: &Url, url: &Url) -> bool {
        start.origin() == url.origin()
    }

    /// https always; http only to a listed host, and not after https.
    fn plain_http_allowed(&self, what: &'static str, from: &Url, to: &Url) -> Result<(), Refusal> {
        if to.scheme() == "https" {
            return Ok(());
        }
        let host = authority(to);
        if from.scheme() == "https" && what == REDIRECT {
            return Err(Refusal::Downgrade { host });
        }
        if from.scheme() == "https" || !self.settings.plain_http(&host) {
            return Err(Refusal::PlainHttp { what, host });
        }
        Ok(())
    }
}

/// Only web URLs with a host: no `file:`, `data:` or `unix:`.
fn http_or_https(what: &'static str, url: &Url) -> Result<(), Refusal> {
    let web = matches!(url.scheme(), "http" | "https");
    if web && url.host_str().is_some_and(|h| !h.is_empty()) {
        Ok(())
    } else {
        Err(Refusal::NotHttp { what })
    }
}

/// `host` or `host:port` (a port only when it is not the scheme's default), as the lists
/// of [`Settings`] name hosts.
pub fn authority(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// `host` equal to `pattern`, or under its domain when `pattern` is `*.domain`.
fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
        None => pattern.eq_ignore_ascii_case(host),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn egress(settings: Settings, image: &str) -> Egress {
        let reference = Reference::parse(image).unwrap_or_else(|e| panic!("{image}: {e}"));
        Egress::for_image(&settings, &reference).unwrap_or_else(|e| panic!("{e}"))
    }

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn hub() -> Settings {
        Settings {
            enabled: true,
            allowed_registries: vec!["docker.io".into(), "ghcr.io".into()],
            auth_hosts: BTreeMap::from([("docker.io".into(), vec!["auth.docker.io".into()])]),
            redirect_hosts: vec!["*.cloudfront.net".into()],
            plain_http_registries: vec!["mirror.svc:5000".into()],
            ..Settings::default()
        }
    }

    #[test]
    fn redirects_stay_on_allowed_hosts_and_never_downgrade() {
        let e = egress(hub(), "ubuntu:22.04");
        assert_eq!(e.base().as_str(), "https://registry-1.docker.io/");
        let from = url("https://registry-1.docker.io/v2/library/ubuntu/manifests/22.04");
        let to = |t: &str| e.redirect(&from, &url(t));
        assert_eq!(to("https://registry-1.docker.io/v2/other"), Ok(()));
        assert_eq!(to("https://ghcr.io/v2/x"), Ok(()));
        assert_eq!(to("https://d1.cloudfront.net/m"), Ok(()));
        assert_eq!(
            to("https://cloudfront.net.evil.com/m"),
            Err(Refusal::RedirectHost {
                host: "cloudfront.net.evil.com".into()
            })
        );
        assert_eq!(
            to("https://169.254.169.254/latest/meta-data"),
            Err(Refusal::RedirectHost {
                host: "169.254.169.254".into()
            })
        );
        assert_eq!(
            to("http://registry-1.docker.io/v2/x"),
            Err(Refusal::Downgrade {
                host: "registry-1.docker.io".into()
            })
        );
        assert_eq!(
            to("file:///etc/passwd"),
            Err(Refusal::NotHttp { what: REDIRECT })
        );
    }

    #[test]
    fn realms_are_the_registrys_own_host_or_listed_for_it() {
        let hub_lookup = egress(hub(), "ubuntu");
        assert!(hub_lookup.realm("https://auth.docker.io/token").is_ok());
        let ghcr = egress(hub(), "ghcr.io/a/b:1");
        assert!(ghcr.realm("https://ghcr.io/token").is_ok());
        // auth.docker.io is Docker Hub's: ghcr.io's credentials never go there.
        let refused = ghcr.realm("https://auth.docker.io/token").err();
        let message = refused.map(|r| r.to_string()).unwrap_or_default();
        assert!(
            message.contains("auth.docker.io") && message.contains("`ghcr.io: [auth.docker.io]`"),
            "{message}"
        );
        assert!(matches!(
            hub_lookup.realm("http://auth.docker.io/token"),
            Err(Refusal::PlainHttp { .. })
        ));
        assert!(matches!(
            hub_lookup.realm("not a url"),
            Err(Refusal::NotHttp { .. })
        ));
    }

    #[test]
    fn plain_http_only_for_listed_hosts() {
        let settings = Settings {
            redirect_hosts: vec!["other.svc:5000".into()],
            ..hub()
        };
        let mirror = egress(settings, "mirror.svc:5000/ml/train:v1");
        assert_eq!(mirror.base().as_str(), "http://mirror.svc:5000/");
        let from = url("http://mirror.svc:5000/v2/ml/train/manifests/v1");
        assert!(mirror
            .redirect(&from, &url("http://mirror.svc:5000/v2/x"))
            .is_ok());
        assert!(matches!(
            mirror.redirect(&from, &url("http://other.svc:5000/v2/x")),
            Err(Refusal::PlainHttp { .. })
        ));
    }

    #[test]
    fn credentials_stay_on_the_origin_the_chain_began_at() {
        let start = url("https://registry.example.com/v2/a/manifests/b");
        assert!(Egress::authorizes(
            &start,
            &url("https://registry.example.com/v2/other")
        ));
        assert!(!Egress::authorizes(
            &start,
            &url("https://cdn.example.com/v2/a")
        ));
        assert!(!Egress::authorizes(
            &start,
            &url("https://registry.example.com:8443/v2/a")
        ));
    }
}
