//! The root view's file masks made before bubblewrap starts, where the
//! launch may (issue #23 item 3: where a root launch's time goes).
//!
//! bubblewrap binds `/dev/null` over a file in two mounts and reads the
//! whole mount table in between, for each mask: on this project's VM the
//! ~26 file masks of a root launch cost bubblewrap ~4 ms. A launching root
//! that holds `CAP_SYS_ADMIN` makes them itself, in the child that becomes
//! bubblewrap (or the network holder that execs it): a mount namespace of
//! its own, every mount made a slave first (nothing propagates back to the
//! machine), then each mask bound and remounted read-only, `nosuid`,
//! `nodev`, as bubblewrap would. bubblewrap's recursive bind of `/` carries
//! them into the sandbox, where they are locked mounts of a more privileged
//! namespace: the session can no more remove them than bubblewrap's own.
//!
//! Promise: the same masks either way, only faster. Only files of the
//! system trees ([`super::rootview::ROOTS`]) are made here (never under
//! `/proc`, which bubblewrap mounts fresh, nor under a home); a launch that
//! cannot make them (no `CAP_SYS_ADMIN`, an AppArmor profile refusing
//! mounts, a mask gone since the walk) leaves them to bubblewrap, which
//! fails closed as before.
//!
//! Exports: [`PreMasks`] (`split` a sandbox, `enter` in the child).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

use crate::sandbox::{Mount, Sandbox};

/// The file masks the child makes before exec.
#[derive(Debug, Default)]
pub(super) struct PreMasks {
    files: Vec<CString>,
}

/// Whether `dst` is a mask this module may make: a file of a system tree.
fn premaskable(dst: &Path) -> bool {
    super::rootview::ROOTS.iter().any(|r| dst.starts_with(r))
}

/// Whether the plan's mount `me` at `dst` is the only one there: no other
/// mount but the root's own bind is at `dst` or above it. A mask under a
/// tmpfs, a home or a bind from elsewhere is bubblewrap's to make, in its
/// place in the sequence (made on the machine's path, it would be hidden,
/// or land where the sandbox does not look).
fn alone(sb: &Sandbox, me: usize, dst: &Path) -> bool {
    !sb.mounts.iter().enumerate().any(|(i, m)| {
        let root_bind = matches!(m, Mount::ReadOnly { src, dst } if src == Path::new("/") && dst == Path::new("/"));
        i != me && !root_bind && dst.starts_with(m.dst())
    })
}

impl PreMasks {
    /// `sb` without the file masks made here, and those masks; `None`
    /// when this launch cannot make them (not root with `CAP_SYS_ADMIN`,
    /// or `enabled` false) or there are none.
    pub(super) fn split(sb: &Sandbox, enabled: bool) -> Option<(Sandbox, PreMasks)> {
        if !enabled || !may_mount() {
            return None;
        }
        let split = split_masks(sb);
        // Only in builds with the test mutations: no trace of it elsewhere.
        #[cfg(feature = "test-mutations")]
        let split = split.map(|(rest, mut pre)| {
            if crate::testhooks::active(crate::testhooks::Mutation::PreMaskFails) {
                pre.files.push(c"/nonexistent-csb-premask".into());
            }
            (rest, pre)
        });
        split
    }

    /// In the child, before exec: a mount namespace of its own, slave to
    /// the machine's, with every mask made. Async-signal-safe (no
    /// allocation): only system calls on the prepared paths.
    pub(super) fn enter(&self) -> std::io::Result<()> {
        let err = std::io::Error::last_os_error;
        // SAFETY: system calls on NUL-terminated strings this struct owns.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(err());
            }
            // Before any mount: nothing made below may reach the machine.
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ) != 0
            {
                return Err(err());
            }
            for f in &self.files {
                if libc::mount(
                    c"/dev/null".as_ptr(),
                    f.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(err());
                }
                if libc::mount(
                    std::ptr::null(),
                    f.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND
                        | libc::MS_REMOUNT
                        | libc::MS_RDONLY
                        | libc::MS_NOSUID
                        | libc::MS_NODEV,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(err());
                }
            }
        }
        Ok(())
    }
}

