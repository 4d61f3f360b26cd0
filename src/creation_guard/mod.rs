//! creation guard
mod filter;
pub(crate) mod supervisor;
