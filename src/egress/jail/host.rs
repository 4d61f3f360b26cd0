//! What the open jail reads of the host at launch (SPEC §4.7): its routes
//! and resolv.conf, for the plan's route and DNS plan ([`host_facts`]),
//! and the one-line refusal when a prerequisite is missing, with the way
//! out ([`missing`]; used by the shadow's side and by pasta's keeper).

use std::path::Path;

use crate::egress::policy::{parse_resolv, parse_routes, parse_routes_any, JailFacts};
use crate::error::setup;

/// The one-line refusal when the jail cannot be built, with the way out.
pub(super) fn missing(what: &str, fix: &str) -> anyhow::Error {
    setup(format!(
        "the egress jail cannot be built: {what}; {fix}. claude will not run without it; to run with open network access instead, set egress-jail = 0 in /etc/claude-sandbox.conf (CLAUDE_SANDBOX_EGRESS_JAIL=0 works only where that file allows env overrides)"
    ))
}

/// The host's routes and resolv.conf, for the plan ([`JailFacts`]). The open
/// jail needs a default route (`need_default`); allowlist mode does not.
pub(crate) fn host_facts(need_default: bool) -> anyhow::Result<JailFacts> {
    let routes = std::fs::read_to_string("/proc/net/route")
        .map_err(|e| e.to_string())
        .and_then(|t| {
            if need_default {
                parse_routes(&t)
            } else {
                Ok(parse_routes_any(&t))
            }
        })
        .map_err(|e| {
            missing(
                &format!("cannot read the host's routes ({e})"),
                "check the container's network",
            )
        })?;
    // A missing or unreadable resolv.conf plans as "no resolver": the
    // jail then answers DNS through pasta's forwarder (to nothing).
    let resolv_text = crate::sys::files::read_text(Path::new("/etc/resolv.conf"));
    Ok(JailFacts {
        routes,
        resolv: parse_resolv(resolv_text.as_deref().unwrap_or_default()),
        resolv_missing: matches!(resolv_text, Err(crate::sys::files::ReadError::Missing)),
    })
}
