//! Claude Code's managed settings (SPEC §6, decisions 0005 and 0012): the
//! merge that installs the guard hooks, the process wrapper and the
//! *lockdown* (`plan::lockdown::LOCKDOWN`: settings that make Claude
//! Code, started outside the sandbox, ignore or never run the hooks, MCP
//! servers, command keys, code-loading `env` variables and bypass mode of
//! user and project settings, which a sandboxed session can write), its
//! undoing, and [`inside_managed`]: the same settings without the lockdown,
//! which the launch binds over the file inside. Pure JSON in, JSON out.

use serde_json::{json, Map, Value};

pub(crate) use super::lockdown::command_keys;
pub use super::lockdown::OperatorEnv;
pub use super::lockdown::API_KEY_HELPER_CMD;
use super::lockdown::{
    endpoint_pins, get, pinned, remove, set, Claim, Kind, LockKey, ENDPOINT_PINS,
};

pub(crate) const SESSION_START_CMD: &str =
    "/usr/libexec/claude-sandbox/claude-sandbox hook session-start";
pub const PROMPT_GATE_CMD: &str = "/usr/libexec/claude-sandbox/claude-sandbox hook prompt-gate";
/// After every tool call, successful or not: what the sandbox refused
/// meanwhile, as context for the agent (issue #44).
pub(crate) const NOTICES_CMD: &str = "/usr/libexec/claude-sandbox/claude-sandbox hook notices";
/// The guard's hooks, by Claude Code event.
const HOOKS: &[(&str, &str)] = &[
    ("SessionStart", SESSION_START_CMD),
    ("UserPromptSubmit", PROMPT_GATE_CMD),
    ("PostToolUse", NOTICES_CMD),
    ("PostToolUseFailure", NOTICES_CMD),
];
/// The process wrapper (§6): a symlink to our binary, dispatched by name.
pub(crate) const WRAPPER: &str = "/usr/libexec/claude-sandbox/claude-wrapper";

/// What the merge changed (so uninstall undoes exactly that): keys it added
/// that were absent, and the foreign values of keys it overwrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Added {
    pub disable_autoupdater: bool,
    pub auto_updates: bool,
    pub process_wrapper: bool,
    /// Keys of the the lockdown the merge added where they were absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lockdown: Vec<String>,
    /// Values found before the merge overwrote them, by setting
    /// (`env.DISABLE_AUTOUPDATER`, `env.CLAUDE_CODE_PROCESS_WRAPPER`,
    /// `autoUpdates`, and the lockdown keys the merge forces).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub replaced: std::collections::BTreeMap<String, Value>,
    /// The operator's values the merge wrote for the endpoint variables it
    /// added (decision 0031), so uninstall leaves an administrator's later edit.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub endpoints: std::collections::BTreeMap<String, Value>,
}

