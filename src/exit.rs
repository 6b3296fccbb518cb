//! Exit codes shared by the subcommands, and by [`crate::audit`], which decides its own.

/// Everything allowed / every test passed.
pub const OK: u8 = 0;
/// A job was denied (or, for `audit`, would be denied today) / a test failed.
pub const FAILED: u8 = 1;
/// Input or policies could not be read; for `audit`, the cluster could not be reached.
pub const UNREADABLE: u8 = 2;
