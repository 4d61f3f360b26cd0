//! The lockdown (decisions 0005 and 0012): the one table of managed settings
//! that keep Claude Code, started outside the sandbox, from running what a
//! sandboxed session can plant in user or project settings — the switches
//! that restrict hooks and MCP servers, every key Claude Code runs as a
//! command, the `env` variables that load code into the processes it
//! starts, the `env` variables that decide where Claude Code sends its
//! credentials and which TLS certificates it trusts (pinned to the
//! operator's values, decision 0031), and the permission switch that keeps
//! a planted `bypassPermissions` off — and the dotted-key access the merge,
//! its undoing and the sandbox's view share. Pure JSON.

use serde_json::{json, Map, Value};

use super::env::SYSTEM_PATH;

/// The managed `apiKeyHelper` (decision 0005), pinned by the lockdown.
pub const API_KEY_HELPER_CMD: &str =
    "/usr/libexec/claude-sandbox/claude-sandbox hook api-key-helper";

/// How the merge takes a [`LockKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Always ours: a foreign value is replaced, and put back by uninstall.
    Force,
    /// Ours only where the key is absent: whatever value an administrator
    /// put there already outranks every user and project setting, and stays.
    IfAbsent,
    /// Never written: `stops` says what already keeps a planted value from running.
    Never,
}

/// What a [`LockKey`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A switch or list restricting what user and project settings may add.
    Restriction,
    /// A settings key whose value Claude Code runs as a command: exactly
    /// the binary's own list of them (tests/planted.rs compares).
    Command,
    /// A variable of `env` that makes a process load or run code it names.
    Env,
    /// A permission switch.
    Permission,
    /// A variable of `env` that decides where Claude Code sends its
    /// credentials, or which certificates it trusts (decision 0031): pinned
    /// to the operator's value at install ([`OperatorEnv`]), `ours` (`""`,
    /// Claude Code's default) where the operator has none.
    Endpoint,
}

/// One managed setting of the lockdown. `key` is dotted for a key inside
/// an object (`env.LD_PRELOAD`, `permissions.disableBypassPermissionsMode`).
#[derive(Debug)]
pub(crate) struct LockKey {
    pub key: &'static str,
    pub kind: Kind,
    pub claim: Claim,
    /// Our value.
    pub ours: fn() -> Value,
    /// What it keeps from running outside the sandbox.
    pub stops: &'static str,
}

/// The inert value of a string key Claude Code runs as a command.
fn no_command() -> Value {
    json!("")
}

/// The inert value of an object key `{type: "command", command}`.
fn no_command_object() -> Value {
    json!({ "type": "command", "command": "" })
}

/// `PATH` outside the sandbox: the system directories only.
fn system_path() -> Value {
    json!(SYSTEM_PATH.join(":"))
}

const fn command(key: &'static str, ours: fn() -> Value, stops: &'static str) -> LockKey {
    LockKey {
        key,
        kind: Kind::Command,
        claim: Claim::IfAbsent,
        ours,
        stops,
    }
}

const fn env(key: &'static str, stops: &'static str) -> LockKey {
    LockKey {
        key,
        kind: Kind::Env,
        claim: Claim::IfAbsent,
        ours: no_command,
        stops,
    }
}

const fn endpoint(key: &'static str, stops: &'static str) -> LockKey {
    LockKey {
        key,
        kind: Kind::Endpoint,
        claim: Claim::IfAbsent,
        ours: no_command,
        stops,
    }
}

