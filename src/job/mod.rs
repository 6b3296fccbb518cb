//! Training jobs: the kind table and JobView, one normalized view over every kind.

pub mod kinds;
pub mod naming;
pub mod quantity;
pub mod view;

pub use kinds::{lookup, KindSpec, Role};
pub use view::JobView;
