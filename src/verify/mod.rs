//! `claude-sandbox verify` (SPEC §7): the deterministic battery, run from
//! inside a session.
//!
//! PROMISE: each check proves one defence from what the process can observe
//! itself — kernel facts (`/proc/self/*`, namespace ownership, route lookups
//! that send no packet, syscalls the seccomp filter must refuse), the mount
//! table, the environment — plus the *launch record*: a small JSON file the
//! shadow binds read-only over [`crate::sys::paths::LAUNCH_RECORD`] at every
//! launch, saying what the launcher knew and the sandbox cannot see (the
//! jail setting, the launcher's namespaces, the host's loopback listeners,
//! the configured read-write paths). Outside a sandbox that file is the
//! empty placeholder the installer wrote. What a check expects it reads off
//! the plan's own tables (`crate::plan::HOME_*`, `SYSTEM_*`), so the battery
//! and the plan cannot drift apart; a unit test requires a check for every
//! operation of a full plan. A check of the egress jail passes with a note
//! when the jail is deliberately off, and fails when it is on but
//! incomplete. docs/verify.md maps every check to the defence and the
//! mechanism behind it (a unit test keeps the two in step).
//!
//! May import: `plan`, `sandbox` (the launch record), `egress::policy`,
//! `limits` (the private state's measure), `config` (`publish-port` as
//! the file inside names it; sizes in words),
//! `launch` (the pin check, the host's sockets and listeners, the root
//! view's walk), `install` (in tests: the slash command), `sys`. It is off
//! the launch path: only `cli` uses it.
//!
//! Exports: [`Args`] and [`main`] (`claude-sandbox verify [--json]`).
//!
//! Files: `observe` gathers what the `probe_*` files sample (`mountinfo`
//! parses the mount table; `probe_forwarder` asks the kernel for routes to
//! the jail's DNS forwarder by protocol, port and interface; `probe_broker`
//! scans what the session can read for the brokered credentials' real
//! values by their digests); the `check_*` files judge it by area;
//! `battery` lists the checks in order and prints the result; `coverage`
//! (test code) ties the list to the plan and to docs/verify.md.

mod battery;
mod check_broker;
mod check_files;
mod check_home;
mod check_limits;
mod check_net;
mod check_process;
mod check_settings;
#[cfg(test)]
mod coverage;
#[cfg(test)]
mod fixtures;
mod mountinfo;
pub(crate) use mountinfo::unescape as unescape_mountinfo;
mod observe;
mod probe_broker;
mod probe_files;
mod probe_forwarder;
mod probe_limits;
mod probe_net;
mod probe_process;

pub(crate) use battery::{main, Args};
