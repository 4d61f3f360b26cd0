//! The root view kept between launches (issue #48, decision 0036): what the
//! last walks found, per directory examined whole, in root-owned state at
//! [`STATE`] (and `/etc`'s at [`STATE_FIRST`]). A launch reuses a
//! directory's record while the directory's identity and change times are
//! the ones recorded, and examines it afresh otherwise.
//!
//! The state is attacker input like everything the launch reads: it is
//! read only when it is a regular file (never through a symlink), owned by
//! root, writable by root alone, with one link, in a directory root owns
//! that nobody else may write to, within [`MAX_STATE`] bytes,
//! with the SHA-256 its first line names over the rest, and every path in
//! it under a walked tree; otherwise it is discarded and the walk done
//! whole. It is written whole to a new file beside it and renamed over it,
//! readable by everyone: it names only entries an unprivileged user can
//! list and stat (the walk goes into no directory it masks), so a root
//! session reading it learns nothing a user could not (a root-only state
//! would be a root-only file the session could read, outside the walked
//! trees).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::Metadata;
use std::io::{Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::libc;
use sha2::{Digest, Sha256};

use crate::sys::text::hex;

/// Where the kept view of the trees other than `/etc` lives: beside the
/// installed binary, root's.
pub(crate) const STATE: &str = "/usr/libexec/claude-sandbox/root-view";
/// Where `/etc`'s kept view lives (every entry kept).
pub(crate) const STATE_FIRST: &str = "/usr/libexec/claude-sandbox/root-view-etc";
/// Every kept view (what `install` walks anew and `uninstall` removes).
pub(crate) const STATES: [&str; 2] = [STATE_FIRST, STATE];
/// The first word of the state; the version follows it.
const MAGIC: &str = "csb-root-view 1";
/// State larger than this is not read (a walk of millions of directories
/// would write less).
const MAX_STATE: u64 = 256 << 20;

/// What identifies a directory's listing: device, inode, change time and
/// modification time (seconds, nanoseconds). An entry added, removed or
/// renamed moves its modification and change times; a change of the
/// directory's own mode or owner, its change time; a mount over it, its
/// device.
pub(super) type Key = [i64; 6];

/// [`Key`] of `m`.
pub(super) fn key_of(m: &Metadata) -> Key {
    [
        m.dev() as i64,
        m.ino() as i64,
        m.ctime(),
        m.ctime_nsec(),
        m.mtime(),
        m.mtime_nsec(),
    ]
}

/// One directory examined whole: its [`Key`] then, the entries in it a
/// root session gains by (name, whether a directory), the directories in
/// it the walk went into, and, where every entry is kept (`/etc`), the
/// others (stat'ed again at each launch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DirRec {
    pub(super) key: Key,
    pub(super) masks: Vec<(OsString, bool)>,
    pub(super) subdirs: Vec<OsString>,
    pub(super) others: Vec<OsString>,
}

impl DirRec {
    /// Whether `other` records the same entries.
    pub(super) fn same_entries(&self, other: &DirRec) -> bool {
        self.masks == other.masks && self.subdirs == other.subdirs && self.others == other.others
    }
}

/// The kept view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Record {
    /// The entry bound it was walked with (another bound: walked whole).
    pub(super) bound: usize,
    /// When the last whole walk started (seconds since the epoch).
    pub(super) full_at: i64,
    /// [`mounts_digest`] when it was walked: a mount at or under a walked
    /// tree (a file bound over a recorded one moves no directory's times)
    /// added, removed or changed since means a whole walk.
    pub(super) mounts: String,
    /// Every directory examined whole, by path.
    pub(super) dirs: HashMap<PathBuf, DirRec>,
}

/// Why kept state was not used.
pub(super) type Refusal = String;

