//! The session's copies of the workspace's `hooks` directories, in the
//! private state (`held/SESSION/`), and what the session left in them.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::libc;
use sha2::{Digest, Sha256};

use super::item::{hex, keys_noticed, Item, What};

/// Where the copies live, relative to `$HOME`.
pub(crate) const DIR_REL: &str = ".local/state/claude-sandbox/held";
/// The most a hooks directory may hold to be copied, and the largest file:
/// beyond either it stays read-only inside, as before (closed, not open).
const MAX_ENTRIES: usize = 256;
const MAX_FILE: u64 = 1 << 20;

/// One launch's copies: made on first asking, the same on every replan,
/// gathered and removed when the session ends.
#[derive(Debug)]
pub(crate) struct Copies {
    root: PathBuf,
    /// hooks directory → its copy.
    made: Mutex<BTreeMap<PathBuf, PathBuf>>,
}

impl Copies {
    /// The copies of session `id` under `home` (nothing made yet); the
    /// copies of launches no longer running are swept first.
    pub(crate) fn new(home: &Path, id: &str) -> Copies {
        let dir = home.join(DIR_REL);
        sweep(&dir);
        Copies {
            root: dir.join(id),
            made: Mutex::new(BTreeMap::new()),
        }
    }

    /// The copy to bind over `hooks` (a git directory's `hooks`, a real
    /// directory), made now if it is not yet; `None` when it cannot be
    /// (the caller keeps `hooks` read-only then).
    pub(crate) fn copy_of(&self, hooks: &Path) -> Option<PathBuf> {
        let mut made = self.made.lock().ok()?;
        if let Some(c) = made.get(hooks) {
            return Some(c.clone());
        }
        let name = hex(&Sha256::digest(hooks.as_os_str().as_bytes()))[..16].to_string();
        let copy = self.root.join(name);
        match copy_dir(hooks, &copy) {
            Ok(()) => {
                made.insert(hooks.to_path_buf(), copy.clone());
                Some(copy)
            }
            Err(_) => {
                let _ = std::fs::remove_dir_all(&copy);
                None
            }
        }
    }

    /// At the end of the session (nothing inside runs any more): every
    /// hook the session added or changed in a copy, every key the notices
    /// text `notices` says was held. Also the lines naming what was left
    /// there that cannot be applied. The copies stay until [`Copies::remove`].
    pub(crate) fn gather(&self, notices: &str) -> (Vec<Item>, Vec<String>) {
        let (mut items, mut lines) = (Vec::new(), Vec::new());
        if let Ok(made) = self.made.lock() {
            for (hooks, copy) in made.iter() {
                hooks_left(hooks, copy, &mut items, &mut lines);
            }
        }
        // A key held in a repository the host does not have (one in the
        // sandbox's private /tmp, or deleted since) has nowhere to go.
        for (file, what) in keys_noticed(notices) {
            if let Some(before) = digest_of(&file) {
                items.push(Item::new(file, what, Some(before)));
            }
        }
        (items, lines)
    }

    /// Remove the copies, once gathered (a launch that never gathers them
    /// leaves them to the next launch's sweep).
    pub(crate) fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// What the session left in `copy` that `hooks` on the host lacks.
fn hooks_left(hooks: &Path, copy: &Path, items: &mut Vec<Item>, lines: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(copy) else {
        return;
    };
    let mut names: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
    names.sort();
    for name in names {
        if name.as_bytes().ends_with(b".sample") {
            continue;
        }
        let (held, target) = (copy.join(&name), hooks.join(&name));
        let Some((content, mode)) = regular(&held) else {
            let host = target.symlink_metadata().ok();
            let same_link = host.is_some()
                && std::fs::read_link(&held).ok() == std::fs::read_link(&target).ok();
            if !same_link {
                lines.push(format!(
                    "claude-sandbox: the session left {} in place of a git hook, not a plain file (of at most 1 MiB): not kept",
                    target.display()
                ));
            }
            continue;
        };
        let host = regular(&target);
        if host
            .as_ref()
            .is_some_and(|(c, m)| *c == content && (m & 0o111) == (mode & 0o111))
        {
            continue;
        }
        let before = digest_of(&target);
        items.push(Item::new(target, What::Hook { content, mode }, before));
    }
}

/// A regular file's content and permission bits (not through a symlink;
/// at most [`MAX_FILE`]).
fn regular(path: &Path) -> Option<(Vec<u8>, u32)> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.len() > MAX_FILE {
        return None;
    }
    let mut content = Vec::new();
    f.take(MAX_FILE + 1).read_to_end(&mut content).ok()?;
    Some((content, m.mode() & 0o7777))
}

