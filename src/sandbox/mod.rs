//! sandbox: the typed description of one launch's sandbox and its one
//! renderer to bubblewrap's arguments (SPEC §4: the filesystem view, §4.4
//! process isolation, §5 the network modes), plus the launch record the
//! sandbox binds read-only and the creation guard's list format.
//!
//! Promise: every fd number the executor, the jail's holder and the shim
//! use is chosen here (in `render`), and every other folder learns its
//! numbers from the [`Rendered`] table or the argument lists rendered here.
//! A `Sandbox` is plain data: `crate::plan` builds it, `crate::launch`
//! executes its rendering; nothing here touches the kernel.
//!
//! May import: `sys`, `egress::policy` (the proxy's policy in [`ProxyNet`]).
//!
//! Exports: the description ([`Sandbox`], [`Mount`], [`Data`], [`RwBind`],
//! [`Namespace`], [`Capabilities`], [`Seccomp`], [`Network`], [`ProxyNet`],
//! [`JailNet`], [`Program`], and what a session may exhaust: [`Limits`],
//! [`Pids`]), the renderer ([`render()`] → [`Rendered`],
//! [`FdContent`], [`Holder`]), the launch record ([`LaunchRecord`],
//! [`RECORD_VERSION`]), and the namespace `guard_list` (its `encode` /
//! `decode` pair is the format's API: the renderer writes, the supervisor
//! inside reads).

pub(crate) mod guard_list;
mod limits;
mod model;
mod record;
mod render;

pub(crate) use limits::{Limits, Pids};
pub(crate) use model::{
    Capabilities, Data, JailNet, Mount, Namespace, Network, Program, ProxyNet, RwBind, Sandbox,
    Seccomp,
};
pub(crate) use record::{LaunchRecord, RECORD_VERSION};
pub(crate) use render::{render, FdContent, Holder, Rendered};
