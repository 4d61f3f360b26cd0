//! The supervisor's `open(O_CREAT)`: the last component is followed by hand,
//! so every name a symlink leads to is checked; a protected name that exists
//! is opened without being created; `/proc` entries are opened only for
//! their own process; an existing FIFO is opened in a thread of its own.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use nix::libc;

use super::fifo_wait;
use super::gitrule::{self, How};
use super::proc::{read_path, still_valid, Caller, ProcOwner};
use super::resolve::{
    cstr, dup, last_errno, locate_from, openat, set_umask, split, Errno, Loc, Split,
};
use super::serve::{respond, Reply, Supervisor};

/// The `open` flags that write (or truncate): such an open is the
/// supervisor's even without `O_CREAT` (the filter sends it).
pub(super) const WRITES: i32 = libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC | libc::O_CREAT;

/// Where one step of [`Supervisor::open`] ended.
enum Step {
    /// Opened: the descriptor to place in the caller.
    Opened(OwnedFd),
    /// Answered otherwise: refused, or taken by another thread.
    Answered(Reply),
    /// The name is a symlink: follow it to here.
    Follow(Loc),
}

impl Supervisor {
    pub(super) fn open(&self, c: &Caller, dirfd: i32, path: u64, flags: i32, mode: u32) -> Reply {
        let path = match read_path(c.pid, path) {
            Ok(p) => p,
            Err(e) => return Reply::Err(e),
        };
        if let Some(reply) = self.create_plain(c, dirfd, &path, flags, mode) {
            return reply;
        }
        let mut loc = match c.locate(dirfd, &path) {
            Ok(l) => l,
            Err(e) => return Reply::Err(e),
        };
        let cloexec = flags & libc::O_CLOEXEC != 0;
        // The last component is followed by hand (at most 40 links, as the
        // kernel does), so every name a link leads to is checked too.
        for _ in 0..40 {
            match self.open_step(c, loc, flags, mode) {
                Ok(Step::Opened(fd)) => return Reply::Fd { fd, cloexec },
                Ok(Step::Answered(reply)) => return reply,
                Ok(Step::Follow(next)) => loc = next,
                Err(e) => return Reply::Err(e),
            }
        }
        Reply::Err(libc::ELOOP)
    }

    /// `open(O_CREAT)` of a plain name, nothing a rule or the table
    /// decides on, in a directory the path names plainly, by a caller
    /// whose context is remembered (docs/decisions/0022): one `openat2`
    /// that follows no symlink, from the caller's working directory, its
    /// `dirfd` or the root, under its umask. Every directory it passes is
    /// one the path spells out, so the one the file lands in is named as
    /// the path says: not `hooks`, and no name it makes is one the way
    /// above would look at twice. Always with `O_EXCL` (decision 0023):
    /// only a new file is made here; a name that exists, whatever it is
    /// (a symlink, a FIFO, a file to truncate), is the way above's when
    /// the caller did not ask for `O_EXCL`. None: not such a call (or the
    /// kernel met a symlink or the name, or takes no `openat2`): the way
    /// above decides.
    fn create_plain(
        &self,
        c: &Caller,
        dirfd: i32,
        path: &[u8],
        flags: i32,
        mode: u32,
    ) -> Option<Reply> {
        if flags & libc::O_CREAT == 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE {
            return None;
        }
        let asked_excl = flags & libc::O_EXCL != 0;
        let absolute = path.starts_with(b"/");
        if !absolute && dirfd < 0 && dirfd != libc::AT_FDCWD {
            return None;
        }
        let bare = self.plainly_named(path)?;
        let fs = c.fs?;
        // A path relative to another descriptor of the caller's (tar's
        // way): that directory, opened through `/proc/TID/fd/N` before the
        // look at the context (which then proves it was the caller's).
        let from_fd = !absolute && dirfd != libc::AT_FDCWD;
        let start_fd = if from_fd {
            c.start(dirfd, path).ok()?
        } else {
            None
        };
        // Held from here until the file is made (decision 0022). Taken
        // before the contexts' lock, as every call that holds both does:
        // a completion holds the rule's write lock while it reads a mask.
        let _held = self.git.hold();
        let opened = fs.in_context(
            c.proc_pid,
            c.serial_before,
            !absolute && !from_fd,
            |mask, cwd, known| {
                let start = match &start_fd {
                    Some(fd) => fd.as_raw_fd(),
                    None => cwd.unwrap_or(libc::AT_FDCWD),
                };
                if bare && !no_entry(start, b"../hooks") {
                    return None;
                }
                if !known {
                    if let Err(e) = c.still_valid() {
                        return Some(Err(e));
                    }
                }
                set_umask(mask);
                Some(openat2_plain(start, path, flags | libc::O_EXCL, mode))
            },
        )??;
        match opened {
            Ok(fd) => Some(Reply::Fd {
                fd,
                cloexec: flags & libc::O_CLOEXEC != 0,
            }),
            // The name exists and the caller did not ask for `O_EXCL`:
            // the way above opens what is there (or refuses it).
            Err(libc::EEXIST) if !asked_excl => None,
            // A symlink on the way (or the kernel's own `ELOOP`), flags
            // `openat2` takes more strictly than `openat`, no `openat2`:
            // the way above answers.
            Err(
                libc::ELOOP
                | libc::EINVAL
                | libc::ENOSYS
                | libc::E2BIG
                | libc::EXDEV
                | libc::EAGAIN,
            ) => None,
            Err(e) => Some(Reply::Err(e)),
        }
    }

