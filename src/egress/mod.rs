//! Egress: what the sandbox may reach over the network, and what may reach
//! it (SPEC §4.7, §4.9). One folder per part:
//!
//! - [`policy`] (pure): the modes, rules and presets, the proxy's
//!   decisions, the log's format, the jail's route plan, the broker's table.
//! - `jail/`: the open jail (`egress = open`): its own network namespace,
//!   routes to the internet only, locked before anything runs inside.
//! - `proxy/`: allowlist mode's proxy (and the open jail's, while a
//!   credential is brokered), its holder, and `publish-port`.
//! - `broker/`: the credential broker the proxy hands brokered hosts to.
//! - `report/`: `egress report`, over a session's connection log.
//! - `holders.rs`: what the jail's holder and the allowlist holder share
//!   (the fds they receive, a fresh user and network namespace).
//! - `wire.rs` (pure): HTTP/1.1's message grammar, read by the proxy and
//!   the broker alike.
//!
//! Each part's `mod.rs` says what it promises, may import and exports.
//! Parts import downwards only (tests/layout.rs holds them to it): the
//! jail uses the proxy, the proxy the broker, the broker the wire grammar;
//! all of them the policy, both holders `holders.rs`.
//!
//! May import: `sys`, `error`, `sandbox`, `plan`, `config`, `testhooks`;
//! `policy` only `sys`.
//!
//! Exports: `policy` (namespace); for the launch [`Jail`], [`Early`],
//! [`Ends`], [`StepFailed`], [`host_facts`], [`Proxy`], [`Published`], the
//! credential [`Broker`] and its [`Sources`]; the hidden subcommands
//! [`holder_main`] (`__holder`), [`jail_ns_main`] (`__jail-ns`),
//! [`keeper_main`] (`__pasta-keeper`), [`allowlist_holder_main`]
//! (`__holder-allowlist`); the report's [`report_main`]; and for lib.rs's
//! `fuzz_targets` [`parse_request`] and [`Tally`].

mod broker;
mod holders;
mod jail;
pub(crate) mod policy;
mod proxy;
mod report;
mod wire;

pub(crate) use broker::{Broker, Sources};
pub(crate) use holders::Ends;
pub(crate) use jail::ns_main as jail_ns_main;
pub(crate) use jail::{holder_main, host_facts, keeper_main, Early, Jail, StepFailed};
pub(crate) use proxy::{allowlist_holder_main, parse_request, Proxy, Published};
pub(crate) use report::{report_main, Tally};
