//! Root sees what a user would (issue #13 item 1), and the view fails
//! closed (issue #24 item 4). uid 0 inside the sandbox's user namespace is
//! the launching root outside, and owns root's files: dropping capabilities
//! does not stop it reading a 0600 file it owns. So, when root launches,
//! everything under the system trees ([`ROOTS`]) that a root session could
//! use and others could not is masked (a file with `/dev/null`, a directory
//! with an empty tmpfs), and so are the kernel's root-only files
//! (`kernel`: the trees and files found by experiment).
//!
//! Promise: no bound decides what is protected. The walk (`walk`) is
//! bounded — `/etc` up to [`FIRST_MAX_ENTRIES`] directory entries, the
//! other trees up to `root-view-max-entries` (`/etc/claude-sandbox.conf`)
//! examined afresh, [`MAX_DEPTH`] levels — and every directory it did not
//! examine whole (the bound reached, changed while read, not readable to
//! the walker) is masked whole: a root session may see less than a user
//! would, never more. Trees anyone may write to are walked last, so what
//! another user piles up there cannot use up the bound first. The view is
//! a snapshot taken at launch: an entry created (or renamed over a masked
//! one) after the walk is not masked.
//!
//! Outside `/etc` the view is kept between launches (`kept`, issue #48,
//! decision 0036): a launch examines afresh only the directories whose
//! device, inode, change or modification time moved since they were
//! recorded (an entry added, removed, renamed; the directory's own mode or
//! owner; a mount over it), stats every recorded subdirectory (a directory
//! narrowed is masked at once), and walks whole when there is no kept view
//! to trust or its last whole walk began [`REFRESH_SECS`] ago (a file
//! narrowed by `chmod` in a directory that did not change is masked from
//! then on). `/etc` is kept too, in a view of its own ([`STATE_FIRST`],
//! decision 0037) that records every entry: each is stat'ed again at every
//! launch, so a file narrowed there by `chmod` is masked at the next one.
//! Each kept view is first verified in one pass (decision 0038): when
//! every directory is as recorded, its masks are the recorded ones and
//! nothing is taken apart; otherwise the walk reuses what did not change.
//!
//! Other users' homes (`/home`) are replaced wholesale ([`HIDDEN_WHOLE`]):
//! a root session has no business there.
//!
//! May import: what `launch` may (it is part of it); uses `plan` (the
//! [`crate::plan::Unreadable`] it reports).
//!
//! Exports: [`view`] (the launch's masks, what was masked whole, and how
//! the kept view served, for `doctor`), [`audit`] (the battery's walk from
//! inside), [`covers`] (whether a mask is the root view's), [`ROOTS`],
//! [`HIDDEN_WHOLE`], [`STATE`] and [`STATE_FIRST`] (where the views are
//! kept; [`STATES`], both) and [`REFRESH_SECS`].

mod kept;
mod kernel;
mod walk;

pub(crate) use kept::{STATE, STATES, STATE_FIRST};

use std::path::{Path, PathBuf};

use crate::plan::Unreadable;

/// System trees walked for entries only root may use.
pub(crate) const ROOTS: &[&str] = &["/etc", "/boot", "/opt", "/srv", "/mnt", "/media", "/var"];
/// The tree walked whole, apart from the bound: what every program reads.
const FIRST: &str = "/etc";
/// [`FIRST`] is examined up to this many entries (a few thousand anywhere);
/// beyond, it fails closed like the rest.
pub(crate) const FIRST_MAX_ENTRIES: usize = 20_000;
/// Replaced by an empty tmpfs when root launches (where they exist).
pub(crate) const HIDDEN_WHOLE: &[&str] = &["/home"];
/// Directories deeper than this below their tree are masked whole unread.
pub(crate) const MAX_DEPTH: usize = 24;
/// At most this many masks outside `/etc` (more only when they lie directly
/// in a tree): beyond it, parents are masked whole instead, the deepest
/// first. Each mask is a mount bubblewrap makes at every launch, and a
/// file's costs it a read of the whole mount table.
pub(crate) const MAX_MASKS: usize = 24;
/// The battery's walk from inside: far larger, it checks rather than plans.
const AUDIT_MAX_ENTRIES: usize = 5_000_000;
/// A kept view whose last whole walk started this long ago (seconds) or
/// more is not reused: the launch walks whole (decision 0036: what a
/// file's `chmod` narrowed after it was recorded is masked from then on).
pub(crate) const REFRESH_SECS: i64 = 3600;

