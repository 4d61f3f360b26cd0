//! Egress: what the sandbox may reach over the network.
//!
//! PROMISES. With `egress = open` the sandbox runs in a network namespace
//! of its own whose routes reach the internet, the DNS resolvers and the
//! `allow-ip` hosts, and nothing internal: site subnets, cloud metadata and
//! the host's loopback are unroutable, and nothing inside can change the
//! routes (SPEC §4.7; docs/decisions/0002, 0004). With `egress = allowlist`
//! the sandbox has no route at all: its one way out is a proxy on its
//! loopback, served from the shadow, that lets through only names on the
//! allowlist, on the ports their rules allow (and only to addresses the
//! jail would route), decides each plain-http request on its own and
//! sends it only where it was decided, and logs every request as it opens
//! and as it closes for `claude-sandbox egress report` (SPEC §4.9;
//! decision 0008). In the open jail, only while the session holds a
//! brokered credential, the same proxy (the credential broker's) listens on
//! the jail's loopback too: it lets every name through, but only to the
//! addresses the jail routes, and logs as allowlist mode's (decision 0016).
//! Any failed step refuses the launch; there is no unjailed fallback.
//! Inward, in either mode, only the `publish-port` ports are reachable, and
//! only from the host's 127.0.0.1 (decision 0011); a port taken on the host
//! stops the launch before anything starts.
//!
//! Two halves. [`policy`] is the pure half (the mode, rules, presets, the
//! proxy's decisions, the log's format, the jail's route plan); it is
//! exported as a namespace because it is a unit of its own (tests/layout.rs
//! checks it imports no runtime unit). The runtime half is private here:
//! for the open jail `jail.rs` (the shadow's side), `jail_holder.rs` (the
//! holder and route keeper), `pasta_keeper.rs` (pasta's keeper); for
//! allowlist mode `allowlist_holder.rs` (the allowlist holder), `proxy.rs`
//! (the proxy the shadow serves), `connection.rs` (one client connection's
//! requests, each decided), `request.rs` (parsing a request head),
//! `http.rs` (plain-HTTP framing and exchanges), `relay.rs` (carrying a
//! tunnel), `logfile.rs` (the log, written as requests open and close),
//! `broker/` (the credential broker the proxy hands brokered hosts to:
//! issue #25, decision 0015); `report.rs` (the report over the log:
//! reading, printing) and `tally.rs` (its sums and risk score);
//! `publish.rs` (`publish-port`: the host-side check, and in allowlist
//! mode the shadow's relay and the holder's connector); `tun.rs` (whether
//! `/dev/net/tun` is usable, and the exact fix when not: the container's own
//! device, or the host's that the devcontainer feature binds).
//!
//! May import: `sys`, `error`, `sandbox` (the plan's network types),
//! `testhooks`; `policy` only `sys`.
//!
//! Exports: `policy` (namespace); for the launch [`Jail`], [`Early`], [`Ends`], [`StepFailed`],
//! [`host_facts`], [`Proxy`], [`Published`], the credential [`Broker`]
//! and its [`Sources`]; the hidden subcommands [`holder_main`]
//! (`__holder`), [`jail_ns_main`] (`__jail-ns`), [`keeper_main`] (`__pasta-keeper`),
//! [`allowlist_holder_main`] (`__holder-allowlist`); the report's
//! [`report_main`]; and for lib.rs's `fuzz_targets` [`parse_request`] and
//! [`Tally`].

mod allowlist_holder;
mod broker;
mod connection;
mod http;
mod jail;
mod jail_holder;
mod logfile;
mod pasta_keeper;
pub(crate) mod policy;
mod proxy;
mod publish;
mod relay;
mod report;
mod request;
mod tally;
mod tun;

pub(crate) use allowlist_holder::allowlist_holder_main;
pub(crate) use broker::{Broker, Sources};
pub(crate) use jail::{host_facts, Early, Ends, Jail, StepFailed};
pub(crate) use jail_holder::holder_main;
pub(crate) use jail_holder::ns_main as jail_ns_main;
pub(crate) use pasta_keeper::keeper_main;
pub(crate) use proxy::Proxy;
pub(crate) use publish::Published;
pub(crate) use report::report_main;
pub(crate) use request::parse_request;
pub(crate) use tally::Tally;
