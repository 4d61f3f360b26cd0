//! The walk behind the root view: breadth-first over the system trees,
//! bounded, and failing closed. Every directory is either examined whole
//! (each entry stat'ed) or reported unfinished, and an unfinished directory
//! is masked whole: a bound (entries, depth), a directory that changed while
//! it was read, or one the walker could not read never leaves an entry
//! unexamined and readable.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsString;
use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::kept::{at_or_under, key_of, under_any, DirRec, Key, Line, Refusal};
use crate::plan::Unreadable;

/// How far one walk goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    /// Directory entries examined at most, over all roots.
    pub(super) max_entries: usize,
    /// Directories deeper than this below their root are not listed.
    pub(super) max_depth: usize,
    /// Whether a directory holding one of the kept paths is reported like
    /// any other (the launch masks it: the kept paths are bound over the
    /// mask) or only gone into (the audit from inside, where it may be a
    /// mount point bubblewrap made).
    pub(super) report_holders: bool,
}

/// What a walk found.
#[derive(Debug, Default)]
pub(super) struct Walk {
    /// Entries the session could use and others could not ([`session_gains`]).
    pub(super) unreadable: Vec<Unreadable>,
    /// Directories not examined whole: masked whole.
    pub(super) unfinished: Vec<PathBuf>,
    /// Directory entries examined.
    pub(super) examined: usize,
    /// With a [`Keeping`]: the directories examined whole, and how many of
    /// them were examined afresh (not reused).
    pub(super) record: HashMap<PathBuf, DirRec>,
    pub(super) fresh: usize,
    /// With a [`Keeping`]: whether a directory examined afresh holds other
    /// masks or subdirectories than recorded.
    pub(super) changed: bool,
    /// With a [`Keeping`]: directories examined whole but not recorded (they
    /// changed within [`RACY_SECS`] of the walk's start).
    pub(super) unkept: usize,
}

/// The permission bits (`rwx`) that matter for an entry of this type on a
/// read-only, `nodev` view: reading a file; listing and entering a
/// directory; connecting to a socket or opening a FIFO (which a read-only
/// mount does not stop); none for a device node (bubblewrap's bind of `/`
/// is `nodev`: none opens, whatever its mode).
fn relevant(m: &Metadata) -> u32 {
    let t = m.file_type();
    if t.is_dir() {
        0o5
    } else if t.is_socket() || t.is_fifo() {
        0o6
    } else if t.is_block_device() || t.is_char_device() {
        0
    } else {
        0o4
    }
}

/// The bits a root session may hold on `m`, counted generously: the
/// owner's when root owns it, the group's always (the session's groups are
/// root's, and an ACL's named entries hide behind the group bits), the
/// others'. Capabilities count for nothing: the session has none.
fn session_bits(m: &Metadata) -> u32 {
    let mode = m.mode();
    let owner = if m.uid() == 0 { (mode >> 6) & 0o7 } else { 0 };
    owner | ((mode >> 3) & 0o7) | (mode & 0o7)
}

/// Whether a root session could do with `m` something others could not:
/// such an entry is masked.
pub(super) fn session_gains(m: &Metadata) -> bool {
    session_bits(m) & relevant(m) & !(m.mode() & 0o7) != 0
}

/// Whether a root session can enter the directory `m` at all: if not,
/// nothing below it is reachable and the walk does not go in.
fn session_enters(m: &Metadata) -> bool {
    session_bits(m) & 0o1 != 0
}

/// Whether anyone may add entries to the directory `m` (`/var/tmp`, a
/// chroot's `/tmp`): such trees are walked after the others, so whatever
/// another user piles up there cannot use up the bound before the
/// system's own trees are examined.
fn world_writable(m: &Metadata) -> bool {
    m.mode() & 0o002 != 0
}

/// One directory's examination.
enum Examined {
    /// Every entry examined: the entries a root session gains by, the
    /// directories to go into (each with what its stat said then), the
    /// names of the other entries (only when asked for: [`Keeping::every_entry`]),
    /// and the directory's [`Key`] then.
    Done {
        masks: Vec<Unreadable>,
        subdirs: Vec<(PathBuf, Metadata)>,
        others: Vec<OsString>,
        key: Key,
    },
    /// Not examined whole: mask it whole.
    Unfinished,
    /// It no longer exists.
    Gone,
}

/// A directory waiting to be examined: its path, how deep below its root,
/// and its stat from its parent's examination (none for a root).
type Queued = (PathBuf, usize, Option<Metadata>);

/// A directory whose change time (in whole seconds) is not at least this
/// far before the walk's start (whole seconds) is not kept: a change made
/// in the same tick of a file system's coarse clock as the reading would
/// leave it as recorded. A margin of at least one second; ticks are
/// milliseconds.
const RACY_SECS: i64 = 1;

/// What a walk may reuse and keep: the record of earlier walks (taken
/// apart as it is reused), when this one started (seconds since the
/// epoch), and whether every entry of a directory is recorded and stat'ed
/// again when the directory is reused (`/etc`: a file narrowed by `chmod`
/// is seen at once) or only its masks and subdirectories (the larger
/// trees: such a file is seen at the next whole walk).
pub(super) struct Keeping {
    pub(super) prior: HashMap<PathBuf, DirRec>,
    pub(super) started: i64,
    pub(super) every_entry: bool,
    /// Directories neither examined nor recorded (the launch's read-write
    /// roots and home, bound over the view whatever it finds there): their
    /// parents' records name them like any subdirectory, so a launch that
    /// does not skip them finds no record and examines them afresh.
    pub(super) skip: Vec<PathBuf>,
}

