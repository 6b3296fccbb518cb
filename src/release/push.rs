//! Pushing the built image to an OCI registry over the distribution API (blobs by monolithic
//! upload, then the manifest under its tag), and checking that the registry serves it back
//! under the digest it was built with.
//!
//! Entry point: [`push`]. For the registries CI and tests run (Debian's docker-registry on
//! loopback, no credentials); a registry that needs a login takes the layout from
//! `skopeo copy oci:DIR docker://...` or `crane push DIR ...` instead.

use reqwest::{Client, StatusCode};

use super::image::{Image, MANIFEST_MEDIA_TYPE};
use crate::images::digest::sha256;

/// Why a push failed, with the registry's status and words.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{reference}: not a registry/repository[:tag] reference ({why})")]
    Reference {
        reference: String,
        why: &'static str,
    },
    #[error("{url}: {step} failed")]
    Transport {
        url: String,
        step: &'static str,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url}: {step} answered {status}: {body}")]
    Status {
        url: String,
        step: &'static str,
        status: StatusCode,
        body: String,
    },
    #[error("{url}: the registry stored the manifest as {stored}, not {built}")]
    DigestMismatch {
        url: String,
        stored: String,
        built: String,
    },
}

/// `registry/repo[:tag]` split; `http://` or `https://` in front chooses the scheme
/// (default https, and http for 127.0.0.1 and localhost).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub base: String,
    pub repository: String,
    pub tag: String,
}

impl Target {
    pub fn parse(reference: &str, default_tag: &str) -> Result<Target, PushError> {
        let bad = |why| PushError::Reference {
            reference: reference.to_string(),
            why,
        };
        let (scheme, rest) = match reference.split_once("://") {
            Some((scheme @ ("http" | "https"), rest)) => (Some(scheme), rest),
            Some(_) => return Err(bad("the scheme must be http or https")),
            None => (None, reference),
        };
        let (host, path) = rest.split_once('/').ok_or_else(|| bad("no repository"))?;
        let local = host.starts_with("127.0.0.1") || host.starts_with("localhost");
        let scheme = scheme.unwrap_or(if local { "http" } else { "https" });
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, tag),
            _ => (path, default_tag),
        };
        if repository.is_empty() || tag.is_empty() {
            return Err(bad("an empty repository or tag"));
        }
        Ok(Target {
            base: format!("{scheme}://{host}"),
            repository: repository.to_string(),
            tag: tag.to_string(),
        })
    }

    fn url(&self, tail: &str) -> String {
        format!("{}/v2/{}/{tail}", self.base, self.repository)
    }
}

/// Pushes `image` to `target`; the digest the registry stored (the image's own).
pub async fn push(client: &Client, image: &Image, target: &Target) -> Result<String, PushError> {
    for blob in [&image.layer, &image.config] {
        push_blob(client, target, blob).await?;
    }
    let url = target.url(&format!("manifests/{}", target.tag));
    let response = client
        .put(&url)
        .header("Content-Type", MANIFEST_MEDIA_TYPE)
        .body(image.manifest.clone())
        .send()
        .await
        .map_err(transport(&url, "manifest upload"))?;
    let response = expect(response, &url, "manifest upload", StatusCode::CREATED).await?;
    let stored = response
        .headers()
        .get("Docker-Content-Digest")
        .and_then(|v| v.to_str().ok())
        .unwrap_or(&image.manifest_digest)
        .to_string();
    if stored != image.manifest_digest {
        return Err(PushError::DigestMismatch {
            url,
            stored,
            built: image.manifest_digest.clone(),
        });
    }
    Ok(stored)
}

async fn push_blob(client: &Client, target: &Target, blob: &[u8]) -> Result<(), PushError> {
    let digest = sha256(blob);
    let url = target.url(&format!("blobs/{digest}"));
    let head = client
        .head(&url)
        .send()
        .await
        .map_err(transport(&url, "blob check"))?;
    if head.status() == StatusCode::OK {
        return Ok(());
    }
    let start = target.url("blobs/uploads/");
    let response = client
        .post(&start)
        .send()
        .await
        .map_err(transport(&start, "upload start"))?;
    let response = expect(response, &start, "upload start", StatusCode::ACCEPTED).await?;
    let location = response
        .headers()
        .get("Location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    // The Location may be relative to the registry, and may carry a query already.
    let location = if location.starts_with('/') {
        format!("{}{location}", target.base)
    } else {
        location
    };
    let separator = if location.contains('?') { '&' } else { '?' };
    let put = format!("{location}{separator}digest={digest}");
    let response = client
        .put(&put)
        .header("Content-Type", "application/octet-stream")
        .body(blob.to_vec())
        .send()
        .await
        .map_err(transport(&put, "blob upload"))?;
    expect(response, &put, "blob upload", StatusCode::CREATED).await?;
    Ok(())
}

fn transport<'a>(
    url: &'a str,
    step: &'static str,
) -> impl FnOnce(reqwest::Error) -> PushError + 'a {
    move |source| PushError::Transport {
        url: url.to_string(),
        step,
        source,
    }
}

async fn expect(
    response: reqwest::Response,
    url: &str,
    step: &'static str,
    status: StatusCode,
) -> Result<reqwest::Response, PushError> {
    if response.status() == status {
        return Ok(response);
    }
    let got = response.status();
    let body = response.text().await.unwrap_or_default();
    Err(PushError::Status {
        url: url.to_string(),
        step,
        status: got,
        body: body.chars().take(300).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_the_registry_repository_and_tag() {
        let t = Target::parse("127.0.0.1:5000/gangplank:0.2.0", "latest").ok();
        assert_eq!(
            t,
            Some(Target {
                base: "http://127.0.0.1:5000".into(),
                repository: "gangplank".into(),
                tag: "0.2.0".into()
            })
        );
        let t = Target::parse("registry.example.com:443/ml/gangplank", "0.2.0").ok();
        assert_eq!(
            t.map(|t| (t.base, t.tag)),
            Some(("https://registry.example.com:443".into(), "0.2.0".into()))
        );
        assert!(Target::parse("gangplank", "x").is_err());
        assert!(Target::parse("ftp://h/r", "x").is_err());
    }
}
