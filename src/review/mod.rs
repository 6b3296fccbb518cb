//! Admission requests in, decisions out: the path shared by the webhooks and `gangplank check`.

pub mod decide;
pub mod documents;
pub mod input;

pub use decide::{review, Decision};
pub use documents::{read_documents, Document, DocumentError};
pub use input::{Input, Operation};