/// Walk `groups` of roots within `b`, never into or under `keep`: each
/// group breadth-first, one after the other, then every world-writable tree
/// found on the way, breadth-first too. Once the entry bound is reached,
/// every directory not yet examined is unfinished.
pub(super) fn walk(groups: &[Vec<PathBuf>], keep: &[PathBuf], b: Bounds) -> Walk {
    walk_keeping(groups, keep, b, None)
}

/// [`walk`], reusing from `keeping` each directory whose [`Key`] is the
/// one recorded, and recording each examined whole ([`Walk::record`]).
pub(super) fn walk_keeping(
    groups: &[Vec<PathBuf>],
    keep: &[PathBuf],
    b: Bounds,
    mut keeping: Option<Keeping>,
) -> Walk {
    let mut w = Walk {
        record: HashMap::with_capacity(keeping.as_ref().map_or(0, |k| k.prior.len())),
        ..Walk::default()
    };
    let mut budget = b.max_entries;
    // One queue per group, and a last one for world-writable trees.
    let mut queues: Vec<VecDeque<Queued>> = groups
        .iter()
        .map(|g| g.iter().map(|r| (r.clone(), 0, None)).collect())
        .collect();
    queues.push(VecDeque::new());
    let last = queues.len() - 1;
    let mut exhausted = false;
    for q in 0..queues.len() {
        while let Some((dir, depth, mut seen)) = queues[q].pop_front() {
            if exhausted || depth >= b.max_depth {
                w.unfinished.push(dir);
                continue;
            }
            if skipped(keeping.as_ref(), &dir) {
                continue;
            }
            let prior = keeping.as_mut().and_then(|k| k.prior.remove(&dir));
            let reused = prior.as_ref().and_then(|rec| reuse(&dir, &mut seen, rec));
            let fresh = reused.is_none();
            let names = keeping.as_ref().is_some_and(|k| k.every_entry);
            let outcome = reused.unwrap_or_else(|| {
                let how = How {
                    keep,
                    report_holders: b.report_holders,
                    names,
                };
                examine(&dir, seen, &how, &mut budget, &mut w)
            });
            match outcome {
                Examined::Done {
                    masks,
                    subdirs,
                    others,
                    key,
                } => {
                    if let Some(k) = &keeping {
                        let rec = match prior {
                            Some(rec) if !fresh => rec,
                            prior => record_of(&masks, &subdirs, others, key, prior, &mut w),
                        };
                        keep_record(&mut w, k, dir, rec, fresh);
                    }
                    w.unreadable.extend(masks);
                    for (p, m) in subdirs {
                        let to = if world_writable(&m) { last } else { q };
                        queues[to].push_back((p, depth + 1, Some(m)));
                    }
                }
                Examined::Unfinished => {
                    exhausted = budget == 0;
                    w.unfinished.push(dir);
                }
                Examined::Gone => {}
            }
        }
    }
    w
}

/// Whether `dir` is one `keeping` skips ([`Keeping::skip`]).
fn skipped(keeping: Option<&Keeping>, dir: &Path) -> bool {
    keeping.is_some_and(|k| under_any(dir, &k.skip))
}

/// The record of a directory examined afresh, noting in `w` whether it
/// names other entries than its `prior` record did (a directory new to
/// the record is one its parent changed for, or one not kept last time:
/// counted by the caller).
fn record_of(
    masks: &[Unreadable],
    subdirs: &[(PathBuf, Metadata)],
    others: Vec<OsString>,
    key: Key,
    prior: Option<DirRec>,
    w: &mut Walk,
) -> DirRec {
    let name = |p: &Path| p.file_name().unwrap_or_default().to_os_string();
    let rec = DirRec {
        key,
        masks: masks.iter().map(|u| (name(&u.path), u.dir)).collect(),
        subdirs: subdirs.iter().map(|(p, _)| name(p)).collect(),
        others,
    };
    w.changed |= prior.is_some_and(|p| !p.same_entries(&rec));
    rec
}

/// `rec`, the record of `dir` (examined afresh when `fresh`), kept in
/// `w` unless `dir` changed within [`RACY_SECS`] of the walk's start.
fn keep_record(w: &mut Walk, k: &Keeping, dir: PathBuf, rec: DirRec, fresh: bool) {
    w.fresh += usize::from(fresh);
    if rec.key[2] < k.started - RACY_SECS {
        w.record.insert(dir, rec);
    } else {
        w.unkept += 1;
    }
}

