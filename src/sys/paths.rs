//! Compile-time locations of every security input (SPEC §1).
//!
//! None of these can be changed at launch: no environment variable, argument
//! or workspace file points the shadow elsewhere. Tests reach other places
//! only through entry points that take a staging root explicitly (the
//! installer's `--prefix`) or by running inside a private mount namespace.

/// The shadow, first on every user's PATH.
pub(crate) const SHADOW: &str = "/usr/local/bin/claude";
/// Directory holding our binary and the relocated real Claude Code.
pub(crate) const LIBEXEC_DIR: &str = "/usr/libexec/claude-sandbox";
/// Our own binary; hooks, the battery and the in-sandbox shim run it by this path.
pub(crate) const SELF_BIN: &str = "/usr/libexec/claude-sandbox/claude-sandbox";
/// The real Claude Code binary, off every user's PATH.
pub(crate) const REAL_CLAUDE: &str = "/usr/libexec/claude-sandbox/claude";
/// SHA-256, size and fingerprint of the real binary, written at install.
pub(crate) const PIN_FILE: &str = "/usr/libexec/claude-sandbox/claude.pin";
/// The launch record: an empty placeholder (root 0644) written at install,
/// over which every launch binds, read-only, what the shadow knew at launch
/// (`verify` reads it from inside; see [`crate::sandbox::LaunchRecord`]).
pub(crate) const LAUNCH_RECORD: &str = "/usr/libexec/claude-sandbox/launch.json";
/// Host-global configuration (SPEC §3).
pub(crate) const CONFIG_FILE: &str = "/etc/claude-sandbox.conf";
/// Curated git configuration the sandbox uses (SPEC §4.6).
pub(crate) const GITCONFIG: &str = "/etc/claude-gitconfig";
/// Claude Code's managed (highest-precedence) settings (SPEC §6).
pub(crate) const MANAGED_SETTINGS: &str = "/etc/claude-code/managed-settings.json";
/// Operator's escape hatch for the prompt gate; presence is the signal.
pub(crate) const ALLOW_UNWRAPPED: &str = "/etc/claude-code/allow-unwrapped";

/// Where the real binary appears inside the sandbox, relative to `$HOME`.
pub(crate) const INSIDE_REAL_CLAUDE_REL: &str = ".local/bin/claude";
/// Where a session reads its notices inside: what the sandbox refused, for
/// the agent (`crate::notices`), bound read-only.
pub(crate) const INSIDE_NOTICES: &str = "/run/claude-sandbox/notices";