/// `bytes` with each byte outside `!`..`~`, and `%`, as `%XX`.
fn escape(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        if (0x21..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// The inverse of [`escape`]; `None` for anything it would not write.
fn unescape(s: &str) -> Option<OsString> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            c if (0x21..=0x7e).contains(&c) => {
                out.push(c);
                i += 1;
            }
            _ => return None,
        }
    }
    Some(OsString::from_vec(out))
}

/// The order of [`Path`]'s comparison (name by name) for canonical paths,
/// cheaper: bytes compared with `/` as the smallest.
fn tree_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let slash_first = |c: &u8| if *c == b'/' { 0 } else { *c };
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    a.iter().map(slash_first).cmp(b.iter().map(slash_first))
}

/// The state's text for `r`.
pub(super) fn render(r: &Record) -> String {
    let mut body = format!(
        "bound {}\nfull-at {}\nmounts {}\n",
        r.bound, r.full_at, r.mounts
    );
    let mut dirs: Vec<(&PathBuf, &DirRec)> = r.dirs.iter().collect();
    // A directory before everything under it, then its next sibling
    // (what `walk::verify` reads in one pass).
    dirs.sort_unstable_by(|a, b| tree_order(a.0, b.0));
    for (p, d) in dirs {
        let k = d.key;
        body.push_str(&format!(
            "D {} {} {} {} {} {} ",
            k[0], k[1], k[2], k[3], k[4], k[5]
        ));
        escape(p.as_os_str().as_bytes(), &mut body);
        body.push('\n');
        for (name, dir) in &d.masks {
            body.push_str(if *dir { "M " } else { "m " });
            escape(name.as_bytes(), &mut body);
            body.push('\n');
        }
        for name in &d.subdirs {
            body.push_str("s ");
            escape(name.as_bytes(), &mut body);
            body.push('\n');
        }
        for name in &d.others {
            body.push_str("f ");
            escape(name.as_bytes(), &mut body);
            body.push('\n');
        }
    }
    format!("{MAGIC} {}\n{body}", hex(&Sha256::digest(body.as_bytes())))
}

/// The mounts of `mountinfo` (`/proc/self/mountinfo`'s text) at or under
/// one of `roots`, as one SHA-256: each one's device, root in its file
/// system, mount point and source, sorted (mount ids, which change with
/// any remount elsewhere, left out).
pub(super) fn mounts_of(mountinfo: &str, roots: &[PathBuf]) -> String {
    let mut seen: Vec<String> = mountinfo
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let (dev, root, point) = (f.get(2)?, f.get(3)?, f.get(4)?);
            let source = l.split_once(" - ").map_or("", |(_, tail)| tail);
            roots
                .iter()
                .any(|r| Path::new(point).starts_with(r))
                .then(|| format!("{dev} {root} {point} {source}"))
        })
        .collect();
    seen.sort();
    hex(&Sha256::digest(seen.join("\n").as_bytes()))
}

/// This process's mount table, for [`mounts_of`]; `None` when it cannot
/// be read (then no kept view is trusted: the walk is whole).
pub(super) fn mount_table() -> Option<String> {
    std::fs::read_to_string("/proc/self/mountinfo").ok()
}

/// A name in a directory: one component, not `.` or `..`.
fn name(s: &str) -> Result<OsString, Refusal> {
    let n = unescape(s).ok_or_else(|| format!("a name that does not decode: {s}"))?;
    let b = n.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(format!("not a name: {s}"));
    }
    Ok(n)
}

/// Whether `p` is `under` or lies below it, both canonical (compared as
/// bytes, a whole name at a time: cheaper than comparing components).
pub(super) fn at_or_under(p: &Path, under: &Path) -> bool {
    let (p, u) = (p.as_os_str().as_bytes(), under.as_os_str().as_bytes());
    p.starts_with(u) && (p.len() == u.len() || u == b"/" || p[u.len()] == b'/')
}

/// Whether `p` is at or under ([`at_or_under`]) one of `list`.
pub(super) fn under_any(p: &Path, list: &[PathBuf]) -> bool {
    list.iter().any(|u| at_or_under(p, u))
}

