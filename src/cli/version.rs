//! `gangplank version`: which build this is and, given `--policies`, which policy set.
//!
//! Entry point: [`VersionArgs::run`]. The same version and revision are exported as
//! `gangplank_build_info` and the same policy-set hash as `gangplank_policy_set_info` by
//! `serve`, so what a replica serves can be compared with a directory or an image.
//!
//! - `revision` is compiled in ([`crate::build_info`]): `unknown` in a build made without
//!   `GANGPLANK_REVISION`.
//! - `imageDigest` comes from the environment variable `GANGPLANK_IMAGE_DIGEST`, which a
//!   deployment may set; a binary cannot contain the digest of the image it is packed into
//!   (the digest covers the binary), so without it the field is null.
//! - `policySetHash` is null unless `--policies` (or `GANGPLANK_POLICIES`) names a directory:
//!   unlike `check`, there is no default directory, because `version` must answer anywhere
//!   (in the image, in any working directory) without guessing which set is meant.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::report::error_chain;
use crate::build_info::BuildInfo;
use crate::exit;
use crate::policy::load::PolicySources;

/// The environment variable naming the image digest (`sha256:<64 hex>`).
pub const IMAGE_DIGEST_ENV: &str = "GANGPLANK_IMAGE_DIGEST";

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Output format.
    #[arg(
        short,
        long,
        value_enum,
        default_value = "text",
        env = "GANGPLANK_VERSION_OUTPUT"
    )]
    pub output: Output,
    /// A policy directory whose policy-set hash to print (the hash `serve` exports for it);
    /// without it the hash is omitted.
    #[arg(long, env = "GANGPLANK_POLICIES")]
    pub policies: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// What `version -o json` prints.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    pub version: &'static str,
    pub revision: &'static str,
    /// `GANGPLANK_IMAGE_DIGEST`, when set.
    pub image_digest: Option<String>,
    /// sha256 of the policy set in `--policies` ([`crate::policy::set_hash`]).
    pub policy_set_hash: Option<String>,
    /// The directory hashed.
    pub policies: Option<String>,
}

impl VersionArgs {
    pub fn run(self) -> u8 {
        let Self { output, policies } = self;
        let digest = std::env::var(IMAGE_DIGEST_ENV).ok();
        match version(digest, policies.as_deref()) {
            Ok(v) => {
                print(&v, output);
                exit::OK
            }
            Err(message) => {
                eprintln!("error: {message}");
                exit::UNREADABLE
            }
        }
    }
}

/// The version document; errors name the bad input (a digest of the wrong form, a policy
/// directory that cannot be read).
pub fn version(image_digest: Option<String>, policies: Option<&Path>) -> Result<Version, String> {
    let build = BuildInfo::current();
    let image_digest = image_digest.filter(|d| !d.is_empty());
    if let Some(d) = &image_digest {
        check_digest(d)?;
    }
    let policy_set_hash = match policies {
        Some(dir) => Some(
            PolicySources::read_dir(dir)
                .map_err(|e| {
                    format!(
                        "cannot read policies from {}: {}",
                        dir.display(),
                        error_chain(&e)
                    )
                })?
                .hash,
        ),
        None => None,
    };
    Ok(Version {
        version: build.version,
        revision: build.revision,
        image_digest,
        policy_set_hash,
        policies: policies.map(|p| p.display().to_string()),
    })
}

/// `sha256:` and 64 lowercase hex digits, the form deploy/ pins images with.
fn check_digest(d: &str) -> Result<(), String> {
    let hex = d.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(format!(
            "{IMAGE_DIGEST_ENV}={d:?} is not an image digest (sha256: and 64 lowercase hex digits)"
        ))
    }
}

fn print(v: &Version, output: Output) {
    match output {
        Output::Json => match serde_json::to_string_pretty(v) {
            Ok(text) => println!("{text}"),
            // Serializing strings and options cannot fail; say so if it ever does.
            Err(e) => eprintln!("error: {e}"),
        },
        Output::Text => {
            let none = "(none)";
            println!("gangplank {}", v.version);
            println!("revision:        {}", v.revision);
            println!(
                "image digest:    {}",
                v.image_digest.as_deref().unwrap_or(none)
            );
            match (&v.policy_set_hash, &v.policies) {
                (Some(hash), Some(dir)) => println!("policy set hash: {hash} ({dir})"),
                _ => println!("policy set hash: {none} (no --policies)"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_digest_that_is_not_sha256_hex() {
        let err = version(Some("latest".into()), None).unwrap_err();
        assert!(err.contains("GANGPLANK_IMAGE_DIGEST"), "{err}");
        let ok = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            version(Some(ok.clone()), None).unwrap().image_digest,
            Some(ok)
        );
    }

    #[test]
    fn an_empty_digest_is_no_digest() {
        assert_eq!(
            version(Some(String::new()), None).unwrap().image_digest,
            None
        );
    }
}
