//! One held item: what it is, where it would go, and how review shows it;
//! and the notice line through which the creation guard's supervisor
//! hands a held config key to the launch.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What the notice of a held key starts with (the JSON record follows).
const KEY_MARK: &str = "claude-sandbox: held for the user: ";
/// The longest record a notice carries whole (a notice line is cut at
/// 1000 bytes); a longer one is refused instead of held.
pub(super) const MAX_RECORD: usize = 700;

/// What a held item is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub(crate) enum What {
    /// A git hook: its file's content and permission bits.
    Hook { content: Vec<u8>, mode: u32 },
    /// A git config entry (`name` as `git config --list` spells it; no
    /// value for a bare key).
    Key { name: String, value: Option<String> },
}

/// One held item, as recorded with the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Item {
    /// A short name for `review --apply`.
    pub(crate) id: String,
    /// The file it would be put in on the host (the hook's path, or the
    /// config file).
    pub(crate) target: PathBuf,
    #[serde(flatten)]
    pub(crate) what: What,
    /// The target's SHA-256 when the session ended; none when absent. The
    /// apply refuses a target that changed since.
    pub(crate) before: Option<String>,
    #[serde(default)]
    pub(crate) applied: bool,
}

impl Item {
    pub(crate) fn new(target: PathBuf, what: What, before: Option<String>) -> Item {
        let mut h = Sha256::new();
        h.update(target.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(serde_json::to_vec(&what).unwrap_or_default());
        let id = hex(&h.finalize())[..8].to_string();
        Item {
            id,
            target,
            what,
            before,
            applied: false,
        }
    }

    /// Why it was held, for the user.
    pub(crate) fn why(&self) -> &'static str {
        match self.what {
            What::Hook { .. } => "a git hook: host git would run it",
            What::Key { .. } => {
                "a git config key outside what git writes in ordinary work: host git would obey it"
            }
        }
    }

    /// The item in full, as review shows it before and when applying.
    pub(crate) fn shown(&self) -> String {
        let target = self.target.display();
        match &self.what {
            What::Hook { content, mode } => format!(
                "[{}] hook {target} (mode {:o}), held: {}; its content:\n{}",
                self.id,
                mode & 0o7777,
                self.why(),
                indent(&String::from_utf8_lossy(content))
            ),
            What::Key { name, .. } => format!(
                "[{}] git config {name} in {target}, held: {}; --apply adds these lines:\n{}",
                self.id,
                self.why(),
                indent(&self.config_text().unwrap_or_default())
            ),
        }
    }

    /// For a key: the lines `--apply` appends to the config file (a
    /// section header of its own and the entry, the value quoted);
    /// `None` for a name that is not `section[.sub].key`.
    pub(crate) fn config_text(&self) -> Option<String> {
        let What::Key { name, value } = &self.what else {
            return None;
        };
        let (section, rest) = name.split_once('.')?;
        let (sub, key) = match rest.rsplit_once('.') {
            Some((sub, key)) => (Some(sub), key),
            None => (None, rest),
        };
        let plain =
            |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !plain(section) || !plain(key) || sub.is_some_and(|s| s.contains('\n')) {
            return None;
        }
        let header = match sub {
            Some(s) => format!("[{section} \"{}\"]", escaped(s)),
            None => format!("[{section}]"),
        };
        Some(match value {
            Some(v) => format!("{header}\n\t{key} = \"{}\"\n", escaped(v)),
            None => format!("{header}\n\t{key}\n"),
        })
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    | {l}\n")).collect()
}

/// `s` as git reads it back inside double quotes.
fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

pub(super) use crate::sys::text::hex;

/// The held key's record on a notice line.
#[derive(Debug, Serialize, Deserialize)]
struct KeyRecord {
    file: PathBuf,
    name: String,
    value: Option<String>,
}

/// The notice the supervisor writes for a key it held in config file
/// `file` (a path inside, which is the host's path: the workspace is bound
/// where it is): the record, then what the agent should know. `None` when
/// the record would not fit a notice line whole (the caller refuses then).
pub(crate) fn key_notice(file: &[u8], name: &[u8], value: Option<&[u8]>) -> Option<String> {
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).ok();
    let record = KeyRecord {
        file: PathBuf::from(std::ffi::OsStr::from_bytes(file)),
        name: text(name)?,
        value: match value {
            Some(v) => Some(text(v)?),
            None => None,
        },
    };
    let json = serde_json::to_string(&record).ok()?;
    (json.len() <= MAX_RECORD && !json.contains(['\n', '\r'])).then(|| {
        format!(
            "{KEY_MARK}{json} held: host git would obey this key, so it was left out of the \
             file (the git command succeeded without it); the user can put it in place after \
             the session with `claude-sandbox review --apply`."
        )
    })
}

/// The held keys the notices file `text` records: (config file, what).
pub(super) fn keys_noticed(text: &str) -> Vec<(PathBuf, What)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(KEY_MARK) else {
            continue;
        };
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<KeyRecord>();
        if let Some(Ok(r)) = stream.next() {
            let what = What::Key {
                name: r.name,
                value: r.value,
            };
            if !out.iter().any(|(f, w)| *f == r.file && *w == what) {
                out.push((r.file, what));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_notice_reads_back_and_its_apply_text_is_git_config() {
        let line = key_notice(
            b"/w/.git/config",
            b"remote.my.fork.pushurl",
            Some(b"a \"b\"\\c"),
        )
        .unwrap();
        assert!(line.contains("review --apply"), "{line}");
        let bare = key_notice(b"/w/.git/config", b"core.fsmonitor", None).unwrap();
        let text = format!("junk\n{line}\nclaude-sandbox: refused x\n{bare}\n{line}\n");
        let keys = keys_noticed(&text);
        assert_eq!(keys.len(), 2, "{keys:?}");
        let item = Item::new(keys[0].0.clone(), keys[0].1.clone(), None);
        assert_eq!(
            item.config_text().unwrap(),
            "[remote \"my.fork\"]\n\tpushurl = \"a \\\"b\\\"\\\\c\"\n"
        );
        let item = Item::new(keys[1].0.clone(), keys[1].1.clone(), None);
        assert_eq!(item.config_text().unwrap(), "[core]\n\tfsmonitor\n");
        assert_eq!(item.id.len(), 8);
        // A record too long for one notice line is not made (refused instead).
        assert!(key_notice(b"/w/.git/config", b"http.proxy", Some(&[b'x'; 800])).is_none());
    }

    #[test]
    fn a_name_that_is_not_section_and_key_gets_no_apply_text() {
        for name in ["nodot", "a b.c", ".x", "core."] {
            let i = Item::new(
                "/w/.git/config".into(),
                What::Key {
                    name: name.into(),
                    value: None,
                },
                None,
            );
            assert!(i.config_text().is_none(), "{name}");
        }
    }
}