/// An absolute, normal path under one of `roots`.
fn dir_path(s: &str, roots: &[PathBuf]) -> Result<PathBuf, Refusal> {
    let p = PathBuf::from(unescape(s).ok_or_else(|| format!("a path that does not decode: {s}"))?);
    // Written as a canonical path: `/`, then names (no `.`, `..`, empty).
    let normal = p
        .as_os_str()
        .as_bytes()
        .strip_prefix(b"/")
        .is_some_and(|rest| {
            rest.split(|&b| b == b'/')
                .all(|n| !n.is_empty() && n != b"." && n != b"..")
        });
    if !normal || !under_any(&p, roots) {
        return Err(format!("a path outside the walked trees: {s}"));
    }
    Ok(p)
}

/// What decides whether a kept view may serve a launch at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Header {
    /// [`Record::bound`].
    pub(super) bound: usize,
    /// [`Record::full_at`].
    pub(super) full_at: i64,
    /// [`Record::mounts`].
    pub(super) mounts: String,
}

/// `text`'s header, its checksum checked over everything after it, and
/// the lines that follow the header (see [`lines`]).
pub(super) fn header(text: &str) -> Result<(Header, std::str::Lines<'_>), Refusal> {
    let (head, body) = text.split_once('\n').ok_or("no header")?;
    let sum = head
        .strip_prefix(MAGIC)
        .and_then(|s| s.strip_prefix(' '))
        .ok_or("not a kept root view of this version")?;
    if sum != hex(&Sha256::digest(body.as_bytes())) {
        return Err("its checksum does not match its content (edited or torn)".into());
    }
    let mut lines = body.lines();
    let mut field = |k: &str| -> Result<i64, Refusal> {
        lines
            .next()
            .and_then(|l| l.strip_prefix(k))
            .and_then(|v| v.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no `{k}` line"))
    };
    let bound = usize::try_from(field("bound")?).map_err(|_| "a negative bound")?;
    let full_at = field("full-at")?;
    let mounts = lines
        .next()
        .and_then(|l| l.strip_prefix("mounts "))
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or("no `mounts` line")?
        .to_string();
    let h = Header {
        bound,
        full_at,
        mounts,
    };
    Ok((h, lines))
}

/// One line of a kept view after its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Line {
    /// A directory examined whole ([`DirRec`]): its path and [`Key`]; the
    /// lines up to the next one are about its entries.
    Dir(PathBuf, Key),
    /// An entry a root session gains by (whether a directory).
    Mask(OsString, bool),
    /// A directory the walk went into.
    Sub(OsString),
    /// Another entry, where every entry is kept.
    Other(OsString),
}

/// The [`Line`]s of `body` (what follows [`header`]), every path under
/// `roots`; an `Err` for a line that does not parse (and for an entry
/// before any directory).
pub(super) fn lines<'a>(
    body: std::str::Lines<'a>,
    roots: &'a [PathBuf],
) -> impl Iterator<Item = Result<Line, Refusal>> + 'a {
    let mut in_dir = false;
    body.map(move |l| {
        let bad = || format!("bad line: {l}");
        let (kind, rest) = l.split_once(' ').ok_or_else(bad)?;
        match (kind, in_dir) {
            ("D", _) => {
                in_dir = true;
                dir_line(rest, roots).map(|(p, k)| Line::Dir(p, k))
            }
            ("m" | "M", true) => Ok(Line::Mask(name(rest)?, kind == "M")),
            ("s", true) => Ok(Line::Sub(name(rest)?)),
            ("f", true) => Ok(Line::Other(name(rest)?)),
            _ => Err(bad()),
        }
    })
}

/// The record in `text`, every path under `roots`; why not, otherwise.
#[cfg(test)]
pub(super) fn parse(text: &str, roots: &[PathBuf]) -> Result<Record, Refusal> {
    let (h, body) = header(text)?;
    record(h, body, roots)
}

