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
    /// Set when the job had more images to look up than `maxImagesPerReview`: none was.
    pub too_many: Option<TooMany>,
    /// The `images` policy's action: a failed lookup refuses no more than the policy would
    /// (audit-first: `failureMode: deny` under an audit-mode `images` only records).
    pub images_action: Option<Action>,
}

/// A job with more tagged images than one review may look up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooMany {
    pub images: Vec<String>,
    pub limit: usize,
}

impl Pinning {
    pub fn failures(&self) -> impl Iterator<Item = &Arc<ResolveError>> {
        self.resolved
            .iter()
            .filter_map(|r| r.outcome.as_ref().err())
    }

    /// Images left without a digest: failed lookups, or all of them when there were too many
    /// to look up.
    pub fn unresolved(&self) -> Vec<String> {
        let over = self.too_many.iter().flat_map(|t| t.images.iter().cloned());
        let failed = self.failures().map(|e| e.image().to_string());
        over.chain(failed).collect()
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
        let images_action = set.policy(IMAGES_POLICY).map(|p| p.action);
        if images.len() > settings.max_images_per_review {
            return Pinning {
                failure_mode: settings.failure_mode,
                images_action,
                too_many: Some(TooMany {
                    images,
                    limit: settings.max_images_per_review,
                }),
                ..Pinning::default()
            };
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
            too_many: None,
            images_action,
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
/// (UPDATE), each once, when the `images` policy applies to this job (enabled, and neither
/// an exemption nor an exception excuses the job from it).
pub fn wanted(set: &PolicySet, input: &Input) -> Vec<String> {
    let Some((index, policy)) = set
        .policies()
        .iter()
        .enumerate()
        .find(|(_, p)| p.name == IMAGES_POLICY && p.applies_to(&input.namespace))
    else {
        return Vec::new();
    };
    if crate::review::decide::excuses(set, input)
        .of(index)
        .is_some()
    {
        return Vec::new();
    }
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
/// image (or one finding for a job with too many images): denied, or warned with the image
/// left as written, per the failure mode.
pub fn failure_violations(pinning: &Pinning, input: &Input) -> Vec<Violation> {
    if pinning.failures().next().is_none() && pinning.too_many.is_none() {
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
    let (action, remedy) = match pinning.failure_mode {
        FailureMode::Deny => (Action::Deny, "pin the image by digest yourself, or fix the reference, the registry or its credentials"),
        FailureMode::Allow => (Action::Warn, "left as written (imageResolution.failureMode: allow)"),
    };
    // The milder of the failure mode's and the policy's: Action orders deny < warn < audit.
    let action = pinning.images_action.map_or(action, |a| a.max(action));
    let finding = |path: String, msg: String| Violation::new(IMAGES_POLICY, action, path, msg);
    let too_many = pinning.too_many.iter().map(|t| {
        let first = t.images.first().map(String::as_str).unwrap_or_default();
        finding(
            path_of(first),
            format!(
                "the job has {} images without a digest, more than imageResolution.maxImagesPerReview ({}) lets one review look up, so none was looked up: pin some by digest yourself, or raise maxImagesPerReview in params.yaml{}",
                t.images.len(),
                t.limit,
                match pinning.failure_mode {
                    FailureMode::Deny => String::new(),
                    FailureMode::Allow => format!("; {remedy}"),
                },
            ),
        )
    });
    let failed = pinning
        .failures()
        .map(|e| finding(path_of(e.image()), format!("{}; {remedy}", e.message())));
    too_many.chain(failed).collect()
}

/// `lib.pattern_matches` of policies/lib: a prefix, or a glob whose `*` matches any run of
/// characters and `?` one.
fn pattern_matches(pattern: &str, image: &str) -> bool {
    if !pattern.contains(['*', '?', '[', '{']) {
        return image.starts_with(pattern);
    }
    crate::policy::exemption::glob_matches(pattern.as_bytes(), image.as_bytes())
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