/// The root view of one launch.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// Every mask: root-only entries, directories the walk did not finish,
    /// kernel files.
    pub(crate) masks: Vec<Unreadable>,
    /// Of those, the directories masked whole: the walk did not examine
    /// them whole, or they stand in for the masks below them.
    pub(crate) unfinished: Vec<PathBuf>,
    /// Directory entries the walk examined.
    pub(crate) examined: usize,
    /// How each kept view (by where it lives: `/etc`'s, the other
    /// trees') served this launch.
    pub(crate) kept: Vec<(PathBuf, Kept)>,
}

/// How the kept view ([`STATE`]) served a launch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) enum Kept {
    /// Reused: only the directories that changed were examined (this many).
    Reused(usize),
    /// None yet, or its bound differs, or it is [`REFRESH_SECS`] old:
    /// walked whole.
    #[default]
    Whole,
    /// Not trusted (why): walked whole.
    Discarded(String),
}

/// The system trees that exist as directories, symlinks resolved (a
/// symlinked `/opt` is walked where it lies).
fn roots(list: &[&str]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = list
        .iter()
        .filter_map(|r| Path::new(r).canonicalize().ok())
        .filter(|r| r.is_dir())
        .collect();
    v.sort();
    v.dedup();
    // A tree inside another is walked as part of it.
    walk::without_nested(v)
}

/// What a root session gets masked, sparing `keep` (the read-write roots:
/// readable by design; a mask over a directory holding one is fine, they
/// are bound over the masks). `host_net`: the session shares the host's
/// network namespace (its root-only files are masked too). `/etc` (small,
/// and what every program reads) is walked up to [`FIRST_MAX_ENTRIES`],
/// every entry kept and stat'ed again at each launch, on a thread of its
/// own; the other trees within `max_entries`, breadth-first, the
/// world-writable ones last. Outside `/etc`, at most [`MAX_MASKS`] masks:
/// beyond it, parents are masked whole instead.
pub(crate) fn view(keep: &[PathBuf], max_entries: usize, host_net: bool) -> View {
    let first = Kind {
        max_entries: FIRST_MAX_ENTRIES,
        every_entry: true,
        state: Path::new(STATE_FIRST),
    };
    let rest = Kind {
        max_entries,
        every_entry: false,
        state: Path::new(STATE),
    };
    view_keeping(keep, host_net, &first, &rest)
}

fn bounds(max_entries: usize) -> walk::Bounds {
    walk::Bounds {
        max_entries,
        max_depth: MAX_DEPTH,
        report_holders: true,
    }
}

/// How one group of trees is walked and kept: its entry bound, whether
/// every entry is kept (and stat'ed again at each launch) or only masks
/// and subdirectories, and where its kept view lives.
struct Kind<'a> {
    max_entries: usize,
    every_entry: bool,
    state: &'a Path,
}

/// [`view`], `/etc` walked as `first` says, the other trees as `rest`.
fn view_keeping(keep: &[PathBuf], host_net: bool, first: &Kind<'_>, rest: &Kind<'_>) -> View {
    let roots = roots(ROOTS);
    let (first_trees, rest_trees): (Vec<PathBuf>, Vec<PathBuf>) =
        roots.iter().cloned().partition(|r| r == Path::new(FIRST));
    // Read once for both walks: each digests its own trees' mounts.
    let table = kept::mount_table();
    let walk_first = || walk_kept(&first_trees, keep, first, table.as_deref());
    let (wf, w) = std::thread::scope(|s| {
        let other = std::thread::Builder::new().spawn_scoped(s, walk_first);
        let w = walk_kept(&rest_trees, keep, rest, table.as_deref());
        // No thread to be had: the same walk, one after the other.
        let wf = match other.map(|h| h.join()) {
            Ok(Ok(wf)) => wf,
            _ => walk_first(),
        };
        (wf, w)
    });
    finish_view(&roots, host_net, first, rest, wf, w)
}

