//! Work trees that cannot leave (issue #45 item 2, docs/decisions/0032):
//! a git directory's `core.worktree` names the directory host git checks
//! files out into, cleans and reads attributes from. The git rule lets a
//! value into a `config` only when it leads inside the workspace, taken as
//! the kernel walks it (every symlink on the way followed); this keeps it
//! so. Each accepted value (and each one the git directories known at
//! launch already had) is recorded with every path its walk looked at; a
//! `symlink` or `rename` whose new name is one of those paths or above one
//! could change where it leads, so the supervisor performs it alone, walks
//! each recorded value again and undoes the call — refused — when one now
//! leads out. Nothing else makes a path lead elsewhere: a `mkdir` or an
//! `open` makes a real directory or file (inside), an `unlink` or `rmdir`
//! only makes the path fail; mounts are refused inside.
//!
//! Pure path arithmetic and `readlink`; the calls themselves are `serve.rs`'s.

use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::{Mutex, MutexGuard};

use super::resolve::join;

/// One recorded `core.worktree`.
struct Known {
    /// The git directory it was read from (what a relative value is from).
    base: Vec<u8>,
    value: Vec<u8>,
    /// Every path its last walk looked at, the git directory first.
    through: Vec<Vec<u8>>,
}

/// The recorded work trees of one session.
pub(super) struct WorkTrees {
    workspace: Option<Vec<u8>>,
    known: Mutex<Vec<Known>>,
    /// Held while a call that could move one is performed and checked.
    alone: Mutex<()>,
    /// Only in the test mutation `worktree-unkept`: never walked again.
    unkept: bool,
}

impl WorkTrees {
    pub(super) fn new(workspace: Option<Vec<u8>>) -> WorkTrees {
        WorkTrees {
            workspace,
            known: Mutex::new(Vec::new()),
            alone: Mutex::new(()),
            #[cfg(feature = "test-mutations")]
            unkept: crate::testhooks::active(crate::testhooks::Mutation::WorktreeUnkept),
            #[cfg(not(feature = "test-mutations"))]
            unkept: false,
        }
    }

    /// Whether every value of `values`, read from the git directory
    /// `base`, leads inside the workspace, lexically and as the kernel
    /// walks it; if so they are recorded, to stay so.
    pub(super) fn accept(&self, base: &[u8], values: &[Vec<u8>]) -> bool {
        let Some(ws) = &self.workspace else {
            return false;
        };
        let mut walked = Vec::new();
        for v in values {
            let through = match walk_inside(ws, base, v) {
                Some(t) if inside(ws, &lexical(base, v)) => t,
                _ => return false,
            };
            walked.push(Known {
                base: base.to_vec(),
                value: v.clone(),
                through,
            });
        }
        if let Ok(mut k) = self.known.lock() {
            for w in walked {
                if !k.iter().any(|o| o.base == w.base && o.value == w.value) {
                    k.push(w);
                }
            }
        }
        !values.is_empty()
    }

    /// Whether any work tree is recorded (most sessions: none, and a
    /// `symlink` or `rename` costs nothing more).
    pub(super) fn any(&self) -> bool {
        self.known.lock().is_ok_and(|k| !k.is_empty())
    }

    /// Whether a name made or replaced at `path` (a `symlink`, or either
    /// end of a `rename`) could change where a recorded work tree leads:
    /// it is a path the walk looked at, or above one.
    pub(super) fn touches(&self, path: &[u8]) -> bool {
        self.known
            .lock()
            .is_ok_and(|k| k.iter().any(|w| w.through.iter().any(|t| inside(path, t))))
    }

    /// Held while such a call is performed and [`WorkTrees::still_inside`]
    /// asked: no other such call in between.
    pub(super) fn alone(&self) -> MutexGuard<'_, ()> {
        self.alone.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every recorded work tree walked again: true when each still leads
    /// inside (their walks then kept), false when one now leads out.
    pub(super) fn still_inside(&self) -> bool {
        let Some(ws) = &self.workspace else {
            return false;
        };
        if self.unkept {
            return true;
        }
        let Ok(mut k) = self.known.lock() else {
            return false;
        };
        let mut walks = Vec::new();
        for w in k.iter() {
            match walk_inside(ws, &w.base, &w.value) {
                Some(through) => walks.push(through),
                None => return false,
            }
        }
        for (w, t) in k.iter_mut().zip(walks) {
            w.through = t;
        }
        true
    }
}

/// `value` walked from `base` as the kernel walks it: every path looked at
/// (`base` first) when it leads inside `ws`, else `None`.
fn walk_inside(ws: &[u8], base: &[u8], value: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut through = vec![base.to_vec()];
    physical(base, value, &mut through)
        .filter(|p| inside(ws, p))
        .map(|_| through)
}