    /// Whether `path` names its file and directory plainly enough for
    /// [`Supervisor::create_plain`]: `Some(bare)` (whether it is a bare
    /// name, whose directory's name only the file system knows).
    fn plainly_named(&self, path: &[u8]) -> Option<bool> {
        let Split {
            prefix,
            name,
            slash,
        } = split(path)?;
        if slash || !plain(name) || self.decided_on(name) {
            return None;
        }
        // The directory's own name: the path's last component before the
        // name (the root has none).
        if let Some(dir) = prefix.map(last_component) {
            if !dir.is_empty() && (!plain(dir) || dir.eq_ignore_ascii_case(b"hooks")) {
                return None;
            }
        }
        Some(prefix.is_none())
    }

    /// Names [`Supervisor::create_plain`] leaves to the way that looks:
    /// any the table protects somewhere or the git rule decides on, `.git`
    /// and `tty` (`/dev/tty` is the caller's own), in any ASCII case; on a
    /// folding workspace any with a `~` (looked up again once made: some
    /// file systems give names short aliases, issue #45 item 8).
    fn decided_on(&self, name: &[u8]) -> bool {
        (self.table.folds && name.contains(&b'~'))
            || self.table.names_in_any_case(name)
            || gitrule::decides_on(name)
            || name.eq_ignore_ascii_case(b".git")
            || name.eq_ignore_ascii_case(b"tty")
    }

