//! The open jail (`egress = open`; SPEC §4.7, decisions 0002, 0004, 0013,
//! 0019): the sandbox runs in a network namespace of its own whose routes
//! reach the internet, the DNS resolvers and the `allow-ip` hosts, and
//! nothing internal; nothing inside can change them. Any failed step
//! refuses the launch; there is no unjailed fallback.
//!
//! Files: `shadow.rs` the shadow's side ([`Jail`], [`Early`]); `host.rs`
//! the host's routes and resolv.conf, and the refusal naming what is
//! missing; `holder.rs` the namespace owner, the holder and the route
//! keeper; `pasta_keeper.rs` pasta's keeper; `tun.rs` whether
//! `/dev/net/tun` is usable, and the exact fix when not, and the tap's
//! transmit filter (no multicast reaches pasta: decision 0034).
//!
//! May import: `egress::policy` (the route plan), `egress::holders` (what
//! both holders share), `egress::proxy` and `egress::broker` (the broker's
//! proxy on the jail's loopback, decision 0016), `sandbox`, `plan` and
//! `config` (the early wiring), `sys`, `error`, `testhooks`.
//!
//! Exports: [`Jail`], [`Early`], [`StepFailed`], [`host_facts`];
//! the hidden subcommands [`holder_main`] (`__holder`), [`ns_main`]
//! (`__jail-ns`), [`keeper_main`] (`__pasta-keeper`).

mod holder;
mod host;
mod pasta_keeper;
mod shadow;
mod tun;

pub(crate) use holder::{holder_main, ns_main};
pub(crate) use host::host_facts;
pub(crate) use pasta_keeper::keeper_main;
pub(crate) use shadow::{Early, Jail, StepFailed};
