//! The supervisor's serving threads: receive a notification, decode it,
//! refuse a protected name (`EPERM`, remembered for the line at exit) or
//! perform the call on the resolved directory and the copied path, and
//! answer (a new descriptor placed in the caller with `ADDFD`).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::Mutex;

use nix::libc;

use super::calls::{decode, Call};
use super::filter::{create_syscall, AT_REMOVEDIR, NOTED};
use super::fs_context::FsContexts;
use super::gitrule::{GitRule, How, Verdict};
use super::proc::{read_path, Caller, ProcView};
use super::resolve::{check, cstr, last_errno, openat, set_umask, Errno, Loc};
use super::table::Table;

/// What the caller gets back.
pub(super) enum Reply {
    Val(i64),
    Fd {
        fd: OwnedFd,
        cloexec: bool,
    },
    Err(Errno),
    /// Answered by another thread (an `open` that may wait long).
    Later,
    /// Run by the kernel as asked: only the calls the supervisor notes
    /// (`filter::NOTED`), nothing decided on their arguments.
    Continue,
}

/// The supervisor's state shared by its threads.
pub(super) struct Supervisor {
    pub(super) table: Table,
    /// Git directories by rule, wherever they are.
    pub(super) git: GitRule,
    /// `/dev` (its device and inode), where `tty` is the caller's own.
    pub(super) dev_key: Option<(u64, u64)>,
    /// Callers' umasks and working directories (read, or remembered while
    /// they hold).
    pub(super) fs: FsContexts,
    /// The device of `/proc` (the sandbox has one procfs): a directory on
    /// it is known by its device, without a `statfs` per call.
    pub(super) proc_dev: Option<u64>,
    proc_view: ProcView,
    /// Protected paths a call tried to create, for the line at exit.
    refused: Mutex<Vec<String>>,
    /// The session's notices file (issue #44): each refusal is told to the
    /// agent there as it happens.
    notices: Option<std::os::fd::OwnedFd>,
    /// Git directories' configs made by a plain open, set aside (issue #44).
    pub(super) asides: super::aside::Asides,
}

impl Supervisor {
    pub(crate) fn new(table: Table, notices: Option<std::os::fd::OwnedFd>) -> Supervisor {
        let mut git = GitRule::new(table.workspace.clone(), table.held_hooks.clone());
        git.folds = table.folds;
        git.record_worktrees(&table.gitdirs);
        Supervisor {
            git,
            fs: FsContexts::default(),
            dev_key: nix::sys::stat::stat("/dev")
                .ok()
                .map(|s| (s.st_dev, s.st_ino)),
            proc_dev: nix::sys::statfs::statfs("/proc")
                .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
                .then(|| nix::sys::stat::stat("/proc").ok().map(|s| s.st_dev))
                .flatten(),
            table,
            proc_view: ProcView::here(),
            refused: Mutex::new(Vec::new()),
            notices,
            asides: Default::default(),
        }
    }

    pub(super) fn refuse(&self, loc: &Loc) -> Reply {
        if let Ok(mut r) = self.refused.lock() {
            let p = loc.display();
            if !r.contains(&p) && r.len() < 64 {
                self.tell(loc, &p);
                r.push(p);
            }
        }
        Reply::Err(libc::EPERM)
    }

    /// The agent's line for a refusal of `path` (issue #44): what, why,
    /// and what the user can do. Once per path.
    fn tell(&self, loc: &Loc, path: &str) {
        let Some(fd) = &self.notices else {
            return;
        };
        let why = if matches!(loc.name.as_slice(), b"config" | b"config.worktree") {
            "git config with an entry outside what git writes in ordinary work \
             (a program, credential helper, proxy, TLS setting, URL rewrite or include \
             that host git would obey); the user can set such a key outside the sandbox \
             with `git config`"
        } else if path.contains("/hooks/") {
            "a git hook, which host git would run; the user can install it outside the sandbox"
        } else {
            "a protected path that host tools (git, editors, direnv, MCP clients) would \
             run or trust; the user can create it outside the sandbox"
        };
        crate::notices::append(
            std::os::fd::AsRawFd::as_raw_fd(fd),
            &format!("claude-sandbox: refused to write {path}: {why}."),
        );
    }

    /// Tell the agent `line` (issue #44), if it can be told.
    pub(super) fn notice(&self, line: &str) {
        if let Some(fd) = &self.notices {
            crate::notices::append(fd.as_raw_fd(), line);
        }
    }

