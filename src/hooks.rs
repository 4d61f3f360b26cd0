//! The integrity guard (SPEC §6): Claude Code hooks installed into the managed
//! settings, and the merge that installs them.
//!
//! - `hook session-start` (advisory): outside the sandbox, a loud warning as
//!   hook JSON; inside, quick checks, a warning only when one fails.
//! - `hook prompt-gate` (fail-closed): exit 2 with a message unless the
//!   session is sandboxed (kernel facts, `inside::is_inside`), or
//!   `CLAUDE_CODE_REMOTE=true`, or root created `/etc/claude-code/allow-unwrapped`.
//!
//! Both drain their JSON stdin without ever blocking on it.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::{inside, paths};

/// Command-line arguments of `claude-sandbox hook`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub which: Which,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Which {
    /// SessionStart hook: warn when unsandboxed or when a defence is missing.
    SessionStart,
    /// UserPromptSubmit hook: refuse prompts outside the sandbox (exit 2).
    PromptGate,
}

pub(crate) const SESSION_START_CMD: &str =
    "/usr/libexec/claude-sandbox/claude-sandbox hook session-start";
pub const PROMPT_GATE_CMD: &str = "/usr/libexec/claude-sandbox/claude-sandbox hook prompt-gate";
/// The process wrapper (§6): a symlink to our binary, dispatched by name.
pub(crate) const WRAPPER: &str = "/usr/libexec/claude-sandbox/claude-wrapper";

/// Run a hook; returns the exit status.
pub(crate) fn main(args: &Args) -> anyhow::Result<i32> {
    drain_stdin();
    match args.which {
        Which::SessionStart => {
            if let Some(json) = session_start_output(
                &inside::Facts::read(),
                &std::env::vars().collect::<Vec<_>>(),
            ) {
                println!("{json}");
            }
            Ok(0)
        }
        Which::PromptGate => {
            let remote = std::env::var("CLAUDE_CODE_REMOTE").as_deref() == Ok("true");
            let flag = Path::new(paths::ALLOW_UNWRAPPED).exists();
            if inside::is_inside() || remote || flag {
                Ok(0)
            } else {
                eprintln!("{}", gate_message());
                Ok(2)
            }
        }
    }
}

/// Read and discard the hook's JSON input, giving up after a short wait: a
/// hook run by hand from a terminal, or fed by a writer that never closes,
/// must not hang.
fn drain_stdin() {
    if nix::unistd::isatty(0).unwrap_or(false) {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin()
            .lock()
            .take(16 << 20)
            .read_to_end(&mut sink);
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_secs(2));
}

