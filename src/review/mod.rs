//! Admission requests in, decisions out: the path shared by the webhooks and `gangplank check`.

// Request path: data here comes from outside (manifests, AdmissionReviews, policy output),
// so a panic would drop a request; every fallible step returns an error instead.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod decide;
pub mod diff;
pub mod documents;
pub mod existing;
pub mod input;
pub mod pinned;
pub mod provenance;
pub mod skipped;

pub use decide::{review, Decision};
pub use documents::{read_documents, Document, DocumentError};
pub use input::{Caller, Input, Operation};
