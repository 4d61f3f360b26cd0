//! sandbox
pub(crate) mod guard_list;
mod model;
pub(crate) mod record;
pub(crate) use model::*;
