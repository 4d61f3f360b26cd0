//! The bound on the private `~/.cache` and `~/.local/share`
//! (`private-state-max`, issue #24, docs/decisions/0014).
//!
//! Walking the trees costs time in proportion to their entries (100 000
//! files: 0.2 s warm, 1 s cold), so a launch does not walk them unless it
//! must. A session that ends last (no other session of this user running:
//! an exclusive `flock` on the state directory's lock, which every running
//! launch holds shared) measures them, within a budget, and leaves the
//! total in a small file beside them, out of the sandbox's reach. The next
//! launch takes that file away and, when it vouches for a total within the
//! bound, walks nothing; otherwise (no file: a session still running, one
//! killed, a budget run out; or a total over the bound) it walks, and
//! prunes whole top-level entries, least recently changed first, down to
//! three quarters of the bound ([`super::walk`] says how safely).

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::libc;

use super::walk::{self, Policy, Unit, WalkError};
use crate::config::show_bytes;
use crate::error::setup;
use crate::plan;
use crate::sys::paths;

/// The file a session that ended last leaves: `private-usage 1 BYTES`.
const MARKER: &str = "private-usage";
/// `doctor --fix` (issue #45 item 6): every top-level entry of the
/// private directories that a launch's walk stops at, removed whole
/// ([`walk::clear_entry`]: never through a symlink, never across a mount,
/// never out of its directory), only while no session of this user runs
/// (the lock every launch holds shared, taken alone). What it removed, a
/// line each; an error names what it could not.
pub(crate) fn clear_unwalkable(home: &Path) -> anyhow::Result<Vec<String>> {
    let dir = home.join(plan::PRIVATE_STATE);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Ok(Vec::new());
    }
    let held = lock_file(&dir)
        .filter(|f| unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0);
    if held.is_none() {
        return Err(setup(format!(
            "a sandboxed session of this user is running (it holds {}); end it, then run `claude-sandbox doctor --fix` again",
            dir.join(LOCK).display()
        )));
    }
    let mut done = Vec::new();
    for root in roots(home) {
        if !std::fs::symlink_metadata(&root).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let fail = |e: &WalkError| {
            setup(format!(
                "cannot clear {}: {e}; remove it by hand",
                walk::shown(&root)
            ))
        };
        for (name, why) in walk::unwalkable(&root).map_err(|e| fail(&e))? {
            let p = root.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            walk::clear_entry(&root, &name).map_err(|e| {
                setup(format!(
                    "cannot remove {}: {e}; remove it by hand",
                    walk::shown(&p)
                ))
            })?;
            done.push(format!("removed {} ({why})", walk::shown(&p)));
        }
    }
    // The total a session left no longer holds.
    let _ = std::fs::remove_file(dir.join(MARKER));
    Ok(done)
}

/// The lock every running launch holds shared.
const LOCK: &str = "private.lock";
/// How long the measure at a session's end may take.
const EXIT_BUDGET: Duration = Duration::from_secs(1);

/// The private directories of `home`, in [`plan::HOME_PRIVATE`] order.
pub(crate) fn roots(home: &Path) -> Vec<PathBuf> {
    plan::HOME_PRIVATE
        .iter()
        .map(|(_, name)| plan::private_dir(home, name))
        .collect()
}

/// What a measure found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Measured {
    pub(crate) bytes: u64,
    pub(crate) entries: usize,
}

/// Measure `dirs` without changing anything (`doctor`, and `verify` from
/// inside, where the masks over `~/.local/share/claude` are left out).
pub(crate) fn measure(dirs: &[PathBuf], inside: bool) -> Result<Measured, String> {
    let pol = Policy {
        fix_modes: false,
        skip_mounts: inside,
        deadline: None,
    };
    let units = walk::units(dirs, &pol).map_err(|e| e.to_string())?;
    Ok(Measured {
        bytes: units.iter().map(|u| u.bytes).sum(),
        entries: units.len(),
    })
}

/// The private state's bound for one launch, from [`PrivateState::at_launch`]
/// to [`PrivateState::at_exit`].
pub(crate) struct PrivateState {
    home: PathBuf,
    /// Held shared while the session runs.
    lock: Option<File>,
}

impl PrivateState {
    /// Before the sandbox is built: within the bound, or pruned to it; a
    /// state that cannot be measured or pruned safely stops the launch
    /// (exit 125), naming the path. `max`: `private-state-max` (`None`: off).
    pub(crate) fn at_launch(home: &Path, max: Option<u64>) -> anyhow::Result<Option<PrivateState>> {
        let Some(max) = max else {
            return Ok(None);
        };
        if crate::testhooks::active(crate::testhooks::Mutation::NoPrivateBound) {
            return Ok(None);
        }
        let dir = home.join(plan::PRIVATE_STATE);
        let lock = lock(&dir);
        if vouched(&dir).is_some_and(|b| b <= max) {
            return Ok(Some(PrivateState {
                home: home.to_path_buf(),
                lock,
            }));
        }
        let roots = roots(home);
        let pol = Policy::LAUNCH;
        let units = walk::units(&roots, &pol).map_err(|e| refusal(&e, max, &roots))?;
        prune(&roots, units, max)?;
        Ok(Some(PrivateState {
            home: home.to_path_buf(),
            lock,
        }))
    }

