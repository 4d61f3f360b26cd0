//! The guard hooks (SPEC §6): the commands Claude Code runs from the
//! managed settings ([`crate::plan::managed_settings`] writes them there).
//!
//! - `hook session-start` (advisory): outside the sandbox, a loud warning as
//!   hook JSON; inside, quick checks, a warning only when one fails.
//! - `hook prompt-gate` (fail-closed): exit 2 with a message unless the
//!   session is sandboxed (kernel facts, `inside::is_inside`), or
//!   `CLAUDE_CODE_REMOTE=true`, or root created `/etc/claude-code/allow-unwrapped`.
//! - `hook api-key-helper`: the managed `apiKeyHelper`, which outside the
//!   sandbox takes the place of one a session planted in the user's or a
//!   project's settings; it gives no credential.
//! - `hook notices` (`PostToolUse`, `PostToolUseFailure`; issue #44): what
//!   the sandbox refused since the last tool call (`crate::notices`), as
//!   context for the agent; nothing outside the sandbox or when nothing was.
//!
//! The hooks read their JSON stdin without ever blocking on it.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::{sys::inside, sys::paths};

/// Command-line arguments of `claude-sandbox hook`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, clap::Subcommand)]
enum Which {
    /// SessionStart hook: warn when unsandboxed or when a defence is missing.
    SessionStart,
    /// UserPromptSubmit hook: refuse prompts outside the sandbox (exit 2).
    PromptGate,
    /// The managed apiKeyHelper: gives no credential, says why (exit 1).
    ApiKeyHelper,
    /// PostToolUse and PostToolUseFailure hook: what the sandbox refused
    /// since the last tool call, as context for the agent.
    Notices,
}

/// Run a hook; returns the exit status.
pub(crate) fn main(args: &Args) -> anyhow::Result<i32> {
    match args.which {
        Which::SessionStart => {
            drain_stdin();
            let facts = inside::Facts::read();
            let warned = session_start_output(&facts, &std::env::vars().collect::<Vec<_>>());
            // Issue #48: what the launch told the session before it began
            // (the directories a root session has hidden whole).
            let told = facts
                .inside()
                .then(|| {
                    crate::notices::take_unseen(
                        Path::new(crate::notices::INSIDE),
                        Path::new(NOTICES_SEEN),
                    )
                })
                .flatten()
                .unwrap_or_default();
            if let Some(json) = with_told(warned, &told) {
                println!("{json}");
            }
            Ok(0)
        }
        Which::PromptGate => {
            drain_stdin();
            let remote = std::env::var("CLAUDE_CODE_REMOTE").as_deref() == Ok("true");
            let flag = Path::new(paths::ALLOW_UNWRAPPED).exists();
            if inside::is_inside() || remote || flag {
                Ok(0)
            } else {
                eprintln!("{}", gate_message());
                Ok(2)
            }
        }
        Which::Notices => {
            let input = read_stdin();
            let event = serde_json::from_slice::<serde_json::Value>(&input)
                .ok()
                .and_then(|v| v["hook_event_name"].as_str().map(str::to_string))
                .unwrap_or_default();
            let seen = Path::new(NOTICES_SEEN);
            if let Some(lines) =
                crate::notices::take_unseen(Path::new(crate::notices::INSIDE), seen)
            {
                if let Some(json) = crate::notices::hook_json(&event, &lines) {
                    println!("{json}");
                }
            }
            Ok(0)
        }
        // Not a hook: Claude Code gives it no JSON, and reads its stdout as
        // the credential. None, and the reason on stderr.
        Which::ApiKeyHelper => {
            eprintln!("{}", api_key_helper_message());
            Ok(1)
        }
    }
}

/// Where the notices hook remembers how far it has read, inside: the
/// sandbox's own `/tmp`, gone with the session.
const NOTICES_SEEN: &str = "/tmp/.claude-sandbox-notices-seen";

/// Read and discard the hook's JSON input ([`read_stdin`]).
fn drain_stdin() {
    let _ = read_stdin();
}

/// The hook's JSON input (at most 16 MiB), giving up after a short wait: a
/// hook run by hand from a terminal, or fed by a writer that never closes,
/// must not hang.
fn read_stdin() -> Vec<u8> {
    if nix::unistd::isatty(0).unwrap_or(false) {
        return Vec::new();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut input = Vec::new();
        let _ = std::io::stdin()
            .lock()
            .take(16 << 20)
            .read_to_end(&mut input);
        let _ = tx.send(input);
    });
    rx.recv_timeout(Duration::from_secs(2)).unwrap_or_default()
}

fn gate_message() -> String {
    format!(
        "claude-sandbox: this Claude Code session is not sandboxed, so prompts are refused. \
         Start it with plain `claude` (the shadow at {}), not {} directly. \
         An operator who accepts unsandboxed sessions can create {}.",
        paths::SHADOW,
        paths::REAL_CLAUDE,
        paths::ALLOW_UNWRAPPED
    )
}

/// What the managed apiKeyHelper says (Claude Code shows it as the reason the helper failed).
fn api_key_helper_message() -> String {
    format!(
        "claude-sandbox: outside the sandbox an apiKeyHelper from user or project settings does not run (a sandboxed session can write those); \
         start Claude Code with plain `claude` (the shadow at {}), where your own apiKeyHelper works",
        paths::SHADOW
    )
}

