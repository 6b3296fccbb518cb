//! Training jobs: the kind table and JobView, one normalized view over every kind.

// Request path: data here comes from outside (manifests, AdmissionReviews, policy output),
// so a panic would drop a request; every fallible step returns an error instead.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod containers;
mod fields;
pub mod kinds;
pub mod naming;
pub mod network_topology;
pub mod placement_facts;
pub mod problem;
pub mod quantity;
pub mod release_order;
pub mod requests;
pub mod trainer_facts;
pub mod view;
pub mod volumes;

pub use kinds::{lookup, KindSpec, Role};
pub use view::JobView;
