//! What the open jail's holder and the allowlist holder share, each spawned
//! in bubblewrap's place (SPEC §4.7, §4.9): the pipe ends a holder and
//! bubblewrap receive, by role ([`Ends`], numbered by
//! [`crate::sandbox::render`]), and the fresh user and network namespace a
//! holder makes, mapped to the launching user, with the parent-death signal
//! set again so it dies with the shadow.
//!
//! May import: `sandbox` (the fds' roles), nothing else of the crate.

use std::os::fd::OwnedFd;

use crate::sandbox::FdContent;

/// The ends of the pipes and the channel a holder (the jail's or the
/// allowlist's) and bubblewrap receive, by role.
pub(crate) struct Ends(Vec<(FdContent, OwnedFd)>);

impl Ends {
    pub(super) fn new(v: Vec<(FdContent, OwnedFd)>) -> Ends {
        Ends(v)
    }

    /// One more end, for `role`.
    pub(crate) fn add(&mut self, role: FdContent, fd: OwnedFd) {
        self.0.push((role, fd));
    }

    /// The fd for `role` (each is handed over once).
    pub(crate) fn take(&mut self, role: &FdContent) -> Option<OwnedFd> {
        let i = self.0.iter().position(|(r, _)| r == role)?;
        Some(self.0.swap_remove(i).1)
    }
}

/// Unshare a user and a network namespace, mapped to the launching user,
/// with the parent-death signal set again (entering a user namespace cleared it).
pub(super) fn enter_namespaces(uid: &str, gid: &str) -> Result<(), String> {
    make_namespaces(uid, gid)?;
    die_with_parent()
}

/// Unshare a user and a network namespace, mapped to the launching user;
/// new interfaces there get no IPv6.
pub(super) fn make_namespaces(uid: &str, gid: &str) -> Result<(), String> {
    use nix::sched::{unshare, CloneFlags};
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("cannot create the user and network namespaces: {e}"))?;
    let write = |path: &str, text: String| {
        std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {uid} 1"))?;
    write("/proc/self/gid_map", format!("0 {gid} 1"))?;
    // New interfaces (the jail's tap) get no IPv6 at all; best effort where
    // /proc/sys is read-only (the route batch flushes IPv6 addresses anyway).
    for k in ["all", "default"] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{k}/disable_ipv6"), "1");
    }
    Ok(())
}

/// So this process (and the bubblewrap a holder becomes) dies with the
/// shadow: the parent-death signal, set again after entering a user
/// namespace (which clears it), and refused if the shadow is gone already.
pub(super) fn die_with_parent() -> Result<(), String> {
    let parent = nix::unistd::getppid();
    unsafe { nix::libc::prctl(nix::libc::PR_SET_PDEATHSIG, nix::libc::SIGKILL, 0, 0, 0) };
    if parent.as_raw() == 1 {
        return Err("the launching shadow is gone".into());
    }
    Ok(())
}
