//! The process inside (SPEC §4.5): its environment, in a stable order, and
//! the real binary's arguments.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::facts::Facts;
use super::network::egress;
use crate::config::Config;
use crate::egress::policy::Egress;
use crate::sys::paths;

/// System directories that lead `PATH` inside the sandbox.
pub(super) const SYSTEM_PATH: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Variables passed through from the launching environment when set (§4.5).
const PASS_THROUGH: &[&str] = &[
    "TERM",
    "COLORTERM",
    "LANG",
    "VIRTUAL_ENV",
    "UV_PROJECT_ENVIRONMENT",
    "UV_CACHE_DIR",
    "UV_PYTHON_CACHE_DIR",
    "PRE_COMMIT_HOME",
    "CLAUDE_SANDBOX_WORKSPACE_ROOT",
];

/// The version queries Claude Code answers on a fast path (~15 ms) only when
/// they are its sole argument; anything more loads the whole app (~220 ms).
const VERSION_ONLY: &[&str] = &["--version", "-v", "-V"];

/// The arguments the real binary receives: `--no-chrome` first, any user
/// `--chrome` dropped (up to a literal `--`, after which arguments are data).
/// A lone version query is passed as it is: it starts no session, so there is
/// no browser integration to refuse, and it keeps Claude Code's fast path.
pub(crate) fn claude_args(user_args: &[OsString]) -> Vec<OsString> {
    if let [only] = user_args {
        if VERSION_ONLY.iter().any(|v| only == v) {
            return vec![only.clone()];
        }
    }
    let mut out = vec![OsString::from("--no-chrome")];
    let mut literal = false;
    for a in user_args {
        if !literal {
            if a == "--" {
                literal = true;
            } else if a == "--chrome"
                || a.as_bytes().starts_with(b"--chrome=")
                || a == "--no-chrome"
            {
                continue;
            }
        }
        out.push(a.clone());
    }
    out
}

/// The environment inside the sandbox (§4.5), in a stable order.
pub(super) fn environment(cfg: &Config, facts: &Facts) -> Vec<(OsString, OsString)> {
    let get = |k: &str| facts.env.get(OsStr::new(k)).cloned();
    let home = facts.home.as_os_str();
    let mut path: Vec<OsString> = SYSTEM_PATH.iter().map(OsString::from).collect();
    // Other absolute, system-wide entries of the caller's PATH keep their
    // order after the system directories (toolchains under /usr/local/...);
    // entries under $HOME or relative ones are dropped.
    if let Some(p) = get("PATH") {
        for entry in std::env::split_paths(&p) {
            if entry.is_absolute()
                && !entry.starts_with(&facts.home)
                && !entry.starts_with("/tmp")
                && !path.iter().any(|e| Path::new(e) == entry)
            {
                path.push(entry.into_os_string());
            }
        }
    }
    path.push(facts.home.join(".local/bin").into_os_string());
    if let Some(venv) = get("VIRTUAL_ENV").filter(|v| Path::new(v).is_absolute()) {
        path.push(Path::new(&venv).join("bin").into_os_string());
    }
    let mut env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), join_paths(&path)),
        ("HOME".into(), home.to_os_string()),
        ("USER".into(), facts.user.clone().into()),
        ("IS_SANDBOX".into(), "1".into()),
    ];
    env.extend(git_env(Path::new(home)));
    // Allowlist mode: tools find the proxy (§4.9); nothing may override it.
    if egress(cfg) == Egress::Allowlist {
        env.extend(
            crate::egress::policy::proxy_env()
                .into_iter()
                .map(|(k, v)| (k.into(), v.into())),
        );
    }
    // The open jail with the credential broker (decision 0016): the same
    // variables name the broker's proxy; a forwarded NO_PROXY keeps only
    // what exempts no brokered host.
    if let Some(b) = facts
        .broker
        .as_ref()
        .filter(|_| egress(cfg) == Egress::Open)
    {
        let forwarded = ["NO_PROXY", "no_proxy"]
            .into_iter()
            .filter(|k| cfg.pass_env.iter().any(|n| n == k))
            .find_map(|k| get(k)?.into_string().ok());
        let hosts: Vec<&str> = b.hosts.iter().map(String::as_str).collect();
        let (vars, _dropped) = crate::egress::policy::open_proxy_env(forwarded.as_deref(), &hosts);
        env.extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
    }
    let mut push = |k: &OsStr, v: OsString| {
        if !env.iter().any(|(e, _)| e == k) {
            env.push((k.to_os_string(), v));
        }
    };
    for k in PASS_THROUGH {
        if let Some(v) = get(k) {
            push(OsStr::new(k), v);
        }
    }
    for (k, v) in &facts.env {
        if k.as_bytes().starts_with(b"LC_") && config_name_ok(k) {
            push(k, v.clone());
        }
    }
    for k in &cfg.pass_env {
        // Re-checked here so no path around the parser can forward a protected name.
        if crate::config::pass_env_refusal(k).is_none() {
            if let Some(v) = get(k) {
                push(OsStr::new(k), v);
            }
        }
    }
    env
}

fn config_name_ok(k: &OsStr) -> bool {
    k.to_str()
        .is_some_and(|s| crate::config::pass_env_refusal(s).is_none())
}

fn join_paths(parts: &[OsString]) -> OsString {
    let mut out = OsString::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(":");
        }
        out.push(p);
    }
    out
}

/// git's two configuration levels inside: the curated config is the system
/// level; the global level is a file of the session's own in its private
/// `$HOME` (a tmpfs), which `git config --global` makes and rewrites, never
/// read outside (issue #44, decision 0026).
fn git_env(home: &Path) -> [(OsString, OsString); 2] {
    [
        (
            "GIT_CONFIG_GLOBAL".into(),
            home.join(".gitconfig").into_os_string(),
        ),
        ("GIT_CONFIG_SYSTEM".into(), paths::GITCONFIG.into()),
    ]
}

/// Whether an environment (`get` looks a variable up) has git's two levels
/// as [`git_env`] sets them for its own `HOME`: the session-start hook's
/// quick check and verify's check 13 ask this one question.
pub(crate) fn git_env_in_place<'a>(get: impl Fn(&str) -> Option<&'a str>) -> bool {
    get("HOME").is_some_and(|home| {
        git_env(Path::new(home)).iter().all(|(k, v)| {
            get(&k.to_string_lossy()).map(std::ffi::OsStr::new) == Some(v.as_os_str())
        })
    })
}
