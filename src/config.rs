//! `/etc/claude-sandbox.conf` and its `CLAUDE_SANDBOX_*` overrides (SPEC §3).
//!
//! Parsing is pure: [`parse`] takes the text and a name for error messages,
//! [`apply_env`] takes a lookup function. Only [`load`] touches the file
//! system, and only at the compile-time path the caller hands it.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::error::bad_input;

/// The default configuration file, compiled into the binary (the installer writes it).
pub(crate) const DEFAULT_CONFIG: &str = include_str!("../etc/claude-sandbox.conf");

/// The effective configuration of one launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub workspace_root: Option<PathBuf>,
    pub no_forge: bool,
    pub allow_write: Vec<PathBuf>,
    pub pass_env: Vec<String>,
    pub egress_jail: bool,
    pub allow_ip: Vec<Ipv4Addr>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workspace_root: None,
            no_forge: false,
            allow_write: Vec::new(),
            pass_env: Vec::new(),
            egress_jail: true,
            allow_ip: Vec::new(),
        }
    }
}

/// Environment variables that override the file.
pub const ENV_WORKSPACE_ROOT: &str = "CLAUDE_SANDBOX_WORKSPACE_ROOT";
pub const ENV_NO_FORGE: &str = "CLAUDE_SANDBOX_NO_FORGE";
pub const ENV_ALLOW_WRITE: &str = "CLAUDE_SANDBOX_ALLOW_WRITE";
pub const ENV_PASS_ENV: &str = "CLAUDE_SANDBOX_PASS_ENV";
pub const ENV_EGRESS_JAIL: &str = "CLAUDE_SANDBOX_EGRESS_JAIL";
pub const ENV_ALLOW_IP: &str = "CLAUDE_SANDBOX_ALLOW_IP";

/// Names `pass-env` may never forward: the sandbox sets them itself, or they
/// would let the launching environment undo a defence.
const NEVER_PASS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "IS_SANDBOX",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
];
/// Prefixes `pass-env` may never forward (`GIT_CONFIG*` would undo the curated
/// git config of §4.6 just as `GIT_CONFIG_GLOBAL` would).
const NEVER_PASS_PREFIX: &[&str] = &["LD_", "GIT_CONFIG"];

