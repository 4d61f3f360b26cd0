//! verify
mod battery;
pub(crate) use battery::*;
