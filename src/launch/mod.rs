//! launch
pub(crate) mod host;
pub(crate) mod integrity;
pub(crate) mod rootview;
mod shadow;
pub(crate) use shadow::*;