    /// The git rule's verdict on making `loc` by `how`, for every call but
    /// a rename (which alone may put a `config` in place), judged as the
    /// name `decided` (`loc`'s own, or on a folding workspace the name it
    /// is another spelling of: [`super::fold`]): the lock to hold while
    /// the call is performed, or the refusal to answer with.
    pub(super) fn admit_as(
        &self,
        loc: &Loc,
        decided: &[u8],
        how: How,
    ) -> Result<Verdict<'_>, Reply> {
        match self.git.judge(&loc.dir, decided, how) {
            Verdict::Refused | Verdict::Config(_) => Err(self.refuse(loc)),
            held => Ok(held),
        }
    }

    /// The paths refused so far.
    pub(super) fn refused(&self) -> Vec<String> {
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Serve notifications from `listener` until it fails (the sandbox is gone).
    pub(super) fn serve(&self, listener: RawFd) {
        // Each thread its own umask (set per call from the caller's).
        // SAFETY: unshare(CLONE_FS) only detaches this thread's fs_struct.
        unsafe { libc::unshare(libc::CLONE_FS) };
        serving_policy();
        loop {
            // SAFETY: the kernel wants a zeroed struct; it fills it.
            let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            let serial_before = self.fs.serial();
            // SAFETY: req is a valid seccomp_notif for the ioctl to fill.
            let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) };
            if r < 0 {
                match last_errno() {
                    libc::EINTR => continue,
                    // A caller gone before its call was taken, or no
                    // process left under the filter: then the receive
                    // fails at once, every time, and there is nothing
                    // more to serve.
                    libc::ENOENT if !hung_up(listener) => continue,
                    _ => return,
                }
            }
            let reply = self.handle(listener, &req, serial_before);
            respond(listener, req.id, reply);
        }
    }

    fn handle(&self, listener: RawFd, req: &libc::seccomp_notif, serial_before: u64) -> Reply {
        self.fs.seen(req.pid);
        let name = create_syscall(req.data.arch, req.data.nr as u32);
        if name.is_some_and(|n| NOTED.contains(&n)) {
            let proc_pid = self.proc_view.pid(req.pid).ok();
            self.fs.changing(req.pid, proc_pid, i64::from(req.data.nr));
            return Reply::Continue;
        }
        let Some(call) = name.and_then(|n| decode(n, req.data.args)) else {
            return Reply::Err(libc::ENOSYS);
        };
        match self.proc_view.pid(req.pid) {
            Ok(p) => self.perform(
                &Caller {
                    pid: req.pid,
                    proc_pid: p,
                    listener,
                    id: req.id,
                    fs: Some(&self.fs),
                    serial_before,
                },
                &call,
            ),
            Err(e) => Reply::Err(e),
        }
    }

    fn perform(&self, c: &Caller, call: &Call) -> Reply {
        let res = match *call {
            Call::Open {
                dirfd,
                path,
                flags,
                mode,
            } => return self.open(c, dirfd, path, flags, mode),
            Call::Mkdir { dirfd, path, mode } => self.create(c, dirfd, path, How::Mkdir, |loc| {
                // SAFETY: valid fd and C string.
                check(unsafe { libc::mkdirat(loc.dir.fd.as_raw_fd(), loc.cname().as_ptr(), mode) })
            }),
            Call::Mknod {
                dirfd,
                path,
                mode,
                dev,
            } => self.create(c, dirfd, path, How::File, |loc| {
                // SAFETY: valid fd and C string.
                check(unsafe {
                    libc::mknodat(
                        loc.dir.fd.as_raw_fd(),
                        loc.cname().as_ptr(),
                        mode,
                        libc::dev_t::from(dev),
                    )
                })
            }),
            Call::Symlink {
                target,
                dirfd,
                path,
            } => self.symlink(c, target, dirfd, path),
            Call::Link {
                olddirfd,
                old,
                newdirfd,
                new,
                flags,
            } => self.link(c, olddirfd, old, newdirfd, new, flags),
            Call::Rename {
                olddirfd,
                old,
                newdirfd,
                new,
                flags,
            } => self.rename(c, olddirfd, old, newdirfd, new, flags),
            Call::Unlink { dirfd, path, flags } => self.unlink(c, dirfd, path, flags),
            Call::Bind { fd, addr, len } => self.bind(c, fd, addr, len),
            Call::Socketcall { op, args } if op == super::filter::SYS_BIND => {
                self.socketcall_bind(c, args)
            }
            // Another operation with SYS_BIND's bit: nothing is made, and
            // the operation is in a register, not in the caller's memory.
            Call::Socketcall { .. } => return Reply::Continue,
        };
        match res {
            Ok(v) => Reply::Val(v),
            Err(r) => r,
        }
    }

    /// mkdir, mknod, symlink: one new name, never following the last component.
    fn create(
        &self,
        c: &Caller,
        dirfd: i32,
        path: u64,
        how: How,
        op: impl FnOnce(&Loc) -> Result<i64, Errno>,
    ) -> Result<i64, Reply> {
        let path = read_path(c.pid, path).map_err(Reply::Err)?;
        let mut loc = c.locate(dirfd, &path).map_err(Reply::Err)?;
        let folded = self.fold_in(&mut loc);
        let decided = folded.as_deref().unwrap_or(&loc.name);
        if self.table.protects(&loc.dir, decided) || self.inside_other_spelling(&loc.dir) {
            return Err(self.refuse(&loc));
        }
        let _held = self.admit_as(&loc, decided, how)?;
        // A symlink may turn a recorded work tree outward: made alone,
        // then checked ([`super::worktrees`]).
        let alone = (how == How::Symlink)
            .then(|| self.moves_a_worktree(&loc))
            .flatten();
        let umask = self.fs.umask(c.proc_pid).map_err(Reply::Err)?;
        c.still_valid().map_err(Reply::Err)?;
        set_umask(umask);
        let made = op(&loc).map_err(Reply::Err)?;
        let moved_out = alone.is_some() && !self.git.worktrees.still_inside();
        if moved_out || self.folded_after(&loc, decided) {
            unmake(&loc, how == How::Mkdir);
            return Err(self.refuse(&loc));
        }
        Ok(made)
    }

    /// `symlink`: refused, like any creation, where the table or the git
    /// rule protects the name, and undone when it turns a recorded work
    /// tree outward ([`Supervisor::create`]).
    fn symlink(&self, c: &Caller, target: u64, dirfd: i32, path: u64) -> Result<i64, Reply> {
        let target = read_path(c.pid, target)
            .and_then(|t| cstr(&t))
            .map_err(Reply::Err)?;
        self.create(c, dirfd, path, How::Symlink, |loc| {
            // SAFETY: valid fd and C strings.
            check(unsafe {
                libc::symlinkat(
                    target.as_ptr(),
                    loc.dir.fd.as_raw_fd(),
                    loc.cname().as_ptr(),
                )
            })
        })
    }

    fn link(
        &self,
        c: &Caller,
        olddirfd: i32,
        old: u64,
        newdirfd: i32,
        new: u64,
        flags: i32,
    ) -> Result<i64, Reply> {
        let old = read_path(c.pid, old).map_err(Reply::Err)?;
        let new = read_path(c.pid, new).map_err(Reply::Err)?;
        let mut to = c.locate(newdirfd, &new).map_err(Reply::Err)?;
        let folded = self.fold_in(&mut to);
        let decided = folded.as_deref().unwrap_or(&to.name);
        if self.table.protects(&to.dir, decided) || self.inside_other_spelling(&to.dir) {
            return Err(self.refuse(&to));
        }
        let _held = self.admit_as(&to, decided, How::File)?;
        // The source names an existing object; the kernel resolves it for
        // us, from the caller's directory.
        let (from_dir, from, flags) = if old.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
            // linkat(fd, "", …, AT_EMPTY_PATH): the caller's descriptor itself.
            let p = format!("/proc/{}/fd/{olddirfd}", c.proc_pid).into_bytes();
            (None, p, libc::AT_SYMLINK_FOLLOW)
        } else {
            let old = c.translate(&old);
            let start = c.start(olddirfd, &old).map_err(Reply::Err)?;
            c.still_valid().map_err(Reply::Err)?;
            (start, old, flags)
        };
        let (_obj, from) = self.link_source(from_dir, from, flags).map_err(|e| {
            if e == libc::EPERM {
                self.refuse(&to)
            } else {
                Reply::Err(e)
            }
        })?;
        let from = cstr(&from).map_err(Reply::Err)?;
        let (base, flags) = (libc::AT_FDCWD, libc::AT_SYMLINK_FOLLOW);
        // SAFETY: valid fds and C strings.
        let made = check(unsafe {
            libc::linkat(
                base,
                from.as_ptr(),
                to.dir.fd.as_raw_fd(),
                to.cname().as_ptr(),
                flags,
            )
        })
        .map_err(Reply::Err)?;
        if self.folded_after(&to, decided) {
            unmake(&to, false);
            return Err(self.refuse(&to));
        }
        Ok(made)
    }

    /// The source of a `link`, opened (`O_PATH`) as the kernel would
    /// resolve it and linked through that descriptor, so what is checked is
    /// what is linked: refused (`EPERM`) when it is a file the git rule
    /// protects, whose second name could be opened for writing.
    fn link_source(
        &self,
        from_dir: Option<OwnedFd>,
        from: Vec<u8>,
        flags: i32,
    ) -> Result<(OwnedFd, Vec<u8>), Errno> {
        let base = from_dir.as_ref().map_or(libc::AT_FDCWD, |f| f.as_raw_fd());
        let nofollow = if flags & libc::AT_SYMLINK_FOLLOW != 0 {
            0
        } else {
            libc::O_NOFOLLOW
        };
        let obj = openat(base, &from, libc::O_PATH | nofollow, 0)?;
        if self.protects_object(&obj) {
            return Err(libc::EPERM);
        }
        let via = format!("/proc/self/fd/{}", obj.as_raw_fd()).into_bytes();
        Ok((obj, via))
    }

    /// Whether the opened object `obj` is a file the git rule protects,
    /// found by the name it was opened under (a regular file whose name no
    /// longer leads to it is taken as protected: closed, never open).
    pub(super) fn protects_object(&self, obj: &OwnedFd) -> bool {
        let Ok(st) = nix::sys::stat::fstat(obj.as_raw_fd()) else {
            return true;
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return false;
        }
        let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{}", obj.as_raw_fd())) else {
            return true;
        };
        let path = path.into_os_string().into_vec();
        if !path.starts_with(b"/") || path.ends_with(b" (deleted)") {
            return false;
        }
        let Ok(mut loc) = super::resolve::locate_from(None, &path) else {
            return true;
        };
        let same = nix::sys::stat::fstatat(
            Some(loc.dir.fd.as_raw_fd()),
            std::ffi::OsStr::from_bytes(&loc.name),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .is_ok_and(|s| (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino));
        // Another spelling of a protected name is that name (issue #45 item 8).
        self.fold_in(&mut loc);
        !same || self.git.protects_file(&loc.dir, &loc.name)
    }

    fn rename(
        &self,
        c: &Caller,
        olddirfd: i32,
        old: u64,
        newdirfd: i32,
        new: u64,
        flags: u32,
    ) -> Result<i64, Reply> {
        let old = read_path(c.pid, old).map_err(Reply::Err)?;
        let new = read_path(c.pid, new).map_err(Reply::Err)?;
        let mut from = c.locate(olddirfd, &old).map_err(Reply::Err)?;
        let mut to = c.locate(newdirfd, &new).map_err(Reply::Err)?;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let fresh = self.fold_rename(&mut from, &mut to, exchange);
        if self.table.protects(&to.dir, &to.name) || self.inside_other_spelling(&to.dir) {
            return Err(self.refuse(&to));
        }
        if exchange && self.table.protects(&from.dir, &from.name) {
            return Err(self.refuse(&from));
        }
        if self.table.is_protected_dir(&from.dir, &from.name)
            || self.inside_other_spelling(&from.dir)
        {
            return Err(self.refuse(&from));
        }
        if self.table.is_protected_dir(&to.dir, &to.name) {
            return Err(self.refuse(&to));
        }
        let held = self.git.judge(&to.dir, &to.name, How::Rename);
        if let Verdict::Config(_) = held {
            if exchange {
                return Err(self.refuse(&to));
            }
            let noreplace = flags & libc::RENAME_NOREPLACE != 0;
            // Held keys (issue #44) only where the session can be told.
            let told = self.git.rename_config(
                from.dir.fd.as_raw_fd(),
                &from.name,
                (to.dir.fd.as_raw_fd(), &to.name),
                noreplace,
                self.notices.is_some() && !self.git.no_hold,
            );
            return match told {
                Ok(lines) => {
                    lines.iter().for_each(|l| self.notice(l));
                    Ok(0)
                }
                Err(libc::EPERM) => Err(self.refuse(&to)),
                Err(e) => Err(Reply::Err(e)),
            };
        }
        if let Verdict::Refused = held {
            return Err(self.refuse(&to));
        }
        // An exchange moves both names: git never makes one of its names so.
        if exchange {
            if !matches!(held, Verdict::Plain(_) | Verdict::Free) {
                return Err(self.refuse(&to));
            }
            // Asked under the lock `held` has.
            if !self.git.leaves_alone(&from.dir, &from.name) {
                return Err(self.refuse(&from));
            }
        }
        let _held = held;
        let alone = self
            .moves_a_worktree(&to)
            .or_else(|| self.moves_a_worktree(&from));
        let done = if alone.is_some() {
            self.rename_keeping_worktrees(&from, &to, flags)?
        } else {
            check(renameat2(&from, &to, flags)).map_err(Reply::Err)?
        };
        if fresh && self.folded_after(&to, &to.name) {
            check(renameat2(&to, &from, libc::RENAME_NOREPLACE)).map_err(Reply::Err)?;
            return Err(self.refuse(&to));
        }
        Ok(done)
    }

    /// Whether a name made or replaced at `loc` could change where a
    /// recorded work tree leads ([`super::worktrees`]): then the guard to
    /// hold while the call is performed and checked.
    fn moves_a_worktree(&self, loc: &Loc) -> Option<std::sync::MutexGuard<'_, ()>> {
        if !self.git.worktrees.any() {
            return None;
        }
        let path =
            super::resolve::join(&super::resolve::fd_path(loc.dir.fd.as_raw_fd())?, &loc.name);
        self.git
            .worktrees
            .touches(&path)
            .then(|| self.git.worktrees.alone())
    }

    /// A rename that could move a recorded work tree: performed, then each
    /// walked again; when one now leads out of the workspace the rename is
    /// undone and refused. What it replaced is kept aside (exchanged, not
    /// overwritten) until the check passes, so an undone rename loses
    /// nothing.
    fn rename_keeping_worktrees(&self, from: &Loc, to: &Loc, flags: u32) -> Result<i64, Reply> {
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let replaces = !exchange && flags & libc::RENAME_NOREPLACE == 0 && exists_at(to);
        let how = if exchange || replaces {
            libc::RENAME_EXCHANGE
        } else {
            flags
        };
        check(renameat2(from, to, how)).map_err(Reply::Err)?;
        if !self.git.worktrees.still_inside() {
            let back = if how == libc::RENAME_EXCHANGE {
                libc::RENAME_EXCHANGE
            } else {
                libc::RENAME_NOREPLACE
            };
            check(renameat2(to, from, back)).map_err(Reply::Err)?;
            return Err(self.refuse(to));
        }
        if replaces {
            // What the rename replaced, now under the source's name.
            let dir = if is_dir_at(from) {
                libc::AT_REMOVEDIR
            } else {
                0
            };
            // SAFETY: valid fd and C string.
            if unsafe { libc::unlinkat(from.dir.fd.as_raw_fd(), from.cname().as_ptr(), dir) } != 0 {
                let e = super::resolve::last_errno();
                // A rename over a non-empty directory fails; so does this.
                check(renameat2(to, from, libc::RENAME_EXCHANGE)).map_err(Reply::Err)?;
                return Err(Reply::Err(e));
            }
        }
        Ok(0)
    }

    fn unlink(&self, c: &Caller, dirfd: i32, path: u64, flags: i32) -> Result<i64, Reply> {
        let path = read_path(c.pid, path).map_err(Reply::Err)?;
        let loc = c.locate(dirfd, &path).map_err(Reply::Err)?;
        if flags & AT_REMOVEDIR as i32 != 0 && self.table.is_protected_dir(&loc.dir, &loc.name) {
            return Err(self.refuse(&loc));
        }
        // SAFETY: valid fd and C string.
        check(unsafe { libc::unlinkat(loc.dir.fd.as_raw_fd(), loc.cname().as_ptr(), flags) })
            .map_err(Reply::Err)
    }
}