/// Names that carry credentials and must not reach a sandboxed session.
const TOKEN_VARS: &[&str] = &[
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GITLAB_TOKEN",
    "GL_TOKEN",
    "ANTHROPIC_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "SSH_AUTH_SOCK",
    "DISPLAY",
];

/// The SessionStart hook's JSON, or None when all is well.
fn session_start_output(facts: &inside::Facts, env: &[(String, String)]) -> Option<String> {
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if !facts.inside() {
        let msg = format!(
            "WARNING: this Claude Code session is NOT running inside claude-sandbox. Commands it runs can read \
             your credentials and reach internal hosts. Quit and start it with plain `claude` ({}).",
            paths::SHADOW
        );
        return Some(warning(&msg));
    }
    let passed: Vec<String> = crate::config::load(Path::new(paths::CONFIG_FILE), &|_| None)
        .map(|l| l.config.pass_env)
        .unwrap_or_default();
    let mut problems = Vec::new();
    for t in TOKEN_VARS {
        if get(t).is_some_and(|v| !v.is_empty()) && !passed.iter().any(|p| p == t) {
            problems.push(format!("{t} is set"));
        }
    }
    if !crate::plan::git_env_in_place(get) {
        problems.push("git config is not pinned to /etc/claude-gitconfig".into());
    }
    if let Some(home) = get("HOME") {
        for f in [".netrc", ".Xauthority"] {
            if std::fs::metadata(Path::new(home).join(f)).is_ok_and(|m| m.len() > 0) {
                problems.push(format!("~/{f} is not masked"));
            }
        }
        for d in [".ssh", ".aws", ".gnupg"] {
            if Path::new(home).join(d).exists() {
                problems.push(format!("~/{d} is visible"));
            }
        }
    }
    if problems.is_empty() {
        return None;
    }
    Some(warning(&format!(
        "WARNING: claude-sandbox integrity check failed: {}. Run /verify-sandbox.",
        problems.join("; ")
    )))
}

/// The SessionStart hook's JSON `warned` with the lines `told` added to
/// its context (a JSON of their own when there is no warning).
fn with_told(warned: Option<String>, told: &[String]) -> Option<String> {
    if told.is_empty() {
        return warned;
    }
    let text = told.join("\n");
    let mut v: serde_json::Value = match warned.and_then(|w| serde_json::from_str(&w).ok()) {
        Some(v) => v,
        None => {
            json!({ "hookSpecificOutput": { "hookEventName": "SessionStart", "additionalContext": "" } })
        }
    };
    let ctx = &mut v["hookSpecificOutput"]["additionalContext"];
    let before = ctx.as_str().unwrap_or_default();
    *ctx = if before.is_empty() {
        text.into()
    } else {
        format!("{before}\n{text}").into()
    };
    Some(v.to_string())
}

fn warning(msg: &str) -> String {
    json!({
        "systemMessage": msg,
        "hookSpecificOutput": { "hookEventName": "SessionStart", "additionalContext": msg },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_key_helper_names_the_way_in() {
        let m = api_key_helper_message();
        assert!(
            m.contains("apiKeyHelper") && m.contains(paths::SHADOW),
            "{m}"
        );
    }

    #[test]
    fn session_start_outside_warns_inside_silent_unless_broken() {
        let outside = inside::Facts::default();
        let out = session_start_output(&outside, &[]).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(v["systemMessage"]
            .as_str()
            .unwrap()
            .contains("NOT running inside"));
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
        let inside_facts = inside::Facts::from_texts(
            true,
            "NoNewPrivs:\t1\nCapEff:\t0000000000000000\nNSpid:\t9\t2\n",
            "1000 1000 1\n",
            "bwrap",
        );
        let env: Vec<(String, String)> = vec![
            ("HOME".into(), "/home/dev".into()),
            ("GIT_CONFIG_GLOBAL".into(), "/home/dev/.gitconfig".into()),
            ("GIT_CONFIG_SYSTEM".into(), "/etc/claude-gitconfig".into()),
        ];
        assert_eq!(session_start_output(&inside_facts, &env), None);
        let mut leaky = env.clone();
        leaky.push(("GH_TOKEN".into(), "ghp_x".into()));
        let out = session_start_output(&inside_facts, &leaky).unwrap();
        assert!(out.contains("GH_TOKEN is set"), "{out}");
        // The old levels (the user's config readable as global) are a problem.
        let mut old = env.clone();
        old[1].1 = "/etc/claude-gitconfig".into();
        old[2].1 = "/dev/null".into();
        let out = session_start_output(&inside_facts, &old).unwrap();
        assert!(out.contains("git config is not pinned"), "{out}");
    }

    #[test]
    fn what_the_launch_told_joins_the_session_start_context() {
        assert_eq!(with_told(None, &[]), None);
        let told = ["claude-sandbox: /opt/x is hidden".to_string()];
        let v: serde_json::Value = serde_json::from_str(&with_told(None, &told).unwrap()).unwrap();
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
        assert_eq!(
            v["hookSpecificOutput"]["additionalContext"],
            "claude-sandbox: /opt/x is hidden"
        );
        let w = Some(warning("WARNING: x"));
        let v: serde_json::Value = serde_json::from_str(&with_told(w, &told).unwrap()).unwrap();
        assert_eq!(
            v["hookSpecificOutput"]["additionalContext"],
            "WARNING: x\nclaude-sandbox: /opt/x is hidden"
        );
        assert_eq!(v["systemMessage"], "WARNING: x");
    }
}
