//! Where `review --revert` may act, and how. A recorded path is touched
//! only when it lies inside the session's workspace or is one of Claude
//! Code's settings files ([`Place::locate`]), and only through its parent
//! directory, opened from the workspace one component at a time without
//! following a symlink: a link swapped into a parent component, before or
//! during the revert, cannot lead it anywhere else. Every operation names
//! the entry relative to that open directory (`/proc/self/fd/N/name`, which
//! the kernel resolves to the directory the descriptor holds, not to a
//! path) and never follows the last name.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::scan::{read_entry, Entry, HOME_SETTINGS, SETTINGS_MAX, WORKSPACE_SETTINGS};

/// One path a revert may touch: its parent directory, open, and its name.
pub(super) struct Place {
    dir: File,
    name: OsString,
    /// Whether it is one of Claude Code's settings files.
    pub(super) settings: bool,
}

fn open_dir(p: &Path, follow: bool) -> std::io::Result<File> {
    let nofollow = if follow { 0 } else { nix::libc::O_NOFOLLOW };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH | nix::libc::O_DIRECTORY | nofollow)
        .open(p)?;
    // O_PATH with O_NOFOLLOW would hold a symlink itself: refuse it.
    if !f.metadata()?.is_dir() {
        return Err(std::io::Error::from_raw_os_error(nix::libc::ENOTDIR));
    }
    Ok(f)
}

impl Place {
    /// `path` as the revert of a session in `workspace`, for the user whose
    /// home is `home`, may touch it: inside the workspace (no `..`, no
    /// symlink in any component below it), or `home`'s settings files
    /// (their directory as the user keeps it, symlinked or not).
    pub(super) fn locate(home: &Path, workspace: &Path, path: &Path) -> Result<Place, String> {
        let in_home = HOME_SETTINGS.iter().any(|r| home.join(r) == path);
        let (root, rel) = match path.parent().zip(path.file_name()) {
            Some((parent, name)) if in_home => (parent, PathBuf::from(name)),
            _ => match path.strip_prefix(workspace) {
                Ok(rel) => (workspace, rel.to_path_buf()),
                Err(_) => {
                    return Err("outside the session's workspace: a revert never touches it".into())
                }
            },
        };
        let settings = in_home || WORKSPACE_SETTINGS.iter().any(|r| rel == Path::new(r));
        let names: Vec<&OsStr> = rel
            .components()
            .map(|c| match c {
                Component::Normal(n) => Ok(n),
                _ => Err(format!("not a plain path below {}", root.display())),
            })
            .collect::<Result<_, _>>()?;
        let Some((name, parents)) = names.split_last() else {
            return Err("the workspace itself: a revert never touches it".into());
        };
        let mut dir = open_dir(root, true).map_err(|e| format!("{}: {e}", root.display()))?;
        let mut walked = root.to_path_buf();
        for n in parents {
            walked.push(n);
            dir = open_dir(&under(&dir, n), false).map_err(|e| match e.raw_os_error() {
                Some(nix::libc::ENOTDIR | nix::libc::ELOOP) => format!(
                    "{} is not a directory now (a symlink?): a revert does not follow it",
                    walked.display()
                ),
                _ => format!("{}: {e}", walked.display()),
            })?;
        }
        Ok(Place {
            dir,
            name: name.to_os_string(),
            settings,
        })
    }

    fn at(&self) -> PathBuf {
        under(&self.dir, &self.name)
    }

    /// What is there now (never following a symlink), read as the
    /// tripwire read it; an entry replaced while read is an error.
    pub(super) fn entry(&self) -> Result<Option<Entry>, String> {
        let at = self.at();
        let m = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let e = read_entry(&at, &m, None, &mut { SETTINGS_MAX });
        let again = std::fs::symlink_metadata(&at).map_err(|e| e.to_string())?;
        let ident = |m: &std::fs::Metadata| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.ctime_nsec())
        };
        if ident(&m) != ident(&again) {
            return Err("it changed while being read; check it by hand".into());
        }
        Ok(Some(e))
    }

    /// Remove a file or link (`dir`: an empty directory; one with anything
    /// in it stays).
    pub(super) fn remove(&self, dir: bool) -> Result<(), String> {
        let r = if dir {
            std::fs::remove_dir(self.at())
        } else {
            std::fs::remove_file(self.at())
        };
        r.map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ENOTEMPTY | nix::libc::EEXIST) => {
                "the directory holds files the session did not add; left in place".into()
            }
            _ => e.to_string(),
        })
    }

    /// Put a file there: over what is there when `replace` (the caller
    /// checked it), else only where nothing is.
    pub(super) fn put_file(&self, content: &[u8], mode: u32, replace: bool) -> Result<(), String> {
        let tmp = self.tmp();
        let made = crate::sys::files::write_new(&tmp, content, mode);
        self.settle(made, &tmp, replace)
    }

    /// Put a symlink there, as [`Place::put_file`].
    pub(super) fn put_link(&self, target: &Path, replace: bool) -> Result<(), String> {
        let tmp = self.tmp();
        let made = std::os::unix::fs::symlink(target, &tmp);
        self.settle(made, &tmp, replace)
    }

    /// Make an empty directory there (nothing may be there).
    pub(super) fn make_dir(&self, mode: u32) -> Result<(), String> {
        let at = self.at();
        std::fs::DirBuilder::new()
            .mode(mode)
            .create(&at)
            .map_err(|e| e.to_string())?;
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(mode))
            .map_err(|e| e.to_string())
    }

    fn tmp(&self) -> PathBuf {
        let mut n = OsString::from(".");
        n.push(&self.name);
        n.push(format!(".csb-revert-{}.tmp", std::process::id()));
        under(&self.dir, &n)
    }

    /// Move the temporary `tmp` into place: renamed over, or linked where
    /// nothing is (a link never replaces), then its temporary name removed.
    fn settle(&self, made: std::io::Result<()>, tmp: &Path, replace: bool) -> Result<(), String> {
        let r = made.and_then(|()| {
            if replace {
                std::fs::rename(tmp, self.at())
            } else {
                std::fs::hard_link(tmp, self.at())
            }
        });
        let _ = std::fs::remove_file(tmp);
        r.map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                "something is there now that the session did not leave; left alone".into()
            }
            _ => e.to_string(),
        })
    }
}

/// `name` in the open directory `dir`.
fn under(dir: &File, name: &OsStr) -> PathBuf {
    let mut p = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    p.push(name);
    p
}
