//! The pure half of egress: data and functions, no I/O beyond what callers
//! hand in, imported by the plan and by egress's runtime alike
//! (tests/layout.rs treats it as a pure unit of its own).
//!
//! PROMISES. `rules.rs`: the egress modes, the allowlist's rules and
//! presets, Claude Code's own domains. `decide.rs`: the proxy's verdict on
//! each request's name and on the addresses it resolves to — allowed only
//! by a rule (in the open jail's broker proxy: any name, decision 0016),
//! and never to an address the open jail would not route unless
//! `allow-ip` names it; the proxy variables inside. `log.rs`: the connection log's format and
//! paths (SPEC §4.9, decision 0008). `routes.rs`: the jail's routes and
//! DNS as functions of the host's routing table and resolv.conf —
//! internal ranges blackholed, link-local unreachable, pasta's DNS
//! forwarder routed for UDP port 53 only, and sockets bound to the jail's
//! interface kept off the blocked ranges too (SPEC §4.7, decisions 0002
//! and 0004, issue #24). `broker.rs`: the credential broker's table of
//! hosts, stand-ins and header swap, and the salted digests `verify` finds
//! the real values by (issue #25, decision 0015).
//! `claude_oauth.rs`: Claude Code's login file, its token endpoint and the
//! JSON of a refresh and its answer (decision 0017). `token_files.rs`:
//! `gh`'s and `glab`'s token files read as the tools read them, or
//! refused, and the sandbox's copy of them (issue #45).
//!
//! May import: `sys` only.
//!
//! Exports: the items re-exported below, by name, and the namespaces
//! `broker` and `claude_oauth`. `DomainRule`, `Egress`
//! and `Preset` are `pub` for lib.rs's `fuzz_targets`.

pub(crate) mod broker;
pub(crate) mod claude_oauth;
mod decide;
mod log;
mod routes;
mod rules;
pub(crate) mod token_files;

// The property tests name these (lib.rs `fuzz_targets`).
pub use rules::{DomainRule, Egress, Preset};

pub(crate) use decide::{open_proxy_env, proxy_env, NameVerdict, Policy, PROXY_ADDR};
pub(crate) use log::{
    is_session_id, log_dir, log_path, session_id, sessions, sessions_in, Decision, LogLine,
    KEEP_LOGS,
};
pub(crate) use routes::{
    blocked_ranges, parse_resolv, parse_routes, parse_routes_any, plan_jail, JailFacts, BLACKHOLES,
    DNS_FORWARDER, UNREACHABLE,
};
pub(crate) use rules::{normalise_host, preset, ClaudeTraffic, Via, PRESETS};

// Named only by the host facts that unit tests build (plan::fixtures).
#[cfg(test)]
pub(crate) use routes::{HostRoutes, Resolv};
// Named only by testhooks' `allowlist-open` mutation.
#[cfg(feature = "test-mutations")]
pub(crate) use decide::PolicyRule;
