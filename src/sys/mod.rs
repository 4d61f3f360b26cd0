//! sys
pub(crate) mod clock;
pub(crate) mod fd;
pub(crate) mod files;
pub(crate) mod inside;
pub(crate) mod kernel;
pub(crate) mod paths;
pub(crate) mod user;
