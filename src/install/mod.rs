//! install
pub(crate) mod doctor;
pub(crate) mod hooks;
pub(crate) mod promote;
mod setup;
pub(crate) use setup::*;