/// The view from `/etc`'s walk (`wf`, kept as `first` says) and the other
/// trees' (`w`, as `rest` says): their masks, the kernel's, and how each
/// kept view served.
fn finish_view(
    roots: &[PathBuf],
    host_net: bool,
    first: &Kind<'_>,
    rest: &Kind<'_>,
    (wf, kept_first): (walk::Walk, Kept),
    (w, kept): (walk::Walk, Kept),
) -> View {
    let whole = |path: PathBuf| Unreadable { path, dir: true };
    let (elsewhere, added) = walk::coarsen(
        w.unreadable
            .into_iter()
            .chain(w.unfinished.iter().cloned().map(whole))
            .collect(),
        roots,
        MAX_MASKS,
    );
    let mut masks: Vec<Unreadable> = wf.unreadable;
    masks.extend(wf.unfinished.iter().cloned().map(whole));
    masks.extend(elsewhere);
    let mut masks = walk::without_nested_masks(masks);
    let mut unfinished = walk::without_nested(
        wf.unfinished
            .into_iter()
            .chain(w.unfinished)
            .chain(added)
            .collect(),
    );
    unfinished.retain(|d| masks.iter().any(|m| m.path == *d));
    masks.extend(kernel::masks(host_net));
    View {
        masks,
        unfinished,
        examined: wf.examined + w.examined,
        kept: vec![
            (first.state.to_path_buf(), kept_first),
            (rest.state.to_path_buf(), kept),
        ],
    }
}

/// The walk of `trees` as `kind` says, reusing and updating the kept view
/// at `kind.state` (walked whole when there is none to trust, nor a mount
/// table `mountinfo`), never into what lies in `keep` (bound read-write
/// over the view whatever it holds): left out of the record too, which a
/// launch that does not keep it then examines afresh.
fn walk_kept(
    trees: &[PathBuf],
    keep: &[PathBuf],
    kind: &Kind<'_>,
    mountinfo: Option<&str>,
) -> (walk::Walk, Kept) {
    let started = crate::sys::clock::now_secs();
    let mounts = mountinfo.map(|t| kept::mounts_of(t, trees));
    let (prior, mut kept) = match prior_of(trees, keep, kind, mounts.as_deref(), started) {
        Prior::Verified(mut unreadable) => {
            unreadable.retain(|u| !kept::under_any(&u.path, keep));
            let w = walk::Walk {
                unreadable,
                ..walk::Walk::default()
            };
            return (w, Kept::Reused(0));
        }
        Prior::Record(r) => (r, Kept::Reused(0)),
        Prior::None(kept) => (kept::Record::default(), kept),
    };
    let full_at = prior.full_at;
    let keeping = walk::Keeping {
        prior: prior.dirs,
        started,
        every_entry: kind.every_entry,
        skip: keep.to_vec(),
    };
    let mut w = walk::walk_keeping(
        &[trees.to_vec()],
        &[],
        bounds(kind.max_entries),
        Some(keeping),
    );
    let full = !matches!(kept, Kept::Reused(_));
    if let Kept::Reused(n) = &mut kept {
        *n = w.fresh;
    }
    // Written again when what it records changed, and when directories
    // were examined afresh with nothing new in them (only their times
    // moved) and each could be recorded: the next launch then verifies it
    // without taking it apart ([`walk::verify`]), which one directory left
    // as recorded would keep from every launch until the next whole walk.
    // One that changed in the walk's last second is examined afresh next
    // time anyway: not written for it. Not kept without a mount table, nor
    // where it cannot be written (a read-only /usr): the next launch walks
    // whole again.
    let due = full || w.changed || (w.fresh > 0 && w.unkept == 0);
    if let Some(mounts) = mounts.filter(|_| due) {
        let record = kept::Record {
            bound: kind.max_entries,
            full_at: if full { started } else { full_at },
            mounts,
            dirs: std::mem::take(&mut w.record),
        };
        let _ = kept::store(kind.state, &record);
    }
    w.unreadable.retain(|u| !kept::under_any(&u.path, keep));
    w.unfinished.retain(|d| !kept::under_any(d, keep));
    (w, kept)
}

/// What a launch starts from for one kept view.
enum Prior {
    /// Nothing changed: the recorded masks ([`walk::verify`]).
    Verified(Vec<Unreadable>),
    /// The record, to reuse what did not change.
    Record(kept::Record),
    /// None to reuse (why: [`Kept::Whole`] or [`Kept::Discarded`]).
    None(Kept),
}