pub(crate) fn gate_message() -> String {
    format!(
        "claude-sandbox: this Claude Code session is not sandboxed, so prompts are refused. \
         Start it with plain `claude` (the shadow at {}), not {} directly. \
         An operator who accepts unsandboxed sessions can create {}.",
        paths::SHADOW,
        paths::REAL_CLAUDE,
        paths::ALLOW_UNWRAPPED
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
pub(crate) fn session_start_output(
    facts: &inside::Facts,
    env: &[(String, String)],
) -> Option<String> {
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
    if get("GIT_CONFIG_GLOBAL") != Some(paths::GITCONFIG)
        || get("GIT_CONFIG_SYSTEM") != Some("/dev/null")
    {
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

fn warning(msg: &str) -> String {
    json!({
        "systemMessage": msg,
        "hookSpecificOutput": { "hookEventName": "SessionStart", "additionalContext": msg },
    })
    .to_string()
}

/// What the merge changed (so uninstall undoes exactly that): keys it added
/// that were absent, and the foreign values of keys it overwrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Added {
    pub disable_autoupdater: bool,
    pub auto_updates: bool,
    pub process_wrapper: bool,
    /// Values found before the merge overwrote them, by setting
    /// (`env.DISABLE_AUTOUPDATER`, `env.CLAUDE_CODE_PROCESS_WRAPPER`, `autoUpdates`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub replaced: std::collections::BTreeMap<String, Value>,
}

impl Added {
    /// Fold a later install's changes into this record: what was found first
    /// (the foreign state) wins over what a re-install saw (our own values).
    pub fn absorb(&mut self, later: Added) {
        self.disable_autoupdater |= later.disable_autoupdater;
        self.auto_updates |= later.auto_updates;
        self.process_wrapper |= later.process_wrapper;
        for (k, v) in later.replaced {
            self.replaced.entry(k).or_insert(v);
        }
    }
}

/// Set `map[key] = ours`; note in `added`/`replaced` what was there before.
fn set_ours(
    map: &mut Map<String, Value>,
    key: &str,
    setting: &str,
    ours: Value,
    added: &mut bool,
    replaced: &mut std::collections::BTreeMap<String, Value>,
) {
    match map.insert(key.into(), ours.clone()) {
        None => *added = true,
        Some(old) if old != ours => {
            replaced.insert(setting.into(), old);
        }
        Some(_) => {}
    }
}

/// Undo [`set_ours`]: only while the value is still ours (an administrator's
/// later edit stands), put back the foreign value or remove what we added.
fn unset_ours(
    map: &mut Map<String, Value>,
    key: &str,
    setting: &str,
    ours: &Value,
    added: &Added,
    was_added: bool,
) {
    if map.get(key) != Some(ours) {
        return;
    }
    if let Some(old) = added.replaced.get(setting) {
        map.insert(key.into(), old.clone());
    } else if was_added {
        map.remove(key);
    }
}

fn obj<'a>(v: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    v.entry(key).or_insert_with(|| json!({})).as_object_mut()
}

fn has_command(groups: &[Value], cmd: &str) -> bool {
    groups.iter().any(|g| {
        g.get("hooks").and_then(Value::as_array).is_some_and(|hs| {
            hs.iter()
                .any(|h| h.get("command").and_then(Value::as_str) == Some(cmd))
        })
    })
}

/// Merge the guard into managed settings `text` (None: no file yet). Err when
/// the existing text is not a JSON object (left alone by the caller).
pub fn merge_managed(text: Option<&str>, wrapper: bool) -> Result<(String, Added), String> {
    let mut root: Map<String, Value> = match text {
        None => Map::new(),
        Some(t) => match serde_json::from_str::<Value>(t) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err("it is JSON but not an object".into()),
            Err(e) => return Err(format!("it is not JSON ({e})")),
        },
    };
    let mut added = Added::default();
    {
        let hooks = obj(&mut root, "hooks").ok_or("its `hooks` is not an object")?;
        for (event, cmd) in [
            ("SessionStart", SESSION_START_CMD),
            ("UserPromptSubmit", PROMPT_GATE_CMD),
        ] {
            let groups = hooks.entry(event).or_insert_with(|| json!([]));
            let groups = groups
                .as_array_mut()
                .ok_or(format!("its `hooks.{event}` is not an array"))?;
            if !has_command(groups, cmd) {
                groups.push(json!({ "hooks": [ { "type": "command", "command": cmd } ] }));
            }
        }
    }
    {
        let env = obj(&mut root, "env").ok_or("its `env` is not an object")?;
        set_ours(
            env,
            "DISABLE_AUTOUPDATER",
            "env.DISABLE_AUTOUPDATER",
            json!("1"),
            &mut added.disable_autoupdater,
            &mut added.replaced,
        );
        if wrapper {
            set_ours(
                env,
                "CLAUDE_CODE_PROCESS_WRAPPER",
                "env.CLAUDE_CODE_PROCESS_WRAPPER",
                json!(WRAPPER),
                &mut added.process_wrapper,
                &mut added.replaced,
            );
        }
    }
    set_ours(
        &mut root,
        "autoUpdates",
        "autoUpdates",
        json!(false),
        &mut added.auto_updates,
        &mut added.replaced,
    );
    Ok((
        serde_json::to_string_pretty(&Value::Object(root)).expect("serializes") + "\n",
        added,
    ))
}

/// Remove the guard (and what `added` says the merge added). None: nothing left.
pub fn unmerge_managed(text: &str, added: &Added) -> Option<String> {
    let Ok(Value::Object(mut root)) = serde_json::from_str::<Value>(text) else {
        return Some(text.to_string());
    };
    if let Some(Value::Object(hooks)) = root.get_mut("hooks") {
        for (event, cmd) in [
            ("SessionStart", SESSION_START_CMD),
            ("UserPromptSubmit", PROMPT_GATE_CMD),
        ] {
            if let Some(Value::Array(groups)) = hooks.get_mut(event) {
                for g in groups.iter_mut() {
                    if let Some(Value::Array(hs)) = g.get_mut("hooks") {
                        hs.retain(|h| h.get("command").and_then(Value::as_str) != Some(cmd));
                    }
                }
                groups.retain(|g| {
                    g.get("hooks")
                        .and_then(Value::as_array)
                        .is_none_or(|hs| !hs.is_empty())
                });
                if groups.is_empty() {
                    hooks.remove(event);
                }
            }
        }
        if hooks.is_empty() {
            root.remove("hooks");
        }
    }
    if let Some(Value::Object(env)) = root.get_mut("env") {
        unset_ours(
            env,
            "DISABLE_AUTOUPDATER",
            "env.DISABLE_AUTOUPDATER",
            &json!("1"),
            added,
            added.disable_autoupdater,
        );
        unset_ours(
            env,
            "CLAUDE_CODE_PROCESS_WRAPPER",
            "env.CLAUDE_CODE_PROCESS_WRAPPER",
            &json!(WRAPPER),
            added,
            added.process_wrapper,
        );
        if env.is_empty() {
            root.remove("env");
        }
    }
    unset_ours(
        &mut root,
        "autoUpdates",
        "autoUpdates",
        &json!(false),
        added,
        added.auto_updates,
    );
    (!root.is_empty())
        .then(|| serde_json::to_string_pretty(&Value::Object(root)).expect("serializes") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOREIGN: &str = r#"{
  "permissions": { "deny": ["Bash(curl:*)"] },
  "hooks": {
    "SessionStart": [ { "matcher": "startup", "hooks": [ { "type": "command", "command": "/opt/corp/audit" } ] } ]
  },
  "env": { "CORP": "1" }
}"#;

    #[test]
    fn merge_keeps_numbers_exactly_as_written() {
        // Found by tests/fuzz.rs: an integer beyond 64 bits was read as a
        // float and written back altered, differently on each merge.
        let text = "{\n  \"SessionStart\": {\n    \"SessionStart\": -18019702501368573953\n  },\n  \"big\": 1.00000000000000000001,\n  \"runArgs\": {}\n}";
        let (once, _) = merge_managed(Some(text), false).unwrap();
        let (twice, _) = merge_managed(Some(&once), false).unwrap();
        assert_eq!(once, twice, "a second merge changed the text");
        assert!(once.contains("-18019702501368573953"), "{once}");
        assert!(once.contains("1.00000000000000000001"), "{once}");
    }

    #[test]
    fn merge_keeps_foreign_and_is_idempotent() {
        let (once, added) = merge_managed(Some(FOREIGN), true).unwrap();
        let (twice, _) = merge_managed(Some(&once), true).unwrap();
        let (thrice, _) = merge_managed(Some(&twice), true).unwrap();
        assert_eq!(once, twice);
        assert_eq!(twice, thrice);
        let v: Value = serde_json::from_str(&thrice).unwrap();
        assert_eq!(v["permissions"]["deny"][0], "Bash(curl:*)");
        assert_eq!(v["env"]["CORP"], "1");
        assert_eq!(v["env"]["DISABLE_AUTOUPDATER"], "1");
        assert_eq!(v["env"]["CLAUDE_CODE_PROCESS_WRAPPER"], WRAPPER);
        assert_eq!(v["autoUpdates"], false);
        assert_eq!(
            v["hooks"]["SessionStart"][0]["hooks"][0]["command"],
            "/opt/corp/audit"
        );
        assert_eq!(thrice.matches(SESSION_START_CMD).count(), 1);
        assert_eq!(thrice.matches(PROMPT_GATE_CMD).count(), 1);
        // Foreign keys keep their order.
        assert!(thrice.find("permissions").unwrap() < thrice.find("hooks").unwrap());
        // Unmerge restores the foreign content.
        let back = unmerge_managed(&thrice, &added).unwrap();
        let v: Value = serde_json::from_str(&back).unwrap();
        let orig: Value = serde_json::from_str(FOREIGN).unwrap();
        assert_eq!(v, orig);
    }

    #[test]
    fn overwritten_foreign_values_come_back_on_uninstall() {
        let foreign = r#"{
  "env": { "DISABLE_AUTOUPDATER": "0", "CLAUDE_CODE_PROCESS_WRAPPER": "/opt/corp/wrap" },
  "autoUpdates": true
}"#;
        let (once, mut added) = merge_managed(Some(foreign), true).unwrap();
        let v: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(v["env"]["DISABLE_AUTOUPDATER"], "1");
        assert_eq!(v["env"]["CLAUDE_CODE_PROCESS_WRAPPER"], WRAPPER);
        assert_eq!(v["autoUpdates"], false);
        // A re-install sees our values; the foreign ones recorded first stay.
        let (twice, again) = merge_managed(Some(&once), true).unwrap();
        assert_eq!(once, twice);
        added.absorb(again);
        let back: Value = serde_json::from_str(&unmerge_managed(&twice, &added).unwrap()).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(foreign).unwrap());
    }

    #[test]
    fn an_administrators_later_edit_survives_uninstall() {
        let (text, added) = merge_managed(Some(r#"{"autoUpdates": true}"#), false).unwrap();
        let edited = text.replace(
            r#""DISABLE_AUTOUPDATER": "1""#,
            r#""DISABLE_AUTOUPDATER": "0""#,
        );
        assert_ne!(edited, text);
        let back: Value = serde_json::from_str(&unmerge_managed(&edited, &added).unwrap()).unwrap();
        assert_eq!(back["env"]["DISABLE_AUTOUPDATER"], "0");
        assert_eq!(back["autoUpdates"], true);
    }

    #[test]
    fn fresh_file_unmerges_to_nothing() {
        let (text, added) = merge_managed(None, false).unwrap();
        assert!(!text.contains("CLAUDE_CODE_PROCESS_WRAPPER"));
        assert_eq!(unmerge_managed(&text, &added), None);
    }

    #[test]
    fn non_json_refused() {
        assert!(merge_managed(Some("{ not json"), true)
            .unwrap_err()
            .contains("not JSON"));
        assert!(merge_managed(Some("[1]"), true).is_err());
    }

    #[test]
    fn session_start_outside_warns_inside_silent_unless_broken() {
        let outside = inside::Facts::default();
        let out = session_start_output(&outside, &[]).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
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
            ("GIT_CONFIG_GLOBAL".into(), "/etc/claude-gitconfig".into()),
            ("GIT_CONFIG_SYSTEM".into(), "/dev/null".into()),
        ];
        assert_eq!(session_start_output(&inside_facts, &env), None);
        let mut leaky = env.clone();
        leaky.push(("GH_TOKEN".into(), "ghp_x".into()));
        let out = session_start_output(&inside_facts, &leaky).unwrap();
        assert!(out.contains("GH_TOKEN is set"), "{out}");
    }
}