/// The record of header `h` and the `body` that follows it ([`header`]),
/// every path under `roots`; why not, otherwise.
pub(super) fn record<'a>(
    h: Header,
    body: std::str::Lines<'a>,
    roots: &'a [PathBuf],
) -> Result<Record, Refusal> {
    let mut r = Record {
        bound: h.bound,
        full_at: h.full_at,
        mounts: h.mounts,
        dirs: HashMap::with_capacity(body.clone().filter(|l| l.starts_with("D ")).count()),
    };
    let mut current: Option<(PathBuf, DirRec)> = None;
    for l in lines(body, roots) {
        match (l?, current.as_mut()) {
            (Line::Dir(p, key), _) => {
                if let Some((p, d)) = current.take() {
                    r.dirs.insert(p, d);
                }
                let d = DirRec {
                    key,
                    masks: Vec::new(),
                    subdirs: Vec::new(),
                    others: Vec::new(),
                };
                current = Some((p, d));
            }
            (Line::Mask(n, dir), Some((_, d))) => d.masks.push((n, dir)),
            (Line::Sub(n), Some((_, d))) => d.subdirs.push(n),
            (Line::Other(n), Some((_, d))) => d.others.push(n),
            // `lines` allows no entry before a directory.
            (_, None) => return Err("an entry before any directory".into()),
        }
    }
    if let Some((p, d)) = current {
        r.dirs.insert(p, d);
    }
    Ok(r)
}

/// A `D` line's path and key.
fn dir_line(rest: &str, roots: &[PathBuf]) -> Result<(PathBuf, Key), Refusal> {
    let mut f = rest.splitn(7, ' ');
    let mut key = [0i64; 6];
    for k in key.iter_mut() {
        *k = f
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("bad directory line: {rest}"))?;
    }
    Ok((dir_path(f.next().unwrap_or(""), roots)?, key))
}

/// Whether `m` is a directory only root may change.
fn root_only_dir(m: &Metadata) -> bool {
    m.is_dir() && m.uid() == 0 && m.mode() & 0o022 == 0
}

/// The kept view at `at`: `Ok(None)` when there is none (a first launch),
/// `Err` saying why it is not trusted.
#[cfg(test)]
pub(super) fn load(at: &Path, roots: &[PathBuf]) -> Result<Option<Record>, Refusal> {
    read(at)?.map(|t| parse(&t, roots)).transpose()
}

