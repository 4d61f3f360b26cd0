//! Whether the workspace's file system folds case (issue #45 item 8,
//! docs/decisions/0033): then the creation guard decides by the file
//! system's own lookup, not by comparing bytes. Asked once, at launch: a
//! case-folding FUSE, 9p, virtiofs or Docker Desktop mount cannot be known
//! by its type, so the honest test is a lookup in another case; and an
//! ext4, f2fs or tmpfs that can fold any new directory (`chattr +F`) counts
//! as folding, since a directory made inside could be given the attribute.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

/// The inode attribute of a directory whose names are folded (linux/fs.h).
const FS_CASEFOLD_FL: libc::c_long = 0x4000_0000;

/// Whether names in the workspace `ws` may be folded by its file system.
/// A probe directory of the launch's own is made there and removed at
/// once; where none can be made, the entries already there are looked up
/// in another case; and where that tells nothing, folding is assumed (the
/// guard's lookups cost a little; a folded name let through costs a hook).
pub(super) fn folds(ws: &Path) -> bool {
    let name = format!(".claude-sandbox-casefold-probe.{}", std::process::id());
    let probe = ws.join(&name);
    if std::fs::create_dir(&probe).is_err() {
        return existing_entries_fold(ws).unwrap_or(true);
    }
    let folded = same_entry(&probe, &ws.join(name.to_ascii_uppercase())) || can_fold(&probe);
    let _ = std::fs::remove_dir(&probe);
    folded
}

/// Whether `a` and `b` are one entry (one device and inode, not followed).
fn same_entry(a: &Path, b: &Path) -> bool {
    match (std::fs::symlink_metadata(a), std::fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) => {
            use std::os::unix::fs::MetadataExt;
            (x.dev(), x.ino()) == (y.dev(), y.ino())
        }
        _ => false,
    }
}

/// Whether the empty directory `dir` folds names or could be made to
/// (ext4, f2fs, tmpfs with an encoding): its casefold attribute is set
/// (inherited) or takes being set.
fn can_fold(dir: &Path) -> bool {
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string; the descriptor is checked and owned.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: the kernel just returned this descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one long (the kernel's int) to `flags`.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) } != 0 {
        return false;
    }
    if flags & FS_CASEFOLD_FL != 0 {
        return true;
    }
    let set = flags | FS_CASEFOLD_FL;
    // SAFETY: FS_IOC_SETFLAGS reads one long from `set`.
    unsafe { libc::ioctl(fd.as_raw_fd(), libc::FS_IOC_SETFLAGS, &set) == 0 }
}

/// Without writing: whether an entry of `ws` with a letter in its name is
/// found under its name in the other case (None: no entry tells).
fn existing_entries_fold(ws: &Path) -> Option<bool> {
    let entries = std::fs::read_dir(ws).ok()?;
    for e in entries.flatten().take(64) {
        let name = e.file_name();
        let bytes = name.as_bytes();
        if !bytes.iter().any(u8::is_ascii_alphabetic) {
            continue;
        }
        let other: Vec<u8> = bytes
            .iter()
            .map(|b| {
                if b.is_ascii_lowercase() {
                    b.to_ascii_uppercase()
                } else {
                    b.to_ascii_lowercase()
                }
            })
            .collect();
        let other = ws.join(std::ffi::OsStr::from_bytes(&other));
        return Some(same_entry(&ws.join(&name), &other));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordinary_directory_does_not_fold_and_the_probe_leaves_nothing() {
        let ws = std::env::temp_dir().join(format!("csb-casefold-{}", std::process::id()));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("File"), "").unwrap();
        // This machine's file systems fold nothing (no CONFIG_UNICODE);
        // tests/casefold.rs has a case-folding mount.
        assert!(!folds(&ws));
        assert_eq!(existing_entries_fold(&ws), Some(false));
        let left: Vec<_> = std::fs::read_dir(&ws).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "the probe is removed");
        std::fs::remove_dir_all(&ws).unwrap();
        assert_eq!(existing_entries_fold(Path::new("/nonexistent-csb")), None);
    }
}
