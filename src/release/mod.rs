//! What a release is made of, built without a container daemon: gangplank's image as an OCI
//! image layout ([`image`], over a deterministic [`tar`] writer) and its push to a registry
//! ([`push`]), deploy/'s reference to it ([`pin`]), and the install files of dist/ rendered
//! from deploy/ ([`render`], with [`kubectl`]'s kustomize). [`git`] refuses a dirty tree. The
//! `gangplank-release` binary (src/bin/gangplank-release.rs) drives them.

pub mod git;
pub mod image;
pub mod kubectl;
pub mod pin;
pub mod push;
pub mod render;
pub mod tar;