    /// After the session: if no other session of this user is running,
    /// measure within [`EXIT_BUDGET`] and leave the total for the next launch.
    pub(crate) fn at_exit(self) {
        let Some(lock) = &self.lock else {
            return;
        };
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return;
        }
        let pol = Policy {
            fix_modes: false,
            skip_mounts: false,
            deadline: Some(Instant::now() + EXIT_BUDGET),
        };
        let Ok(units) = walk::units(&roots(&self.home), &pol) else {
            return;
        };
        let total: u64 = units.iter().map(|u| u.bytes).sum();
        let dir = self.home.join(plan::PRIVATE_STATE);
        let tmp = dir.join(format!("{MARKER}.{}", std::process::id()));
        let wrote = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            // One write: an unbuffered `writeln!` is four system calls.
            .and_then(|mut f| f.write_all(format!("{MARKER} 1 {total}\n").as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, dir.join(MARKER)));
        if wrote.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// The lock every running launch holds shared (waiting at most 2 s for a
/// session's end measure); `None` when it cannot be had (then no measure
/// is left at the end).
fn lock(dir: &Path) -> Option<File> {
    let f = lock_file(dir)?;
    let deadline = Instant::now() + Duration::from_secs(2);
    while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0 {
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Some(f)
}

/// The lock file in `dir`, opened (made when absent), not through a symlink.
fn lock_file(dir: &Path) -> Option<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(LOCK))
        .ok()
}

/// The total the last session to end left, taken away (so a session
/// running now, or one killed before its end, leaves none to trust).
fn vouched(dir: &Path) -> Option<u64> {
    let path = dir.join(MARKER);
    let text = crate::sys::files::read_text(&path).ok();
    let _ = std::fs::remove_file(&path);
    let t = text?;
    let mut f = t.split_whitespace();
    match (f.next(), f.next(), f.next(), f.next()) {
        (Some(MARKER), Some("1"), Some(n), None) => n.parse().ok(),
        _ => None,
    }
}

/// Prune `units` (of `roots`) when they hold more than `max`: whole units,
/// least recently changed first (ties: the larger first), until they hold
/// at most three quarters of it. Says what it did in one line.
fn prune(roots: &[PathBuf], mut units: Vec<Unit>, max: u64) -> anyhow::Result<()> {
    let mut total: u64 = units.iter().map(|u| u.bytes).sum();
    if total <= max {
        return Ok(());
    }
    let before = total;
    let target = max / 4 * 3;
    units.sort_by(|a, b| {
        (a.newest, std::cmp::Reverse(a.bytes), a.root, &a.name).cmp(&(
            b.newest,
            std::cmp::Reverse(b.bytes),
            b.root,
            &b.name,
        ))
    });
    let mut removed = 0;
    for u in &units {
        if total <= target {
            break;
        }
        walk::remove_unit(roots, u).map_err(|e| refusal(&e, max, roots))?;
        total -= u.bytes;
        removed += 1;
    }
    eprintln!(
        "claude-sandbox: the sandbox's private ~/.cache and ~/.local/share held {}, over private-state-max = {}: removed {removed} of their entries, least recently changed first ({} left)",
        show_bytes(before),
        show_bytes(max),
        show_bytes(total)
    );
    Ok(())
}