/// The managed settings that keep Claude Code, started outside the sandbox,
/// from running what a sandboxed session can plant in `~/.claude/settings.json`,
/// `~/.claude.json`, a project's `.claude/settings*.json` or `.mcp.json`,
/// while the guard hooks (managed) still run. Verified against the pinned
/// Claude Code, see docs/decisions/0005-managed-settings-lockdown.md and
/// docs/decisions/0012-planted-settings-inert-outside.md.
pub(crate) const LOCKDOWN: &[LockKey] = &[
    LockKey {
        key: "allowManagedHooksOnly",
        kind: Kind::Restriction,
        claim: Claim::Force,
        ours: || json!(true),
        stops: "hooks and the status line of user, project and local settings and of user-installed plugins",
    },
    LockKey {
        key: "allowManagedMcpServersOnly",
        kind: Kind::Restriction,
        claim: Claim::Force,
        ours: || json!(true),
        stops: "allowedMcpServers entries outside the managed settings",
    },
    LockKey {
        key: "allowedMcpServers",
        kind: Kind::Restriction,
        claim: Claim::IfAbsent,
        ours: || json!([]),
        stops: "MCP servers of ~/.claude.json, .mcp.json, settings and plugins",
    },
    command(
        "apiKeyHelper",
        || json!(API_KEY_HELPER_CMD),
        "an apiKeyHelper of user or project settings",
    ),
    command("awsAuthRefresh", no_command, "an awsAuthRefresh of user or project settings (runs when Bedrock is on)"),
    command("awsCredentialExport", no_command, "an awsCredentialExport of user or project settings (runs when Bedrock is on)"),
    command("gcpAuthRefresh", no_command, "a gcpAuthRefresh of user or project settings (runs when Vertex is on)"),
    command("otelHeadersHelper", no_command, "an otelHeadersHelper of user or project settings (runs when telemetry is on)"),
    command("proxyAuthHelper", no_command, "a proxyAuthHelper of user or project settings (runs behind a proxy)"),
    command("fileSuggestion", no_command_object, "a fileSuggestion command of user or project settings (runs on @)"),
    command("statusLine", no_command_object, "a status line command of user or project settings"),
    command("subagentStatusLine", no_command_object, "a subagent status line command of user or project settings"),
    command("processWrapper", no_command, "a processWrapper of user settings (background sessions' launcher)"),
    LockKey {
        key: "policyHelpers",
        kind: Kind::Command,
        claim: Claim::Never,
        ours: || Value::Null,
        stops: "nothing to stop: Claude Code reads it only from admin-controlled sources, never from user or project settings",
    },
    LockKey {
        key: "permissions.disableBypassPermissionsMode",
        kind: Kind::Permission,
        claim: Claim::IfAbsent,
        ours: || json!("disable"),
        stops: "a defaultMode of bypassPermissions in user or project settings (every tool call unprompted)",
    },
    env("env.LD_PRELOAD", "a library loaded into every process Claude Code starts"),
    env("env.LD_LIBRARY_PATH", "libraries found first in a directory a session wrote"),
    env("env.LD_AUDIT", "an audit library loaded into every process"),
    env("env.GCONV_PATH", "character-set modules loaded by glibc"),
    env("env.BASH_ENV", "a script every non-interactive bash runs first"),
    env("env.ENV", "a script every sh runs first"),
    env("env.SHELLOPTS", "bash options (xtrace with a PS4 that runs commands)"),
    env("env.BASHOPTS", "bash shopt options"),
    env("env.PS4", "a command substitution bash's xtrace runs"),
    env("env.PROMPT_COMMAND", "a command every interactive bash runs"),
    env("env.NODE_OPTIONS", "a module every node preloads (--require)"),
    env("env.BUN_OPTIONS", "options of every bun process (--preload)"),
    env("env.PERL5OPT", "a module every perl loads (-M)"),
    env("env.RUBYOPT", "a library every ruby loads (-r)"),
    env("env.JAVA_TOOL_OPTIONS", "an agent every JVM loads (-javaagent)"),
    env("env.GIT_CONFIG_COUNT", "git config entries (core.pager, aliases, diff drivers) given in the environment"),
    env("env.GIT_CONFIG_PARAMETERS", "git config entries given in the environment"),
    env("env.GIT_EXEC_PATH", "git's own programs taken from a directory a session wrote"),
    env("env.GIT_ASKPASS", "a program git runs for credentials"),
    env("env.SSH_ASKPASS", "a program ssh and git run for credentials"),
    env("env.CLAUDE_CODE_SHELL_PREFIX", "a program Claude Code runs every hook, helper and command through (the guard hooks included)"),
    env("env.CLAUDE_CODE_SHELL", "the shell Claude Code runs commands with"),
    LockKey {
        key: "env.PATH",
        kind: Kind::Env,
        claim: Claim::IfAbsent,
        ours: system_path,
        stops: "programs (git, sh, ps) found first in a directory a session wrote",
    },
    endpoint("env.ANTHROPIC_BASE_URL", "the API key and login token sent to a server a session names"),
    endpoint("env.ANTHROPIC_BEDROCK_BASE_URL", "Bedrock credentials sent to a server a session names"),
    endpoint("env.ANTHROPIC_BEDROCK_MANTLE_BASE_URL", "Bedrock credentials sent to a server a session names"),
    endpoint("env.ANTHROPIC_VERTEX_BASE_URL", "Google Cloud credentials sent to a server a session names"),
    endpoint("env.ANTHROPIC_GOOGLE_CLOUD_BASE_URL", "Google Cloud credentials sent to a server a session names"),
    endpoint("env.ANTHROPIC_AWS_BASE_URL", "AWS credentials sent to a server a session names"),
    endpoint("env.ANTHROPIC_FOUNDRY_BASE_URL", "Foundry credentials sent to a server a session names"),
    endpoint("env.CLAUDE_CODE_API_BASE_URL", "the API key and login token of the Files API sent to a server a session names"),
    endpoint("env.CLAUDE_CODE_CUSTOM_OAUTH_URL", "the login flow taken to another of Claude Code's approved OAuth servers"),
    endpoint("env.HTTP_PROXY", "every plain-HTTP request, API key included, through a proxy a session names"),
    endpoint("env.http_proxy", "every plain-HTTP request, API key included, through a proxy a session names"),
    endpoint("env.HTTPS_PROXY", "every HTTPS connection through a proxy a session names"),
    endpoint("env.https_proxy", "every HTTPS connection through a proxy a session names"),
    endpoint("env.ALL_PROXY", "every request through a proxy a session names"),
    endpoint("env.all_proxy", "every request through a proxy a session names"),
    endpoint("env.NO_PROXY", "hosts taken past the operator's proxy"),
    endpoint("env.no_proxy", "hosts taken past the operator's proxy"),
    endpoint("env.NODE_TLS_REJECT_UNAUTHORIZED", "TLS certificate checks turned off (0)"),
    endpoint("env.NODE_EXTRA_CA_CERTS", "a certificate authority a session made trusted, for reading the API key on its way"),
];

