//! launch: the shadow launch (SPEC §2), the runtime that executes a plan.
//! `claude ARGS…` gathers the host facts (the only place the plan's inputs
//! touch the file system), builds the plan ([`crate::plan`]), spawns
//! bubblewrap with the rendered arguments and fds, and runs the real binary
//! through the shim.
//!
//! Promise: never a silent fallback to an unsandboxed run (a sandbox that
//! cannot be built stops the launch, exit 125, naming the escape hatch);
//! the real binary's pin is checked before every launch (§5); read-write
//! roots are re-checked just before exec (§4.3); nothing outside the
//! workspace is bound because the workspace pointed there, and such a
//! pointer is named at launch (issue #22); root sees only what a user
//! would, or less: the walk that decides it fails closed (issues #13, #24);
//! nothing the launch started outlives it, and the tripwire reports
//! afterwards (§4.8).
//!
//! May import: `sys`, `error`, `config`, `testhooks`, `sandbox`, `plan`,
//! `seccomp`, `egress` (the jail and the proxy), `creation_guard` (the
//! shim's supervisor), `tripwire`, `limits` (the process limit, the private
//! state's bound). Never `install`, `verify` or `cli`.
//!
//! Exports: the entries ([`shadow_main`], [`wrapper_main`], [`shim_main`]),
//! one attempt's plan ([`sandbox`], for `claude-sandbox plan`), the checks
//! `doctor` and the installer share ([`preflight()`], [`userns_available`],
//! [`APPARMOR_USERNS_SYSCTL`], [`apparmor_restricts_userns`],
//! [`apparmor_userns_fix`], and the broker's [`base_url_elsewhere`]), the
//! host views the battery compares with
//! ([`loopback_listeners`], [`run_sockets`]), and two namespaces whose names
//! are their API: `integrity` (the real binary's pin, §5) and `rootview`
//! (what an unprivileged user could not read, issues #13 and #24: the
//! launch's masks, the battery's audit, `doctor`'s summary).

mod casefold;
mod exec;
mod host;
pub(crate) mod integrity;
mod listeners;
mod preflight;
mod premask;
pub(crate) mod rootview;
mod shadow;
mod shim;

pub(crate) use host::run_sockets;
pub(crate) use listeners::loopback_listeners;
pub(crate) use preflight::{
    apparmor_restricts_userns, apparmor_userns_fix, preflight, userns_available,
    APPARMOR_USERNS_SYSCTL,
};
pub(crate) use shadow::{base_url_elsewhere, sandbox, shadow_main, wrapper_main};
pub(crate) use shim::shim_main;
