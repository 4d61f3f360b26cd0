//! tripwire
mod watch;
pub(crate) use watch::*;