/// The SHA-256 of what `path` holds now (not through a symlink); `None`
/// when there is nothing there. Something other than a file reads as a
/// digest no file has.
pub(super) fn digest_of(path: &Path) -> Option<String> {
    let m = path.symlink_metadata().ok()?;
    Some(match regular(path) {
        Some((content, _)) => hex(&Sha256::digest(content)),
        None => format!("not-a-file:{:o}:{}", m.mode(), m.ino()),
    })
}

/// `hooks`' files and symlinks but the samples copied into a new directory
/// `copy` (its parents made owner-only); refused when `hooks` holds more
/// than [`MAX_ENTRIES`] of them, a larger file, or something else.
fn copy_dir(hooks: &Path, copy: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(copy.parent().unwrap_or(copy))?;
    std::fs::DirBuilder::new().mode(0o755).create(copy)?;
    let mut n = 0;
    for e in std::fs::read_dir(hooks)? {
        let e = e?;
        // git never runs a sample: not worth a copy at every launch.
        if e.file_name().as_bytes().ends_with(b".sample") {
            continue;
        }
        n += 1;
        if n > MAX_ENTRIES {
            return Err(std::io::Error::other("too many entries"));
        }
        let (from, to) = (e.path(), copy.join(e.file_name()));
        let ft = e.file_type()?;
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
        } else if ft.is_dir() {
            std::fs::DirBuilder::new().mode(0o755).create(&to)?;
        } else {
            let (content, mode) =
                regular(&from).ok_or_else(|| std::io::Error::other("not a small file"))?;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&to)?;
            std::io::Write::write_all(&mut f, &content)?;
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(())
}

/// Remove the copies of sessions whose launcher is gone (a session id ends
/// in its launcher's pid).
fn sweep(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let alive = e
            .file_name()
            .to_str()
            .is_some_and(crate::sys::kernel::launcher_alive);
        if !alive && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("csb-held-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn what_the_session_adds_or_changes_is_gathered_and_the_copies_go() {
        let t = tmp("gather");
        let hooks = t.join("ws/.git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(hooks.join("pre-commit.sample"), "sample").unwrap();
        std::fs::write(hooks.join("post-merge"), "#!/bin/sh\nmine\n").unwrap();
        std::fs::set_permissions(hooks.join("post-merge"), PermissionsExt::from_mode(0o755))
            .unwrap();
        let copies = Copies::new(&t, &format!("20261207T000000Z-{}", std::process::id()));
        let copy = copies.copy_of(&hooks).unwrap();
        assert_eq!(
            copies.copy_of(&hooks),
            Some(copy.clone()),
            "one copy per launch"
        );
        assert_eq!(
            std::fs::read(copy.join("post-merge")).unwrap(),
            b"#!/bin/sh\nmine\n"
        );
        // The session: a new hook, a sample, the user's own left alone.
        std::fs::write(copy.join("pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(copy.join("pre-commit"), PermissionsExt::from_mode(0o755))
            .unwrap();
        std::fs::write(copy.join("x.sample"), "").unwrap();
        std::os::unix::fs::symlink("/bin/true", copy.join("pre-push")).unwrap();
        std::fs::write(t.join("ws/.git/config"), "").unwrap();
        let key = |file: &Path| {
            let file = file.as_os_str().as_bytes();
            super::super::key_notice(file, b"core.hookspath", Some(b".husky/_")).unwrap()
        };
        let gone = t.join("gone/.git/config");
        let notices = format!("{}\n{}\n", key(&t.join("ws/.git/config")), key(&gone));
        let root = copies.root.clone();
        let (items, lines) = copies.gather(&notices);
        assert_eq!(items.len(), 2, "{items:?}");
        assert_eq!(items[0].target, hooks.join("pre-commit"));
        assert_eq!(
            items[0].what,
            What::Hook {
                content: b"#!/bin/sh\nexit 0\n".to_vec(),
                mode: 0o755
            }
        );
        assert_eq!(items[0].before, None);
        assert!(matches!(&items[1].what, What::Key { name, .. } if name == "core.hookspath"));
        assert_eq!(
            items[1].target,
            t.join("ws/.git/config"),
            "a repository gone holds nothing"
        );
        assert_eq!(lines.len(), 1, "the symlink is named: {lines:?}");
        assert!(lines[0].contains("pre-push"));
        assert!(root.exists(), "gathering only reads");
        copies.remove();
        assert!(!root.exists());
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn a_directory_too_big_to_copy_is_not_held() {
        let t = tmp("big");
        let hooks = t.join("hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        for i in 0..=MAX_ENTRIES {
            std::fs::write(hooks.join(format!("h{i}")), "").unwrap();
        }
        let copies = Copies::new(&t, "20261207T000000Z-1");
        assert_eq!(copies.copy_of(&hooks), None);
        std::fs::remove_file(hooks.join("h0")).unwrap();
        assert!(
            copies.copy_of(&hooks).is_some(),
            "control: at the bound it is copied"
        );
        std::fs::remove_dir_all(&t).unwrap();
    }
}
