//! Claude Code's settings as the tripwire compares them: only the keys
//! through which they run code or widen what runs ([`watched`]: every key
//! Claude Code runs as a command, from the lockdown's one table, and
//! [`SETTINGS_KEYS`]; in `~/.claude.json` each project's MCP servers), the
//! rest skipped unparsed; what changed in them, and the fingerprint a
//! revert checks them against.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::change::{file_items, sha256, shown, Ident, Item, Old};
use super::scan::{Entry, Kind, Tree, SETTINGS_MAX};
use crate::plan::managed_settings::command_keys;

/// The keys of Claude Code's settings through which they run code or let
/// more run, besides those it runs as a command: hooks, MCP servers,
/// `env` (which loads code into every process it starts, and turns on the
/// helpers of Bedrock, Vertex, telemetry), permissions (`defaultMode =
/// bypassPermissions`, `allow` rules), plugins and the marketplaces they
/// come from (`additionalMarketplaces` is an alias Claude Code reads as
/// `extraKnownMarketplaces`).
const SETTINGS_KEYS: &[&str] = &[
    "hooks",
    "mcpServers",
    "env",
    "permissions",
    "enabledPlugins",
    "extraKnownMarketplaces",
    "additionalMarketplaces",
];

/// Whether the tripwire compares settings key `k`.
fn watched(k: &str) -> bool {
    SETTINGS_KEYS.contains(&k) || command_keys().any(|c| c == k)
}

/// Settings keys → their values ([`watched`] keys, and with `projects`
/// `projects.P.mcpServers`); an empty value (`{}`, `[]`, `""`, `null`)
/// counts as not set.
type Projection = BTreeMap<Vec<String>, Value>;

/// The watched keys of a settings file; everything else is skipped
/// unparsed (a long-used `~/.claude.json` holds megabytes of history). A
/// key given twice counts as Claude Code reads it: the last one.
struct SettingsKeys {
    keys: BTreeMap<String, Value>,
    projects: Option<BTreeMap<String, ProjectKeys>>,
}

