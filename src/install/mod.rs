//! install: the offline commands that put the sandbox in place and check
//! it, never reached from the launch path (tests/layout.rs).
//!
//! Promise: `install` and `uninstall` (SPEC §8) are idempotent and
//! byte-stable, validate everything before the first write, and reverse
//! exactly what a manifest recorded; the real binary is pinned at install
//! (§5, `crate::launch::integrity`); the guard hooks (§6, decision 0005)
//! fail closed outside the sandbox; every host git's system config gets
//! `safe.bareRepository = explicit` (issue #22: a bare-style directory
//! planted in a workspace is not used by host git), appended as one block
//! that uninstall takes out again; `promote` (§9) edits a devcontainer
//! file changing only the inserted text; `doctor` reports one line per
//! fact and exits 0 only when all is in place, naming any alias or
//! function `claude` in the user's shell startup files (issue #24).
//!
//! May import: `sys`, `error`, `config`, `testhooks`, `plan` (the managed settings, the
//! git config), `launch` (its preflight checks and the pin), `egress`
//! (doctor's jail check).
//!
//! Exports: `claude-sandbox install` and `uninstall` ([`Args`], [`main`],
//! [`UninstallArgs`], [`uninstall()`]), and one namespace per other
//! subcommand, each with its own `Args` and `main` (the namespace names the
//! subcommand): `doctor`, `hooks` (`claude-sandbox hook …`), `promote`
//! (also its JSONC edit, for the property tests, and the `/verify-sandbox`
//! command text the battery checks).

pub(crate) mod doctor;
pub(crate) mod hooks;
mod host_git;
mod manifest;
pub(crate) mod promote;
mod real_claude;
mod setup;
mod shell_alias;
mod uninstall;

pub(crate) use setup::{main, Args};
pub(crate) use uninstall::{uninstall, UninstallArgs};