/// Put the calling (receiving) thread at `SCHED_BATCH`; left as it is
/// where refused. When a caller has taken the descriptor `ADDFD` placed, it
/// wakes the receiving thread, which must not preempt it (it has nothing to
/// do but wait for the next call, and the caller's next call will wake it
/// anyway); a batch thread does not preempt on wake-up, and keeps the
/// normal weight, so it is never starved. `bench/notif-floor.c` under load
/// here: 7.7 µs a round trip, 5.5 µs with the batch policy.
fn serving_policy() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: changes this thread's own policy to one of the same weight.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
}

/// Whether no process is left under the listener's filter (the kernel
/// reports hang-up then; it never comes back).
fn hung_up(listener: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd: listener,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of ours, no waiting.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & libc::POLLHUP != 0
}

/// Complete the call `id` with `reply`.
pub(super) fn respond(listener: RawFd, id: u64, reply: Reply) {
    let (val, error, flags) = match reply {
        Reply::Later => return,
        Reply::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Reply::Val(v) => (v, 0, 0),
        Reply::Err(e) => (0, -e, 0),
        Reply::Fd { fd, cloexec } => {
            let add = libc::seccomp_notif_addfd {
                id,
                flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
                srcfd: fd.as_raw_fd() as u32,
                newfd: 0,
                newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
            };
            // SAFETY: add is a valid seccomp_notif_addfd. With FLAG_SEND the
            // kernel completes the call with the new fd's number; if the
            // caller is gone there is nothing more to do.
            let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD as _, &add) };
            if r >= 0 || last_errno() == libc::ENOENT {
                return;
            }
            (0, -last_errno(), 0)
        }
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: resp is a valid seccomp_notif_resp; a dead caller (ENOENT) needs nothing.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut resp) };
}

