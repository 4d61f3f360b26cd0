//! egress policy
mod allowlist;
pub(crate) use allowlist::*;
// The property tests name these (lib.rs `fuzz_targets`).
pub use allowlist::{DomainRule, Egress, Preset};
mod routes;
pub(crate) use routes::*;