    /// Open `loc` for the caller, or say where the symlink it names leads.
    fn open_step(&self, c: &Caller, mut loc: Loc, flags: i32, mode: u32) -> Result<Step, Errno> {
        let dir = loc.dir.fd.as_raw_fd();
        if self.on_proc(&loc) {
            let cname = loc.cname();
            return self.open_in_proc(c, &loc, &cname, flags, mode);
        }
        // Issue #45 item 8: another spelling of a name decided on.
        let folded = self.fold_in(&mut loc);
        let decided = folded.as_deref().unwrap_or(&loc.name);
        let cname = loc.cname();
        if self.table.protects(&loc.dir, decided) || self.inside_other_spelling(&loc.dir) {
            return self.open_protected(&loc, &cname, flags, mode);
        }
        let how = if flags & libc::O_CREAT != 0 {
            How::File
        } else {
            How::Write
        };
        // A repository copied file by file (issue #44): its `config`, made
        // after its `HEAD`, is set aside, not refused.
        let tmpfile = flags & libc::O_TMPFILE == libc::O_TMPFILE;
        if how == How::File && !tmpfile {
            if let Some(fd) = self.set_aside(&loc, decided, mode) {
                return Ok(Step::Opened(fd));
            }
        }
        // Held until the call is done (a FIFO's wait is in its own thread,
        // without it).
        let _held = match self.admit_as(&loc, decided, how) {
            Ok(held) => held,
            Err(refused) => return Ok(Step::Answered(refused)),
        };
        let follow = flags & (libc::O_EXCL | libc::O_NOFOLLOW) == 0;
        let f = if follow {
            flags | libc::O_NOFOLLOW
        } else {
            flags
        };
        let cloexec = flags & libc::O_CLOEXEC != 0;
        if loc.name == b"tty" && loc.dir.key.is_some() && loc.dir.key == self.dev_key {
            return open_ctty(c, flags, mode).map(Step::Opened);
        }
        let creates = flags & libc::O_CREAT != 0;
        // `O_CREAT | O_EXCL` (how tar, cp and git make their files) makes
        // the name or fails with `EEXIST`, whatever is there now, a symlink
        // or a FIFO included: the kernel's answer, with no look first.
        if creates && flags & libc::O_EXCL != 0 && !tmpfile {
            let fd = create(self, c, dir, &cname, f, mode)?;
            return Ok(self.made(&loc, decided, fd));
        }
        // One look at the name decides the way: a symlink to follow by
        // hand, a FIFO to wait on apart, an existing file to open as it is,
        // a missing one to create (the only way that needs the umask).
        let st = nix::sys::stat::fstatat(
            Some(dir),
            OsStr::from_bytes(&loc.name),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map(|st| st.st_mode & libc::S_IFMT)
        .map_err(|e| e as Errno);
        let opened = match st {
            Ok(libc::S_IFLNK) if follow => return follow_link(c, loc).map(Step::Follow),
            Ok(libc::S_IFIFO) => {
                let fifo = open_fifo_apart(c, dir, &cname, f, mode, cloexec);
                return Ok(Step::Answered(fifo));
            }
            Ok(_) if !tmpfile => openat(dir, cname.as_bytes(), f & !libc::O_CREAT, mode),
            Err(libc::ENOENT) if !creates => Err(libc::ENOENT),
            // Made here (where names fold, looked up again); ELOOP: below.
            Err(libc::ENOENT) if !tmpfile => match create(self, c, dir, &cname, f, mode) {
                Ok(fd) => return Ok(self.made(&loc, decided, fd)),
                Err(e) => Err(e),
            },
            _ => create(self, c, dir, &cname, f, mode),
        };
        match opened {
            Err(libc::ELOOP) if follow => follow_link(c, loc).map(Step::Follow),
            other => other.map(Step::Opened),
        }
    }

    /// A git directory's missing `config` made by a plain open (`decided`,
    /// at `loc`): set aside, the agent told, when the rule says so.
    fn set_aside(&self, loc: &Loc, decided: &[u8], mode: u32) -> Option<OwnedFd> {
        if !self.git.sets_aside(&loc.dir, decided) {
            return None;
        }
        let fd = self
            .asides
            .set_aside(loc.dir.fd.as_raw_fd(), decided, mode)
            .ok()?;
        self.notice(&format!(
            "claude-sandbox: held {}: a git config written by a plain copy is kept aside and put in place when the session ends if every entry is one git writes in ordinary work; until then the repository has no config.",
            loc.display()
        ));
        Some(fd)
    }

    /// A file just made at `loc`, decided as `decided`: placed in the
    /// caller, or on a folding workspace unmade and refused when the file
    /// system finds it under another name decided on (issue #45 item 8).
    fn made(&self, loc: &Loc, decided: &[u8], fd: OwnedFd) -> Step {
        if !self.folded_after(loc, decided) {
            return Step::Opened(fd);
        }
        drop(fd);
        // SAFETY: valid fd and C string.
        unsafe { libc::unlinkat(loc.dir.fd.as_raw_fd(), loc.cname().as_ptr(), 0) };
        Step::Answered(self.refuse(loc))
    }

    /// Whether `loc`'s directory is on `/proc`.
    fn on_proc(&self, loc: &Loc) -> bool {
        match (loc.dir.key, self.proc_dev) {
            (Some((dev, _)), Some(proc_dev)) => dev == proc_dev,
            _ => loc.dir.on_procfs(),
        }
    }

    /// Nothing is created in /proc; its links (fd/N, cwd) lead to existing
    /// objects. But only the caller's own entries are opened for it, never
    /// the supervisor's or another process's; and one opened for writing is
    /// opened first as `O_PATH` and reopened through that descriptor once
    /// the git rule has seen what it is (a caller's `fd/N` may be its
    /// read-only descriptor of a git directory's `config`).
    fn open_in_proc(
        &self,
        c: &Caller,
        loc: &Loc,
        cname: &CString,
        flags: i32,
        mode: u32,
    ) -> Result<Step, Errno> {
        let dir = loc.dir.fd.as_raw_fd();
        match c.proc_owner(&loc.dir) {
            ProcOwner::Caller | ProcOwner::System if flags & WRITES != 0 => {
                let obj = openat(dir, cname.as_bytes(), libc::O_PATH, 0)?;
                if self.protects_object(&obj) {
                    return Ok(Step::Answered(self.refuse(loc)));
                }
                let via = format!("/proc/self/fd/{}", obj.as_raw_fd());
                openat(libc::AT_FDCWD, via.as_bytes(), flags & !libc::O_CREAT, mode)
                    .map(Step::Opened)
            }
            ProcOwner::Caller | ProcOwner::System => {
                openat(dir, cname.as_bytes(), flags, mode).map(Step::Opened)
            }
            ProcOwner::Supervisor(mut p) => {
                p.push(b'/');
                p.extend_from_slice(cname.as_bytes());
                locate_from(None, &p).map(Step::Follow)
            }
            ProcOwner::Other => Err(libc::EACCES),
        }
    }

    /// A protected name (or any inside another spelling of a protected
    /// entry, on a folding workspace): refused if it does not exist; if it
    /// does (bound read-only), opened as the kernel would, but never
    /// created.
    fn open_protected(
        &self,
        loc: &Loc,
        cname: &CString,
        flags: i32,
        mode: u32,
    ) -> Result<Step, Errno> {
        let dir = loc.dir.fd.as_raw_fd();
        let exists = nix::sys::stat::fstatat(
            Some(dir),
            OsStr::from_bytes(&loc.name),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .is_ok();
        if !exists && flags & libc::O_CREAT == 0 {
            return Err(libc::ENOENT);
        }
        if !exists {
            return Ok(Step::Answered(self.refuse(loc)));
        }
        if flags & libc::O_EXCL != 0 {
            return Err(libc::EEXIST);
        }
        // On a folding workspace the entry may be reached under a spelling
        // no read-only bind covers (a FUSE server's inode of its own for
        // `.VSCODE`): never opened for writing (issue #45 item 8).
        if self.table.folds && flags & WRITES != 0 {
            return Ok(Step::Answered(self.refuse(loc)));
        }
        openat(dir, cname.as_bytes(), flags & !libc::O_CREAT, mode).map(Step::Opened)
    }
}

/// `/dev/tty` opened for the caller: its own controlling terminal, not the
/// supervisor's (a caller in a session of its own, as under `tmux` or
/// `script` inside, has another). Reopened through the caller's descriptor
/// of that terminal; when it holds none, `/dev/tty` as the supervisor
/// sees it only if that is the same terminal; `ENXIO` otherwise, as the
/// kernel answers a process without one.
fn open_ctty(c: &Caller, flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
    let tty = |pid: &str| -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 1..];
        after.split_whitespace().nth(4)?.parse().ok()
    };
    let flags = flags & !libc::O_CREAT;
    let theirs = tty(&c.proc_pid.to_string()).ok_or(libc::ESRCH)?;
    if theirs == 0 {
        return Err(libc::ENXIO);
    }
    // tty_nr: major in bits 15..8, minor in 31..20 and 7..0.
    let (major, minor) = (
        (theirs >> 8) & 0xfff,
        (theirs & 0xff) | ((theirs >> 12) & 0xfff00),
    );
    let fds = format!("/proc/{}/fd", c.proc_pid);
    for e in std::fs::read_dir(&fds).map_err(|_| libc::ESRCH)?.flatten() {
        let p = e.path();
        let Ok(st) = nix::sys::stat::stat(&p) else {
            continue;
        };
        let rdev = st.st_rdev;
        if st.st_mode & libc::S_IFMT == libc::S_IFCHR
            && u64::from(libc::major(rdev)) == major
            && u64::from(libc::minor(rdev)) == minor
        {
            return openat(libc::AT_FDCWD, p.as_os_str().as_bytes(), flags, mode);
        }
    }
    if tty("self") == Some(theirs) {
        return openat(libc::AT_FDCWD, b"/dev/tty", flags, mode);
    }
    Err(libc::ENXIO)
}

