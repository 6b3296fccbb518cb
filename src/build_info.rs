//! Which build this binary is: the crate version and the source revision it was built from.
//!
//! Entry point: [`BuildInfo::current`]. `gangplank version` prints it and both `/metrics`
//! endpoints export it as `gangplank_build_info{version,revision} 1`.
//!
//! The revision comes from the `GANGPLANK_REVISION` environment variable at compile time
//! (`.ci/image` exports what `gangplank-release source` reports); git is never read here, so
//! the image stays reproducible and a commit that changes only docs does not change its
//! digest. A build without it (`cargo build` on a laptop) says [`UNKNOWN_REVISION`].

/// The revision of a build made without `GANGPLANK_REVISION`.
pub const UNKNOWN_REVISION: &str = "unknown";

/// Version and revision of the running binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// `CARGO_PKG_VERSION`, e.g. `0.1.0`.
    pub version: &'static str,
    /// The source revision `GANGPLANK_REVISION` named at build time, or `unknown`.
    pub revision: &'static str,
}

impl BuildInfo {
    /// This binary's build identity (fixed at compile time).
    pub const fn current() -> BuildInfo {
        BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            revision: revision(option_env!("GANGPLANK_REVISION")),
        }
    }
}

/// An unset or empty `GANGPLANK_REVISION` is [`UNKNOWN_REVISION`], never an empty label.
const fn revision(value: Option<&'static str>) -> &'static str {
    match value {
        Some(v) if !v.is_empty() => v,
        _ => UNKNOWN_REVISION,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_the_crate_version() {
        assert_eq!(BuildInfo::current().version, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn an_unset_or_empty_revision_is_unknown() {
        assert_eq!(revision(None), UNKNOWN_REVISION);
        assert_eq!(revision(Some("")), UNKNOWN_REVISION);
        assert_eq!(revision(Some("abc123")), "abc123");
    }
}