/// `renameat2` of `from` to `to` with `flags`, on their resolved directories.
fn renameat2(from: &Loc, to: &Loc, flags: u32) -> libc::c_int {
    // SAFETY: valid fds and C strings.
    unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            from.dir.fd.as_raw_fd(),
            from.cname().as_ptr(),
            to.dir.fd.as_raw_fd(),
            to.cname().as_ptr(),
            flags,
        ) as libc::c_int
    }
}

/// Undo a creation the supervisor performed at `loc` (`dir`: a `mkdir`).
fn unmake(loc: &Loc, dir: bool) {
    let flags = if dir { AT_REMOVEDIR as i32 } else { 0 };
    // SAFETY: valid fd and C string.
    unsafe { libc::unlinkat(loc.dir.fd.as_raw_fd(), loc.cname().as_ptr(), flags) };
}

/// `lstat` of `loc`: whether it names anything.
pub(super) fn exists_at(loc: &Loc) -> bool {
    lstat_at(loc).is_some()
}

/// Whether `loc` names a directory (not through a symlink).
fn is_dir_at(loc: &Loc) -> bool {
    lstat_at(loc).is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

fn lstat_at(loc: &Loc) -> Option<nix::sys::stat::FileStat> {
    nix::sys::stat::fstatat(
        Some(loc.dir.fd.as_raw_fd()),
        std::ffi::OsStr::from_bytes(&loc.name),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::creation_guard::filter::{guard_program, load_with_listener};

    /// A child under the guard's filter hands its listener over and waits;
    /// while it lives the listener has not hung up, once it is gone it has
    /// (and a serving thread stops instead of receiving `ENOENT` forever).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_listener_hangs_up_once_no_process_is_left_under_its_filter() {
        // (Not under qemu-user, where the aarch64 unit tests run in CI: it
        // loads no guest seccomp filter, so no listener comes back.)
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        let prog = guard_program();
        let (parent, child) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        // SAFETY: the child makes syscalls only (and one small allocation,
        // fork-safe in glibc) and leaves with _exit.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                // SAFETY: prctl and _exit on this process only.
                unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
                let sent = load_with_listener(&prog).is_ok_and(|l| {
                    crate::sys::fd::send_fd(child.as_raw_fd(), l.as_raw_fd()).is_ok()
                });
                if sent {
                    crate::sys::fd::read_byte(child.as_raw_fd());
                }
                // SAFETY: leaving the forked child without running destructors.
                unsafe { libc::_exit(0) };
            }
            nix::unistd::ForkResult::Parent { child: pid } => {
                drop(child);
                let listener = crate::sys::fd::recv_fd(parent.as_raw_fd()).expect("listener");
                assert!(
                    !hung_up(listener.as_raw_fd()),
                    "hung up while the child lives"
                );
                nix::unistd::write(&parent, b"g").unwrap();
                nix::sys::wait::waitpid(pid, None).unwrap();
                assert!(
                    hung_up(listener.as_raw_fd()),
                    "no hang-up after the child left"
                );
            }
        }
    }
}
