//! The checks of what the session is handed (§1, §3, §4.5, §4.6, §4.8, §5,
//! §6): no credential or display in the environment, the curated git
//! config, the config file out of reach, no weakening by the environment
//! unless /etc allows it, the pinned real binary, and the managed settings
//! bound without the lockdown (docs/decisions/0005).

use super::observe::{record, Observed, Outcome};
use super::probe_files::ConfigFileAccess;
use crate::sys::paths;

/// Variables that carry credentials or open an IDE channel.
fn is_secret_var(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "KUBECONFIG",
        "DOCKER_HOST",
        "VSCODE_IPC_HOOK_CLI",
        "VSCODE_GIT_IPC_HANDLE",
        "VSCODE_GIT_ASKPASS_MAIN",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
    ];
    const PREFIX: &[&str] = &["AWS_", "AZURE_", "ARM_CLIENT_", "VAULT_"];
    const PART: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY"];
    // Claude Code sets CLAUDE_CODE_* for its own children inside the sandbox;
    // the launcher never forwards such a name (only §4.5's list and pass-env).
    if name.starts_with("CLAUDE_CODE_") || name == "CLAUDECODE" {
        return false;
    }
    let up = name.to_ascii_uppercase();
    EXACT.contains(&name)
        || PREFIX.iter().any(|p| up.starts_with(p))
        || PART.iter().any(|p| up.contains(p))
}

pub(super) fn check_tokens(o: &Observed) -> Outcome {
    let passed: &[String] = o.record.as_ref().map(|r| &r.pass_env[..]).unwrap_or(&[]);
    let (opted, leaked): (Vec<&String>, Vec<&String>) = o
        .env
        .iter()
        .filter(|(k, v)| is_secret_var(k) && !v.is_empty())
        .map(|(k, _)| k)
        .partition(|k| passed.contains(k));
    if !leaked.is_empty() {
        let names: Vec<&str> = leaked.iter().map(|s| s.as_str()).collect();
        return Err(format!(
            "{} present: the environment is not cleared (or pass-through regressed)",
            names.join(", ")
        ));
    }
    if opted.is_empty() {
        Ok("no credential or IDE-channel variable".into())
    } else {
        let names: Vec<&str> = opted.iter().map(|s| s.as_str()).collect();
        Ok(format!(
            "none leaked; forwarded on purpose by pass-env: {}",
            names.join(", ")
        ))
    }
}

pub(super) fn check_display(o: &Observed) -> Outcome {
    let set: Vec<&str> = ["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY"]
        .into_iter()
        .filter(|k| o.env.get(*k).is_some_and(|v| !v.is_empty()))
        .collect();
    if set.is_empty() {
        Ok("DISPLAY and WAYLAND_DISPLAY empty".into())
    } else {
        Err(format!("{} set: a display could be driven", set.join(", ")))
    }
}

pub(super) fn check_gitconfig(o: &Observed) -> Outcome {
    let g = o.env.get("GIT_CONFIG_GLOBAL").map(String::as_str);
    let s = o.env.get("GIT_CONFIG_SYSTEM").map(String::as_str);
    // The system level is the curated file; the global level the
    // session's own file in its private `$HOME` (the plan's one table).
    if !crate::plan::git_env_in_place(|k| o.env.get(k).map(String::as_str)) {
        return Err(format!(
            "GIT_CONFIG_GLOBAL={} GIT_CONFIG_SYSTEM={}: git may read the user's own config (tokens, hooks)",
            g.unwrap_or("unset"),
            s.unwrap_or("unset")
        ));
    }
    let text = o
        .gitconfig
        .as_ref()
        .map_err(|e| format!("{} unreadable: {e}", paths::GITCONFIG))?;
    if !text.contains("defaultBranch = main") || !text.contains("directory = *") {
        return Err(format!("{} is not the curated config", paths::GITCONFIG));
    }
    if o.gitconfig_writable {
        return Err(format!("{} is writable from inside", paths::GITCONFIG));
    }
    let forge = text.contains("auth git-credential");
    if let Ok(rec) = &o.record {
        if rec.no_forge && forge {
            return Err(
                "no-forge is set but the git config carries forge credential helpers".into(),
            );
        }
    }
    Ok(format!(
        "{} read-only as the system config, the global one private{}",
        paths::GITCONFIG,
        if forge {
            ", forge helpers"
        } else {
            ", no forge helpers"
        }
    ))
}