/// The variable of `env` holding the names of the [`Kind::Endpoint`]
/// variables install wrote (space separated): the operator's values are
/// not ours to know later, so the launch drops exactly these inside the
/// sandbox, and an administrator's own value, never named, stays.
pub(crate) const ENDPOINT_PINS: &str = "env.CLAUDE_SANDBOX_ENDPOINT_PINS";

/// The operator's values of the [`Kind::Endpoint`] variables: what install
/// finds in its own environment. A proxy variable takes either case's
/// value, upper case first, for both (Claude Code reads one case or the
/// other depending on the call: pinning `HTTPS_PROXY` empty beside an
/// operator's `https_proxy` would turn the proxy off).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorEnv(std::collections::BTreeMap<String, String>);

impl OperatorEnv {
    /// The values `lookup` (the environment) gives.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut m = std::collections::BTreeMap::new();
        for k in LOCKDOWN.iter().filter(|k| k.kind == Kind::Endpoint) {
            let var = split(k.key).1;
            let names = if var.to_ascii_uppercase().ends_with("_PROXY") {
                vec![var.to_ascii_uppercase(), var.to_ascii_lowercase()]
            } else {
                vec![var.to_string()]
            };
            if let Some(v) = names
                .iter()
                .find_map(|n| lookup(n).filter(|v| !v.is_empty()))
            {
                m.insert(var.to_string(), v);
            }
        }
        OperatorEnv(m)
    }

    /// This process's environment (install's own).
    pub fn from_process() -> Self {
        Self::from_lookup(|n| std::env::var(n).ok())
    }

    /// The value pinned for dotted `key` (`env.ANTHROPIC_BASE_URL`): the
    /// operator's, else `""` (Claude Code's default).
    pub(crate) fn value(&self, key: &str) -> Value {
        json!(self.0.get(split(key).1).map_or("", String::as_str))
    }
}