impl<'de> Deserialize<'de> for SettingsKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = SettingsKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SettingsKeys, A::Error> {
                let mut out = SettingsKeys {
                    keys: BTreeMap::new(),
                    projects: None,
                };
                while let Some(k) = map.next_key::<String>()? {
                    if k == "projects" {
                        out.projects = map.next_value()?;
                    } else if watched(&k) {
                        out.keys.insert(k, map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(Keys)
    }
}

#[derive(Deserialize)]
struct ProjectKeys {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Value>,
}

/// The projection of a settings file's text.
fn project(text: &[u8], projects: bool) -> Result<Projection, String> {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    };
    let s: SettingsKeys = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
    let mut out = Projection::new();
    for (k, v) in s.keys.into_iter().filter(|(_, v)| !empty(v)) {
        out.insert(vec![k], v);
    }
    for (p, pv) in s.projects.into_iter().flatten().filter(|_| projects) {
        if let Some(m) = pv.mcp_servers.filter(|v| !empty(v)) {
            out.insert(vec!["projects".into(), p, "mcpServers".into()], m);
        }
    }
    Ok(out)
}

/// The projection of a settings file's entry.
pub(super) fn projection(e: Option<&Entry>, projects: bool) -> Result<Projection, String> {
    match e {
        None => Ok(Projection::new()),
        Some(Entry::File {
            content: Some(c), ..
        }) => project(c, projects),
        Some(Entry::File { .. }) => Err(format!("over {} MiB, not read", SETTINGS_MAX >> 20)),
        Some(_) => Err("not a regular file".into()),
    }
}

/// A settings file's change: the keys that differ, and one item that puts
/// their old values back (or, if a side is not JSON, the whole file).
pub(super) fn settings_change(
    path: &Path,
    projects: bool,
    old: &Tree,
    new: &Tree,
    differs: &[&PathBuf],
) -> Option<(String, Vec<Item>)> {
    let root = PathBuf::new();
    let (a, b) = match (
        projection(old.get(&root), projects),
        projection(new.get(&root), projects),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (_, Err(e)) | (Err(e), _) => {
            let items = file_items(path, Kind::Other, old, new, differs);
            return Some((shown(&e), items));
        }
    };
    let keys: Vec<Vec<String>> = a
        .keys()
        .chain(b.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    if keys.is_empty() {
        return None;
    }
    let details: Vec<String> = keys
        .iter()
        .flat_map(|k| key_details(k, a.get(k), b.get(k)))
        .collect();
    let item = Item {
        path: path.to_path_buf(),
        old: Old::Keys {
            existed: old.contains_key(&root),
            values: keys
                .iter()
                .map(|k| (k.clone(), a.get(k).cloned()))
                .collect(),
        },
        new: Some(keys_fingerprint(&b, &keys)),
        left: Ident::of(new.get(&root)),
        reverted: false,
    };
    Some((details.join("; "), vec![item]))
}

/// `hooks`, `projects["/ws"].mcpServers`.
fn key_name(k: &[String]) -> String {
    match k {
        [p, proj, rest] if p == "projects" => {
            format!("projects[{}].{rest}", shown(&format!("{proj:?}")))
        }
        _ => shown(&k.join(".")),
    }
}

/// For object values, each sub-key that changed (`hooks.SessionStart
/// changed`, never a value: `env` may hold secrets); otherwise the key,
/// with a string's new value (`apiKeyHelper = CMD`).
fn key_details(k: &[String], a: Option<&Value>, b: Option<&Value>) -> Vec<String> {
    let name = key_name(k);
    let object_or_none = |v: Option<&Value>| v.is_none_or(Value::is_object);
    if !(object_or_none(a) && object_or_none(b)) {
        return vec![match (a, b) {
            (_, Some(Value::String(s))) => format!("{name} = {}", shown(s)),
            (None, Some(_)) => format!("{name} added"),
            (Some(_), None) => format!("{name} removed"),
            _ => format!("{name} changed"),
        }];
    }
    let (x, y) = (a.and_then(Value::as_object), b.and_then(Value::as_object));
    let subs: BTreeSet<&String> = x.iter().chain(y.iter()).flat_map(|o| o.keys()).collect();
    subs.into_iter()
        .filter_map(|s| {
            let how = match (x.and_then(|o| o.get(s)), y.and_then(|o| o.get(s))) {
                (None, Some(_)) => "added",
                (Some(_), None) => "removed",
                (Some(p), Some(q)) if p != q => "changed",
                _ => return None,
            };
            Some(format!("{name}.{} {how}", shown(s)))
        })
        .collect()
}

/// `v` with every object's keys sorted, so equal settings hash equally.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        x => x.clone(),
    }
}

