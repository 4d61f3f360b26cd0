//! plan: the sandbox plan as pure functions (SPEC §4.1–4.9, §6): from the
//! configuration and a snapshot of host facts to a typed
//! [`crate::sandbox::Sandbox`], with no kernel effect, so every rule is
//! unit-tested without namespaces.
//!
//! Promise: `$HOME` is hidden by inversion (§4.2; under a bound-back
//! `~/.claude`, `~/.claude/local` masked, issue #24), system secrets and
//! runtime sockets are masked (§4.1, issue #13), a read-write root never
//! exposes `$HOME`, `/` or a security input (§4.3), the environment is
//! built from an allowlist (§4.5), the network mode is decided in one place
//! ([`egress`], §4.7, §4.9), protected workspace paths are bound read-only
//! or guarded (§4.8, issue #12) and never outside the workspace (issue
//! #22), and the managed settings go in without their lockdown (§6,
//! decisions 0005, 0012; the lockdown is one table, `lockdown.rs`).
//!
//! May import: `sys`, `error`, `config`, `testhooks`, `sandbox`, `seccomp`,
//! `egress::policy` (a pure unit: tests/layout.rs).
//!
//! Exports: [`build()`], the host facts it reads ([`Facts`], [`ProcMode`],
//! [`Unreadable`]) and what the gatherer asks first ([`candidates`],
//! [`rw_requests`], [`jailed`], [`egress`]), the path tables the tripwire,
//! installer and battery share ([`HOME_RW`], [`HOME_PRIVATE`], …), and
//! three namespaces whose names are their API: `protect` (the protected
//! workspace paths, §4.8), `gitconfig` (the curated git config, §4.6, and
//! its reader), `managed_settings` (the merge, §6). `fixtures` (host facts
//! for other folders' unit tests) exists in test builds only.

mod build;
mod env;
mod facts;
#[cfg(test)]
pub(crate) mod fixtures;
mod git_allow;
pub(crate) mod gitconfig;
#[cfg(test)]
mod golden;
mod limits;
mod lockdown;
pub(crate) mod managed_settings;
mod mounts;
mod network;
pub(crate) mod protect;
mod tables;

pub(crate) use build::build;
pub(crate) use env::{claude_args, git_env_in_place};
pub(crate) use facts::{
    candidates, private_dir, rw_requests, Facts, PidsMechanism, ProcMode, RootViewTold, Unreadable,
};
pub(crate) use limits::{tmpfs_size, MASK_TMPFS_SIZE};
pub(crate) use network::{egress, jailed};
pub(crate) use tables::{
    FORGE_FILES, HOME_CLAUDE_MASKED, HOME_FORGE, HOME_NULLED, HOME_PRIVATE, HOME_RO, HOME_RW,
    HOME_SHARE_MASKED, PID1_MEM, PRIVATE_STATE, RUN_KEEP, SYSTEM_NULLED, SYSTEM_TMPFS,
};
