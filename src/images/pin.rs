//! Pinning one request's images: which images need a digest, where credentials come from,
//! and what a failed lookup becomes.
//!
//! Entry point: [`Pinner::pin`], called before policy evaluation by the webhooks and by
//! `gangplank check --resolve`. It fills `input.images` (reference → digest), which the
//! `images` policy turns into `<reference>@<digest>`; [`failure_violations`] turns lookups
//! that failed into findings of the `images` policy, denied or warned per
//! `imageResolution.failureMode`.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;
use tracing::warn;

use super::credentials::Keychain;
use super::error::ResolveError;
use super::resolver::{Resolved, Resolver};
use super::settings::{FailureMode, Settings};
use crate::policy::{Action, PolicySet, Violation};
use crate::review::Input;

/// The policy that writes digests (policies/images.rego).
pub const IMAGES_POLICY: &str = "images";

/// The resolver and where credentials come from.
#[derive(Default)]
pub struct Pinner {
    pub resolver: Resolver,
    /// The cluster whose pull secrets and ServiceAccounts are read; `None` offline.
    pub cluster: Option<kube::Client>,
    /// `--registry-credentials`: used for registries no pull secret covers.
    pub credentials: Keychain,
}

impl std::fmt::Debug for Pinner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pinner")
            .field("resolver", &self.resolver)
            .field("cluster", &self.cluster.is_some())
            .field("credentials", &self.credentials)
            .finish()
    }
}

/// What pinning did to a request.
#[derive(Debug, Clone, Default)]
pub struct Pinning {
    pub resolved: Vec<Resolved>,
    pub failure_mode: FailureMode,
}

impl Pinning {
    pub fn failures(&self) -> impl Iterator<Item = &Arc<ResolveError>> {
        self.resolved
            .iter()
            .filter_map(|r| r.outcome.as_ref().err())
    }
}

impl Pinner {
    /// Resolves the images of `input`'s job that need a digest (see [`wanted`]) and adds
    /// the digests found to `input.images`. Does nothing when `imageResolution` is off.
    pub async fn pin(&self, set: &PolicySet, input: &mut Input) -> Pinning {
        let Some(settings) = enabled(set) else {
            return Pinning::default();
        };
        let images = wanted(set, input);
        if images.is_empty() {
            return Pinning::default();
        }
        let deadline = tokio::time::Instant::now() + settings.budget;
        let mut keychain = match &self.cluster {
            Some(client) => {
                let secrets =
                    super::pull_secrets::keychain(client, &input.namespace, &input.object);
                tokio::time::timeout_at(deadline, secrets).await.unwrap_or_else(|_| {
                    warn!(namespace = %input.namespace, "pull secrets not read within the resolution budget; resolving without them");
                    Keychain::default()
                })
            }
            None => Keychain::default(),
        };
        keychain.merge(self.credentials.clone());
        let resolved = self
            .resolver
            .resolve_all(settings, &images, &keychain, deadline)
            .await;
        for r in &resolved {
            if let Ok(digest) = &r.outcome {
                input
                    .images
                    .insert(r.image.clone(), Value::String(digest.clone()));
            }
        }
        Pinning {
            resolved,
            failure_mode: settings.failure_mode,
        }
    }
}

/// The settings when resolution is on.
pub fn enabled(set: &PolicySet) -> Option<&Settings> {
    set.sources()
        .params
        .image_resolution
        .as_ref()
        .filter(|s| s.enabled)
}

/// Images of the job written without a digest, not exempt, not kept from the stored object
/// (UPDATE), each once, when the `images` policy applies here.
pub fn wanted(set: &PolicySet, input: &Input) -> Vec<String> {
    let Some(policy) = set
        .policy(IMAGES_POLICY)
        .filter(|p| p.applies_to(&input.namespace))
    else {
        return Vec::new();
    };
    let Some(view) = input.view_of(&input.object) else {
        return Vec::new();
    };
    let exempt: Vec<&str> = policy
        .params
        .get("exemptImages")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let known = crate::review::pinned::keep_stored_digests(input);
    let images: BTreeSet<&str> = view
        .replicas
        .iter()
        .flat_map(|r| r.containers.iter().chain(&r.init_containers))
        .map(|c| c.image.as_str())
        .filter(|image| !image.is_empty() && !image.contains('@'))
        .filter(|image| !known.images.contains_key(*image))
        .filter(|image| !exempt.iter().any(|p| pattern_matches(p, image)))
        .collect();
    images.into_iter().map(str::to_string).collect()
}

/// Failed lookups as findings of the `images` policy at the first container running the
/// image: denied, or warned with the image left as written, per the failure mode.
pub fn failure_violations(pinning: &Pinning, input: &Input) -> Vec<Violation> {
    if pinning.failures().next().is_none() {
        return Vec::new();
    }
    let view = input.view_of(&input.object);
    let path_of = |image: &str| {
        view.as_ref()
            .and_then(|v| {
                v.replicas
                    .iter()
                    .flat_map(|r| r.containers.iter().chain(&r.init_containers))
                    .find(|c| c.image == image)
            })
            .map(|c| format!("{}/image", c.path))
            .unwrap_or_default()
    };
    pinning
        .failures()
        .map(|e| {
            let (action, outcome) = match pinning.failure_mode {
                FailureMode::Deny => (Action::Deny, "pin the image by digest yourself, or fix the reference, the registry or its credentials"),
                FailureMode::Allow => (Action::Warn, "left as written (imageResolution.failureMode: allow)"),
            };
            Violation {
                policy: IMAGES_POLICY.to_string(),
                action,
                path: path_of(e.image()),
                msg: format!("{}; {outcome}", e.message()),
            }
        })
        .collect()
}

/// `lib.pattern_matches` of policies/lib: a prefix, or a glob whose `*` matches any run of
/// characters and `?` one.
fn pattern_matches(pattern: &str, image: &str) -> bool {
    if !pattern.contains(['*', '?', '[', '{']) {
        return image.starts_with(pattern);
    }
    glob(pattern.as_bytes(), image.as_bytes())
}

fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => {
            (0..=text.len()).any(|i| text.get(i..).is_some_and(|t| glob(rest, t)))
        }
        Some((b'?', rest)) => text.split_first().is_some_and(|(_, t)| glob(rest, t)),
        Some((c, rest)) => text
            .split_first()
            .is_some_and(|(t0, t)| t0 == c && glob(rest, t)),
    }
}

#[cfg(test)]
mod tests {
    use super::pattern_matches;

    #[test]
    fn exemptions_match_like_the_policy_library() {
        assert!(pattern_matches(
            "registry.example.com/dev/",
            "registry.example.com/dev/a:1"
        ));
        assert!(pattern_matches(
            "*/busybox:*",
            "docker.io/library/busybox:1.36"
        ));
        assert!(!pattern_matches("*/busybox:*", "busybox"));
        assert!(pattern_matches("ghcr.io/?/x", "ghcr.io/a/x"));
    }
}
