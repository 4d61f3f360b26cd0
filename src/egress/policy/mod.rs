//! The pure half of egress: data and functions, no I/O beyond what callers
//! hand in, imported by the plan and by egress's runtime alike
//! (tests/layout.rs treats it as a pure unit of its own).
//!
//! PROMISES. `allowlist.rs`: the egress modes, the allowlist's rules and
//! presets, Claude Code's own domains, the decision on each request's name
//! and addresses, and the connection log's format and paths (SPEC §4.9,
//! decision 0008). `routes.rs`: the jail's routes and DNS as functions of
//! the host's routing table and resolv.conf — internal ranges blackholed,
//! link-local unreachable (SPEC §4.7, decisions 0002 and 0004).
//!
//! MAY IMPORT: `sys` only.
//!
//! EXPORTS: the items re-exported below, by name. `DomainRule`, `Egress`
//! and `Preset` are `pub` for lib.rs's `fuzz_targets`.

mod allowlist;
mod routes;

// The property tests name these (lib.rs `fuzz_targets`).
pub(crate) use allowlist::{
    is_session_id, log_dir, log_path, normalise_host, preset, proxy_env, session_id, sessions,
    sessions_in, ClaudeTraffic, Decision, LogLine, NameVerdict, Policy, KEEP_LOGS, PRESETS,
    PROXY_ADDR,
};
pub use allowlist::{DomainRule, Egress, Preset};
pub(crate) use routes::{
    blocked_ranges, parse_resolv, parse_routes, parse_routes_any, plan_jail, JailFacts, BLACKHOLES,
    UNREACHABLE,
};
// Named only by the host facts that unit tests build (plan::fixtures).
#[cfg(test)]
pub(crate) use routes::{HostRoutes, Resolv};
// Named only by testhooks' `allowlist-open` mutation.
#[cfg(feature = "test-mutations")]
pub(crate) use allowlist::PolicyRule;
