//! claude-sandbox: plain `claude` always starts inside an OS-level sandbox.
//!
//! One module per concern; the sandbox plan is plain data built by pure
//! functions ([`plan`]) and executed separately ([`launch`]).

// Everything is crate-private except what the binary and the property tests
// use (below), so the compiler reports dead code and visibility creep.
#![warn(unreachable_pub)]

mod cli;
mod clock;
mod config;
mod doctor;
mod egress;
mod error;
mod files;
mod gitconfig;
mod hooks;
mod host;
mod inside;
mod install;
mod integrity;
mod jail;
mod kernel;
mod launch;
mod paths;
mod plan;
mod promote;
mod protect;
mod proxy;
mod record;
mod report;
mod rootview;
mod sandbox;
mod seccomp;
mod testhooks;
mod tripwire;
mod verify;

#[cfg(test)]
mod golden;

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
        pub use crate::egress::{DomainRule, Egress, Preset};
    }
    pub mod hooks {
        pub use crate::hooks::{
            inside_managed, merge_managed, unmerge_managed, API_KEY_HELPER_CMD, PROMPT_GATE_CMD,
        };
    }
    pub mod promote {
        pub use crate::promote::{edit, FEATURE_REF};
    }
}