/// The fingerprint of the values of `keys` in `p`.
pub(super) fn keys_fingerprint(p: &Projection, keys: &[Vec<String>]) -> String {
    let values: Vec<Value> = keys
        .iter()
        .map(|k| serde_json::json!([k, p.get(k).map(canonical)]))
        .collect();
    format!(
        "keys {}",
        sha256(Value::Array(values).to_string().as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::super::change::Mark;
    use super::super::compare::compare;
    use super::super::fixtures::{file, root};
    use super::*;

    #[test]
    fn settings_report_only_the_keys_that_run_code() {
        let p = Path::new("/ws/.claude/settings.json");
        let k = Kind::Settings { projects: false };
        let before = r#"{"model":"a","env":{"A":"1"},"hooks":{}}"#;
        let other = r#"{"env":{"A":"1"},"model":"b","theme":"dark"}"#;
        assert_eq!(
            compare(p, k, &root(file(before)), &root(file(other))),
            None,
            "a model, key order and an empty `hooks` do not run code"
        );
        let after = r#"{"env":{"A":"2","B":"secret"},"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"evil"}]}]},"apiKeyHelper":"curl x","model":"a"}"#;
        let c = compare(p, k, &root(file(before)), &root(file(after))).unwrap();
        assert_eq!(c.mark, Mark::Changed);
        assert_eq!(
            c.what,
            "apiKeyHelper = curl x; env.A changed; env.B added; hooks.SessionStart added"
        );
        assert!(!c.what.contains("secret"), "env values are never shown");
        let Old::Keys { existed, values } = &c.items[0].old else {
            panic!("{:?}", c.items[0].old)
        };
        assert!(*existed);
        assert_eq!(values.len(), 3);
        // A new file with hooks: added.
        let c = compare(p, k, &Tree::new(), &root(file(after))).unwrap();
        assert_eq!(c.mark, Mark::Added);
        assert!(c.what.starts_with("(new)  apiKeyHelper"), "{}", c.what);
        // ~/.claude.json: per-project MCP servers count; its other churn does not.
        let p = Path::new("/home/u/.claude.json");
        let k = Kind::Settings { projects: true };
        let a = r#"{"numStartups":1,"projects":{"/ws":{"mcpServers":{},"history":[]}}}"#;
        let b = r#"{"numStartups":2,"projects":{"/ws":{"mcpServers":{},"history":["x"]},"/new":{"mcpServers":{}}}}"#;
        assert_eq!(compare(p, k, &root(file(a)), &root(file(b))), None);
        let b = r#"{"projects":{"/ws":{"mcpServers":{"evil":{"command":"sh"}}}}}"#;
        let c = compare(p, k, &root(file(a)), &root(file(b))).unwrap();
        assert_eq!(c.what, "projects[\"/ws\"].mcpServers.evil added");
        // Not JSON any more: reported, with the whole file to put back.
        let c = compare(p, k, &root(file(a)), &root(file("{"))).unwrap();
        assert!(c.what.starts_with("not JSON"), "{}", c.what);
        assert!(matches!(c.items[0].old, Old::File { .. }));
    }

    #[test]
    fn every_command_key_and_what_widens_what_runs_is_reported_alone() {
        // Each on its own, with no `env` change beside it: the report never
        // depends on what the user's own environment already turns on.
        let p = Path::new("/home/u/.claude/settings.json");
        let k = Kind::Settings { projects: false };
        let before = r#"{"model":"a"}"#;
        let mut keys: Vec<&str> = command_keys().collect();
        keys.extend(SETTINGS_KEYS);
        assert!(keys.len() > 15, "{keys:?}");
        for key in keys {
            let after = serde_json::json!({ "model": "a", key: "touch /tmp/x" }).to_string();
            let c = compare(p, k, &root(file(before)), &root(file(&after)))
                .unwrap_or_else(|| panic!("{key} not reported"));
            assert_eq!(c.what, format!("{key} = touch /tmp/x"));
        }
        let after = r#"{"model":"a","permissions":{"defaultMode":"bypassPermissions"},"enabledPlugins":{"evil@m":true},"extraKnownMarketplaces":{"m":{"source":{"source":"directory","path":"/w"}}},"fileSuggestion":{"type":"command","command":"x"}}"#;
        let c = compare(p, k, &root(file(before)), &root(file(after))).unwrap();
        assert_eq!(
            c.what,
            "enabledPlugins.evil@m added; extraKnownMarketplaces.m added; fileSuggestion.command added; fileSuggestion.type added; permissions.defaultMode added"
        );
        // The last of a key given twice, as Claude Code reads it.
        let twice = r#"{"awsAuthRefresh":"evil","awsAuthRefresh":""}"#;
        assert_eq!(compare(p, k, &root(file(before)), &root(file(twice))), None);
        let twice = r#"{"awsAuthRefresh":"","awsAuthRefresh":"evil"}"#;
        assert!(compare(p, k, &root(file(before)), &root(file(twice))).is_some());
    }
}
