//! The containers the controller adds to users' pods (`init-pytorch`, `kubectl-delivery`):
//! their default images, pinned by digest, and the restricted securityContext they run with.
//!
//! Entry points: [`PYTORCH_INIT_IMAGE`], [`KUBECTL_DELIVERY_IMAGE`] (the defaults of
//! `--pytorch-init-image` and `--mpi-kubectl-delivery-image`), [`security_context`], and
//! [`wait_for_name`], the bounded DNS wait an init container runs.
//!
//! The digests were read from public repositories that pin these tags (this machine cannot
//! reach the registries): each one seen in several unrelated repositories. Re-check, or move to
//! a newer tag, with `crane digest <image:tag>` (or `skopeo inspect --format '{{.Digest}}'
//! docker://<image:tag>`); the digest is that of the multi-platform index.

use k8s_openapi::api::core::v1::{Capabilities, SeccompProfile, SecurityContext};

/// `init-pytorch`: a shell with `nslookup`, `date` and `sleep` (busybox's, as upstream's
/// `alpine:3.10`, which is past its end of life). Alpine 3.24.2; digest seen pinned in nine
/// unrelated repositories.
pub const PYTORCH_INIT_IMAGE: &str = "docker.io/library/alpine:3.24.2\
     @sha256:294b683cb724975bec92580e1e685676bd4b50bda910ddb8c51d4cabeaec77e6";

/// `kubectl-delivery`: `cp` and `/bin/kubectl`, what the container's command uses. The
/// Kubernetes project's own kubectl image (Debian base with coreutils, 1.28 and later), since
/// upstream's `kubeflow/kubectl-delivery:latest` is published under no digest anyone pins.
/// v1.34.1; digest seen pinned in three unrelated repositories. Its kubectl talks to API
/// servers within one minor version of it (1.33 to 1.35) as supported skew, and `exec`, all the
/// launcher does, works well beyond that; platforms on other versions pass their own with
/// `--mpi-kubectl-delivery-image`.
pub const KUBECTL_DELIVERY_IMAGE: &str = "registry.k8s.io/kubectl:v1.34.1\
     @sha256:59bafa07ff3a6d4b417e7633ddb9d79a9606ca98bf64bac080b3e65748669250";

/// The command of an init container that waits until `name` resolves, looking it up once a
/// second, and fails after `limit_secs` with the name and the last lookup's answer in its log
/// (which `terminationMessagePolicy: FallbackToLogsOnError` copies into the pod's status).
///
/// `name` must be complete, trailing dot included (see
/// [`ClusterDomain::fqdn`](super::cluster_domain::ClusterDomain::fqdn)): busybox's nslookup
/// asks a short name under every search domain and fails if any of them fails, so a short
/// name never counts as resolved. Needs `sh`, `nslookup`, `date` and `sleep`; the bound is
/// kept by the clock, not by counting tries, so a slow DNS server cannot stretch it.
pub fn wait_for_name(what: &str, name: &str, limit_secs: u64) -> Vec<String> {
    // `name` is built from a namespace, a job name and a domain, all DNS names: no quote
    // can be in it, so single quotes keep it one word.
    let script = format!(
        r#"name='{name}'; end=$(( $(date +%s) + {limit_secs} ))
until nslookup "$name" >/dev/null 2>&1; do
  if [ "$(date +%s)" -ge "$end" ]; then
    echo "gave up waiting for {what}: $name did not resolve within {limit_secs}s; the last lookup said:"
    nslookup "$name"
    exit 1
  fi
  echo "waiting for {what}: $name does not resolve yet"
  sleep 1
done
echo "{what} resolves: $name"
"#
    );
    vec!["sh".to_string(), "-c".to_string(), script]
}

/// The user the injected containers run as: not root, and numeric so that `runAsNonRoot` can
/// be checked by the kubelet whatever the image declares (65532, distroless' `nonroot`).
pub const USER: i64 = 65_532;

/// Pod Security's `restricted` profile for a container the controller adds: a numeric non-root
/// user, no privilege escalation, no capabilities, the runtime's default seccomp profile, a
/// read-only root filesystem. What they run needs no more: `nslookup` sends UDP from an
/// unprivileged port, and `cp` writes only into the emptyDir, which the kubelet creates
/// world-writable (mode 0777).
pub fn security_context() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(USER),
        run_as_group: Some(USER),
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_string()]),
            add: None,
        }),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_string(),
            localhost_profile: None,
        }),
        read_only_root_filesystem: Some(true),
        ..SecurityContext::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_images_are_pinned_by_a_full_sha256_digest() {
        for image in [PYTORCH_INIT_IMAGE, KUBECTL_DELIVERY_IMAGE] {
            let (name, digest) = image.split_once("@sha256:").unwrap_or((image, ""));
            assert!(name.contains(':'), "{image}: the tag stays for readers");
            assert_eq!(digest.len(), 64, "{image}");
            assert!(digest.chars().all(|c| c.is_ascii_hexdigit()), "{image}");
        }
    }

    #[test]
    fn the_security_context_meets_pod_securitys_restricted_profile() {
        let sc = security_context();
        assert_eq!(sc.run_as_non_root, Some(true));
        assert!(sc.run_as_user.is_some_and(|u| u > 0));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.privileged, None);
        let caps = sc.capabilities.unwrap_or_default();
        assert_eq!(caps.drop, Some(vec!["ALL".to_string()]));
        assert_eq!(caps.add, None);
        let seccomp = sc.seccomp_profile.map(|p| p.type_);
        assert_eq!(seccomp.as_deref(), Some("RuntimeDefault"));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
    }
}
