//! A change of one watched path as the tripwire prints, records and puts
//! back ([`Change`]): how the path changed ([`Mark`]), the [`Item`]s
//! `review --revert` acts on (what each held before, [`Old`]; what the
//! session left, by [`fingerprint`] and [`Ident`]), and the helpers every
//! file of the tripwire shares: what is safe to print ([`shown`]), digests,
//! and paths and bytes kept exactly in the log (text when UTF-8, hex
//! otherwise: `bytes_text`, `path_text`). Pure.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::scan::{Entry, Kind, Tree};

/// What a revert compares a path against: the state the session left.
pub(super) fn fingerprint(e: &Entry) -> String {
    match e {
        Entry::File {
            meta,
            content: Some(c),
        } => format!("file {:o} {}", meta.mode & 0o7777, sha256(c)),
        Entry::Link { target, .. } => format!("link {}", sha256(target.as_os_str().as_bytes())),
        Entry::Dir { .. } => "dir".into(),
        _ => UNREAD.into(),
    }
}

/// The fingerprint of content that was not read (over the budget, special).
pub(super) const UNREAD: &str = "unread";

pub(super) fn sha256(b: &[u8]) -> String {
    hex(&Sha256::digest(b))
}

pub(super) use crate::sys::text::hex;

/// How a watched path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Mark {
    #[serde(rename = "+")]
    Added,
    #[serde(rename = "~")]
    Changed,
    #[serde(rename = "-")]
    Removed,
}

impl Mark {
    pub(super) fn of(old: Option<&Entry>, new: Option<&Entry>) -> Mark {
        match (old, new) {
            (None, Some(_)) => Mark::Added,
            (Some(_), None) => Mark::Removed,
            _ => Mark::Changed,
        }
    }

    pub(super) fn sign(self) -> char {
        match self {
            Mark::Added => '+',
            Mark::Changed => '~',
            Mark::Removed => '-',
        }
    }
}

/// One change of a watched path, as printed and recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Change {
    #[serde(with = "path_text")]
    pub(super) path: PathBuf,
    pub(super) mark: Mark,
    /// What changed, for people (already made safe to print).
    pub(super) what: String,
    /// What `review --revert` does.
    pub(super) items: Vec<Item>,
}

/// One path `review --revert` can put back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Item {
    #[serde(with = "path_text")]
    pub(super) path: PathBuf,
    /// What was there before the session.
    pub(super) old: Old,
    /// The fingerprint of what the session left (`None`: nothing).
    pub(super) new: Option<String>,
    /// Which file system object the session left (records before version
    /// 2 have none: `review --revert` then never removes or replaces it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) left: Option<Ident>,
    #[serde(default)]
    pub(super) reverted: bool,
}

/// A file system object's identity: its device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Ident {
    pub(super) dev: u64,
    pub(super) ino: u64,
}

impl Ident {
    pub(super) fn of(e: Option<&Entry>) -> Option<Ident> {
        e?.meta().map(|m| Ident {
            dev: m.dev,
            ino: m.ino,
        })
    }
}

/// What a path held before the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Old {
    Absent,
    File {
        mode: u32,
        #[serde(with = "bytes_text")]
        content: Vec<u8>,
    },
    Link {
        #[serde(with = "path_text")]
        target: PathBuf,
    },
    Dir {
        mode: u32,
    },
    /// Settings keys (`key`: the path of object keys), `None`: not set.
    Keys {
        existed: bool,
        values: Vec<(Vec<String>, Option<Value>)>,
    },
    /// Not kept (over the read budget, a special file): cannot be put back.
    Unknown,
}

impl Old {
    fn of(e: Option<&Entry>) -> Old {
        match e {
            None => Old::Absent,
            Some(Entry::File {
                meta,
                content: Some(c),
            }) => Old::File {
                mode: meta.mode & 0o7777,
                content: c.clone(),
            },
            Some(Entry::Link { target, .. }) => Old::Link {
                target: target.clone(),
            },
            Some(Entry::Dir { meta }) => Old::Dir {
                mode: meta.mode & 0o7777,
            },
            Some(_) => Old::Unknown,
        }
    }
}

/// Whether a difference at `rel` involves more than directories.
pub(super) fn file_level(old: &Tree, new: &Tree, rel: &Path) -> bool {
    [old.get(rel), new.get(rel)]
        .iter()
        .any(|e| e.is_some_and(|e| !matches!(e, Entry::Dir { .. })))
}

/// What `review --revert` puts back for the entries in `differs` (git's
/// own `hooks` directory of a new repository stays).
pub(super) fn file_items(
    path: &Path,
    kind: Kind,
    old: &Tree,
    new: &Tree,
    differs: &[&PathBuf],
) -> Vec<Item> {
    differs
        .iter()
        .filter(|rel| {
            !(kind == Kind::Hooks && rel.as_os_str().is_empty() && !file_level(old, new, rel))
        })
        .map(|rel| Item {
            path: if rel.as_os_str().is_empty() {
                path.to_path_buf()
            } else {
                path.join(rel)
            },
            old: Old::of(old.get(*rel)),
            new: new.get(*rel).map(fingerprint),
            left: Ident::of(new.get(*rel)),
            reverted: false,
        })
        .collect()
}

/// Safe to print on a terminal ([`crate::plan::protect::printable`]), at
/// most 120 characters.
pub(super) fn shown(s: &str) -> String {
    crate::plan::protect::printable(s, 120)
}

/// Serde for paths and bytes: text when UTF-8, hex otherwise.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Bytes {
    Text(String),
    Hex(String),
}

impl Bytes {
    fn of(b: &[u8]) -> Bytes {
        match std::str::from_utf8(b) {
            Ok(s) => Bytes::Text(s.to_string()),
            Err(_) => Bytes::Hex(hex(b)),
        }
    }

    fn into_bytes(self) -> Result<Vec<u8>, String> {
        match self {
            Bytes::Text(s) => Ok(s.into_bytes()),
            Bytes::Hex(h) if h.len() % 2 == 0 => (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(h.get(i..i + 2).unwrap_or("x"), 16))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string()),
            Bytes::Hex(_) => Err("odd hex length".into()),
        }
    }
}

pub(super) mod bytes_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(in crate::tripwire) fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        super::Bytes::of(b).serialize(s)
    }

    pub(in crate::tripwire) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<u8>, D::Error> {
        super::Bytes::deserialize(d)?
            .into_bytes()
            .map_err(serde::de::Error::custom)
    }
}

pub(super) mod path_text {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    use serde::{Deserializer, Serializer};

    pub(in crate::tripwire) fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        super::bytes_text::serialize(p.as_os_str().as_bytes(), s)
    }

    pub(in crate::tripwire) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<PathBuf, D::Error> {
        let b = super::bytes_text::deserialize(d)?;
        Ok(PathBuf::from(std::ffi::OsString::from_vec(b)))
    }
}
