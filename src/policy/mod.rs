//! The Rego policy engine: load `policies/`, evaluate mutation and validation rules.
//!
//! Entry points: [`PolicySet::load`] and, per request, [`PolicySet::mutation_intents`] and
//! [`PolicySet::violations`]. The policy contract (package names, `meta`, outputs) is
//! documented for policy authors in `policies/README.md`.

// Request path: data here comes from outside (manifests, AdmissionReviews, policy output),
// so a panic would drop a request; every fallible step returns an error instead.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod applicability;
pub mod classes;
pub mod coverage;
pub mod error;
pub mod eval;
pub mod exceptions;
pub mod excuse;
pub mod exemption;
pub mod intent;
pub mod load;
pub mod params;
pub mod profile;
pub mod rules;
pub mod set;
pub mod set_hash;
pub mod to_rego;
pub mod vm;
pub mod vm_hazards;

pub use error::{EvalError, LoadError};
pub use eval::Violation;
pub use excuse::{Excuses, Exempted};
pub use intent::{Intent, Op};
pub use load::LoadOptions;
pub use params::{Action, ParamsFile};
pub use set::{PolicyInfo, PolicySet};