/// Why `name` may not be forwarded, if it may not.
pub(crate) fn pass_env_refusal(name: &str) -> Option<&'static str> {
    if !is_identifier(name) {
        return Some("is not a variable name (letters, digits and `_`, not starting with a digit)");
    }
    if NEVER_PASS.contains(&name) || NEVER_PASS_PREFIX.iter().any(|p| name.starts_with(p)) {
        return Some("is never forwarded: the sandbox sets it or it would undo a defence");
    }
    None
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Parse the text of a configuration file. `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> anyhow::Result<Config> {
    let mut cfg = Config::default();
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (line, None),
        };
        let at = |what: String| bad_input(format!("{origin}:{lineno}: {what}"));
        let need = |v: Option<&str>| -> anyhow::Result<String> {
            match v {
                Some(v) if !v.is_empty() => Ok(v.to_string()),
                _ => Err(at(format!("`{key}` needs a value (`{key} = ...`)"))),
            }
        };
        match key {
            "workspace-root" => {
                let v = need(value)?;
                cfg.workspace_root =
                    Some(absolute_path(&v).map_err(|e| at(format!("workspace-root: {e}")))?);
            }
            "allow-write" => {
                let v = need(value)?;
                cfg.allow_write
                    .push(absolute_path(&v).map_err(|e| at(format!("allow-write: {e}")))?);
            }
            "no-forge" => {
                cfg.no_forge = flag(value).map_err(|e| at(format!("no-forge: {e}")))?;
            }
            "egress-jail" => {
                cfg.egress_jail = flag(value).map_err(|e| at(format!("egress-jail: {e}")))?;
            }
            "pass-env" => {
                let v = need(value)?;
                for name in split_list(&v) {
                    if let Some(why) = pass_env_refusal(name) {
                        return Err(at(format!("pass-env: `{name}` {why}")));
                    }
                    push_unique(&mut cfg.pass_env, name.to_string());
                }
            }
            "allow-ip" => {
                let v = need(value)?;
                let ip = parse_allow_ip(&v).map_err(|e| at(format!("allow-ip: {e}")))?;
                if !cfg.allow_ip.contains(&ip) {
                    cfg.allow_ip.push(ip);
                }
            }
            other => {
                return Err(at(format!(
                    "unknown key `{other}` (known: workspace-root, no-forge, allow-write, pass-env, egress-jail, allow-ip)"
                )))
            }
        }
    }
    Ok(cfg)
}

/// Apply `CLAUDE_SANDBOX_*` overrides. A variable that is set replaces what
/// the file said for that key (set but empty clears a list).
pub fn apply_env(
    mut cfg: Config,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> anyhow::Result<Config> {
    let get = |name: &str| -> anyhow::Result<Option<String>> {
        match env(name) {
            None => Ok(None),
            Some(v) => v
                .into_string()
                .map(Some)
                .map_err(|v| bad_input(format!("environment {name}={v:?}: not valid UTF-8"))),
        }
    };
    if let Some(v) = get(ENV_WORKSPACE_ROOT)? {
        cfg.workspace_root = if v.is_empty() {
            None
        } else {
            Some(
                absolute_path(&v)
                    .map_err(|e| bad_input(format!("environment {ENV_WORKSPACE_ROOT}: {e}")))?,
            )
        };
    }
    if let Some(v) = get(ENV_NO_FORGE)? {
        cfg.no_forge = env_bool(ENV_NO_FORGE, &v)?;
    }
    if let Some(v) = get(ENV_EGRESS_JAIL)? {
        cfg.egress_jail = env_bool(ENV_EGRESS_JAIL, &v)?;
    }
    if let Some(v) = get(ENV_ALLOW_WRITE)? {
        cfg.allow_write = v
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| {
                absolute_path(l)
                    .map_err(|e| bad_input(format!("environment {ENV_ALLOW_WRITE}: {e}")))
            })
            .collect::<anyhow::Result<_>>()?;
    }
    if let Some(v) = get(ENV_PASS_ENV)? {
        let mut names = Vec::new();
        for name in split_list(&v) {
            if let Some(why) = pass_env_refusal(name) {
                return Err(bad_input(format!(
                    "environment {ENV_PASS_ENV}: `{name}` {why}"
                )));
            }
            push_unique(&mut names, name.to_string());
        }
        cfg.pass_env = names;
    }
    if let Some(v) = get(ENV_ALLOW_IP)? {
        let mut ips = Vec::new();
        for item in split_list(&v) {
            let ip = parse_allow_ip(item)
                .map_err(|e| bad_input(format!("environment {ENV_ALLOW_IP}: {e}")))?;
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        cfg.allow_ip = ips;
    }
    Ok(cfg)
}

/// Read the file at `path` (a missing file means defaults), then apply the environment.
pub(crate) fn load(path: &Path, env: &dyn Fn(&str) -> Option<OsString>) -> anyhow::Result<Config> {
    use crate::files::{read_text, ReadError};
    let cfg = match read_text(path) {
        Ok(text) => parse(&text, &path.display().to_string())?,
        Err(ReadError::Missing) => Config::default(),
        Err(e @ (ReadError::NotAFile(_) | ReadError::TooLarge(_) | ReadError::NotText)) => {
            return Err(bad_input(format!(
                "{}: {e}; it must be a short text file of `key = value` lines: fix or remove it (see docs/configuration.md)",
                path.display()
            )))
        }
        Err(e) => {
            return Err(bad_input(format!(
                "cannot read {}: {e}; fix its permissions (root 0644)",
                path.display()
            )))
        }
    };
    apply_env(cfg, env)
}

/// The process environment as a lookup function.
pub(crate) fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

fn split_list(v: &str) -> impl Iterator<Item = &str> {
    v.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

fn flag(value: Option<&str>) -> Result<bool, String> {
    match value {
        None | Some("1") | Some("true") | Some("yes") | Some("on") => Ok(true),
        Some("0") | Some("false") | Some("no") | Some("off") => Ok(false),
        Some(v) => Err(format!("`{v}` is not a flag value (use 1 or 0)")),
    }
}

fn env_bool(name: &str, v: &str) -> anyhow::Result<bool> {
    match v.trim() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad_input(format!("environment {name}={v:?}: use 1 or 0"))),
    }
}

fn absolute_path(v: &str) -> Result<PathBuf, String> {
    let p = Path::new(v);
    if !p.is_absolute() {
        return Err(format!("`{v}` is a relative path; give an absolute one"));
    }
    if p.components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!("`{v}` contains `..`; give a plain absolute path"));
    }
    Ok(p.to_path_buf())
}

/// A bare IPv4 address of a host (no prefix, port or name; not loopback,
/// unspecified, broadcast or multicast).
pub(crate) fn parse_allow_ip(v: &str) -> Result<Ipv4Addr, String> {
    let ip: Ipv4Addr = v.parse().map_err(|_| {
        format!("`{v}` is not a bare IPv4 address (write e.g. `10.0.0.5`, no prefix, port or name)")
    })?;
    if ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.octets()[0] == 0
    {
        return Err(format!(
            "`{v}` is not a host address the jail could route to"
        ));
    }
    Ok(ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{exit_code, EXIT_BAD_INPUT};
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    fn err_of(text: &str) -> String {
        let e = parse(text, "/etc/claude-sandbox.conf").unwrap_err();
        assert_eq!(exit_code(&e), EXIT_BAD_INPUT, "{e}");
        e.to_string()
    }

    #[test]
    fn default_file_parses_to_defaults() {
        assert_eq!(parse(DEFAULT_CONFIG, "default").unwrap(), Config::default());
        assert!(Config::default().egress_jail, "the jail is on by default");
    }

    #[test]
    fn every_key() {
        let cfg = parse(
            "# comment\n\nworkspace-root = /workspaces/app\nno-forge\n\
             allow-write = /run/user/1000/podman/podman.sock  # trailing comment\n\
             allow-write = /srv/data\npass-env = FOO, BAR_2\npass-env = BAZ\n\
             egress-jail = 0\nallow-ip = 10.0.0.5\nallow-ip = 192.168.1.20\n",
            "f",
        )
        .unwrap();
        assert_eq!(cfg.workspace_root, Some(PathBuf::from("/workspaces/app")));
        assert!(cfg.no_forge);
        assert_eq!(
            cfg.allow_write,
            vec![
                PathBuf::from("/run/user/1000/podman/podman.sock"),
                PathBuf::from("/srv/data")
            ]
        );
        assert_eq!(cfg.pass_env, vec!["FOO", "BAR_2", "BAZ"]);
        assert!(!cfg.egress_jail);
        assert_eq!(
            cfg.allow_ip,
            vec![Ipv4Addr::new(10, 0, 0, 5), Ipv4Addr::new(192, 168, 1, 20)]
        );
    }

    #[test]
    fn jail_flag_forms() {
        assert!(parse("egress-jail", "f").unwrap().egress_jail);
        assert!(parse("egress-jail = 1", "f").unwrap().egress_jail);
        assert!(!parse("egress-jail = 0", "f").unwrap().egress_jail);
        assert!(err_of("egress-jail = maybe").contains("maybe"));
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = err_of("no-forge\nallow-everything = 1\n");
        assert!(e.contains("/etc/claude-sandbox.conf:2"), "{e}");
        assert!(e.contains("allow-everything"), "{e}");
    }

    #[test]
    fn allow_ip_must_be_bare_ipv4() {
        for bad in [
            "10.0.0.0/8",
            "10.0.0.5:80",
            "example.com",
            "fd00::1",
            "127.0.0.1",
            "0.0.0.0",
            "10.0.0",
        ] {
            let e = err_of(&format!("allow-ip = {bad}"));
            assert!(e.contains(bad) && e.contains(":1:"), "{bad}: {e}");
        }
    }

    #[test]
    fn relative_paths_refused() {
        let e = err_of("allow-write = run/podman.sock");
        assert!(
            e.contains("run/podman.sock") && e.contains("relative"),
            "{e}"
        );
        let e = err_of("\n\nworkspace-root = ../x");
        assert!(e.contains(":3:") && e.contains("../x"), "{e}");
        assert!(err_of("allow-write = /srv/../etc").contains(".."));
    }

    #[test]
    fn pass_env_must_be_identifiers() {
        for bad in ["1ABC", "A-B", "A.B", "$HOME"] {
            let e = err_of(&format!("pass-env = {bad}"));
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn pass_env_never_forwards_protected_names() {
        for bad in [
            "LD_PRELOAD",
            "PATH",
            "IS_SANDBOX",
            "HOME",
            "USER",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_SYSTEM",
            "GIT_CONFIG_COUNT",
            "LD_LIBRARY_PATH",
            "BASH_ENV",
            "ENV",
            "SHELLOPTS",
            "BASHOPTS",
            "IFS",
        ] {
            let e = err_of(&format!("pass-env = {bad}"));
            assert!(e.contains(bad), "{e}");
        }
        let e = apply_env(
            Config::default(),
            &env_of(&[(ENV_PASS_ENV, "LD_PRELOAD, PATH, IS_SANDBOX")]),
        )
        .unwrap_err();
        assert_eq!(exit_code(&e), EXIT_BAD_INPUT);
    }

    #[test]
    fn missing_value_is_an_error() {
        assert!(err_of("allow-write").contains("needs a value"));
        assert!(err_of("allow-ip =").contains("needs a value"));
    }

    #[test]
    fn env_takes_precedence() {
        let file = parse(
            "egress-jail = 0\nallow-ip = 10.0.0.5\nworkspace-root = /a\n",
            "f",
        )
        .unwrap();
        let cfg = apply_env(
            file.clone(),
            &env_of(&[
                (ENV_EGRESS_JAIL, "1"),
                (ENV_ALLOW_IP, "10.1.1.1,10.2.2.2"),
                (ENV_WORKSPACE_ROOT, "/b"),
                (ENV_ALLOW_WRITE, "/x\n/y\n"),
                (ENV_PASS_ENV, "FOO BAR"),
                (ENV_NO_FORGE, "1"),
            ]),
        )
        .unwrap();
        assert!(cfg.egress_jail);
        assert_eq!(
            cfg.allow_ip,
            vec![Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 2, 2, 2)]
        );
        assert_eq!(cfg.workspace_root, Some(PathBuf::from("/b")));
        assert_eq!(
            cfg.allow_write,
            vec![PathBuf::from("/x"), PathBuf::from("/y")]
        );
        assert_eq!(cfg.pass_env, vec!["FOO", "BAR"]);
        assert!(cfg.no_forge);
        // Config on, env off: env wins.
        let on = parse("egress-jail = 1", "f").unwrap();
        assert!(
            !apply_env(on, &env_of(&[(ENV_EGRESS_JAIL, "0")]))
                .unwrap()
                .egress_jail
        );
        // Nothing set: the file stands.
        assert_eq!(apply_env(file.clone(), &env_of(&[])).unwrap(), file);
    }

    #[test]
    fn bad_env_values_are_errors() {
        for (k, v) in [
            (ENV_EGRESS_JAIL, "nope"),
            (ENV_NO_FORGE, "2"),
            (ENV_ALLOW_IP, "10.0.0.0/8"),
            (ENV_ALLOW_WRITE, "relative/path"),
            (ENV_WORKSPACE_ROOT, "ws"),
        ] {
            let e = apply_env(Config::default(), &env_of(&[(k, v)])).unwrap_err();
            assert_eq!(exit_code(&e), EXIT_BAD_INPUT);
            assert!(e.to_string().contains(k), "{e}");
        }
    }

    #[test]
    fn load_missing_file_means_defaults() {
        let cfg = load(Path::new("/nonexistent/claude-sandbox.conf"), &env_of(&[])).unwrap();
        assert_eq!(cfg, Config::default());
    }
}
