//! plan
mod build;
#[cfg(test)]
pub(crate) mod fixtures;
pub(crate) mod gitconfig;
#[cfg(test)]
mod golden;
pub(crate) mod managed_settings;
pub(crate) mod protect;
pub(crate) use build::*;
