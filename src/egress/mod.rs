//! egress
pub(crate) mod jail;
pub(crate) mod policy;
pub(crate) mod proxy;
pub(crate) mod report;
