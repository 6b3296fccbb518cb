//! dist/: the files a user installs, rendered from deploy/ by kubectl's built-in kustomize
//! over the small overlays of dist/overlays/, never written by hand, so a release's
//! `kubectl apply -f` installs exactly what `kubectl apply -k` of the same commit would.
//!
//! Entry points: [`VARIANTS`] (what is rendered from where), [`render`] (one file's text, its
//! header included) and [`drift`] (how a committed file differs from a fresh render).
//!
//! # Guarantees
//! - The output depends only on deploy/, policies/, the overlays, the crate version and
//!   kubectl's kustomize: no date, commit or path, so a render of an unchanged tree is
//!   byte-identical and `gangplank-release render --check` can compare.

use std::path::Path;
use std::process::Command;

/// One rendered file.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    /// The rendered file, relative to the repository root.
    pub file: &'static str,
    /// The kustomization it is rendered from.
    pub overlay: &'static str,
    /// What it installs and what is left to do, for the header.
    pub about: &'static str,
}

/// Both install files.
pub const VARIANTS: [Variant; 2] = [
    Variant {
        file: "dist/install.yaml",
        overlay: "dist/overlays/default",
        about: "the admission webhooks and the lifecycle controller (deploy/ and\n\
                # deploy/controller). The webhooks need a serving certificate after applying:\n\
                # `gangplank certs` (docs/src/install.md); or use install-cert-manager.yaml.",
    },
    Variant {
        file: "dist/install-cert-manager.yaml",
        overlay: "dist/overlays/cert-manager",
        about: "the admission webhooks and the lifecycle controller, with cert-manager\n\
                # (>= 1.0, installed first) issuing the webhooks' certificate and caBundle\n\
                # (deploy/, deploy/controller and deploy/cert-manager).",
    },
];

/// Why a file could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    NoKubectl(#[from] super::kubectl::NotFound),
    #[error("cannot run {kubectl}: {source}")]
    Spawn {
        kubectl: String,
        #[source]
        source: std::io::Error,
    },
    #[error("kubectl kustomize {overlay} failed: {stderr}")]
    Kustomize { overlay: String, stderr: String },
    #[error("kubectl kustomize {overlay} printed no UTF-8 text")]
    NotText { overlay: String },
}

/// The text of `variant`'s file: the header, then `kubectl kustomize <overlay>`, with the
/// overlay's path taken relative to `root`.
pub fn render(kubectl: &Path, root: &Path, variant: &Variant) -> Result<String, RenderError> {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(root.join(variant.overlay))
        .output()
        .map_err(|source| RenderError::Spawn {
            kubectl: kubectl.display().to_string(),
            source,
        })?;
    if !out.status.success() {
        return Err(RenderError::Kustomize {
            overlay: variant.overlay.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let body = String::from_utf8(out.stdout).map_err(|_| RenderError::NotText {
        overlay: variant.overlay.to_string(),
    })?;
    Ok(format!("{}{body}", header(variant)))
}

/// The comment on top of a rendered file.
pub fn header(variant: &Variant) -> String {
    format!(
        "# gangplank {version}: {about}\n\
         #\n\
         # Install: kubectl apply --server-side -f {file}\n\
         # Rendered from {overlay}/kustomization.yaml by `gangplank-release render` (kubectl\n\
         # kustomize). Do not edit: change deploy/ and render again; CI fails when this file\n\
         # differs from a fresh render.\n",
        version = env!("CARGO_PKG_VERSION"),
        about = variant.about,
        file = variant.file,
        overlay = variant.overlay,
    )
}

/// `None` when `committed` is `rendered`; otherwise a summary for a person: the line counts
/// and the first line that differs, on both sides.
pub fn drift(committed: &str, rendered: &str) -> Option<String> {
    if committed == rendered {
        return None;
    }
    let (old, new): (Vec<&str>, Vec<&str>) =
        (committed.lines().collect(), rendered.lines().collect());
    let first = old
        .iter()
        .zip(&new)
        .position(|(a, b)| a != b)
        .unwrap_or(old.len().min(new.len()));
    let line = |lines: &[&str]| {
        lines
            .get(first)
            .map_or("(end of file)".to_string(), |l| format!("{l:?}"))
    };
    Some(format!(
        "{} lines committed, {} rendered; first difference at line {}:\n  committed: {}\n  rendered:  {}",
        old.len(),
        new.len(),
        first + 1,
        line(&old),
        line(&new)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_names_the_first_differing_line() {
        assert_eq!(drift("a\nb\n", "a\nb\n"), None);
        let summary = drift("a\nb\nc\n", "a\nB\nc\n").unwrap_or_default();
        assert!(
            summary.starts_with("3 lines committed, 3 rendered; first difference at line 2"),
            "{summary}"
        );
        assert!(
            summary.contains("committed: \"b\"") && summary.contains("rendered:  \"B\""),
            "{summary}"
        );
        let shorter = drift("a\n", "a\nb\n").unwrap_or_default();
        assert!(
            shorter.contains("line 2:\n  committed: (end of file)"),
            "{shorter}"
        );
    }

    #[test]
    fn the_header_is_a_yaml_comment_naming_the_version_and_the_overlay() {
        for variant in &VARIANTS {
            let header = header(variant);
            assert!(header.lines().all(|l| l.starts_with('#')), "{header}");
            assert!(header.contains(env!("CARGO_PKG_VERSION")));
            assert!(header.contains(variant.overlay));
            assert!(header.contains("Do not edit"));
        }
    }
}