/// The pure part of [`PreMasks::split`].
fn split_masks(sb: &Sandbox) -> Option<(Sandbox, PreMasks)> {
    let mut rest = sb.clone();
    rest.mounts.clear();
    let mut files = Vec::new();
    for (i, m) in sb.mounts.iter().enumerate() {
        if let Mount::Empty { dst } = m {
            if premaskable(dst) && alone(sb, i, dst) {
                if let Ok(c) = CString::new(dst.as_os_str().as_bytes()) {
                    files.push(c);
                    continue;
                }
            }
        }
        rest.mounts.push(m.clone());
    }
    (!files.is_empty()).then_some((rest, PreMasks { files }))
}

/// Root with `CAP_SYS_ADMIN` in its effective set (`CapEff` of
/// `/proc/self/status`, read as the recursion check reads it).
fn may_mount() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    if !nix::unistd::geteuid().is_root() {
        return false;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    crate::sys::inside::status_field(&status, "CapEff")
        .and_then(|v| u64::from_str_radix(v, 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn sandbox_with(masks: &[&str]) -> Sandbox {
        let mut sb = crate::plan::build(
            &crate::config::Config::default(),
            &crate::plan::fixtures::facts(),
            &[],
        )
        .unwrap();
        sb.mounts.extend(masks.iter().map(|p| Mount::Empty {
            dst: PathBuf::from(p),
        }));
        sb
    }

    #[test]
    fn only_files_of_the_system_trees_are_made_before_bubblewrap() {
        let sb = sandbox_with(&["/etc/shadow-", "/var/lib/dpkg/lock", "/proc/timer_list"]);
        let (rest, pre) = split_masks(&sb).expect("system-tree masks");
        let made: Vec<&str> = pre.files.iter().map(|c| c.to_str().unwrap()).collect();
        assert!(made.contains(&"/etc/shadow-"), "{made:?}");
        assert!(made.contains(&"/var/lib/dpkg/lock"), "{made:?}");
        for m in &made {
            assert!(
                !rest
                    .mounts
                    .iter()
                    .any(|x| matches!(x, Mount::Empty { dst } if dst == Path::new(m))),
                "{m} is made twice"
            );
        }
        // /proc is bubblewrap's fresh one, the home a tmpfs it makes: theirs.
        assert!(!made
            .iter()
            .any(|m| m.starts_with("/proc") || m.starts_with("/home")));
        assert!(rest
            .mounts
            .iter()
            .any(|x| matches!(x, Mount::Empty { dst } if dst == Path::new("/proc/timer_list"))));
        // Nothing else moves: every other mount keeps its place.
        assert_eq!(rest.mounts.len() + made.len(), sb.mounts.len());
    }

    #[test]
    fn a_mask_under_another_mount_is_left_to_bubblewrap() {
        // A home under /var (a tmpfs bubblewrap makes), a bind from elsewhere.
        let mut sb = sandbox_with(&[]);
        sb.mounts.push(Mount::Tmpfs {
            dst: PathBuf::from("/var/home/dev"),
        });
        sb.mounts.push(Mount::Empty {
            dst: PathBuf::from("/var/home/dev/.netrc"),
        });
        sb.mounts.push(Mount::ReadOnly {
            src: PathBuf::from("/usr/share/x"),
            dst: PathBuf::from("/opt/x"),
        });
        sb.mounts.push(Mount::Empty {
            dst: PathBuf::from("/opt/x/secret"),
        });
        sb.mounts.push(Mount::Empty {
            dst: PathBuf::from("/srv/key"),
        });
        let (rest, pre) = split_masks(&sb).expect("/srv/key alone");
        let made: Vec<&str> = pre.files.iter().map(|c| c.to_str().unwrap()).collect();
        assert!(made.contains(&"/srv/key"), "{made:?}");
        for theirs in ["/var/home/dev/.netrc", "/opt/x/secret"] {
            assert!(!made.contains(&theirs), "{theirs} made before bubblewrap");
            assert!(rest
                .mounts
                .iter()
                .any(|m| matches!(m, Mount::Empty { dst } if dst == Path::new(theirs))));
        }
    }

    #[test]
    fn without_system_tree_masks_bubblewrap_makes_everything() {
        let mut sb = sandbox_with(&[]);
        sb.mounts
            .retain(|m| !matches!(m, Mount::Empty { dst } if premaskable(dst)));
        assert!(split_masks(&sb).is_none());
    }
}
