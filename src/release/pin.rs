//! deploy/'s image reference, written from the built image and never by hand: the `images:`
//! entry of deploy/kustomization.yaml names the repository and the digest of the image
//! `gangplank-release image` built, so `kubectl apply -k deploy/` runs exactly those bytes.
//!
//! Entry points: [`pinned`] (the digest deploy/ names now), [`rewrite`] (the file with another
//! digest), [`IMAGE_INPUTS`] (what the image is built from, so its date and revision come
//! from the last commit that changed them, and pinning does not change the digest it pins).

/// The paths whose last commit dates and names the image. deploy/ is not one of them: a
/// commit that only pins the digest builds the same image.
pub const IMAGE_INPUTS: [&str; 4] = ["src", "Cargo.toml", "Cargo.lock", ".ci/image"];

/// The lines that begin and end the generated block.
const BEGIN: &str = "# BEGIN image: written by `gangplank-release pin`, never by hand";
const END: &str = "# END image";

/// Why deploy/kustomization.yaml cannot be pinned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PinError {
    #[error("deploy/kustomization.yaml has no block between `{BEGIN}` and `{END}`")]
    NoBlock,
    #[error("{0:?} is not a sha256 digest (sha256: and 64 lowercase hex digits)")]
    BadDigest(String),
}

/// (repository, digest) that the generated block names, if it names both.
pub fn pinned(kustomization: &str) -> Result<(String, String), PinError> {
    let block = block(kustomization)?;
    let field = |key: &str| {
        block
            .lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
            .unwrap_or_default()
    };
    Ok((field("newName:"), field("digest:")))
}

/// `kustomization` with its generated block naming `repository@digest`.
pub fn rewrite(kustomization: &str, repository: &str, digest: &str) -> Result<String, PinError> {
    check_digest(digest)?;
    let old = block(kustomization)?;
    let new = format!(
        "\n  # Built by .ci/image from this commit's sources; `.ci/run` checks that it still\n  \
         # builds to this digest.\n  - name: gangplank\n    newName: {repository}\n    digest: {digest}\n"
    );
    Ok(kustomization.replacen(old, &new, 1))
}

fn block(text: &str) -> Result<&str, PinError> {
    let start = text.find(BEGIN).ok_or(PinError::NoBlock)? + BEGIN.len();
    let len = text
        .get(start..)
        .and_then(|rest| rest.find(END))
        .ok_or(PinError::NoBlock)?;
    // Up to the indentation of the END line.
    let inner = text.get(start..start + len).ok_or(PinError::NoBlock)?;
    Ok(inner.trim_end_matches(' '))
}

fn check_digest(digest: &str) -> Result<(), PinError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or_default();
    let lower_hex = hex
        .chars()
        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
    if hex.len() == 64 && lower_hex {
        Ok(())
    } else {
        Err(PinError::BadDigest(digest.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "resources:\n  - a.yaml\nimages:\n  # BEGIN image: written by `gangplank-release pin`, never by hand\n  - name: gangplank\n    newName: old/gangplank\n    digest: sha256:0000000000000000000000000000000000000000000000000000000000000000\n  # END image\n";

    #[test]
    fn the_block_is_rewritten_and_nothing_else() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let new = rewrite(FILE, "ghcr.io/x/gangplank", &digest).unwrap_or_default();
        assert!(
            new.starts_with("resources:\n  - a.yaml\nimages:\n  # BEGIN image"),
            "{new}"
        );
        assert!(new.ends_with("  # END image\n"), "{new}");
        assert_eq!(
            pinned(&new),
            Ok(("ghcr.io/x/gangplank".to_string(), digest.clone()))
        );
        assert_eq!(
            rewrite(&new, "ghcr.io/x/gangplank", &digest).ok(),
            Some(new)
        );
    }

    #[test]
    fn a_bad_digest_or_a_missing_block_is_refused() {
        assert!(matches!(
            rewrite(FILE, "r", "sha256:ABC"),
            Err(PinError::BadDigest(_))
        ));
        assert_eq!(pinned("images: []\n"), Err(PinError::NoBlock));
    }
}
