//! The tripwire at exit (SPEC §4.8, issue #12 item 3).
//!
//! PROMISE: inside the sandbox the protected workspace paths that exist are
//! read-only ([`crate::plan::protect`]); those that do not exist can still be
//! created, and Claude Code's settings files stay writable. So before the
//! sandbox starts the shadow snapshots everything through which something
//! written inside could run outside: the workspace's protected paths (git
//! config keys that run commands, git hooks and attributes, editor,
//! devcontainer, direnv and MCP files, in every repository) and Claude Code's
//! settings files (every key Claude Code runs as a command, from the
//! lockdown's table in `plan`, and `hooks`, `mcpServers`, `env`,
//! `permissions`, `enabledPlugins`, `extraKnownMarketplaces`: issue #24).
//! When the session ends it compares and reports each change
//! that adds, alters or removes something executable in one block on stderr,
//! recording it with the old content in a per-user log under
//! `$HOME/.local/state/claude-sandbox/tripwire/` that the sandbox never sees.
//! It reports at exit; it does not prevent. At exit the workspace is walked
//! again to any depth ([`crate::plan::protect::discover_all`], bounded by
//! time, one line when the time ran out), so repositories made during the
//! session or beyond the launch's walk are compared too, and a pointer out
//! of the workspace the session made is named. It reads bounded amounts
//! and never follows a symlink (a link is recorded as a link).
//! `claude-sandbox review` lists what is recorded and not reverted;
//! `review --revert` undoes it where the path still holds exactly what the
//! session left (the same inode and content, recorded at the session's
//! end), and only inside the session's workspace or on Claude Code's
//! settings files ([`place`]): it removes only what the session provably
//! created and restores only content it recorded; anything else is named
//! and left alone.
//!
//! May import: `held` (what was held, its apply), `plan` (the protected paths, the git config parser, the
//! private state directory, the managed settings' command keys), `sys`,
//! `error`.
//!
//! Exports: [`Watch`] (start before the sandbox, finish after it) and
//! [`review_main`] (`claude-sandbox review [--revert | --apply ID…]`, the
//! [`Ask`]); what was held for the user (issue #44, `crate::held`) is
//! recorded with the session and listed and applied in `held_review`.
//!
//! The comparison is pure (`compare` over two snapshots, `settings` for
//! Claude Code's keys, both into a `change`: what is printed, recorded and
//! put back); the file system is read by `scan`, and written only by `log`
//! and `review` (through `place`, which confines where a revert may act).

mod change;
mod compare;
#[cfg(test)]
mod fixtures;
mod held_review;
mod log;
mod place;
mod review;
mod scan;
mod settings;
mod watch;

pub(crate) use review::{review_main, Ask};
pub(crate) use watch::Watch;
