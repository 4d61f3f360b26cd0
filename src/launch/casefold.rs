//! Whether the workspace's file system folds case (issue #45 item 8,
//! docs/decisions/0033): then the creation guard decides by the file
//! system's own lookup, not by comparing bytes. Asked once, at launch: a
//! case-folding FUSE, 9p, virtiofs or Docker Desktop mount cannot be known
//! by its type, so the honest test is a lookup in another case; and an
//! ext4, f2fs or tmpfs that can fold any new directory (`chattr +F`) counts
//! as folding, since a directory made inside could be given the attribute.
//! The probe's answer is kept in the private state, per workspace
//! directory and mount (the kernel's unique mount id, within one boot):
//! what folds is fixed when a file system is mounted, and a directory
//! that holds anything cannot change its own attribute, so later launches
//! in the same workspace do not make and remove a directory each time
//! (issue #48 item 3: ~0.3 ms of a launch on ext4).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

/// The inode attribute of a directory whose names are folded (linux/fs.h).
const FS_CASEFOLD_FL: libc::c_long = 0x4000_0000;

/// Where the probes' answers are kept, relative to `$HOME` (the private
/// state: the sandbox never sees it), and how many.
const KEPT_REL: &str = ".local/state/claude-sandbox/casefold";
const KEPT_MAX: usize = 16;

/// [`folds`], the answer kept under `home` for the same workspace
/// directory on the same mount in this boot reused; kept only when the
/// probe itself answered, never a guess.
pub(super) fn folds_kept(ws: &Path, home: &Path) -> bool {
    let kept_at = home.join(KEPT_REL);
    let Some(key) = key_of(ws) else {
        return folds(ws);
    };
    let text = crate::sys::files::read_text(&kept_at).unwrap_or_default();
    if let Some(answer) = kept_answer(&text, &key) {
        return answer;
    }
    let Some(answer) = probe(ws) else {
        return unprobed(ws);
    };
    let mut lines: Vec<&str> = text
        .lines()
        .filter(|l| l.rsplit_once(' ').is_some_and(|(k, _)| k != key))
        .collect();
    let line = format!("{key} {}", u8::from(answer));
    lines.push(&line);
    let start = lines.len().saturating_sub(KEPT_MAX);
    let _ = crate::sys::files::write_atomic(
        &kept_at,
        (lines[start..].join("\n") + "\n").as_bytes(),
        0o600,
    );
    answer
}

/// The answer kept for `key` in `text` (lines `KEY 0|1`), if any.
fn kept_answer(text: &str, key: &str) -> Option<bool> {
    text.lines().find_map(|l| match l.rsplit_once(' ') {
        Some((k, "1")) if k == key => Some(true),
        Some((k, "0")) if k == key => Some(false),
        _ => None,
    })
}

/// The statx mask bit of the mount's unique id (Linux 6.8; linux/stat.h).
const STATX_MNT_ID_UNIQUE: u32 = 0x4000;

/// What an answer is kept under: the boot, the mount's unique id (never
/// reused within a boot, unlike the short one), the workspace directory's
/// device and inode. `None` where the kernel has no unique mount id.
fn key_of(ws: &Path) -> Option<String> {
    let boot = crate::sys::files::read_text(Path::new("/proc/sys/kernel/random/boot_id")).ok()?;
    let c = CString::new(ws.as_os_str().as_bytes()).ok()?;
    // SAFETY: statx writes one `struct statx`, zeroed before.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let flags = libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_SYNC_AS_STAT;
    // SAFETY: a valid C string and a struct of the kernel's layout.
    if unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            flags,
            STATX_MNT_ID_UNIQUE,
            &mut st,
        )
    } != 0
        || st.stx_mask & STATX_MNT_ID_UNIQUE == 0
        || u32::from(st.stx_mode) & libc::S_IFMT != libc::S_IFDIR
    {
        return None;
    }
    let boot = boot.trim();
    let boot_ok = !boot.is_empty() && boot.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    boot_ok.then(|| {
        format!(
            "{boot} {} {}:{} {}",
            st.stx_mnt_id, st.stx_dev_major, st.stx_dev_minor, st.stx_ino
        )
    })
}

