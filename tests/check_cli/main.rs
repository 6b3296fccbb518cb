//! `gangplank check` as users run it: the built binary on files, directories and stdin,
//! with exit codes and output checked.
//!
//! Policies are still being written, so the assertions stick to what is stable: exit codes,
//! the document each message names, and the JSON pointer of each denial.
//!
//! One binary (`cargo test --test check_cli`), split by topic: `examples` (the shipped
//! manifests), `formats` (output formats, stdin, AdmissionReviews), `unreadable` (input that
//! must exit 2 with a message naming the document) and `malformed_jobs` (jobs whose structure
//! is wrong: a verdict naming the field, never a crash), `updates` (UPDATE reviews with
//! `oldObject`), `exemptions` (audit-first `--default-action`, exemptions and
//! exceptions), `explain` (`--explain` and `--profile`: the policies the applicability index
//! skips).

mod examples;
mod exemptions;
mod explain;
mod formats;
mod kueue;
mod limits;
mod malformed_jobs;
mod support;
mod trainer;
mod unreadable;
mod updates;