/// The kept view at `kind.state` for `trees`, when it may serve a launch
/// that started at `started` with the mount table digest `mounts`: its
/// entry bound is this launch's, its last whole walk is not in the future
/// nor [`REFRESH_SECS`] old, and the mounts under its trees are the ones
/// it was walked with. Verified first, line by line; taken apart into a
/// record only when something changed.
fn prior_of(
    trees: &[PathBuf],
    keep: &[PathBuf],
    kind: &Kind<'_>,
    mounts: Option<&str>,
    started: i64,
) -> Prior {
    let text = match kept::read(kind.state) {
        Ok(Some(text)) => text,
        Ok(None) => return Prior::None(Kept::Whole),
        Err(why) => return Prior::None(Kept::Discarded(why)),
    };
    match kept::header(&text) {
        Ok((h, body))
            if h.bound == kind.max_entries
                && h.full_at <= started + 60
                && started - h.full_at < REFRESH_SECS
                && mounts == Some(h.mounts.as_str()) =>
        {
            let lines = kept::lines(body.clone(), trees);
            if let Some(masks) = walk::verify(lines, trees, keep, MAX_DEPTH) {
                return Prior::Verified(masks);
            }
            // Its checksum checked already: only the lines taken apart.
            match kept::record(h, body, trees) {
                Ok(r) => Prior::Record(r),
                Err(why) => Prior::None(Kept::Discarded(why)),
            }
        }
        Ok(_) => Prior::None(Kept::Whole),
        Err(why) => Prior::None(Kept::Discarded(why)),
    }
}

/// What the battery checks from inside a root session.
#[derive(Debug, Default)]
pub(crate) struct Audit {
    /// Entries a root session may use and others may not, by their mode
    /// here (a mask reads as an empty tmpfs or `/dev/null`: not among them).
    pub(crate) root_only: Vec<PathBuf>,
    /// Directories the audit's own walk could not finish.
    pub(crate) unfinished: Vec<PathBuf>,
}

/// Walk what [`view`] masks, from inside, far beyond the launch's bound;
/// `keep`: the read-write roots and `$HOME` (the session's own: bubblewrap
/// makes the directories that hold their mount points 0700, and those are
/// not reported either); `host_net`: the session shares the host's network
/// namespace.
pub(crate) fn audit(keep: &[PathBuf], host_net: bool) -> Audit {
    let mut roots = roots(ROOTS);
    roots.extend(roots_of(kernel::KERNEL_DIRS));
    let w = walk::walk(
        &[roots],
        keep,
        walk::Bounds {
            max_entries: AUDIT_MAX_ENTRIES,
            max_depth: 64,
            report_holders: false,
        },
    );
    let mut root_only: Vec<PathBuf> = w.unreadable.into_iter().map(|u| u.path).collect();
    root_only.extend(
        kernel::audited_files(host_net)
            .into_iter()
            .filter(|f| f.symlink_metadata().is_ok_and(|m| walk::session_gains(&m))),
    );
    Audit {
        root_only,
        unfinished: w.unfinished,
    }
}

/// The kernel trees that exist as directories (not resolved: `/sys` has no
/// symlinked ones in the table).
fn roots_of(list: &[&str]) -> Vec<PathBuf> {
    list.iter()
        .map(PathBuf::from)
        .filter(|d| d.symlink_metadata().is_ok_and(|m| m.is_dir()))
        .collect()
}

/// Whether a mask at `dst` is the root view's: under a system tree, hidden
/// whole, or a kernel path.
pub(crate) fn covers(dst: &Path) -> bool {
    ROOTS.iter().any(|r| dst.starts_with(r))
        || HIDDEN_WHOLE.iter().any(|h| dst == Path::new(h))
        || kernel::covers(dst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trees_are_walked_once_each() {
        let r = roots(&["/etc", "/etc/ssl", "/nonexistent-csb", "/var"]);
        assert!(r.iter().all(|p| p.is_dir()));
        assert!(!r.iter().any(|p| p.starts_with("/etc/ssl")), "{r:?}");
    }

    #[test]
    fn covers_the_trees_the_homes_and_the_kernel() {
        for p in [
            "/etc/shadow-",
            "/var/lib/x",
            "/home",
            "/sys/firmware",
            "/proc/timer_list",
        ] {
            assert!(covers(Path::new(p)), "{p}");
        }
        // A home under /home is the session's own tmpfs, not the root view's.
        for p in ["/usr/bin/env", "/proc/1/mem", "/run", "/tmp/x", "/home/dev"] {
            assert!(!covers(Path::new(p)), "{p}");
        }
    }
}
