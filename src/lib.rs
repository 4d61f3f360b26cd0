//! claude-sandbox: plain `claude` always starts inside an OS-level sandbox.
//!
//! One module per concern; the sandbox plan is plain data built by pure
//! functions ([`plan`]) and executed separately ([`launch`]).

pub mod cli;
pub mod config;
pub mod doctor;
pub mod error;
pub mod files;
pub mod gitconfig;
pub mod hooks;
pub mod host;
pub mod inside;
pub mod install;
pub mod integrity;
pub mod jail;
pub mod kernel;
pub mod launch;
pub mod paths;
pub mod plan;
pub mod promote;
pub mod record;
pub mod sandbox;
pub mod seccomp;
pub mod testhooks;
pub mod verify;

#[cfg(test)]
mod golden;
