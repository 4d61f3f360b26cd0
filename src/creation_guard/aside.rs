//! A git directory's `config` made by a plain open — `cp -r`, `tar x` of a
//! repository, whose files arrive in any order (issue #44 item 6): held
//! aside as an unnamed file (`O_TMPFILE`) in that directory, which the
//! caller writes as it would have written the real one; the repository
//! works without it meanwhile. When the session ends, the content is read
//! once, checked by the git rule as a rename's would be, and a copy of what
//! was checked is put in place — never over a `config` that came to be
//! meanwhile, and never the caller's own inode (which something still
//! running could write after the check). Each ends in one line for the
//! user.

use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use nix::libc;

use super::gitrule::{place_config, GitRule, MAX_CONFIG};
use super::resolve::{dup, fd_path, join, openat, Errno};

/// The most configs one session may have set aside; past it, refused.
const MAX_ASIDE: usize = 64;

/// One config set aside: its directory, name, the unnamed file, and the
/// path to name it by.
struct Aside {
    dir: OwnedFd,
    name: Vec<u8>,
    file: OwnedFd,
    path: String,
}

/// The session's configs set aside.
#[derive(Default)]
pub(super) struct Asides {
    held: Mutex<Vec<Aside>>,
}

impl Asides {
    /// A new unnamed file in git directory `dir`, to be `name` at the
    /// session's end: the caller's descriptor of it.
    pub(super) fn set_aside(&self, dir: RawFd, name: &[u8], mode: u32) -> Result<OwnedFd, Errno> {
        let mut held = self.held.lock().map_err(|_| libc::EPERM)?;
        if held.len() >= MAX_ASIDE {
            return Err(libc::EPERM);
        }
        let file = openat(dir, b".", libc::O_TMPFILE | libc::O_RDWR, mode & 0o666)?;
        let path =
            String::from_utf8_lossy(&join(&fd_path(dir).unwrap_or_default(), name)).into_owned();
        held.push(Aside {
            dir: dup(dir)?,
            name: name.to_vec(),
            file: dup(file.as_raw_fd())?,
            path,
        });
        Ok(file)
    }

    /// The path of each config set aside so far.
    #[cfg(test)]
    pub(super) fn paths(&self) -> Vec<String> {
        self.held
            .lock()
            .map(|h| h.iter().map(|a| a.path.clone()).collect())
            .unwrap_or_default()
    }

    /// At the session's end: each config set aside checked by `git` and
    /// put in place, or not; one line for the user each.
    pub(super) fn place_all(&self, git: &GitRule) -> Vec<String> {
        let held = self
            .held
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default();
        held.into_iter().filter_map(|a| place(git, a)).collect()
    }
}

/// `a` checked and put in place: the line for the user; none when its
/// directory was removed (the repository is gone).
fn place(git: &GitRule, a: Aside) -> Option<String> {
    let dir = a.dir.as_raw_fd();
    if nix::sys::stat::fstat(dir).is_ok_and(|st| st.st_nlink == 0) {
        return None;
    }
    Some(check_and_place(git, a))
}

fn check_and_place(git: &GitRule, a: Aside) -> String {
    let dir = a.dir.as_raw_fd();
    let mut f = std::fs::File::from(a.file);
    let mut bytes = Vec::new();
    let read = f.seek(SeekFrom::Start(0)).is_ok()
        && (&mut f)
            .take(MAX_CONFIG + 1)
            .read_to_end(&mut bytes)
            .is_ok()
        && bytes.len() as u64 <= MAX_CONFIG;
    let mode = f
        .metadata()
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o666);
    let path = &a.path;
    if !read {
        return format!("claude-sandbox: not put in place: {path}: the copy written inside could not be read (larger than 1 MiB?); copy it yourself");
    }
    if !git.config_is_safe(dir, &bytes, &[]) {
        return format!("claude-sandbox: not put in place: {path}: it sets what host git would run or obey (an entry outside what git writes in ordinary work); look at the original and copy it yourself");
    }
    match place_config(dir, &a.name, &bytes, mode.unwrap_or(0o644)) {
        Ok(()) => format!("claude-sandbox: put in place at the session's end: {path} (written inside by a plain copy; every entry is one git writes in ordinary work)"),
        Err(libc::EEXIST) => format!("claude-sandbox: not put in place: {path}: a config is there now; the copy written inside is dropped"),
        Err(e) => format!("claude-sandbox: not put in place: {path}: {}", std::io::Error::from_raw_os_error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::creation_guard::resolve::tests::{dir, tmp};
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_config_copied_in_is_placed_at_the_end_only_when_it_passes() {
        let ws = tmp("aside");
        let rule = GitRule::new(Some(ws.as_os_str().as_bytes().to_vec()), Vec::new());
        let asides = Asides::default();
        let mut paths = Vec::new();
        for (repo, text) in [
            ("good", "[core]\n\tbare = false\n[user]\n\temail = a@b\n"),
            ("bad", "[core]\n\tfsmonitor = touch MARK\n"),
            ("raced", "[user]\n\tname = x\n"),
        ] {
            let g = ws.join(repo).join(".git");
            std::fs::create_dir_all(&g).unwrap();
            std::fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
            let d = dir(&g);
            assert!(rule.sets_aside(&d, b"config"));
            let fd = asides
                .set_aside(d.fd.as_raw_fd(), b"config", 0o644)
                .unwrap();
            std::fs::File::from(fd).write_all(text.as_bytes()).unwrap();
            assert!(!g.join("config").exists(), "nothing named until the end");
            paths.push(g.join("config"));
        }
        assert_eq!(asides.paths().len(), 3);
        // Something made `config` meanwhile: never replaced.
        std::fs::write(&paths[2], "[user]\n\tname = mine\n").unwrap();
        let lines = asides.place_all(&rule);
        assert!(lines[0].contains("put in place"), "{lines:?}");
        assert_eq!(
            std::fs::read_to_string(&paths[0]).unwrap(),
            "[core]\n\tbare = false\n[user]\n\temail = a@b\n"
        );
        assert!(
            lines[1].contains("not put in place") && lines[1].contains("host git would run"),
            "{lines:?}"
        );
        assert!(!paths[1].exists());
        assert!(lines[2].contains("a config is there now"), "{lines:?}");
        assert_eq!(
            std::fs::read_to_string(&paths[2]).unwrap(),
            "[user]\n\tname = mine\n"
        );
        // A repository removed before the end: nothing to say.
        let gone = ws.join("gone/.git");
        std::fs::create_dir_all(&gone).unwrap();
        std::fs::write(gone.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        drop(
            asides
                .set_aside(dir(&gone).fd.as_raw_fd(), b"config", 0o644)
                .unwrap(),
        );
        std::fs::remove_dir_all(ws.join("gone")).unwrap();
        assert!(asides.place_all(&rule).is_empty());
        // Once placed, `config` exists: nothing more is set aside there.
        assert!(!rule.sets_aside(&dir(&ws.join("good/.git")), b"config"));
        assert!(asides.place_all(&rule).is_empty());
        std::fs::remove_dir_all(&ws).unwrap();
    }
}