/// Whether names in the workspace `ws` may be folded by its file system.
/// A probe directory of the launch's own is made there and removed at
/// once; where none can be made, [`unprobed`].
fn folds(ws: &Path) -> bool {
    probe(ws).unwrap_or_else(|| unprobed(ws))
}

/// Where no probe can be made: the entries already in `ws` looked up in
/// another case; where that tells nothing, folding is assumed (the
/// guard's lookups cost a little; a folded name let through costs a hook).
fn unprobed(ws: &Path) -> bool {
    existing_entries_fold(ws).unwrap_or(true)
}

/// The probe directory's answer; `None` when none can be made.
fn probe(ws: &Path) -> Option<bool> {
    let name = format!(".claude-sandbox-casefold-probe.{}", std::process::id());
    let probe = ws.join(&name);
    std::fs::create_dir(&probe).ok()?;
    let folded = same_entry(&probe, &ws.join(name.to_ascii_uppercase())) || can_fold(&probe);
    let _ = std::fs::remove_dir(&probe);
    Some(folded)
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

    #[test]
    fn the_probes_answer_is_kept_per_workspace_and_mount_and_read_back() {
        let t = std::env::temp_dir().join(format!("csb-casefold-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        let (home, ws, other) = (t.join("home"), t.join("ws"), t.join("other"));
        std::fs::create_dir_all(home.join(".local/state/claude-sandbox")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let kept = home.join(KEPT_REL);
        let Some(key) = key_of(&ws) else {
            // Before Linux 6.8: no unique mount id, nothing kept, probed each time.
            assert!(
                std::env::var_os("CI").is_none(),
                "CI's kernel has unique mount ids"
            );
            eprintln!("SKIPPED: this kernel has no unique mount ids (Linux 6.8): nothing is kept");
            assert!(!folds_kept(&ws, &home));
            assert!(!home.join(KEPT_REL).exists());
            return;
        };
        assert_ne!(Some(&key), key_of(&other).as_ref(), "one key per directory");
        assert_eq!(key_of(&kept), None, "not a directory");

        // Probed once, kept, the probe gone.
        assert!(!folds_kept(&ws, &home));
        let text = std::fs::read_to_string(&kept).unwrap();
        assert_eq!(text, format!("{key} 0\n"));
        assert_eq!(
            std::fs::read_dir(&ws).unwrap().count(),
            0,
            "the probe is removed"
        );
        // Read back, not probed again: a kept "folds" is believed.
        std::fs::write(&kept, format!("{key} 1\n")).unwrap();
        assert!(folds_kept(&ws, &home));
        // Another boot's, another mount's or a garbled line: probed again,
        // and the others kept beside it.
        let stale = format!("0000-other-boot {}", key.split_once(' ').unwrap().1);
        std::fs::write(&kept, format!("{stale} 1\ngarbage\n{key} 2\n")).unwrap();
        assert!(!folds_kept(&ws, &home));
        let text = std::fs::read_to_string(&kept).unwrap();
        assert!(text.starts_with(&format!("{stale} 1\n")), "{text}");
        assert!(text.ends_with(&format!("{key} 0\n")), "{text}");
        assert!(
            !text.contains(" 2\n"),
            "the line for this key is replaced: {text}"
        );
        // At most KEPT_MAX answers.
        let many: String = (0..40).map(|i| format!("boot-{i} 1 2:3 4 1\n")).collect();
        std::fs::write(&kept, many).unwrap();
        assert!(!folds_kept(&ws, &home));
        let text = std::fs::read_to_string(&kept).unwrap();
        assert_eq!(text.lines().count(), KEPT_MAX);
        assert!(text.ends_with(&format!("{key} 0\n")));
        // No private state to keep it in: still answered.
        assert!(!folds_kept(&other, &t.join("no-home")));
        std::fs::remove_dir_all(&t).unwrap();
    }
}