/// The entries the merge writes (all but [`Claim::Never`]).
pub(crate) fn pinned() -> impl Iterator<Item = &'static LockKey> {
    LOCKDOWN.iter().filter(|k| k.claim != Claim::Never)
}

/// The names a managed `env` marks with [`ENDPOINT_PINS`].
pub(crate) fn endpoint_pins(root: &Map<String, Value>) -> Vec<&str> {
    get(root, ENDPOINT_PINS)
        .and_then(Value::as_str)
        .map(|s| s.split_whitespace().collect())
        .unwrap_or_default()
}

/// The settings keys Claude Code runs as a command ([`Kind::Command`]).
pub(crate) fn command_keys() -> impl Iterator<Item = &'static str> {
    LOCKDOWN
        .iter()
        .filter(|k| k.kind == Kind::Command)
        .map(|k| k.key)
}

/// `key` split at its one dot: (the object's key, the key in it).
fn split(key: &str) -> (Option<&str>, &str) {
    match key.split_once('.') {
        Some((parent, leaf)) => (Some(parent), leaf),
        None => (None, key),
    }
}

/// The value at dotted `key`, if any.
pub(crate) fn get<'a>(root: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    match split(key) {
        (None, leaf) => root.get(leaf),
        (Some(parent), leaf) => root.get(parent)?.as_object()?.get(leaf),
    }
}

/// Set dotted `key` to `v` (making its object where absent); the value it
/// replaced. Err when the object's key holds something else than an object.
pub(crate) fn set(
    root: &mut Map<String, Value>,
    key: &str,
    v: Value,
) -> Result<Option<Value>, String> {
    match split(key) {
        (None, leaf) => Ok(root.insert(leaf.into(), v)),
        (Some(parent), leaf) => root
            .entry(parent)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|o| o.insert(leaf.into(), v))
            .ok_or(format!("its `{parent}` is not an object")),
    }
}

/// Remove dotted `key`; its object too when that leaves it empty.
pub(crate) fn remove(root: &mut Map<String, Value>, key: &str) {
    match split(key) {
        (None, leaf) => {
            root.shift_remove(leaf);
        }
        (Some(parent), leaf) => {
            if let Some(Value::Object(o)) = root.get_mut(parent) {
                if o.shift_remove(leaf).is_some() && o.is_empty() {
                    root.shift_remove(parent);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_keys_reach_one_level_in_and_clean_up_after_themselves() {
        let mut root: Map<String, Value> =
            serde_json::from_str(r#"{"env":{"A":"1"},"x":1,"bad":3}"#).unwrap();
        assert_eq!(get(&root, "env.A"), Some(&json!("1")));
        assert_eq!(get(&root, "x.y"), None);
        assert_eq!(set(&mut root, "env.B", json!("2")).unwrap(), None);
        assert_eq!(set(&mut root, "perm.m", json!("d")).unwrap(), None);
        assert!(set(&mut root, "bad.k", json!(1)).is_err());
        remove(&mut root, "perm.m");
        assert!(!root.contains_key("perm"), "an object we emptied goes");
        remove(&mut root, "env.A");
        assert_eq!(root["env"], json!({"B": "2"}));
        remove(&mut root, "x");
        remove(&mut root, "absent.key");
        assert_eq!(Value::Object(root), json!({"env": {"B": "2"}, "bad": 3}));
    }

    #[test]
    fn the_table_names_each_key_once_and_env_keys_are_variables() {
        let mut seen = std::collections::BTreeSet::new();
        for k in LOCKDOWN {
            assert!(seen.insert(k.key), "{} twice", k.key);
            assert_eq!(
                matches!(k.kind, Kind::Env | Kind::Endpoint),
                k.key.starts_with("env."),
                "{}",
                k.key
            );
            assert!(k.key.matches('.').count() <= 1, "{}", k.key);
        }
        for k in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "NODE_OPTIONS",
            "BASH_ENV",
            "ENV",
            "PATH",
        ] {
            assert!(
                seen.contains(format!("env.{k}").as_str()),
                "{k}: named by issue #24"
            );
        }
        assert_eq!(
            system_path(),
            json!("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        );
    }
}
