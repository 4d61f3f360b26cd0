//! creation guard
pub(crate) mod supervisor;