impl Added {
    /// Fold a later install's changes into this record: what was found first
    /// (the foreign state) wins over what a re-install saw (our own values).
    pub fn absorb(&mut self, later: Added) {
        self.disable_autoupdater |= later.disable_autoupdater;
        self.auto_updates |= later.auto_updates;
        self.process_wrapper |= later.process_wrapper;
        for k in later.lockdown {
            if !self.lockdown.contains(&k) {
                self.lockdown.push(k);
            }
        }
        for (k, v) in later.replaced {
            self.replaced.entry(k).or_insert(v);
        }
        for (k, v) in later.endpoints {
            self.endpoints.entry(k).or_insert(v);
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

/// [`unset_ours`] for a lockdown key, dotted (`env.PATH`); an endpoint
/// variable's own is the operator's value the merge wrote.
fn unset_pin(root: &mut Map<String, Value>, k: &LockKey, added: &Added) {
    let key = k.key;
    let ours = match k.kind {
        Kind::Endpoint => added.endpoints.get(key).cloned(),
        _ => Some((k.ours)()),
    };
    if ours.is_none() || get(root, key) != ours.as_ref() {
        return;
    }
    if let Some(old) = added.replaced.get(key) {
        // The object holding it exists: the key is there.
        let _ = set(root, key, old.clone());
    } else if added.lockdown.iter().any(|a| a == key) {
        remove(root, key);
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

/// Write the lockdown's entries into `root` where they are absent (or
/// forced), the endpoint variables with the `operator`'s values, named in
/// [`ENDPOINT_PINS`]; note in `added` what was written or replaced.
fn pin_lockdown(
    root: &mut Map<String, Value>,
    operator: &OperatorEnv,
    added: &mut Added,
) -> Result<(), String> {
    let mut pins: Vec<String> = endpoint_pins(root)
        .into_iter()
        .map(str::to_string)
        .collect();
    for k in pinned() {
        if k.claim == Claim::IfAbsent && get(root, k.key).is_some() {
            continue;
        }
        let ours = match k.kind {
            Kind::Endpoint => operator.value(k.key),
            _ => (k.ours)(),
        };
        match set(root, k.key, ours.clone())? {
            None => added.lockdown.push(k.key.into()),
            Some(old) if old != ours => {
                added.replaced.insert(k.key.into(), old);
            }
            Some(_) => {}
        }
        if k.kind == Kind::Endpoint {
            added.endpoints.insert(k.key.into(), ours);
            let var = &k.key["env.".len()..];
            if !pins.iter().any(|p| p == var) {
                pins.push(var.to_string());
            }
        }
    }
    set_pins(root, &pins);
    Ok(())
}

/// [`ENDPOINT_PINS`] naming `names`, or gone when there are none.
fn set_pins(root: &mut Map<String, Value>, names: &[String]) {
    if names.is_empty() {
        remove(root, ENDPOINT_PINS);
    } else {
        // `env` is an object here: the endpoint variables are in it.
        let _ = set(root, ENDPOINT_PINS, json!(names.join(" ")));
    }
}

/// Whether lockdown key `k` of `root` holds our value: an endpoint
/// variable when [`ENDPOINT_PINS`] names it (the operator's value is not
/// ours to know later), any other when it holds `ours`.
fn holds_ours(root: &Map<String, Value>, k: &LockKey) -> bool {
    match k.kind {
        Kind::Endpoint => {
            get(root, k.key).is_some() && endpoint_pins(root).contains(&&k.key["env.".len()..])
        }
        _ => get(root, k.key) == Some(&(k.ours)()),
    }
}

/// Merge the guard into managed settings `text` (None: no file yet), the
/// endpoint variables pinned to Claude Code's defaults. Err when the
/// existing text is not a JSON object (left alone by the caller).
pub fn merge_managed(text: Option<&str>, wrapper: bool) -> Result<(String, Added), String> {
    merge_managed_for(text, wrapper, &OperatorEnv::default())
}

/// [`merge_managed`] with the endpoint variables pinned to `operator`'s
/// values (decision 0031).
pub fn merge_managed_for(
    text: Option<&str>,
    wrapper: bool,
    operator: &OperatorEnv,
) -> Result<(String, Added), String> {
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
        for &(event, cmd) in HOOKS {
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
    pin_lockdown(&mut root, operator, &mut added)?;
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
        for &(event, cmd) in HOOKS {
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
    for k in pinned() {
        unset_pin(&mut root, k, added);
    }
    remove(&mut root, ENDPOINT_PINS);
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

/// The managed settings as a sandboxed session sees them: the host's
/// `text` without the the lockdown keys that still hold our values (an
/// administrator's own value of such a key stays), so the user's hooks,
/// status line, MCP servers and apiKeyHelper work inside while the guard
/// hooks stay. `None` when `text` is not a JSON object: the launch then
/// binds nothing, and Claude Code reads the file as the host has it.
///
/// Written compact, so never longer than `text` (at most
/// [`crate::sys::files::LIMIT`], which a pipe to bubblewrap can hold).
pub fn inside_managed(text: &str) -> Option<String> {
    let Ok(Value::Object(mut root)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    let ours: Vec<&str> = pinned()
        .filter(|k| holds_ours(&root, k))
        .map(|k| k.key)
        .collect();
    for key in ours {
        remove(&mut root, key);
    }
    remove(&mut root, ENDPOINT_PINS);
    Some(serde_json::to_string(&Value::Object(root)).expect("serializes"))
}

/// The lockdown keys of the parsed managed settings `root` that still hold
/// our values (what [`inside_managed`] removes).
pub(crate) fn lockdown_in_effect(root: &Map<String, Value>) -> Vec<&'static str> {
    pinned()
        .filter(|k| holds_ours(root, k))
        .map(|k| k.key)
        .collect()
}

/// Whether the managed settings `text` keep user and project code from
/// running outside the sandbox: `Ok` with a summary, or `Err` naming what is
/// missing. A key the merge leaves to an administrator counts when set.
pub(crate) fn lockdown_report(text: &str) -> Result<String, String> {
    let Ok(Value::Object(root)) = serde_json::from_str::<Value>(text) else {
        return Err("the file is not a JSON object".into());
    };
    let mut missing = Vec::new();
    let mut foreign = Vec::new();
    for k in pinned() {
        match (get(&root, k.key), k.claim) {
            (Some(_), _) if holds_ours(&root, k) => {}
            (Some(_), Claim::IfAbsent) => foreign.push(k.key),
            _ => missing.push(format!("{} (stops {})", k.key, k.stops)),
        }
    }
    if !missing.is_empty() {
        return Err(format!("missing: {}", missing.join("; ")));
    }
    let keys: Vec<&str> = pinned()
        .filter(|k| !matches!(k.kind, Kind::Env | Kind::Endpoint))
        .map(|k| k.key)
        .collect();
    let vars = pinned().filter(|k| k.kind == Kind::Env).count();
    let summary = format!(
        "{}; env: {vars} variables that load code; {}",
        keys.join(", "),
        endpoints_summary(&root)
    );
    Ok(if foreign.is_empty() {
        summary
    } else {
        format!(
            "{summary} ({} set by the administrator)",
            foreign.join(", ")
        )
    })
}

/// What the endpoint variables of `root` are pinned to (decision 0031):
/// those at Claude Code's default (`""`) by name, the others with their value.
fn endpoints_summary(root: &Map<String, Value>) -> String {
    let (mut default, mut set) = (Vec::new(), Vec::new());
    for k in pinned().filter(|k| k.kind == Kind::Endpoint) {
        let var = &k.key["env.".len()..];
        match get(root, k.key) {
            Some(Value::String(v)) if v.is_empty() => default.push(var.to_string()),
            Some(v) => set.push(format!(
                "{var}={}",
                without_userinfo(&v.as_str().map_or(v.to_string(), str::to_string))
            )),
            None => {}
        }
    }
    let mut parts = vec![format!(
        "endpoints pinned to the default: {}",
        or_none(&default)
    )];
    if !set.is_empty() {
        parts.push(format!("to the operator's values: {}", set.join(", ")));
    }
    parts.join("; ")
}

/// `url` without a user and password (a proxy's `http://user:pass@host`),
/// for a report.
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) if !scheme.is_empty() => format!("{scheme}://…@{}", &rest[at + 1..]),
        _ => url.to_string(),
    }
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The endpoint variables whose value in this environment (`lookup`)
/// differs from the one the managed settings `text` pin: outside the
/// sandbox Claude Code uses the pinned one (decision 0031). Names only:
/// a proxy's value may hold a password.
pub(crate) fn endpoints_overridden(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<String> {
    let Ok(Value::Object(root)) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let here = OperatorEnv::from_lookup(lookup);
    pinned()
        .filter(|k| k.kind == Kind::Endpoint)
        .filter(|k| get(&root, k.key).is_some_and(|v| *v != here.value(k.key)))
        .map(|k| k.key["env.".len()..].to_string())
        .collect()
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

    /// The lockdown keys of `v` and their values.
    fn lockdown_of(v: &Value) -> Vec<(&'static str, Option<Value>)> {
        pinned()
            .map(|k| (k.key, get(v.as_object().unwrap(), k.key).cloned()))
            .collect()
    }

    #[test]
    fn merge_writes_the_lockdown_and_uninstall_takes_it_back() {
        let (text, added) = merge_managed(Some(FOREIGN), false).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        for (key, value) in lockdown_of(&v) {
            let ours = (pinned().find(|k| k.key == key).unwrap().ours)();
            assert_eq!(value, Some(ours), "{key}: {text}");
        }
        assert_eq!(v["allowManagedHooksOnly"], true);
        assert_eq!(v["allowManagedMcpServersOnly"], true);
        assert_eq!(v["allowedMcpServers"], json!([]));
        assert_eq!(v["apiKeyHelper"], API_KEY_HELPER_CMD);
        assert_eq!(v["env"]["LD_PRELOAD"], "");
        assert_eq!(v["awsAuthRefresh"], "");
        assert_eq!(v["statusLine"]["command"], "");
        assert_eq!(v["permissions"]["disableBypassPermissionsMode"], "disable");
        assert_eq!(
            v["permissions"]["deny"][0], "Bash(curl:*)",
            "foreign permissions stay"
        );
        assert_eq!(added.lockdown.len(), pinned().count(), "{added:?}");
        assert_eq!(lockdown_report(&text).map(|_| ()), Ok(()));
        let back: Value = serde_json::from_str(&unmerge_managed(&text, &added).unwrap()).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(FOREIGN).unwrap());
    }

    #[test]
    fn an_administrators_lockdown_values_are_forced_or_kept() {
        // A foreign `false` is no lockdown: replaced, and put back on uninstall.
        // A foreign allowlist or helper already outranks the user's: kept.
        let foreign = r#"{
  "allowManagedHooksOnly": false,
  "allowManagedMcpServersOnly": false,
  "allowedMcpServers": [ { "serverName": "corp-docs" } ],
  "apiKeyHelper": "/opt/corp/key-helper"
}"#;
        let (text, mut added) = merge_managed(Some(foreign), false).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["allowManagedHooksOnly"], true);
        assert_eq!(v["allowManagedMcpServersOnly"], true);
        assert_eq!(v["allowedMcpServers"][0]["serverName"], "corp-docs");
        assert_eq!(v["apiKeyHelper"], "/opt/corp/key-helper");
        for theirs in ["allowManagedHooksOnly", "allowedMcpServers", "apiKeyHelper"] {
            assert!(!added.lockdown.iter().any(|k| k == theirs), "{added:?}");
        }
        assert!(added.lockdown.iter().any(|k| k == "env.PATH"), "{added:?}");
        assert_eq!(added.replaced["allowManagedHooksOnly"], false);
        let report = lockdown_report(&text).unwrap();
        assert!(
            report.ends_with("(allowedMcpServers, apiKeyHelper set by the administrator)"),
            "{report}"
        );
        // Inside, the administrator's allowlist and helper stay.
        let inside: Value = serde_json::from_str(&inside_managed(&text).unwrap()).unwrap();
        assert_eq!(inside["apiKeyHelper"], "/opt/corp/key-helper");
        assert_eq!(inside["allowedMcpServers"][0]["serverName"], "corp-docs");
        assert!(inside.get("allowManagedHooksOnly").is_none(), "{inside}");
        let (again, later) = merge_managed(Some(&text), false).unwrap();
        assert_eq!(again, text);
        added.absorb(later);
        let back: Value = serde_json::from_str(&unmerge_managed(&again, &added).unwrap()).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(foreign).unwrap());
    }

    #[test]
    fn inside_the_lockdown_is_gone_and_the_guard_stays() {
        let (text, _) = merge_managed(Some(FOREIGN), true).unwrap();
        let inside_text = inside_managed(&text).unwrap();
        assert!(inside_text.len() <= text.len());
        let inside: Value = serde_json::from_str(&inside_text).unwrap();
        let mut expected: Value = serde_json::from_str(&text).unwrap();
        for k in pinned() {
            remove(expected.as_object_mut().unwrap(), k.key);
        }
        remove(expected.as_object_mut().unwrap(), ENDPOINT_PINS);
        assert_eq!(inside["env"]["CORP"], "1");
        assert!(inside["env"].get("PATH").is_none(), "{inside}");
        assert!(inside["permissions"]
            .get("disableBypassPermissionsMode")
            .is_none());
        assert_eq!(inside, expected);
        assert!(inside_text.contains(SESSION_START_CMD) && inside_text.contains(PROMPT_GATE_CMD));
        assert!(lockdown_in_effect(inside.as_object().unwrap()).is_empty());
        assert!(lockdown_report(&inside_text).is_err());
        // Idempotent; foreign keys keep their order.
        assert_eq!(inside_managed(&inside_text).unwrap(), inside_text);
        assert!(inside_text.find("permissions").unwrap() < inside_text.find("hooks").unwrap());
        // An administrator's own edit of a lockdown key is theirs: it stays.
        let edited = text.replace(API_KEY_HELPER_CMD, "/opt/corp/key-helper");
        assert!(inside_managed(&edited)
            .unwrap()
            .contains("/opt/corp/key-helper"));
        // Not a JSON object: nothing to bind.
        for bad in ["{ not json", "[1]", "\"text\"", ""] {
            assert_eq!(inside_managed(bad), None, "{bad:?}");
        }
        assert_eq!(inside_managed("{}").as_deref(), Some("{}"));
    }

    #[test]
    fn an_administrators_env_and_permissions_stay_theirs() {
        let foreign = r#"{
  "env": { "PATH": "/opt/corp/bin:/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/corp/lib" },
  "permissions": { "disableBypassPermissionsMode": "disable", "allow": ["Read"] }
}"#;
        let (text, added) = merge_managed(Some(foreign), false).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["env"]["PATH"], "/opt/corp/bin:/usr/bin:/bin");
        assert_eq!(v["env"]["LD_LIBRARY_PATH"], "/opt/corp/lib");
        assert_eq!(v["env"]["LD_PRELOAD"], "");
        let report = lockdown_report(&text).unwrap();
        assert!(
            report.contains("env.LD_LIBRARY_PATH, env.PATH set by the administrator"),
            "{report}"
        );
        // Inside: ours go, theirs stay (an administrator's PATH is theirs to pin).
        let inside: Value = serde_json::from_str(&inside_managed(&text).unwrap()).unwrap();
        assert_eq!(inside["env"]["PATH"], "/opt/corp/bin:/usr/bin:/bin");
        assert!(inside["env"].get("LD_PRELOAD").is_none());
        // A value identical to ours cannot be told apart: it goes too (decision 0005).
        assert!(inside["permissions"]
            .get("disableBypassPermissionsMode")
            .is_none());
        assert_eq!(inside["permissions"]["allow"][0], "Read");
        let back: Value = serde_json::from_str(&unmerge_managed(&text, &added).unwrap()).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(foreign).unwrap());
        // Not an object where the lockdown goes: refused, like a bad `env`.
        let err = merge_managed(Some(r#"{"permissions": "all"}"#), false).unwrap_err();
        assert!(err.contains("`permissions` is not an object"), "{err}");
    }

    #[test]
    fn an_upgrade_adds_the_new_pins_and_uninstall_takes_all_out() {
        // A file as an install before issue #24 left it, and its record.
        let old = r#"{
  "hooks": { "SessionStart": [ { "hooks": [ { "type": "command", "command": "/usr/libexec/claude-sandbox/claude-sandbox hook session-start" } ] } ],
    "UserPromptSubmit": [ { "hooks": [ { "type": "command", "command": "/usr/libexec/claude-sandbox/claude-sandbox hook prompt-gate" } ] } ] },
  "env": { "DISABLE_AUTOUPDATER": "1" },
  "autoUpdates": false,
  "allowManagedHooksOnly": true,
  "allowManagedMcpServersOnly": true,
  "allowedMcpServers": [],
  "apiKeyHelper": "/usr/libexec/claude-sandbox/claude-sandbox hook api-key-helper"
}"#;
        let mut added = Added {
            disable_autoupdater: true,
            auto_updates: true,
            lockdown: [
                "allowManagedHooksOnly",
                "allowManagedMcpServersOnly",
                "allowedMcpServers",
                "apiKeyHelper",
            ]
            .map(String::from)
            .to_vec(),
            ..Default::default()
        };
        let (text, later) = merge_managed(Some(old), false).unwrap();
        assert_eq!(lockdown_report(&text).map(|_| ()), Ok(()), "{text}");
        assert_eq!(later.lockdown.len(), pinned().count() - 4, "{later:?}");
        added.absorb(later);
        assert_eq!(unmerge_managed(&text, &added), None, "everything was ours");
    }

    /// An operator whose environment has a gateway, a lower-case proxy
    /// with a password and a CA.
    fn operator() -> OperatorEnv {
        OperatorEnv::from_lookup(|n| {
            match n {
                "ANTHROPIC_BASE_URL" => Some("https://gw.corp.example"),
                "https_proxy" => Some("http://u:secret@proxy.corp:3128"),
                "NODE_EXTRA_CA_CERTS" => Some("/etc/corp/ca.pem"),
                "HTTP_PROXY" => Some(""),
                _ => None,
            }
            .map(str::to_string)
        })
    }

    #[test]
    fn endpoints_are_pinned_to_the_operators_values_or_the_default() {
        let (text, added) = merge_managed_for(Some(FOREIGN), false, &operator()).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["env"]["ANTHROPIC_BASE_URL"], "https://gw.corp.example");
        // Either case of a proxy, upper first, for both cases.
        assert_eq!(v["env"]["HTTPS_PROXY"], "http://u:secret@proxy.corp:3128");
        assert_eq!(v["env"]["https_proxy"], "http://u:secret@proxy.corp:3128");
        assert_eq!(v["env"]["HTTP_PROXY"], "", "an empty value is none");
        assert_eq!(v["env"]["NODE_EXTRA_CA_CERTS"], "/etc/corp/ca.pem");
        for var in [
            "ANTHROPIC_BEDROCK_BASE_URL",
            "NODE_TLS_REJECT_UNAUTHORIZED",
            "no_proxy",
        ] {
            assert_eq!(v["env"][var], "", "{var}: {text}");
        }
        let pins = v["env"]["CLAUDE_SANDBOX_ENDPOINT_PINS"].as_str().unwrap();
        assert_eq!(pins.split(' ').count(), 19, "{pins}");
        assert!(pins.starts_with("ANTHROPIC_BASE_URL "), "{pins}");
        // Idempotent, whatever the environment of a later install.
        let (again, later) = merge_managed(Some(&text), false).unwrap();
        assert_eq!(again, text);
        assert!(later.endpoints.is_empty(), "{later:?}");
        // A pin an administrator deleted comes back, named once.
        let deleted = text.replace("\"NODE_TLS_REJECT_UNAUTHORIZED\": \"\",", "");
        assert_ne!(deleted, text);
        let back: Value =
            serde_json::from_str(&merge_managed(Some(&deleted), false).unwrap().0).unwrap();
        assert_eq!(back["env"]["NODE_TLS_REJECT_UNAUTHORIZED"], "");
        assert_eq!(back["env"]["CLAUDE_SANDBOX_ENDPOINT_PINS"], pins);
        // doctor's summary names the pins, a proxy's password left out.
        let report = lockdown_report(&text).unwrap();
        assert!(
            report.contains("endpoints pinned to the default: ANTHROPIC_BEDROCK_BASE_URL,"),
            "{report}"
        );
        assert!(report.contains("to the operator's values: ANTHROPIC_BASE_URL=https://gw.corp.example, HTTPS_PROXY=http://…@proxy.corp:3128"), "{report}");
        assert!(!report.contains("secret"), "{report}");
        assert!(!report.contains("set by the administrator"), "{report}");
        // Inside: every pin and the marker go (the sandbox's own proxy and
        // CA, and the user's gateway, work there).
        let inside: Value = serde_json::from_str(&inside_managed(&text).unwrap()).unwrap();
        assert_eq!(
            inside["env"],
            json!({"CORP": "1", "DISABLE_AUTOUPDATER": "1"})
        );
        // Uninstall takes them all out.
        let back: Value = serde_json::from_str(&unmerge_managed(&text, &added).unwrap()).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(FOREIGN).unwrap());
    }

    #[test]
    fn an_administrators_endpoint_stays_theirs_inside_and_out() {
        let foreign =
            r#"{ "env": { "ANTHROPIC_BASE_URL": "https://admin.gw", "HTTPS_PROXY": "" } }"#;
        let (text, added) = merge_managed_for(Some(foreign), false, &operator()).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["env"]["ANTHROPIC_BASE_URL"], "https://admin.gw");
        assert_eq!(v["env"]["HTTPS_PROXY"], "");
        assert_eq!(v["env"]["https_proxy"], "http://u:secret@proxy.corp:3128");
        let pins = v["env"]["CLAUDE_SANDBOX_ENDPOINT_PINS"].as_str().unwrap();
        assert!(
            !pins
                .split(' ')
                .any(|p| p == "ANTHROPIC_BASE_URL" || p == "HTTPS_PROXY"),
            "{pins}"
        );
        let report = lockdown_report(&text).unwrap();
        assert!(
            report.contains("env.ANTHROPIC_BASE_URL, env.HTTPS_PROXY set by the administrator"),
            "{report}"
        );
        let inside: Value = serde_json::from_str(&inside_managed(&text).unwrap()).unwrap();
        assert_eq!(
            inside["env"],
            json!({"ANTHROPIC_BASE_URL": "https://admin.gw", "HTTPS_PROXY": "", "DISABLE_AUTOUPDATER": "1"})
        );
        assert_eq!(
            lockdown_in_effect(inside.as_object().unwrap()),
            Vec::<&str>::new()
        );
        // An administrator's later edit of one we pinned survives uninstall.
        let edited = text.replace("\"/etc/corp/ca.pem\"", "\"/etc/corp/new-ca.pem\"");
        assert_ne!(edited, text);
        let back: Value = serde_json::from_str(&unmerge_managed(&edited, &added).unwrap()).unwrap();
        assert_eq!(back["env"]["NODE_EXTRA_CA_CERTS"], "/etc/corp/new-ca.pem");
        assert_eq!(back["env"]["ANTHROPIC_BASE_URL"], "https://admin.gw");
        assert!(back["env"].get("https_proxy").is_none(), "{back}");
        assert!(
            back["env"].get("CLAUDE_SANDBOX_ENDPOINT_PINS").is_none(),
            "{back}"
        );
        // Without a pin the report names what is missing.
        let unpinned = text.replace("\"NODE_TLS_REJECT_UNAUTHORIZED\": \"\",", "");
        assert_ne!(unpinned, text);
        let err = lockdown_report(&unpinned).unwrap_err();
        assert!(
            err.contains(
                "env.NODE_TLS_REJECT_UNAUTHORIZED (stops TLS certificate checks turned off (0))"
            ),
            "{err}"
        );
    }

    #[test]
    fn doctor_names_the_endpoints_this_environment_sets_otherwise() {
        let (text, _) = merge_managed_for(None, false, &operator()).unwrap();
        let same = endpoints_overridden(&text, |n| match n {
            "ANTHROPIC_BASE_URL" => Some("https://gw.corp.example".into()),
            "https_proxy" => Some("http://u:secret@proxy.corp:3128".into()),
            "NODE_EXTRA_CA_CERTS" => Some("/etc/corp/ca.pem".into()),
            _ => None,
        });
        assert_eq!(same, Vec::<String>::new());
        let other = endpoints_overridden(&text, |n| {
            (n == "ANTHROPIC_BASE_URL" || n == "NODE_TLS_REJECT_UNAUTHORIZED").then(|| "x".into())
        });
        assert_eq!(
            other,
            [
                "ANTHROPIC_BASE_URL",
                "HTTPS_PROXY",
                "https_proxy",
                "NODE_TLS_REJECT_UNAUTHORIZED",
                "NODE_EXTRA_CA_CERTS"
            ]
        );
        assert_eq!(endpoints_overridden("[", |_| None), Vec::<String>::new());
        assert_eq!(without_userinfo("http://a:b@h:1/p@q"), "http://…@h:1/p@q");
        assert_eq!(without_userinfo("/etc/ca@x.pem"), "/etc/ca@x.pem");
    }

    #[test]
    fn non_json_refused() {
        assert!(merge_managed(Some("{ not json"), true)
            .unwrap_err()
            .contains("not JSON"));
        assert!(merge_managed(Some("[1]"), true).is_err());
    }
}