/// Where the symlink `loc` names leads, read as the caller would: its
/// self-references spelled out, a relative target from `loc`'s directory.
fn follow_link(c: &Caller, loc: Loc) -> Result<Loc, Errno> {
    let target = nix::fcntl::readlinkat(Some(loc.dir.fd.as_raw_fd()), OsStr::from_bytes(&loc.name))
        .map_err(|e| e as i32)?;
    let target = c.translate(target.as_bytes());
    let start = if target.starts_with(b"/") {
        None
    } else {
        Some(loc.dir.fd)
    };
    locate_from(start, &target)
}

/// A name no file system folds into another: ASCII (case aside, which
/// the callers compare without), not `.` or `..`, and not ending in a dot
/// or a space (which some drop).
fn plain(name: &[u8]) -> bool {
    !name.is_empty()
        && name.is_ascii()
        && name != b"."
        && name != b".."
        && !name.ends_with(b".")
        && !name.ends_with(b" ")
}

/// The last component of a directory path (empty for the root).
fn last_component(dir: &[u8]) -> &[u8] {
    let end = dir.iter().rposition(|b| *b != b'/').map_or(0, |i| i + 1);
    let dir = &dir[..end];
    let start = dir.iter().rposition(|b| *b == b'/').map_or(0, |i| i + 1);
    &dir[start..]
}

