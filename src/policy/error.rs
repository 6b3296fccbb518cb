//! Errors of loading a policy set and of evaluating it.

use std::path::PathBuf;

/// Why a policy directory could not become a policy set. A set that fails to load is
/// never partly used: the caller keeps whatever set it had before.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("policy directory {dir} does not exist or is not a directory")]
    NotADirectory { dir: PathBuf },
    #[error("no policies (*.rego) in {dir}")]
    NoPolicies { dir: PathBuf },
    #[error("cannot read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "policy file name {path} must be a Rego identifier: lower-case letters, digits and '_'"
    )]
    BadPolicyName { path: PathBuf },
    /// regorus's message keeps file:line:col and a caret under the fault.
    #[error("policy {policy} does not compile:\n{message}")]
    Compile { policy: String, message: String },
    #[error("{path}: declares {found}, but a policy file named {name}.rego must declare `package gangplank.policies.{name}`")]
    WrongPackage {
        path: PathBuf,
        name: String,
        found: String,
    },
    #[error("policy {policy} ({path}): {detail}")]
    BadMeta {
        policy: String,
        path: PathBuf,
        detail: String,
    },
    /// A `# METADATA` block that cannot be read: the index must never guess.
    #[error("{path}: {detail}")]
    BadMetadata { path: PathBuf, detail: String },
    #[error("{message}")]
    Params { message: String },
    /// Digest pinning that could be aimed anywhere: refused like a policy that does not
    /// compile, so `serve` does not start with it and a reload keeps the previous set.
    #[error("params.yaml imageResolution")]
    ImageResolution {
        #[source]
        source: crate::images::settings::SettingsError,
    },
    /// A file of `exceptions/` that cannot be used: the file and the field at fault.
    #[error("{}: {field}: {detail}", path.display())]
    Exception {
        path: PathBuf,
        field: String,
        detail: String,
    },
    #[error("params.yaml configures policy {name:?}, which does not exist (policies: {known})")]
    UnknownPolicy { name: String, known: String },
    #[error("policy set fails on a sample job, so it would fail every request:\n{message}")]
    Smoke { message: String },
}

/// Why an evaluation produced no decision. The webhook turns these into a refusal
/// (fail closed); `gangplank check` reports them and exits 2.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("evaluating {rule} failed: {message}")]
    Rego { rule: String, message: String },
    #[error("policy {policy} returned a malformed {what}: {detail}")]
    BadOutput {
        policy: String,
        what: &'static str,
        detail: String,
    },
    #[error("policy {policy}: mutation {op} {path} cannot be applied: {detail}")]
    Intent {
        policy: String,
        op: String,
        path: String,
        detail: String,
    },
}
