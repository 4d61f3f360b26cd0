//! seccomp
mod filter;
pub(crate) use filter::*;