/// The launch's refusal when the private state cannot be kept in bounds:
/// the fix removes the top-level entry (of `roots`) the trouble is in.
fn refusal(e: &WalkError, max: u64, roots: &[PathBuf]) -> anyhow::Error {
    let unit = e.path().and_then(|p| {
        roots.iter().find_map(|r| {
            let first = p.strip_prefix(r).ok()?.components().next()?;
            Some(r.join(first))
        })
    });
    // `doctor --fix` removes exactly what a walk stops at; a budget or a
    // mount point is not that.
    let fix = match (unit, e) {
        (Some(u), WalkError::TooDeep(_) | WalkError::Io(..)) => format!(
            "run `claude-sandbox doctor --fix` (with no session running) to remove {} safely",
            walk::shown(&u)
        ),
        (Some(u), _) => format!("remove {}", walk::shown(&u)),
        (None, _) => "remove what is not needed there".into(),
    };
    setup(format!(
        "cannot keep the sandbox's private state within private-state-max = {}: {e}; {fix}, or set `private-state-max = off` in {}",
        show_bytes(max),
        paths::CONFIG_FILE
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("csb-private-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn put(p: &Path, len: usize) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, vec![b'x'; len]).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }

    #[test]
    fn pruning_removes_whole_entries_oldest_first_and_nothing_outside() {
        let base = scratch("prune");
        let (root, outside) = (base.join("cache"), base.join("outside"));
        put(&outside.join("keep"), 1 << 20);
        put(&root.join("old/a/b/data"), 2 << 20);
        std::os::unix::fs::symlink(&outside, root.join("old/a/out")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        put(&root.join("zzz"), 2 << 20);
        put(&root.join("\u{1}first"), 1 << 20);
        let roots = vec![root.clone()];
        let pol = Policy::LAUNCH;
        let units = walk::units(&roots, &pol).unwrap();
        let link = units.iter().find(|u| u.name.as_bytes() == b"link").unwrap();
        assert_eq!(
            link.bytes, 4096,
            "a symlink is charged as itself, never its target"
        );
        let total: u64 = units.iter().map(|u| u.bytes).sum();
        assert!(total > 5 << 20 && total < 6 << 20, "{total}");
        // Bound 4M: down to 3M, the oldest (`old`, then `link`) removed first.
        prune(&roots, units, 4 << 20).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["\u{1}first", "zzz"]);
        assert_eq!(std::fs::read(outside.join("keep")).unwrap().len(), 1 << 20);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn what_cannot_be_walked_safely_is_an_error_and_nothing_is_removed() {
        let base = scratch("closed");
        let root = base.join("cache");
        let deep: PathBuf = std::iter::once(root.join("deep"))
            .chain((0..walk::MAX_DEPTH + 2).map(|_| PathBuf::from("d")))
            .collect();
        put(&deep.join("f"), 10);
        let roots = vec![root.clone()];
        let pol = Policy::LAUNCH;
        let e = walk::units(&roots, &pol).unwrap_err();
        let msg = refusal(&e, 1 << 20, &roots).to_string();
        assert!(
            msg.contains("directories deep")
                && msg.contains(&format!(
                    "run `claude-sandbox doctor --fix` (with no session running) to remove {} safely",
                    root.join("deep").display()
                )),
            "{msg}"
        );
        assert!(deep.join("f").exists());
        // Out of time: an error too, never a partial total.
        let late = Policy {
            deadline: Some(Instant::now() - Duration::from_secs(1)),
            ..pol
        };
        std::fs::remove_dir_all(root.join("deep")).unwrap();
        put(&root.join("x"), 10);
        assert!(matches!(
            walk::units(&roots, &late),
            Err(WalkError::OutOfTime)
        ));
        // The root itself as a symlink: refused, not followed.
        let link = base.join("link");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        assert!(walk::units(&[link], &pol).is_err());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn doctor_fix_removes_what_a_launch_cannot_walk_and_nothing_else() {
        let home = scratch("fix");
        let outside = home.join("outside");
        put(&outside.join("keep"), 10);
        let roots = roots(&home);
        let cache = &roots[0];
        // Three times deeper than a walk goes, a symlink out at the bottom.
        let mut deep = cache.join("deep");
        for _ in 0..3 * walk::MAX_DEPTH + 5 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::os::unix::fs::symlink(&outside, deep.join("out")).unwrap();
        put(&deep.join("f"), 10);
        put(&cache.join("good/file"), 10);
        std::os::unix::fs::symlink(&outside, cache.join("link")).unwrap();
        put(&roots[1].join("fine"), 10);
        let e = PrivateState::at_launch(&home, Some(1 << 30))
            .err()
            .expect("refused");
        assert!(e.to_string().contains("doctor --fix"), "{e}");
        // A session running holds the lock shared: nothing is done.
        let running = lock(&home.join(plan::PRIVATE_STATE)).unwrap();
        let busy = clear_unwalkable(&home).unwrap_err().to_string();
        assert!(busy.contains("is running") && busy.contains(LOCK), "{busy}");
        assert!(deep.join("f").exists());
        drop(running);
        let done = clear_unwalkable(&home).unwrap();
        assert_eq!(done.len(), 1, "{done:?}");
        assert!(
            done[0].starts_with(&format!("removed {}", cache.join("deep").display())),
            "{done:?}"
        );
        let mut left: Vec<String> = std::fs::read_dir(cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["good", "link"],
            "nothing else removed, nothing lifted left"
        );
        assert!(roots[1].join("fine").exists());
        assert!(outside.join("keep").exists(), "never through a symlink");
        assert!(PrivateState::at_launch(&home, Some(1 << 30)).is_ok());
        assert_eq!(clear_unwalkable(&home).unwrap(), Vec::<String>::new());
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn a_total_is_trusted_once_and_only_in_its_own_format() {
        let dir = scratch("marker");
        std::fs::write(dir.join(MARKER), format!("{MARKER} 1 12345\n")).unwrap();
        assert_eq!(vouched(&dir), Some(12345));
        assert_eq!(vouched(&dir), None, "taken away when read");
        for bad in [
            "12345",
            "private-usage 2 5",
            "private-usage 1 x",
            "private-usage 1 5 6",
        ] {
            std::fs::write(dir.join(MARKER), bad).unwrap();
            assert_eq!(vouched(&dir), None, "{bad}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
