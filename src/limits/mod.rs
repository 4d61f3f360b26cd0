//! limits: what a session can exhaust is bounded (issue #24, SPEC §4.4).
//!
//! Promise: a session's processes are bounded by a cgroup of its own where
//! the launch can make one, else by `RLIMIT_NPROC` where that binds (every
//! uid but the kernel's root), and when neither can the launch says so at
//! every start instead of pretending ([`pids`]); the session is told at its
//! end when it hit the limit. The private `~/.cache` and `~/.local/share`
//! keep at most `private-state-max` between sessions: a launch prunes whole
//! entries, least recently changed first, through directory fds that never
//! follow a symlink, leave their tree or cross a mount, and refuses to start
//! (naming the path) when it cannot measure or prune safely ([`private`],
//! [`walk`]). (The tmpfs sizes are plain data: `crate::plan` plans them,
//! `crate::sandbox` renders them.)
//!
//! May import: `sys`, `error`, `config`, `plan` (the host facts' types),
//! `sandbox` (the limits' types), `testhooks`.
//!
//! Exports: [`memory`] (what `tmpfs-size = N%` is of), the process limit
//! ([`detect_pids`], [`describe_pids`], [`Enforced`], [`Spawn`]), the private state's bound
//! ([`PrivateState`]), its measure ([`measure`] of [`private_roots`],
//! for `doctor` and `verify`) and its repair ([`clear_unwalkable`], for
//! `doctor --fix`).

mod cgroup;
mod pids;
mod private;
mod walk;

pub(crate) use cgroup::memory;
pub(crate) use pids::{describe as describe_pids, detect as detect_pids, Enforced, Spawn};
pub(crate) use private::{clear_unwalkable, measure, roots as private_roots, PrivateState};
