//! The notices file on the host: made per session in the private state
//! (hidden inside), handed to the guard's supervisor as a descriptor that
//! appends and to bubblewrap as a descriptor it binds read-only at
//! [`super::INSIDE`]; removed when the session ends.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::libc;

/// Where the files live, relative to `$HOME`.
const DIR_REL: &str = ".local/state/claude-sandbox/notices";
/// The most one session's file holds; later lines are dropped.
const MAX_FILE: u64 = 1 << 20;
/// The longest line kept (the rest is cut).
const MAX_LINE: usize = 1000;

/// One session's notices file, removed when dropped.
#[derive(Debug)]
pub(crate) struct SessionFile {
    path: PathBuf,
    file: File,
}

impl SessionFile {
    /// Make the file of session `id` (a session id: no `/`), empty, mode
    /// 0600, never through a symlink; files of launches no longer running
    /// are swept first.
    pub(crate) fn create(home: &Path, id: &str) -> std::io::Result<SessionFile> {
        let dir = home.join(DIR_REL);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        sweep(&dir);
        let path = dir.join(format!("{id}.log"));
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)?;
        Ok(SessionFile { path, file })
    }

    /// A descriptor that appends (for the supervisor, or the proxy).
    pub(crate) fn writer(&self) -> std::io::Result<OwnedFd> {
        Ok(self.file.try_clone()?.into())
    }

    /// What the file holds now (at most [`MAX_FILE`]; lossy UTF-8).
    pub(crate) fn text(&self) -> String {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = match self.file.try_clone() {
            Ok(f) => f,
            Err(_) => return String::new(),
        };
        let mut bytes = Vec::new();
        let _ = f.seek(SeekFrom::Start(0));
        let _ = f.take(MAX_FILE + MAX_LINE as u64).read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// A descriptor of the file for bubblewrap's read-only bind.
    pub(crate) fn reader(&self) -> std::io::Result<OwnedFd> {
        Ok(File::open(format!("/proc/self/fd/{}", self.file.as_raw_fd()))?.into())
    }
}

impl Drop for SessionFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Append one line to the notices file open at `fd` (with `O_APPEND`): one
/// `write`, control characters dropped, cut at [`MAX_LINE`] bytes, nothing
/// once the file holds [`MAX_FILE`].
pub(crate) fn append(fd: RawFd, line: &str) {
    let full = nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_size as u64 >= MAX_FILE);
    if full {
        return;
    }
    let mut text: String = line.chars().filter(|c| !c.is_control()).collect();
    if text.len() > MAX_LINE {
        let mut cut = MAX_LINE;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text.push('\n');
    // SAFETY: `fd` is borrowed for one write; ManuallyDrop never closes it.
    let mut f =
        std::mem::ManuallyDrop::new(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    let _ = f.write_all(text.as_bytes());
}

/// Remove the files of sessions whose launcher is gone (named
/// `TIME-PID.log`; a file whose name says no such process runs).
fn sweep(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".log")) else {
            continue;
        };
        let alive = crate::sys::kernel::launcher_alive(stem);
        if !alive {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(tag: &str) -> PathBuf {
        let h = std::env::temp_dir().join(format!("csb-notices-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&h);
        std::fs::create_dir_all(&h).unwrap();
        h
    }

    #[test]
    fn lines_are_appended_whole_and_the_file_goes_with_the_session() {
        let h = home("file");
        let id = format!("20261207T000000Z-{}", std::process::id());
        let f = SessionFile::create(&h, &id).unwrap();
        let w = f.writer().unwrap();
        append(w.as_raw_fd(), "first\nwith a newline\x1b[31m");
        append(f.writer().unwrap().as_raw_fd(), "second");
        append(w.as_raw_fd(), &"x".repeat(5000));
        let path = h.join(DIR_REL).join(format!("{id}.log"));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[..2], ["firstwith a newline[31m", "second"]);
        assert!(lines[2].len() <= MAX_LINE + 3, "{}", lines[2].len());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A second file for the same session is refused, not shared.
        assert!(SessionFile::create(&h, &id).is_err());
        drop(f);
        assert!(!path.exists());
        std::fs::remove_dir_all(&h).unwrap();
    }

    #[test]
    fn files_of_launches_gone_are_swept_and_symlinks_never_followed() {
        let h = home("sweep");
        let dir = h.join(DIR_REL);
        std::fs::create_dir_all(&dir).unwrap();
        let gone = dir.join("20261207T000000Z-4194304999.log");
        std::fs::write(&gone, "old").unwrap();
        let mine = format!("20261207T000001Z-{}", std::process::id());
        let target = h.join("elsewhere");
        std::os::unix::fs::symlink(&target, dir.join(format!("{mine}.log"))).unwrap();
        assert!(
            SessionFile::create(&h, &mine).is_err(),
            "a symlink is not opened"
        );
        assert!(!target.exists());
        assert!(!gone.exists(), "swept");
        std::fs::remove_dir_all(&h).unwrap();
    }
}
