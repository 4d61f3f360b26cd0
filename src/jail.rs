//! The egress jail (SPEC §4.7). Not built yet: issue #3.
//!
//! Interface used by [`crate::launch`]:
//! - [`Jail::prepare`] checks prerequisites and computes everything (no side effects);
//! - [`Jail::bwrap_args`] / [`Jail::data_fds`] add to the plan (e.g. a resolv.conf bind);
//! - [`Jail::command`] is spawned instead of bubblewrap (the holder, which execs
//!   bubblewrap once the routes are locked);
//! - [`Jail::attach`] runs right after the spawn (pasta attach, release the holder).

use std::ffi::OsString;
use std::path::Path;
use std::process::{Child, Command};

use crate::config::Config;
use crate::error::setup;

/// A prepared egress jail.
#[derive(Debug)]
pub struct Jail {
    _private: (),
}

impl Jail {
    /// Check the jail's prerequisites and prepare it.
    pub fn prepare(_cfg: &Config) -> anyhow::Result<Jail> {
        Err(setup(
            "the egress jail is not available yet in this build, and claude never runs unjailed silently; \
             to run without it set egress-jail = 0 in /etc/claude-sandbox.conf or CLAUDE_SANDBOX_EGRESS_JAIL=0",
        ))
    }

    /// bubblewrap options the jail adds before the command.
    pub fn bwrap_args(&self) -> Vec<OsString> {
        Vec::new()
    }

    /// Data for numbered fds the jail's bubblewrap options read.
    pub fn data_fds(&self) -> Vec<(i32, Vec<u8>)> {
        Vec::new()
    }

    /// The command to spawn in place of `bwrap ARGS`.
    pub fn command(&self, bwrap: &Path, bwrap_args: &[OsString]) -> Command {
        let mut c = Command::new(bwrap);
        c.args(bwrap_args);
        c
    }

    /// Called right after [`Jail::command`] was spawned.
    pub fn attach(&mut self, _holder: &Child) -> anyhow::Result<()> {
        Ok(())
    }
}