/// The text of the kept view at `at`, unparsed ([`header`], [`record`]):
/// `Ok(None)` when there is none (a first launch), `Err` saying why it is
/// not trusted.
pub(super) fn read(at: &Path) -> Result<Option<String>, Refusal> {
    let parent = at.parent().unwrap_or(Path::new("/"));
    match parent.symlink_metadata() {
        Ok(m) if root_only_dir(&m) => {}
        Ok(_) => {
            return Err(format!(
                "{} is not a directory only root may change",
                parent.display()
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", parent.display())),
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(at);
    let f = match f {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err("it is a symlink".into()),
        Err(e) => return Err(format!("unreadable: {e}")),
    };
    let m = f.metadata().map_err(|e| format!("unreadable: {e}"))?;
    if !m.is_file() {
        return Err("not a regular file".into());
    }
    if m.uid() != 0 || m.mode() & 0o022 != 0 {
        return Err(format!(
            "owned by uid {} with mode {:o}, not writable by root alone",
            m.uid(),
            m.mode() & 0o7777
        ));
    }
    if m.nlink() != 1 {
        return Err(format!("it has {} links", m.nlink()));
    }
    if m.len() > MAX_STATE {
        return Err(format!("{} bytes, more than {MAX_STATE}", m.len()));
    }
    let mut text = String::new();
    f.take(MAX_STATE)
        .read_to_string(&mut text)
        .map_err(|e| format!("unreadable: {e}"))?;
    Ok(Some(text))
}

/// Write `r` at `at`, atomically: a new file beside it (never through a
/// symlink), renamed over it. Nothing when the directory is missing or
/// others may change it.
pub(super) fn store(at: &Path, r: &Record) -> std::io::Result<()> {
    let parent = at.parent().unwrap_or(Path::new("/"));
    if !parent.symlink_metadata().is_ok_and(|m| root_only_dir(&m)) {
        return Ok(());
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let file = at.file_name().unwrap_or(OsStr::new("root-view"));
    let mut tmp_name = OsString::from(".");
    tmp_name.push(file);
    tmp_name.push(format!(".{}.{nanos}.new", std::process::id()));
    let tmp = parent.join(tmp_name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    // Readable by all whatever the umask (see the module's doc).
    let done = f
        .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .and_then(|_| f.write_all(render(r).as_bytes()))
        .and_then(|_| std::fs::rename(&tmp, at));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        let mut r = Record {
            bound: 1000,
            full_at: 1_700_000_000,
            mounts: "ab".repeat(32),
            dirs: HashMap::new(),
        };
        r.dirs.insert(
            PathBuf::from("/opt/a b/\n%x"),
            DirRec {
                key: [1, 2, 3, 4, 5, -6],
                masks: vec![("sec ret".into(), false), ("d".into(), true)],
                subdirs: vec![OsString::from_vec(vec![0xff, b'z'])],
                others: vec!["conf".into(), OsString::from_vec(vec![b'%', 0x0a])],
            },
        );
        r.dirs.insert(
            PathBuf::from("/opt"),
            DirRec {
                key: [9; 6],
                masks: vec![],
                subdirs: vec!["a b".into()],
                others: vec![],
            },
        );
        r
    }

    #[test]
    fn the_mounts_under_the_walked_trees_are_what_counts() {
        let roots = [PathBuf::from("/opt"), PathBuf::from("/var")];
        let base = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
                    30 22 0:5 / /opt rw - tmpfs tmpfs rw\n\
                    31 22 0:6 / /proc rw - proc proc rw\n";
        let d = mounts_of(base, &roots);
        assert_eq!(d.len(), 64);
        // Mount ids renumbered, an unrelated mount added: the same.
        let renumbered = "23 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
                          40 23 0:5 / /opt rw - tmpfs tmpfs rw\n\
                          41 23 0:6 / /proc rw - proc proc rw\n\
                          42 23 0:7 / /run/x rw - tmpfs tmpfs rw\n";
        assert_eq!(mounts_of(renumbered, &roots), d);
        // A file bound over one under /opt, or /opt's mount replaced: not.
        let bound = format!("{base}50 30 0:9 /secret /opt/tool/conf rw - tmpfs tmpfs rw\n");
        assert_ne!(mounts_of(&bound, &roots), d);
        let other = base.replace("0:5 / /opt", "0:8 / /opt");
        assert_ne!(mounts_of(&other, &roots), d);
        // /optional is not under /opt.
        let beside = format!("{base}51 22 0:9 / /optional rw - tmpfs tmpfs rw\n");
        assert_eq!(mounts_of(&beside, &roots), d);
    }

    #[test]
    fn the_tree_order_is_the_order_of_names() {
        let mut v: Vec<PathBuf> = ["/a-c", "/a/b.x", "/a/b/c", "/a/b", "/a", "/a0", "/ab"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let mut by_names = v.clone();
        by_names.sort();
        v.sort_by(|a, b| tree_order(a, b));
        assert_eq!(v, by_names);
        assert_eq!(
            v[..3],
            [PathBuf::from("/a"), "/a/b".into(), "/a/b/c".into()]
        );
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let roots = [PathBuf::from("/opt")];
        let r = sample();
        assert_eq!(parse(&render(&r), &roots), Ok(r));
    }

    #[test]
    fn edited_or_foreign_text_is_refused() {
        let roots = [PathBuf::from("/opt")];
        const M: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let text = render(&sample());
        // A mask taken out: the checksum no longer matches.
        let edited = text.replace("m sec%20ret\n", "");
        assert!(parse(&edited, &roots).unwrap_err().contains("checksum"));
        // Valid text whose paths lie elsewhere; bad names; garbage.
        let body = format!("bound 1\nfull-at 1\nmounts {M}\nD 1 1 1 1 1 1 /home/x\n");
        let other = format!("{MAGIC} {}\n{body}", hex(&Sha256::digest(&body)));
        assert!(parse(&other, &roots).unwrap_err().contains("outside"));
        for bad in ["/opt/../etc", "/opt/./x", "/opt/"] {
            let body = format!("bound 1\nfull-at 1\nmounts {M}\nD 1 1 1 1 1 1 {bad}\n");
            let t = format!("{MAGIC} {}\n{body}", hex(&Sha256::digest(&body)));
            assert!(parse(&t, &roots).is_err(), "{bad}");
        }
        for bad in ["..", "a/b", "", "%2F"] {
            let body = format!("bound 1\nfull-at 1\nmounts {M}\nD 1 1 1 1 1 1 /opt\nm {bad}\n");
            let t = format!("{MAGIC} {}\n{body}", hex(&Sha256::digest(&body)));
            assert!(parse(&t, &roots).is_err(), "{bad}");
        }
        // No mount table recorded: refused.
        let body = "bound 1\nfull-at 1\nmounts \nD 1 1 1 1 1 1 /opt\n";
        let t = format!("{MAGIC} {}\n{body}", hex(&Sha256::digest(body)));
        assert!(parse(&t, &roots).unwrap_err().contains("mounts"));
        assert!(parse("garbage", &roots).is_err());
        assert!(parse("", &roots).is_err());
    }

    #[test]
    fn state_is_written_atomically_and_read_only_when_root_s_alone() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("csb-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let at = d.join("root-view");
        let roots = [PathBuf::from("/opt")];
        assert_eq!(load(&at, &roots), Ok(None), "none yet");
        if !nix::unistd::geteuid().is_root() {
            // Neither the directory nor the file can be root's here.
            return;
        }
        store(&at, &sample()).unwrap();
        assert_eq!(load(&at, &roots), Ok(Some(sample())));
        assert_eq!(at.metadata().unwrap().mode() & 0o777, 0o644);
        // A symlink in its place is not followed.
        let real = d.join("elsewhere");
        std::fs::rename(&at, &real).unwrap();
        std::os::unix::fs::symlink(&real, &at).unwrap();
        assert!(load(&at, &roots).unwrap_err().contains("symlink"));
        // Storing replaces the symlink, never writes through it.
        let before = std::fs::read(&real).unwrap();
        let other = Record {
            mounts: "cd".repeat(32),
            ..Record::default()
        };
        store(&at, &other).unwrap();
        assert_eq!(std::fs::read(&real).unwrap(), before);
        assert!(at.symlink_metadata().unwrap().is_file());
        // Writable by others, owned by another, linked twice: refused.
        for mode in [0o664, 0o646] {
            std::fs::set_permissions(&at, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(load(&at, &roots).unwrap_err().contains("mode"), "{mode:o}");
        }
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(load(&at, &roots).is_ok());
        std::os::unix::fs::chown(&at, Some(4242), None).unwrap();
        assert!(load(&at, &roots).unwrap_err().contains("uid 4242"));
        std::os::unix::fs::chown(&at, Some(0), None).unwrap();
        std::fs::hard_link(&at, d.join("link")).unwrap();
        assert!(load(&at, &roots).unwrap_err().contains("links"));
        std::fs::remove_file(d.join("link")).unwrap();
        // A directory others may write to: neither read nor written.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(load(&at, &roots).is_err());
        std::fs::remove_file(&at).unwrap();
        store(&at, &sample()).unwrap();
        assert!(!at.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
