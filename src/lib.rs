//! claude-sandbox: plain `claude` always starts inside an OS-level sandbox.
//!
//! One folder per defence or role, each opening (`mod.rs`) with what it
//! promises, what it may import and what it exports; docs/architecture.md
//! draws them and tests/layout.rs keeps the graph so. The sandbox is plain
//! data built by pure planning ([`plan`] into a [`sandbox::Sandbox`]) and
//! executed separately ([`launch`]).

// Everything is crate-private except what the binary and the property tests
// use (below), so the compiler reports dead code and visibility creep.
#![warn(unreachable_pub)]

mod cli;
mod config;
mod creation_guard;
mod egress;
mod error;
mod held;
mod install;
mod launch;
mod limits;
mod notices;
mod plan;
mod sandbox;
mod seccomp;
mod sys;
mod testhooks;
mod tripwire;
mod verify;

pub use cli::main_with;
pub use error::exit_code;

/// The parsers the property tests (tests/fuzz.rs) drive directly, and the
/// managed-settings merge the end-to-end tests install by; nothing else
/// outside the crate uses its modules.
pub mod fuzz_targets {
    pub mod config {
        pub use crate::config::{
            apply_env, parse, ENV_ALLOW_DOMAIN, ENV_ALLOW_IP, ENV_ALLOW_WRITE, ENV_EGRESS,
            ENV_EGRESS_JAIL, ENV_NO_FORGE, ENV_PASS_ENV, ENV_WORKSPACE_ROOT,
        };
        pub use crate::egress::policy::{DomainRule, Egress, Preset};
    }
    pub mod hooks {
        pub use crate::plan::managed_settings::{
            inside_managed, merge_managed, merge_managed_for, unmerge_managed, OperatorEnv,
            API_KEY_HELPER_CMD, PROMPT_GATE_CMD,
        };

        /// The settings keys Claude Code runs as a command, as the lockdown's
        /// one table lists them (tests/planted.rs compares them with the
        /// real binary's own list).
        pub fn command_keys() -> Vec<&'static str> {
            crate::plan::managed_settings::command_keys().collect()
        }
    }
    pub mod promote {
        pub use crate::install::promote::{edit, FEATURE_REF};
    }
    /// The mount table's path fields with their octal escapes (`\040` for
    /// a space) undone, as the battery reads them (tests/common detaches
    /// the checkout's mounts by these paths).
    pub mod mountinfo {
        pub fn unescape(field: &str) -> String {
            crate::verify::unescape_mountinfo(field)
        }
    }
    /// The reader of repositories' git config files (gix-config) and its
    /// allow-list of what git writes in ordinary work (issue #44).
    pub mod gitconfig {
        /// Every entry as `git config --list --null` shows it: (name, value;
        /// `None` for a bare key), or why the file is refused.
        #[allow(clippy::type_complexity)]
        pub fn entries(bytes: &[u8]) -> Result<Vec<(Vec<u8>, Option<Vec<u8>>)>, String> {
            crate::plan::gitconfig::entries(bytes)
        }

        /// The names of the keys outside the allow-list of what git writes
        /// in ordinary work, or why the file is refused.
        pub fn unlisted_keys(bytes: &[u8]) -> Result<Vec<String>, String> {
            crate::plan::gitconfig::unlisted_keys(bytes)
        }
    }
    /// The credential broker's reading of `gh`'s `hosts.yml` (issue #45;
    /// tests/fuzz.rs compares it with `gh auth token`).
    pub mod broker {
        /// The (host, token) pairs the broker takes from `hosts.yml`
        /// `text`, or why it refuses the file.
        pub fn gh_tokens(text: &str) -> Result<Vec<(String, String)>, String> {
            crate::egress::policy::broker::gh_tokens(text).map(|(_, t)| t)
        }

        /// The sandbox's copy of `hosts.yml` `text`, each real value of
        /// `pairs` (real, stand-in) replaced.
        pub fn gh_copy(text: &str, pairs: &[(String, String)]) -> Result<String, String> {
            let (root, _) = crate::egress::policy::broker::gh_tokens(text)?;
            Ok(crate::egress::policy::token_files::copy_of(&root, pairs))
        }
    }
    /// The two parsers of allowlist mode that read what a session sends:
    /// the proxy's request heads and, through the log, the report.
    pub mod egress {
        /// The proxy's reading of a request head: (method, host, port, the
        /// head it would forward for plain http), or the 400's text.
        #[allow(clippy::type_complexity)]
        pub fn parse_head(head: &[u8]) -> Result<(String, String, u16, Option<Vec<u8>>), String> {
            crate::egress::parse_request(head).map(|r| (r.method, r.host, r.port, r.forward_head))
        }

        /// The allowlist's verdict on a request for `host:port` (a tunnel
        /// when `connect`, else plain HTTP) with these `allow-domain` rules
        /// (invalid ones skipped): `Ok(reason)` when allowed by name or
        /// address, `Err(fix)` when refused.
        pub fn verdict(
            rules: &[&str],
            host: &str,
            port: u16,
            connect: bool,
        ) -> Result<String, String> {
            use crate::egress::policy::Via;
            let rules: Vec<_> = rules
                .iter()
                .filter_map(|r| crate::egress::policy::DomainRule::parse(r).ok())
                .collect();
            let p = crate::egress::policy::Policy::new(
                &rules,
                &[],
                Default::default(),
                &[],
                Vec::new(),
            );
            let via = if connect { Via::Connect } else { Via::Http };
            match p.check_name(host, port, via) {
                crate::egress::policy::NameVerdict::Name(origin) => Ok(origin),
                crate::egress::policy::NameVerdict::AllowedIp(ip) => Ok(ip.to_string()),
                crate::egress::policy::NameVerdict::Refused { fix, .. } => Err(fix),
            }
        }

        /// The report's JSON over these log lines (what `egress report --json` prints).
        pub fn report_json(lines: &[Vec<u8>]) -> String {
            let mut t = crate::egress::Tally::default();
            for l in lines {
                t.add_line(l);
            }
            let r = t.finish("fuzz", std::path::Path::new("/fuzz.jsonl"));
            serde_json::to_string(&r).expect("a report serializes")
        }
    }
}