/// Whether `path` from `dir` is missing (`ENOENT`), without following a
/// last symlink.
fn no_entry(dir: RawFd, path: &[u8]) -> bool {
    nix::sys::stat::fstatat(
        Some(dir),
        OsStr::from_bytes(path),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    ) == Err(nix::errno::Errno::ENOENT)
}

/// `openat2(dir, path, flags, mode)` following no symlink on the way
/// (`ELOOP` if there is one): the directory reached is the one the path
/// spells out.
fn openat2_plain(dir: RawFd, path: &[u8], flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
    let c = cstr(path)?;
    // SAFETY: open_how is plain integers; all-zero is its empty value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = u64::from((flags | libc::O_CLOEXEC) as u32);
    how.mode = u64::from(mode & 0o7777);
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: c is a valid C string and `how` an open_how of its size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        Err(last_errno())
    } else {
        // SAFETY: the kernel just returned this descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }
}

/// `openat(dir, name, flags)` for the caller, creating: under the
/// caller's umask, read once the call is known to create.
fn create(
    sup: &Supervisor,
    c: &Caller,
    dir: RawFd,
    name: &CString,
    flags: i32,
    mode: u32,
) -> Result<OwnedFd, Errno> {
    let umask = sup.fs.umask(c.proc_pid)?;
    c.still_valid()?;
    set_umask(umask);
    openat(dir, name.as_bytes(), flags, mode)
}

/// An existing FIFO's `open` waits for the other end, as long as it takes:
/// done in a thread of its own, which answers, so the serving threads are
/// never held (a writer killed while waiting, left for good, would hold
/// one until a reader came; a few of them, every creation). The wait ends
/// when the caller is gone (`fifo_wait.rs`): no open is left waiting for
/// nobody. `Later` when that thread took the call.
fn open_fifo_apart(
    c: &Caller,
    dir: RawFd,
    cname: &CString,
    flags: i32,
    mode: u32,
    cloexec: bool,
) -> Reply {
    let own = match dup(dir) {
        Ok(own) => own,
        Err(e) => return Reply::Err(e),
    };
    let (listener, id, name) = (c.listener, c.id, cname.clone());
    // It exists: opened without O_CREAT (gone meanwhile: ENOENT).
    let flags = flags & !libc::O_CREAT;
    std::thread::Builder::new()
        .spawn(move || {
            let opened = fifo_wait::wait_open(
                || openat(own.as_raw_fd(), name.as_bytes(), flags, mode),
                || still_valid(listener, id),
            );
            let reply = match opened {
                Some(Ok(fd)) => Reply::Fd { fd, cloexec },
                Some(Err(e)) => Reply::Err(e),
                // The caller is gone: nobody to answer.
                None => return,
            };
            respond(listener, id, reply);
        })
        .map_or(Reply::Err(libc::EAGAIN), |_| Reply::Later)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::creation_guard::table::Table;

    #[test]
    fn only_plainly_named_paths_are_made_in_one_call() {
        let sup = Supervisor::new(Table::new(&["/ws/HEAD".into(), "/ws/.envrc".into()]), None);
        for (path, bare) in [
            (&b"a/b/f.c"[..], false),
            (b"./d01/f0985.txt", false),
            (b"/f", false),
            (b"//x//f", false),
            (b"f", true),
        ] {
            assert_eq!(sup.plainly_named(path), Some(bare), "{path:?}");
        }
        // Left to the way that looks: a directory that may be `hooks/`
        // (in any case, or named other than plainly), a name the table or
        // the rule decides on (in any case), `tty`, names a file system
        // may fold or drop characters of.
        for path in [
            &b"a/hooks/x"[..],
            b"a/HOOKS/x",
            b"hooks/x",
            b"a/../x",
            b"a/./x",
            b"a/b./x",
            b"a/b /x",
            "a/hoo\u{212a}s/x".as_bytes(),
            b"x/",
            b".envrc",
            b"sub/.EnvRC",
            b"head",
            b"a/config",
            b"a/Config.Worktree",
            b"info/attributes",
            b"a/.git",
            b"dev/TTY",
            b"..",
            b"a/f.",
            "caf\u{e9}".as_bytes(),
            b"/",
            b"",
        ] {
            assert_eq!(sup.plainly_named(path), None, "{path:?}");
        }
        // On a folding workspace a `~` name is looked up again once made
        // (issue #45 item 8): never made in one call.
        assert_eq!(sup.plainly_named(b"a/x~"), Some(false));
        let mut table = Table::new(&["/ws/HEAD".into()]);
        table.folds = true;
        let folding = Supervisor::new(table, None);
        assert_eq!(folding.plainly_named(b"a/x~"), None);
        assert_eq!(folding.plainly_named(b"a/x"), Some(false));
    }
}
