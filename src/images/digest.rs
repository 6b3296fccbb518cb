//! `sha256:<hex>` digests of manifest bytes.

/// The OCI digest of `bytes`: `sha256:` and 64 lowercase hex digits.
pub fn sha256(bytes: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    format!("sha256:{}", hex(digest.as_ref()))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_well_known_digest_of_empty_input() {
        assert_eq!(
            super::sha256(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