/// `value` read from directory `base` (absolute, or relative to it), with
/// `.` and `..` taken lexically.
pub(super) fn lexical(base: &[u8], value: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    let whole = if value.starts_with(b"/") {
        value.to_vec()
    } else {
        join(base, value)
    };
    for c in whole.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = Vec::new();
    for p in parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// `value` read from directory `base` as the kernel walks it: each
/// symlink on the way replaced by its text (absolute, or from the
/// directory it is in), `..` taken from where that leads. A name that does
/// not exist is kept as written. None past 40 symlinks (a loop).
/// Each path looked at on the way is added to `through`.
fn physical(base: &[u8], value: &[u8], through: &mut Vec<Vec<u8>>) -> Option<Vec<u8>> {
    let mut todo: Vec<Vec<u8>> = value
        .split(|b| *b == b'/')
        .rev()
        .map(<[u8]>::to_vec)
        .collect();
    let mut parts: Vec<Vec<u8>> = if value.starts_with(b"/") {
        Vec::new()
    } else {
        base.split(|b| *b == b'/')
            .filter(|c| !c.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    };
    let mut links = 0;
    while let Some(c) = todo.pop() {
        match c.as_slice() {
            b"" | b"." => continue,
            b".." => {
                parts.pop();
                continue;
            }
            _ => {}
        }
        let mut path = Vec::new();
        for p in parts.iter().chain(std::iter::once(&c)) {
            path.push(b'/');
            path.extend_from_slice(p);
        }
        let link = std::fs::read_link(OsStr::from_bytes(&path));
        through.push(path);
        match link {
            Ok(target) => {
                links += 1;
                if links > 40 {
                    return None;
                }
                let t = target.into_os_string().into_vec();
                if t.starts_with(b"/") {
                    parts.clear();
                }
                todo.extend(t.split(|b| *b == b'/').rev().map(<[u8]>::to_vec));
            }
            Err(_) => parts.push(c),
        }
    }
    let mut out = Vec::new();
    for p in parts {
        out.push(b'/');
        out.extend_from_slice(&p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Some(out)
}

/// Whether `path` is `root` or below it.
pub(super) fn inside(root: &[u8], path: &[u8]) -> bool {
    let root = root.strip_suffix(b"/").unwrap_or(root);
    path == root || (path.starts_with(root) && path.get(root.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_taken_lexically() {
        assert_eq!(lexical(b"/w/.git/modules/s", b"../../../s"), b"/w/s");
        assert_eq!(lexical(b"/w/.git", b"/etc"), b"/etc");
        assert!(inside(b"/w", b"/w/s"));
        assert!(inside(b"/w", b"/w"));
        assert!(!inside(b"/w", b"/work"));
        assert!(!inside(b"/w", &lexical(b"/w/.git", b"../../home")));
    }

    #[test]
    fn a_recorded_work_tree_is_walked_again_after_what_could_move_it() {
        let base = crate::creation_guard::resolve::tests::tmp("worktrees");
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join("r/.git")).unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::create_dir_all(base.join("victim")).unwrap();
        let b = |p: &std::path::Path| p.as_os_str().as_bytes().to_vec();
        let t = WorkTrees::new(Some(b(&ws)));
        let gitdir = b(&ws.join("r/.git"));
        assert!(!t.any());
        // Out by `..`, or through a symlink: not taken, nothing recorded.
        assert!(!t.accept(&gitdir, &[b"../../../victim".to_vec()]));
        std::os::unix::fs::symlink(base.join("victim"), ws.join("out")).unwrap();
        assert!(!t.accept(&gitdir, &[b"../../out".to_vec()]));
        assert!(!t.any());
        assert!(t.accept(&gitdir, &[b"../../wt".to_vec()]));
        // What the walk looked at, and what is above it, is touched;
        // a sibling is not.
        assert!(t.touches(&b(&ws.join("wt"))));
        assert!(t.touches(&b(&ws)));
        assert!(t.touches(&b(&ws.join("r"))), "the git directory's own path");
        assert!(!t.touches(&b(&ws.join("wt2"))));
        assert!(
            !t.touches(&b(&ws.join("wt/inner"))),
            "below the work tree: git's own files"
        );
        assert!(t.still_inside());
        std::fs::remove_dir(ws.join("wt")).unwrap();
        std::os::unix::fs::symlink(base.join("victim"), ws.join("wt")).unwrap();
        assert!(!t.still_inside(), "a symlink made later leads out");
        std::fs::remove_file(ws.join("wt")).unwrap();
        std::os::unix::fs::symlink("r", ws.join("wt")).unwrap();
        assert!(t.still_inside(), "a symlink that stays inside is fine");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