/// `dir` as `rec` recorded it, when its [`Key`] (from `seen`, its stat
/// from its parent's examination, or a stat now, kept in `seen` for
/// [`examine`]) is the recorded one: the recorded masks, the recorded
/// subdirectories, each stat'ed now (one a root session gains by since
/// is masked; one it can no longer enter is left), and the other entries
/// recorded, each stat'ed now too (one a root session gains by since is
/// masked). `None`: examine it.
fn reuse(dir: &Path, seen: &mut Option<Metadata>, rec: &DirRec) -> Option<Examined> {
    if seen.is_none() {
        *seen = dir.symlink_metadata().ok();
    }
    let m = seen.as_ref()?;
    if !m.is_dir() || key_of(m) != rec.key {
        return None;
    }
    let mut masks: Vec<Unreadable> = rec
        .masks
        .iter()
        .map(|(n, d)| Unreadable {
            path: dir.join(n),
            dir: *d,
        })
        .collect();
    let mut subdirs = Vec::with_capacity(rec.subdirs.len());
    for n in &rec.subdirs {
        let p = dir.join(n);
        match p.symlink_metadata() {
            Ok(m) if m.is_dir() && session_gains(&m) => {
                masks.push(Unreadable { path: p, dir: true })
            }
            Ok(m) if m.is_dir() => {
                if session_enters(&m) {
                    subdirs.push((p, m))
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // Replaced (the directory would have changed), or not
            // stat-able: examined afresh.
            _ => return None,
        }
    }
    for n in &rec.others {
        masks.extend(other_now(dir.join(n))?);
    }
    Some(Examined::Done {
        masks,
        subdirs,
        others: Vec::new(),
        key: rec.key,
    })
}

/// An entry recorded as neither masked nor gone into, stat'ed now: a mask
/// when a root session gains by it since, nothing when it is as it was or
/// gone; `None` when its directory must be examined afresh (a symlink,
/// which is never followed; a directory the walk would now go into, which
/// the directory would have changed for; one that cannot be stat'ed).
fn other_now(p: PathBuf) -> Option<Option<Unreadable>> {
    match p.symlink_metadata() {
        Ok(m) if m.file_type().is_symlink() => None,
        Ok(m) if session_gains(&m) => Some(Some(Unreadable {
            dir: m.is_dir(),
            path: p,
        })),
        Ok(m) if m.is_dir() && session_enters(&m) => None,
        Ok(_) => Some(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(None),
        Err(_) => None,
    }
}

/// The masks of a kept view whose every directory is as it recorded:
/// exactly what [`walk_keeping`] finds reusing each one, read line by line
/// from `lines` (its [`Line`]s, as [`super::kept::render`] writes them: a
/// directory before what lies in it) without taking the record apart
/// (most launches: nothing changed). Each recorded directory is stat'ed
/// once, as the walk would: its [`Key`] must be the recorded one and,
/// below its tree, it must be one a root session may enter and gains
/// nothing by (as its parent's record says); each of its other entries is
/// stat'ed again ([`other_now`]). `None` at the first thing that differs
/// (a directory changed, narrowed or gone, one deeper than `max_depth`,
/// one recorded that its parent does not name or named without a record
/// of its own, a line that does not parse or comes out of order): the
/// walk decides. Nothing in or under `skip` is stat'ed or reported.
pub(super) fn verify(
    lines: impl Iterator<Item = Result<Line, Refusal>>,
    trees: &[PathBuf],
    skip: &[PathBuf],
    max_depth: usize,
) -> Option<Vec<Unreadable>> {
    let skipped = |p: &Path| under_any(p, skip);
    let mut masks = Vec::new();
    // The trees, each to be recorded; then the recorded directories above
    // the current line.
    let mut trees_left: Vec<&PathBuf> = trees.iter().filter(|t| !skipped(t)).collect();
    let mut above: Vec<Above> = Vec::new();
    // Whether the lines are about the last of `above` (not when skipped).
    let mut at = false;
    for line in lines {
        match (line.ok()?, at) {
            (Line::Dir(p, key), _) => {
                if at {
                    above.last_mut()?.named_all()?;
                }
                at = false;
                if skipped(&p) {
                    continue;
                }
                // Every directory named by those it is not under came.
                while let Some(d) = above.last() {
                    if p != d.dir && at_or_under(&p, &d.dir) {
                        break;
                    }
                    d.complete().then_some(())?;
                    above.pop();
                }
                match above.last_mut() {
                    Some(d) => d.came(&p)?,
                    None => {
                        let t = trees_left.iter().position(|t| **t == p)?;
                        trees_left.swap_remove(t);
                    }
                }
                let depth = above.len();
                let m = p.symlink_metadata().ok()?;
                let entered = depth == 0 || (session_enters(&m) && !session_gains(&m));
                if depth >= max_depth || !m.is_dir() || key_of(&m) != key || !entered {
                    return None;
                }
                above.push(Above {
                    dir: p,
                    named: Vec::new(),
                    came: Vec::new(),
                });
                at = true;
            }
            (Line::Mask(n, dir), true) => masks.push(Unreadable {
                path: above.last()?.dir.join(n),
                dir,
            }),
            (Line::Sub(n), true) => {
                let d = above.last_mut()?;
                if !skipped(&d.dir.join(&n)) {
                    d.named.push(n);
                }
            }
            (Line::Other(n), true) => masks.extend(other_now(above.last()?.dir.join(n))?),
            (_, false) => {}
        }
    }
    if at {
        above.last_mut()?.named_all()?;
    }
    let complete = above.iter().all(Above::complete);
    (complete && trees_left.is_empty()).then_some(masks)
}

/// A recorded directory above [`verify`]'s current line: the
/// subdirectories it names (sorted once all are read), and which of them
/// came with a record of their own.
struct Above {
    dir: PathBuf,
    named: Vec<OsString>,
    came: Vec<bool>,
}

impl Above {
    /// Every name read: sorted, for [`Above::came`]; `None` for a name
    /// given twice.
    fn named_all(&mut self) -> Option<()> {
        self.named.sort_unstable();
        self.came = vec![false; self.named.len()];
        self.named.windows(2).all(|w| w[0] != w[1]).then_some(())
    }

    /// `p`, recorded, is one of the subdirectories named, and came once.
    fn came(&mut self, p: &Path) -> Option<()> {
        let name = p
            .file_name()
            .filter(|_| p.parent() == Some(self.dir.as_path()))?;
        let i = self
            .named
            .binary_search_by(|n| n.as_os_str().cmp(name))
            .ok()?;
        (!std::mem::replace(&mut self.came[i], true)).then_some(())
    }

    /// Whether every subdirectory named came.
    fn complete(&self) -> bool {
        self.came.len() == self.named.len() && self.came.iter().all(|c| *c)
    }
}

/// How [`examine`] treats what it finds: never into or under `keep`;
/// whether a directory holding one of `keep` is reported
/// ([`Bounds::report_holders`]); whether the names of the entries neither
/// masked nor gone into are returned (`names`).
struct How<'a> {
    keep: &'a [PathBuf],
    report_holders: bool,
    names: bool,
}

/// Examine one directory: every entry, or none. `seen`: its stat from
/// before (its parent's examination), compared with one after the reading:
/// read again when it changed; unfinished when it changed again.
fn examine(
    dir: &Path,
    mut seen: Option<Metadata>,
    how: &How<'_>,
    budget: &mut usize,
    w: &mut Walk,
) -> Examined {
    let keep = how.keep;
    for _ in 0..2 {
        let before = match seen.take().map_or_else(|| dir.symlink_metadata(), Ok) {
            Ok(m) if m.is_dir() => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Examined::Gone,
            // Replaced by something else, or not stat-able: never trusted.
            _ => return Examined::Unfinished,
        };
        let found = match entries(dir, budget) {
            Some(found) => found,
            None => return Examined::Unfinished,
        };
        w.examined += found.len();
        let mut masks = Vec::new();
        let mut subdirs = Vec::new();
        let mut others = Vec::new();
        for (e, m) in found {
            // Most entries are neither masked nor gone into: no path for them.
            if !m.is_dir() && !session_gains(&m) {
                if how.names {
                    others.push(e.file_name());
                }
                continue;
            }
            let p = e.path();
            if keep.iter().any(|k| p.starts_with(k)) {
                continue;
            }
            let report = how.report_holders || !keep.iter().any(|k| k.starts_with(&p));
            if report && session_gains(&m) {
                masks.push(Unreadable {
                    path: p,
                    dir: m.is_dir(),
                });
            } else if m.is_dir() && session_enters(&m) {
                subdirs.push((p, m));
            } else if how.names {
                others.push(e.file_name());
            }
        }
        #[cfg(test)]
        tests::between(dir);
        match dir.symlink_metadata() {
            Ok(after) if same_listing(&before, &after) => {
                return Examined::Done {
                    masks,
                    subdirs,
                    others,
                    key: key_of(&after),
                };
            }
            // Changed: read again, from this stat.
            Ok(after) => seen = Some(after),
            Err(_) => return Examined::Unfinished,
        }
    }
    Examined::Unfinished
}

/// A directory with more entries than the budget left is not examined; the
/// part of it listed to find that out is charged at 1 in this many (a
/// listed name costs a fraction of a stat'ed one), so that one huge
/// directory does not leave nothing for the rest, and yet the names listed
/// in all stay within a few times the bound.
const LISTING_SHARE: usize = 8;

/// The entries of `dir` with their metadata (symlinks left out: never
/// followed, their targets are examined where they lie), charged to
/// `budget`; `None` when they are more than it holds, when the directory
/// cannot be read, or when an entry cannot be stat'ed for a reason other
/// than having vanished.
fn entries(dir: &Path, budget: &mut usize) -> Option<Vec<(std::fs::DirEntry, Metadata)>> {
    let rd = std::fs::read_dir(dir).ok()?;
    let mut listed = Vec::new();
    for e in rd {
        let e = e.ok()?;
        if listed.len() == *budget {
            *budget -= (listed.len() / LISTING_SHARE).max(1).min(*budget);
            return None;
        }
        listed.push(e);
    }
    *budget -= listed.len();
    let mut out = Vec::with_capacity(listed.len());
    for e in listed {
        if e.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        // Relative to the directory's fd, not following symlinks.
        match e.metadata() {
            Ok(m) if m.file_type().is_symlink() => {}
            Ok(m) => out.push((e, m)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return None,
        }
    }
    Some(out)
}

/// Whether a directory kept the same identity and entries between two
/// stats (an entry added, removed or renamed changes its mtime; a change
/// of its own mode or owner, its ctime).
fn same_listing(a: &Metadata, b: &Metadata) -> bool {
    (
        a.dev(),
        a.ino(),
        a.mtime(),
        a.mtime_nsec(),
        a.ctime(),
        a.ctime_nsec(),
    ) == (
        b.dev(),
        b.ino(),
        b.mtime(),
        b.mtime_nsec(),
        b.ctime(),
        b.ctime_nsec(),
    )
}

/// At most `max` of `masks` (more only when they lie directly in `roots`),
/// each replaced as needed by its parent directory: the deepest first, the
/// parents holding the most of them first. Hiding a parent hides more than
/// the walk had to, never less; what lies under another mask is dropped.
/// Returns the masks, and which of them are parents put in (masked whole
/// for the bound, not for being root's).
pub(super) fn coarsen(
    masks: Vec<Unreadable>,
    roots: &[PathBuf],
    max: usize,
) -> (Vec<Unreadable>, Vec<PathBuf>) {
    let dirs: BTreeMap<PathBuf, bool> = masks.into_iter().map(|u| (u.path, u.dir)).collect();
    let kept = without_nested(dirs.keys().cloned().collect());
    let mut set: Vec<(PathBuf, bool)> = kept.into_iter().map(|p| (p, false)).collect();
    let depth_of = |p: &Path| {
        roots
            .iter()
            .filter(|r| p.starts_with(r))
            .map(|r| p.components().count() - r.components().count())
            .min()
            .unwrap_or(0)
    };
    let deepest = set.iter().map(|(p, _)| depth_of(p)).max().unwrap_or(0);
    for depth in (2..=deepest).rev() {
        if set.len() <= max {
            break;
        }
        // Parents of this level's masks, those holding the most first.
        let mut by_parent: BTreeMap<PathBuf, usize> = BTreeMap::new();
        for (p, _) in set.iter().filter(|(p, _)| depth_of(p) == depth) {
            if let Some(parent) = p.parent() {
                *by_parent.entry(parent.to_path_buf()).or_default() += 1;
            }
        }
        let mut parents: Vec<(PathBuf, usize)> = by_parent.into_iter().collect();
        parents.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for (parent, _) in parents {
            if set.len() <= max {
                break;
            }
            set.retain(|(p, _)| !p.starts_with(&parent));
            set.push((parent, true));
        }
    }
    set.sort();
    let added = set
        .iter()
        .filter(|(_, a)| *a)
        .map(|(p, _)| p.clone())
        .collect();
    let out = set
        .into_iter()
        .map(|(path, added)| Unreadable {
            dir: added || dirs.get(&path).copied().unwrap_or(true),
            path,
        })
        .collect();
    (out, added)
}

/// `dirs` without any that lie under another of them.
pub(super) fn without_nested(mut dirs: Vec<PathBuf>) -> Vec<PathBuf> {
    dirs.sort();
    dirs.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        // Sorted: an ancestor comes before everything under it.
        if !out.last().is_some_and(|a| d.starts_with(a)) {
            out.push(d);
        }
    }
    out
}

/// `masks` without any that lie under another of them.
pub(super) fn without_nested_masks(masks: Vec<Unreadable>) -> Vec<Unreadable> {
    let dirs: BTreeMap<PathBuf, bool> = masks.into_iter().map(|u| (u.path, u.dir)).collect();
    without_nested(dirs.keys().cloned().collect())
        .into_iter()
        .map(|path| Unreadable {
            dir: dirs[&path],
            path,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::kept::{header, lines, render, Record};
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A scratch tree, removed on drop.
    struct Tree(PathBuf);
    impl Tree {
        fn new(name: &str) -> Tree {
            let d = std::env::temp_dir().join(format!("csb-rv-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Tree(d)
        }
        fn file(&self, rel: &str, mode: u32) -> PathBuf {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "s").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        }
        fn dir(&self, rel: &str, mode: u32) -> PathBuf {
            let p = self.0.join(rel);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        }
        fn rel(&self, p: &Path) -> String {
            p.strip_prefix(&self.0).unwrap().display().to_string()
        }
    }
    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::process::Command::new("chmod")
                .args(["-R", "u+rwx"])
                .arg(&self.0)
                .status();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    type Hook = Box<dyn FnMut(&Path)>;

    thread_local! {
        /// Run between a directory's reading and its second stat (the
        /// window in which an entry may appear).
        static BETWEEN: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
    }

    pub(super) fn between(dir: &Path) {
        BETWEEN.with(|b| {
            if let Some(f) = b.borrow_mut().as_mut() {
                f(dir)
            }
        })
    }

    #[test]
    fn an_entry_appearing_while_its_directory_is_read_is_never_missed() {
        let t = Tree::new("race");
        t.file("d/public", 0o644);
        let d = t.0.join("d");
        // Appears once, after the first reading: found by the second.
        let (target, mut n) = (d.clone(), 0);
        BETWEEN.with(|b| {
            *b.borrow_mut() = Some(Box::new(move |dir: &Path| {
                if dir == target && n == 0 {
                    n += 1;
                    let f = dir.join("late-secret");
                    std::fs::write(&f, "s").unwrap();
                    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
                }
            }))
        });
        let w = walk(&[vec![t.0.clone()]], &[], WIDE);
        assert_eq!(masked(&t, &w), ["d/late-secret"]);
        // Entries keep appearing: the directory is masked whole.
        let (target, mut n) = (d.clone(), 0);
        BETWEEN.with(|b| {
            *b.borrow_mut() = Some(Box::new(move |dir: &Path| {
                if dir == target {
                    n += 1;
                    std::fs::write(dir.join(format!("more-{n}")), "s").unwrap();
                }
            }))
        });
        let w = walk(&[vec![t.0.clone()]], &[], WIDE);
        BETWEEN.with(|b| *b.borrow_mut() = None);
        assert_eq!(masked(&t, &w), ["d (whole)"]);
    }

    const WIDE: Bounds = Bounds {
        max_entries: 100_000,
        max_depth: 64,
        report_holders: true,
    };

    /// Whether `p` is masked, itself or by an unfinished directory above it.
    fn covered(w: &Walk, p: &Path) -> bool {
        w.unreadable.iter().any(|u| p.starts_with(&u.path))
            || w.unfinished.iter().any(|d| p.starts_with(d))
    }

    fn masked(t: &Tree, w: &Walk) -> Vec<String> {
        let mut v: Vec<String> = w
            .unreadable
            .iter()
            .map(|u| format!("{}{}", t.rel(&u.path), if u.dir { "/" } else { "" }))
            .chain(w.unfinished.iter().map(|p| format!("{} (whole)", t.rel(p))))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn modes_a_root_session_gains_by() {
        let t = Tree::new("modes");
        let f = t.file("f", 0o600);
        // Root owns what the test creates (the suite runs as root); as
        // another user, owner bits do not count and only group bits can.
        let root = nix::unistd::geteuid().is_root();
        for (mode, gains) in [
            (0o600, root),
            (0o640, true),
            (0o644, false),
            (0o604, false),
            (0o200, false),
            (0o000, false),
            (0o060, true),
        ] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(session_gains(&f.metadata().unwrap()), gains, "{mode:o}");
        }
        let d = t.dir("d", 0o755);
        for (mode, gains, enters) in [
            (0o700, root, root),
            (0o750, true, true),
            (0o751, true, true),
            (0o755, false, true),
            (0o711, root, true),
            (0o705, false, true),
            (0o000, false, false),
        ] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
            let m = d.metadata().unwrap();
            assert_eq!(session_gains(&m), gains, "{mode:o}");
            assert_eq!(session_enters(&m), enters, "{mode:o}");
        }
    }

    #[test]
    fn a_socket_or_fifo_others_may_read_but_not_write_is_masked() {
        let t = Tree::new("sock");
        let sock = t.0.join("s");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        // Group-writable: a root session may connect, others may not.
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert!(session_gains(&sock.symlink_metadata().unwrap()));
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(!session_gains(&sock.symlink_metadata().unwrap()));
        // A device node opens nowhere under bubblewrap's `nodev` bind of
        // `/`, whatever its mode (making one takes root).
        let dev = t.0.join("c");
        let made = nix::sys::stat::mknod(
            &dev,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o660),
            nix::sys::stat::makedev(1, 3),
        );
        if made.is_ok() {
            assert!(!session_gains(&dev.symlink_metadata().unwrap()));
        }
        let fifo = t.0.join("p");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o664)).unwrap();
        std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert!(session_gains(&fifo.symlink_metadata().unwrap()));
    }

    #[test]
    fn the_walk_finds_root_only_entries_at_any_depth_and_spares_the_workspace() {
        let t = Tree::new("find");
        // Group bits: masked whoever runs the test (owner bits count only
        // when root owns the entry).
        t.file("etc/secret", 0o640);
        t.file("etc/public", 0o644);
        t.dir("var/lib/private", 0o750);
        t.file("var/lib/ws/own-secret", 0o640);
        t.file("var/a/b/c/d/e/f/g/h/i/deep-secret", 0o640);
        t.dir("var/lib/holder/ws2", 0o755);
        t.dir("var/lib/holder", 0o750);
        let keep = [t.0.join("var/lib/ws"), t.0.join("var/lib/holder/ws2")];
        let w = walk(&[vec![t.0.clone()]], &keep, WIDE);
        // A root-only directory holding a read-write root is masked whole
        // too: the read-write root is bound over the mask.
        assert_eq!(
            masked(&t, &w),
            [
                "etc/secret",
                "var/a/b/c/d/e/f/g/h/i/deep-secret",
                "var/lib/holder/",
                "var/lib/private/"
            ]
        );
    }

    #[test]
    fn the_audit_goes_into_a_directory_holding_a_kept_path_without_naming_it() {
        let t = Tree::new("holders");
        t.dir("h/ws", 0o755);
        t.file("h/secret", 0o640);
        t.dir("h", 0o750);
        let keep = [t.0.join("h/ws")];
        let w = walk(
            &[vec![t.0.clone()]],
            &keep,
            Bounds {
                report_holders: false,
                ..WIDE
            },
        );
        assert_eq!(masked(&t, &w), ["h/secret"]);
    }

    #[test]
    fn a_directory_beyond_the_depth_bound_is_masked_whole() {
        let t = Tree::new("depth");
        t.file("a/b/c/secret", 0o640);
        t.file("a/public", 0o644);
        let w = walk(
            &[vec![t.0.clone()]],
            &[],
            Bounds {
                max_entries: 100,
                max_depth: 2,
                report_holders: true,
            },
        );
        assert_eq!(masked(&t, &w), ["a/b (whole)"]);
    }

    #[test]
    fn a_directory_over_the_entry_bound_is_masked_whole() {
        let t = Tree::new("entries");
        for i in 0..50 {
            t.file(&format!("big/f{i}"), 0o644);
        }
        let secrets = [
            t.file("big/secret", 0o640),
            t.file("small/x/secret", 0o640),
            t.file("top-secret", 0o640),
        ];
        let w = walk(
            &[vec![t.0.clone()]],
            &[],
            Bounds {
                max_entries: 20,
                max_depth: 64,
                report_holders: true,
            },
        );
        // The root's 3 entries fit; "big" does not, and spends 1/8 of what
        // it listed (17): "small" (1 entry) and "small/x" (1) still fit.
        assert_eq!(
            masked(&t, &w),
            ["big (whole)", "small/x/secret", "top-secret"]
        );
        for s in &secrets {
            assert!(covered(&w, s), "{s:?} readable: {:?}", masked(&t, &w));
        }
        assert!(w.examined <= 20, "{}", w.examined);
    }

    #[test]
    fn trees_anyone_may_write_to_are_walked_last() {
        let t = Tree::new("shared");
        // World-writable (sticky) like /var/tmp, full of entries.
        t.dir("tmp", 0o1777);
        for i in 0..30 {
            t.file(&format!("tmp/junk/f{i}"), 0o644);
        }
        t.file("lib/deeper/still/secret", 0o640);
        let w = walk(
            &[vec![t.0.clone()]],
            &[],
            Bounds {
                max_entries: 12,
                max_depth: 64,
                report_holders: true,
            },
        );
        // The system's own tree was examined whole before the shared one.
        assert_eq!(
            masked(&t, &w),
            ["lib/deeper/still/secret", "tmp/junk (whole)"]
        );
    }

    #[test]
    fn symlinks_are_never_followed_and_loops_end() {
        let t = Tree::new("links");
        t.file("d/secret", 0o640);
        std::os::unix::fs::symlink(".", t.0.join("d/self")).unwrap();
        std::os::unix::fs::symlink(&t.0, t.0.join("d/up")).unwrap();
        let w = walk(&[vec![t.0.clone()]], &[], WIDE);
        assert_eq!(masked(&t, &w), ["d/secret"]);
    }

    #[test]
    fn coarsening_keeps_the_count_and_never_hides_less() {
        let root = PathBuf::from("/r");
        let dir = |p: &str| Unreadable {
            path: root.join(p),
            dir: true,
        };
        let masks: Vec<Unreadable> = (0..10)
            .map(|i| dir(&format!("a/b/c{i}")))
            .chain((0..3).map(|i| dir(&format!("x/y{i}/z"))))
            .chain([
                dir("q"),
                dir("a/b/c1/inner"),
                Unreadable {
                    path: root.join("x/file"),
                    dir: false,
                },
            ])
            .collect();
        let (got, added) = coarsen(masks.clone(), std::slice::from_ref(&root), 6);
        assert!(got.len() <= 6, "{got:?}");
        for m in &masks {
            assert!(
                got.iter().any(|g| m.path.starts_with(&g.path)),
                "{:?} not covered by {got:?}",
                m.path
            );
        }
        // Never the root itself; a file left alone stays a file; what was
        // put in is a directory.
        assert!(!got.iter().any(|g| g.path == root), "{got:?}");
        assert!(got.contains(&Unreadable {
            path: root.join("x/file"),
            dir: false
        }));
        assert_eq!(added, [root.join("a/b")]);
        let (all, added) = coarsen(masks, std::slice::from_ref(&root), 100);
        assert_eq!(all.len(), 15, "under the limit: only nested ones dropped");
        assert!(added.is_empty());
    }

    /// A walk keeping its record, as if it started `started` seconds from
    /// now (far enough ahead: every directory is old enough to keep).
    fn kept_walk(t: &Tree, prior: &Record, started: i64) -> Walk {
        kept_walk_of(t, prior, started, false, Vec::new())
    }

    /// [`kept_walk`], every entry kept when `every_entry` (as `/etc`'s),
    /// never into `skip`.
    fn kept_walk_of(
        t: &Tree,
        prior: &Record,
        started: i64,
        every_entry: bool,
        skip: Vec<PathBuf>,
    ) -> Walk {
        let k = Keeping {
            prior: prior.dirs.clone(),
            started: crate::sys::clock::now_secs() + started,
            every_entry,
            skip,
        };
        walk_keeping(&[vec![t.0.clone()]], &[], WIDE, Some(k))
    }

    /// What [`verify`] makes of `prior` (as written to the state), the
    /// tree its only root: the masks, as [`masked`] lists a walk's.
    fn verified(t: &Tree, prior: &Record, skip: &[PathBuf], depth: usize) -> Option<Vec<String>> {
        let written = Record {
            mounts: "0".repeat(64),
            ..prior.clone()
        };
        let text = render(&written);
        let (_, body) = header(&text).unwrap();
        let roots = [t.0.clone()];
        let unreadable = verify(lines(body, &roots), &roots, skip, depth)?;
        let w = Walk {
            unreadable,
            ..Walk::default()
        };
        Some(masked(t, &w))
    }

    #[test]
    fn verifying_a_kept_view_finds_what_its_walk_finds_or_leaves_it_to_the_walk() {
        let t = Tree::new("verify");
        t.file("a/secret", 0o640);
        t.file("b/c/public", 0o644);
        t.file("b/public", 0o644);
        t.file("b/c/d/public", 0o644);
        t.dir("closed", 0o750);
        let walk_of = |prior: &Record, skip: Vec<PathBuf>| kept_walk_of(&t, prior, 100, true, skip);
        let prior = Record {
            dirs: walk_of(&Record::default(), Vec::new()).record,
            ..Record::default()
        };
        let same = |skip: Vec<PathBuf>| {
            let w = walk_of(&prior, skip.clone());
            assert_eq!(w.fresh, 0, "the walk reused every directory");
            assert_eq!(
                verified(&t, &prior, &skip, WIDE.max_depth),
                Some(masked(&t, &w))
            );
            masked(&t, &w)
        };
        assert_eq!(same(Vec::new()), ["a/secret", "closed/"]);
        // A file narrowed in place: masked by both, nothing else changed.
        let public = t.0.join("b/public");
        std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(same(Vec::new()), ["a/secret", "b/public", "closed/"]);
        std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
        // Skipped: neither stat'ed nor reported, by either.
        assert_eq!(same(vec![t.0.join("a"), t.0.join("b/c")]), ["closed/"]);
        // Left to the walk: a line that does not parse; a directory deeper
        // than the bound; one its parent names with no record of its own.
        let roots = [t.0.clone()];
        assert_eq!(
            verify(std::iter::once(Err("x".into())), &roots, &[], 64),
            None
        );
        assert_eq!(verified(&t, &prior, &[], 3), None, "b/c/d is 3 deep");
        assert!(verified(&t, &prior, &[], 4).is_some());
        for missing in ["b/c/d", "b/c", ""] {
            let mut partial = prior.clone();
            partial.dirs.remove(&t.0.join(missing));
            assert_eq!(verified(&t, &partial, &[], 64), None, "{missing}");
        }
        // A directory narrowed (its parent unchanged), then widened again:
        // its key moved either way.
        let c = t.0.join("b/c");
        std::fs::set_permissions(&c, std::fs::Permissions::from_mode(0o750)).unwrap();
        assert_eq!(verified(&t, &prior, &[], 64), None);
        assert!(masked(&t, &walk_of(&prior, Vec::new())).contains(&"b/c/".to_string()));
        std::fs::set_permissions(&c, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(verified(&t, &prior, &[], 64), None);
        // An entry added, where nothing else changed.
        let prior = Record {
            dirs: walk_of(&Record::default(), Vec::new()).record,
            ..Record::default()
        };
        assert!(verified(&t, &prior, &[], 64).is_some());
        t.file("b/c/d/new-secret", 0o640);
        assert_eq!(verified(&t, &prior, &[], 64), None);
    }

    #[test]
    fn a_skipped_directory_is_neither_examined_nor_recorded_and_examined_when_not_skipped() {
        let t = Tree::new("skip");
        t.file("ws/secret", 0o640);
        t.file("ws/deep/er/secret", 0o640);
        t.file("other/secret", 0o640);
        let walk_skipping = |prior: &Record, skip| kept_walk_of(&t, prior, 100, false, skip);
        let w = walk_skipping(&Record::default(), vec![t.0.join("ws")]);
        assert_eq!(masked(&t, &w), ["other/secret"]);
        assert!(!w.record.keys().any(|p| p.starts_with(t.0.join("ws"))));
        // Its parent names it: a launch not skipping it examines it.
        assert_eq!(w.record[&t.0].subdirs.len(), 2, "{:?}", w.record[&t.0]);
        let prior = Record {
            dirs: w.record,
            ..Record::default()
        };
        let w = walk_skipping(&prior, Vec::new());
        assert_eq!(
            masked(&t, &w),
            ["other/secret", "ws/deep/er/secret", "ws/secret"]
        );
        assert_eq!(w.fresh, 3, "ws, ws/deep, ws/deep/er");
        // A name that merely begins like the skipped one is walked.
        assert!(!at_or_under(&t.0.join("wsx"), &t.0.join("ws")));
        assert!(at_or_under(&t.0.join("ws/a"), &t.0.join("ws")));
        assert!(at_or_under(Path::new("/opt"), Path::new("/")));
    }

    #[test]
    fn where_every_entry_is_kept_a_file_narrowed_in_place_is_seen_at_once() {
        let t = Tree::new("every");
        t.file("conf", 0o644);
        t.file("d/public", 0o644);
        // Group bits: what a root session gains by whoever runs this.
        t.file("d/secret", 0o640);
        t.dir("d/closed", 0o750);
        std::fs::create_dir_all(t.0.join("d/closed/x")).unwrap();
        let w = kept_walk_of(&t, &Record::default(), 100, true, Vec::new());
        let prior = Record {
            dirs: w.record,
            ..Record::default()
        };
        let d = &prior.dirs[&t.0.join("d")];
        assert_eq!(d.others, [OsString::from("public")], "{d:?}");
        let again = kept_walk_of(&t, &prior, 100, true, Vec::new());
        assert_eq!(again.fresh, 0);
        assert_eq!(again.record, prior.dirs);
        assert_eq!(masked(&t, &again), ["d/closed/", "d/secret"]);
        // Narrowed in place, their directories unchanged: masked at once.
        for f in ["conf", "d/public"] {
            std::fs::set_permissions(t.0.join(f), std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        let w = kept_walk_of(&t, &prior, 100, true, Vec::new());
        assert_eq!(w.fresh, 0, "nothing examined afresh");
        assert_eq!(
            masked(&t, &w),
            ["conf", "d/closed/", "d/public", "d/secret"]
        );
    }

    #[test]
    fn a_kept_walk_examines_only_what_changed() {
        let t = Tree::new("kept");
        t.file("a/secret", 0o640);
        t.file("b/c/public", 0o644);
        t.file("b/public", 0o644);
        let w = kept_walk(&t, &Record::default(), 100);
        assert_eq!((w.fresh, w.record.len()), (4, 4), "the root, a, b, b/c");
        let prior = Record {
            dirs: w.record,
            ..Record::default()
        };
        let again = kept_walk(&t, &prior, 100);
        assert_eq!(again.fresh, 0);
        assert_eq!(masked(&t, &again), ["a/secret"]);
        assert_eq!(again.record, prior.dirs);
        // A file added: its directory alone is examined again.
        t.file("b/c/new-secret", 0o640);
        // A directory narrowed: its own change time moves, not its
        // parent's; it is stat'ed anyway, and masked.
        t.dir("b", 0o750);
        let w = kept_walk(&t, &prior, 100);
        assert_eq!(masked(&t, &w), ["a/secret", "b/"]);
        t.dir("b", 0o755);
        let w = kept_walk(&t, &prior, 100);
        assert_eq!(masked(&t, &w), ["a/secret", "b/c/new-secret"]);
        assert_eq!(w.fresh, 2, "b and b/c changed");
        // A file narrowed in a directory that did not change: not seen
        // until the directory changes or a whole walk (decision 0036).
        let prior = Record {
            dirs: w.record,
            ..Record::default()
        };
        std::fs::set_permissions(t.0.join("b/public"), std::fs::Permissions::from_mode(0o640))
            .unwrap();
        let w = kept_walk(&t, &prior, 100);
        assert_eq!(
            masked(&t, &w),
            ["a/secret", "b/c/new-secret"],
            "the documented gap"
        );
        let w = kept_walk(&t, &Record::default(), 100);
        assert_eq!(masked(&t, &w), ["a/secret", "b/c/new-secret", "b/public"]);
    }

    #[test]
    fn a_directory_changed_in_the_walk_s_second_is_not_kept() {
        let t = Tree::new("racy");
        t.file("a/public", 0o644);
        // The walk started now: every directory here changed within
        // [`RACY_SECS`] of it, and a change in the same clock tick would
        // leave its record standing.
        let w = kept_walk(&t, &Record::default(), 0);
        assert!(w.record.is_empty(), "{:?}", w.record.keys());
        assert_eq!((w.fresh, w.unkept), (2, 2));
    }

    #[test]
    fn the_first_group_is_examined_whole_before_the_next() {
        let t = Tree::new("groups");
        for i in 0..10 {
            t.file(&format!("etc/d/f{i}"), 0o644);
        }
        t.file("etc/d/secret", 0o640);
        t.file("var/small", 0o644);
        let w = walk(
            &[vec![t.0.join("etc")], vec![t.0.join("var")]],
            &[],
            Bounds {
                // "etc" holds 1 entry, "etc/d" 11: the bound is spent there.
                max_entries: 12,
                max_depth: 64,
                report_holders: true,
            },
        );
        assert_eq!(masked(&t, &w), ["etc/d/secret", "var (whole)"]);
    }
}