pub(super) fn check_config(o: &Observed) -> Outcome {
    let ConfigFileAccess {
        exists,
        writable,
        ours,
    } = o.config_file;
    if paths::CONFIG_FILE != "/etc/claude-sandbox.conf" {
        return Err(format!("the config path is {}", paths::CONFIG_FILE));
    }
    let non_root_owner = ours && !nix::unistd::getuid().is_root();
    if exists && (writable || non_root_owner) {
        return Err(format!(
            "{} is {}: a session could rewrite its own sandbox",
            paths::CONFIG_FILE,
            if writable {
                "writable from inside"
            } else {
                "owned by this (non-root) user"
            }
        ));
    }
    Ok(format!(
        "{} (compile-time path){}",
        paths::CONFIG_FILE,
        if exists {
            ", read-only, not ours"
        } else {
            ", absent: defaults"
        }
    ))
}

pub(super) fn check_pin(o: &Observed) -> Outcome {
    match &o.pin {
        Ok(()) => Ok(format!("{} matches {}", paths::REAL_CLAUDE, paths::PIN_FILE)),
        Err(e) if e.starts_with("sha256") => Err(format!(
            "{e}: the real binary changed after install and was launched anyway (the launch-time pin check regressed)"
        )),
        Err(e) => Err(format!("{e}: the sandbox is not installed (sudo claude-sandbox install)")),
    }
}

pub(super) fn check_env_overrides(o: &Observed) -> Outcome {
    let rec = record(o)?;
    match (&rec.weakened_by_env[..], rec.allow_env_overrides) {
        ([], _) => Ok("no CLAUDE_SANDBOX_* variable weakened this sandbox".into()),
        (w, true) => Ok(format!(
            "weakened deliberately ({}), allowed by allow-env-overrides in {}",
            w.join(", "),
            paths::CONFIG_FILE
        )),
        (w, false) => Err(format!(
            "{} weakened this sandbox although {} does not allow environment overrides",
            w.join(", "),
            paths::CONFIG_FILE
        )),
    }
}

/// The launch binds the managed settings without the lockdown (decisions/0005);
/// with the host's file as it is, the user's hooks, status line, MCP servers
/// and apiKeyHelper would not run inside either.
pub(super) fn check_managed_settings(o: &Observed) -> Outcome {
    let path = paths::MANAGED_SETTINGS;
    let text = match &o.managed_settings {
        Ok(None) => {
            return Ok(format!(
                "{path} absent: nothing restricts the user's settings"
            ))
        }
        Ok(Some(t)) => t,
        Err(e) => {
            return Ok(format!(
                "{path} unreadable ({e}): the launch leaves it as the host has it"
            ))
        }
    };
    if o.managed_settings_writable {
        return Err(format!(
            "{path} is writable from inside: a session could rewrite the guard"
        ));
    }
    let Ok(serde_json::Value::Object(root)) = serde_json::from_str::<serde_json::Value>(text)
    else {
        return Ok(format!(
            "{path} is not a JSON object: the launch leaves it as the host has it"
        ));
    };
    let in_effect = crate::plan::managed_settings::lockdown_in_effect(&root);
    if !in_effect.is_empty() {
        return Err(format!(
            "{path} holds the lockdown for unsandboxed sessions ({}): the user's own hooks, MCP servers and apiKeyHelper do not run inside (the launch did not bind its view without it)",
            in_effect.join(", ")
        ));
    }
    let guard_hooks = text.contains(crate::plan::managed_settings::PROMPT_GATE_CMD);
    Ok(format!(
        "{path} read-only, without the lockdown{}",
        if guard_hooks {
            ", guard hooks kept"
        } else {
            ", no guard hooks"
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_variables_recognised() {
        for k in [
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "SSH_AUTH_SOCK",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_PROFILE",
            "NPM_TOKEN",
            "VSCODE_IPC_HOOK_CLI",
            "DB_PASSWORD",
        ] {
            assert!(is_secret_var(k), "{k}");
        }
        for k in [
            "PATH",
            "HOME",
            "TERM",
            "LANG",
            "IS_SANDBOX",
            "CLAUDE_CODE_ENTRYPOINT",
        ] {
            assert!(!is_secret_var(k), "{k}");
        }
    }
}
