//! notices: what the sandbox refused, told to the agent at the moment it
//! happens (issue #44, item 4), not only to the user when the session ends.
//!
//! Promise: each session has one notices file, written only by the
//! sandbox's own parts — the creation guard's supervisor, through a
//! descriptor the shim hands it, and the allowlist proxy in the shadow —
//! and read-only inside at [`INSIDE`]: Claude Code and everything it starts
//! can read it, nothing inside can write, truncate or replace it (a
//! read-only bind of a file that lives in the private state, which is
//! hidden inside). The managed `PostToolUse` and `PostToolUseFailure` hook
//! (`claude-sandbox hook notices`) returns the lines added since its last
//! run as context for the tool call that caused them. The file goes when
//! the session ends; one a killed launcher left is swept by the next.
//!
//! May import: `sys`.
//!
//! Exports: [`INSIDE`], the host side's [`SessionFile`], the writers'
//! [`append`], and the hook's [`take_unseen`] and [`hook_json`].

mod file;
mod hook;

pub(crate) use file::{append, SessionFile};
pub(crate) use hook::{hook_json, take_unseen};

/// Where a session reads its notices, inside.
pub(crate) const INSIDE: &str = crate::sys::paths::INSIDE_NOTICES;
