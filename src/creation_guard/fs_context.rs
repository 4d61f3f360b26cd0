//! The callers' file-system contexts: their umasks and working directories
//! (docs/decisions/0020 and 0021).
//!
//! PROMISES. A creation performed for a caller is made under the umask the
//! caller has when it makes the call, never a guessed one: read from its
//! `/proc/TID/status`, or remembered from an earlier read that nothing can
//! have changed since. Unreadable, the call fails (`EIO`): a guessed 022
//! would leave what `umask 077` was meant to keep private readable. A path
//! relative to the caller's working directory is resolved from that
//! directory: opened through `/proc/TID/cwd`, or from a descriptor of it
//! kept under the same rules as a remembered mask.
//!
//! Reading costs ~6 µs a creation (the kernel formats the whole status file
//! to give one field), and the jump through `/proc/TID/cwd` ~2 µs, so a
//! read is remembered, per thread, while all of these hold:
//!
//! - no call that changes a file-system context (`umask(2)`, `chdir(2)`,
//!   `fchdir(2)`) has been made anywhere in the session since it was read.
//!   The guard's filter hands every such call to the supervisor, which
//!   notes it ([`FsContexts::changing`]: everything remembered is void) and
//!   lets the kernel run it (`CONTINUE`: nothing is decided on its
//!   arguments, so nothing can change between the note and the call that
//!   matters). Until that call is known done (its thread has made another
//!   call, or is seen in another one, or is gone) nothing read is
//!   remembered: a read in between may still see the old context;
//! - the thread is the same task: a descriptor of its `/proc/TID`, opened
//!   before the read, still reads (a cheap file, `oom_score_adj`; it fails
//!   once the task is gone, whoever has its number since);
//! - its process had one thread when it was read. A thread that `exec`s
//!   takes its process's number, and may have had a file-system context
//!   (umask, working directory) of its own; in a process that had one
//!   thread and no such call since, every thread's context is the one read.
//!
//! The sandbox leaves no other way to change a working directory: no
//! capability for `chroot` or `pivot_root`, namespaces refused, io_uring
//! refused (`crate::seccomp`).
//!
//! Exports: [`FsContexts`] (`changing`, `seen`, `umask`, `in_cwd`,
//! `in_context`, `serial`).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, OnceLock, RwLock};

use nix::libc;

use super::resolve::{last_errno, openat, Errno};

/// What the supervisor knows of its callers' file-system contexts.
#[derive(Default)]
pub(super) struct FsContexts {
    /// Per caller thread (by its `/proc` number): its files, kept open.
    kept: RwLock<HashMap<u32, Kept>>,
    /// Numbers the kept entries (an entry replaced meanwhile is not the
    /// one a read came from).
    opened: AtomicU64,
    /// How many context-changing calls have been noted: what is remembered
    /// is good only in the epoch it was read in.
    epoch: AtomicU64,
    /// Context-changing calls let through and not yet known done.
    pending: Mutex<Vec<Pending>>,
    /// `pending`'s length, read without the lock on every notification.
    pending_n: AtomicUsize,
}

/// One caller thread's files.
struct Kept {
    serial: u64,
    /// `/proc/TID/status`: opening and closing it cost ~4 µs more than
    /// the read itself.
    status: OwnedFd,
    /// `/proc/TID/oom_score_adj`, opened before the first read: it reads
    /// (~0.4 µs) while the task it was opened on lives.
    alive: Option<OwnedFd>,
    /// The mask read and the epoch it was read in, where it may be
    /// remembered.
    known: Option<(libc::mode_t, u64)>,
    /// Its working directory (`O_PATH`), opened through `/proc/TID/cwd`
    /// in `known`'s epoch once a relative path asked for it: void with
    /// `known`.
    cwd: OnceLock<OwnedFd>,
}

impl Kept {
    /// Whether the task its files were opened on still lives.
    fn alive(&self) -> bool {
        let mut b = [0u8; 16];
        self.alive
            .as_ref()
            .is_some_and(|fd| pread(fd, &mut b).is_ok())
    }
}

/// A context-changing call let through: the caller as the listener names
/// it and as `/proc` does (if that could be learnt), and the call's number
/// as `/proc/TID/syscall` shows it.
struct Pending {
    pid: u32,
    proc_pid: Option<u32>,
    nr: i64,
}

/// How many threads' files are kept at most (up to three descriptors
/// each; the supervisor's are bounded): past it, or past what the
/// open-file limit leaves ([`kept_max`]), the set starts again.
const KEPT: usize = 128;

/// How many pending calls [`FsContexts::settled`] looks at; past it nothing is
/// remembered until they are seen done (a session cannot make every
/// creation pay for looking at thousands).
const PENDING_LOOKED_AT: usize = 8;

impl FsContexts {
    /// A `umask(2)`, `chdir(2)` or `fchdir(2)` from `pid` (`proc_pid` in
    /// `/proc`, if known), numbered `nr`, about to be let through: what was
    /// remembered is void, and nothing read is remembered until the call is
    /// known done.
    pub(super) fn changing(&self, pid: u32, proc_pid: Option<u32>, nr: i64) {
        self.seen(pid);
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.push(Pending { pid, proc_pid, nr });
        self.pending_n.store(p.len(), SeqCst);
        self.epoch.fetch_add(1, SeqCst);
    }

    /// A notification from `pid`: a context-changing call it made before
    /// is done (a thread makes one call at a time).
    pub(super) fn seen(&self, pid: u32) {
        if self.pending_n.load(SeqCst) == 0 {
            return;
        }
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.retain(|c| c.pid != pid);
        self.pending_n.store(p.len(), SeqCst);
    }

    /// The umask of the caller thread `tid` (its `/proc` number).
    pub(super) fn umask(&self, tid: u32) -> Result<libc::mode_t, Errno> {
        if let Some(mask) = self.remembered(tid) {
            return Ok(mask);
        }
        let epoch = self.epoch.load(SeqCst);
        let settled = self.settled();
        let mut buf = [0u8; 4096];
        let (n, serial) = self.read_status(tid, &mut buf);
        let status = &buf[..n];
        let mask = umask_in(status).ok_or(libc::EIO)?;
        if settled && one_thread(status) && self.epoch.load(SeqCst) == epoch {
            let mut kept = self.kept.write().unwrap_or_else(|e| e.into_inner());
            if let Some(k) = kept.get_mut(&tid).filter(|k| k.serial == serial) {
                k.known = Some((mask, epoch));
                k.cwd = OnceLock::new();
            }
        }
        Ok(mask)
    }

    /// `f` given a descriptor of the caller thread `tid`'s working
    /// directory, where its context is remembered (None otherwise: the
    /// caller resolves through `/proc` instead). Opened the first time it
    /// is asked for in the epoch its mask was read in; the task checked
    /// the same after the opening and at every use.
    pub(super) fn in_cwd<R>(&self, tid: u32, f: impl FnOnce(RawFd) -> R) -> Option<R> {
        self.in_context(tid, 0, true, |_, cwd, _| cwd.map(f))
            .flatten()
    }

    /// How many entries have been kept so far: taken before a notification
    /// is received, it tells the entries made before the call was (see
    /// [`FsContexts::in_context`]).
    pub(super) fn serial(&self) -> u64 {
        self.opened.load(SeqCst)
    }

    /// `f` given the caller thread `tid`'s remembered umask, if `cwd` is
    /// asked for a descriptor of its working directory (as
    /// [`FsContexts::in_cwd`]), and whether the task is known to be the
    /// caller, with one look at whether it lives. It is where its entry was
    /// kept up to `serial_before` (this supervisor's [`FsContexts::serial`]
    /// before the notification was received): alive now, its task was
    /// alive when the caller's notification was received, so it *is* the
    /// caller (two live tasks never share a number); asked after the
    /// caller's memory was read, that look also proves the memory read was
    /// the caller's. Otherwise (an entry kept by another thread since) the
    /// notification's id must still be checked. None where nothing holds.
    pub(super) fn in_context<R>(
        &self,
        tid: u32,
        serial_before: u64,
        cwd: bool,
        f: impl FnOnce(libc::mode_t, Option<RawFd>, bool) -> R,
    ) -> Option<R> {
        let kept = self.kept.read().ok()?;
        let (k, epoch) = self.current(&kept, tid)?;
        let (mask, _) = k.known?;
        let dir = if cwd {
            Some(self.cwd_of(k, tid, epoch)?.as_raw_fd())
        } else {
            None
        };
        k.alive().then(|| f(mask, dir, k.serial <= serial_before))
    }

    /// `k`'s working directory, opened through `/proc/TID/cwd` the first
    /// time it is asked for in `epoch` (None if it cannot be, or if a
    /// change was noted while it was being opened).
    fn cwd_of<'k>(&self, k: &'k Kept, tid: u32, epoch: u64) -> Option<&'k OwnedFd> {
        if let Some(fd) = k.cwd.get() {
            return Some(fd);
        }
        let fd = proc_file(tid, "cwd", libc::O_PATH | libc::O_DIRECTORY).ok()?;
        // A change noted while it was opened: not this epoch's.
        if epoch != self.epoch.load(SeqCst) {
            return None;
        }
        Some(k.cwd.get_or_init(|| fd))
    }

    /// The mask remembered for `tid`, if it still holds.
    fn remembered(&self, tid: u32) -> Option<libc::mode_t> {
        self.in_context(tid, 0, false, |mask, _, _| mask)
    }

    /// `tid`'s entry in `kept` and its epoch, if what it remembers is of
    /// this epoch (whether its task still lives is the caller's to ask).
    fn current<'k>(&self, kept: &'k HashMap<u32, Kept>, tid: u32) -> Option<(&'k Kept, u64)> {
        let k = kept.get(&tid)?;
        let (_, epoch) = k.known?;
        (epoch == self.epoch.load(SeqCst)).then_some((k, epoch))
    }

    /// Whether every context-changing call let through is known done;
    /// those seen done (their thread in another call, not in any, or gone)
    /// are dropped.
    fn settled(&self) -> bool {
        if self.pending_n.load(SeqCst) == 0 {
            return true;
        }
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() > PENDING_LOOKED_AT {
            return false;
        }
        p.retain(|c| !c.proc_pid.is_some_and(|t| done(t, c.nr)));
        self.pending_n.store(p.len(), SeqCst);
        p.is_empty()
    }

    /// `/proc/TID/status` read into `buf` from offset 0: the bytes read
    /// (0 if none) and the serial of the entry read through.
    fn read_status(&self, tid: u32, buf: &mut [u8]) -> (usize, u64) {
        if let Ok(kept) = self.kept.read() {
            if let Some(k) = kept.get(&tid) {
                if let Ok(n) = pread(&k.status, buf) {
                    return (n, k.serial);
                }
            }
        }
        let mut kept = self.kept.write().unwrap_or_else(|e| e.into_inner());
        kept.remove(&tid);
        if kept.len() >= kept_max() {
            kept.clear();
        }
        // Both opened before the read: the read then proves the task
        // `status` was opened on lived when `alive` was opened, so both
        // are that task's.
        let Ok(status) = proc_file(tid, "status", libc::O_RDONLY) else {
            return (0, 0);
        };
        let alive = proc_file(tid, "oom_score_adj", libc::O_RDONLY).ok();
        let n = pread(&status, buf).unwrap_or(0);
        let serial = self.opened.fetch_add(1, SeqCst) + 1;
        let k = Kept {
            serial,
            status,
            alive,
            known: None,
            cwd: OnceLock::new(),
        };
        kept.insert(tid, k);
        (n, serial)
    }
}

/// How many threads' files may be kept: [`KEPT`], or fewer where the
/// open-file limit would leave the supervisor too few for its own work (a
/// quarter of the soft limit, three descriptors a thread).
fn kept_max() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        let mut lim = libc::rlimit {
            rlim_cur: 1024,
            rlim_max: 1024,
        };
        // SAFETY: getrlimit fills `lim` (left as set if it fails).
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        let room = usize::try_from(lim.rlim_cur / 4 / 3).unwrap_or(KEPT);
        room.clamp(1, KEPT)
    })
}

/// Whether a pending call numbered `nr` of thread `tid` is done:
/// the thread is gone, or `/proc/TID/syscall` shows it in no call or in
/// another one. Not readable otherwise (a thread that made itself not
/// dumpable): not known done.
fn done(tid: u32, nr: i64) -> bool {
    let gone = |e: Errno| matches!(e, libc::ENOENT | libc::ESRCH);
    let fd = match proc_file(tid, "syscall", libc::O_RDONLY) {
        Ok(fd) => fd,
        Err(e) => return gone(e),
    };
    let mut b = [0u8; 32];
    match pread(&fd, &mut b) {
        Ok(n) => in_another_call(&b[..n], nr),
        Err(e) => gone(e),
    }
}

/// Whether a `/proc/TID/syscall` text shows a thread out of the call
/// numbered `nr`: in none (`-1 …`) or in another; `running` (or anything
/// else) says nothing.
fn in_another_call(text: &[u8], nr: i64) -> bool {
    let first = text
        .split(|b| b.is_ascii_whitespace())
        .next()
        .unwrap_or(b"");
    std::str::from_utf8(first)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .is_some_and(|n| n != nr)
}

/// Thread `tid`'s `/proc/TID/NAME`, opened with `flags`.
fn proc_file(tid: u32, name: &str, flags: i32) -> Result<OwnedFd, Errno> {
    let path = format!("/proc/{tid}/{name}");
    openat(libc::AT_FDCWD, path.as_bytes(), flags, 0)
}

/// `fd` read into `buf` from offset 0: the bytes read (at least one).
fn pread(fd: &OwnedFd, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: buf is ours for the read; fd is a descriptor we hold.
    let n = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    match usize::try_from(n) {
        Ok(0) => Err(libc::EIO),
        Ok(n) => Ok(n),
        Err(_) => Err(last_errno()),
    }
}

/// The `Umask:` field of a `/proc/PID/status` text.
fn umask_in(status: &[u8]) -> Option<libc::mode_t> {
    let field = b"\nUmask:\t";
    let at = status.windows(field.len()).position(|w| w == field)? + field.len();
    let rest = &status[at..];
    let n = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 {
        return None;
    }
    rest[..n].iter().try_fold(0, |v: libc::mode_t, d| {
        Some(v.checked_mul(8)? + libc::mode_t::from(d - b'0'))
    })
}

/// Whether a `/proc/PID/status` text says the process has one thread.
fn one_thread(status: &[u8]) -> bool {
    status.windows(12).any(|w| w == b"\nThreads:\t1\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    /// A `sleep` with a umask of its own (this process's is shared by every
    /// test thread: not ours to change): its thread's number and the
    /// number of the call it sleeps in, as `/proc/TID/syscall` shows it
    /// (the machine's own `sleep`, also where these tests run under qemu).
    fn sleeper(mask: libc::mode_t) -> (std::process::Child, u32, i64) {
        sleeper_in(mask, Path::new("/"))
    }

    /// The same, working in `dir`.
    fn sleeper_in(mask: libc::mode_t, dir: &Path) -> (std::process::Child, u32, i64) {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("20").current_dir(dir);
        // SAFETY: umask is async-signal-safe and sets the child's alone.
        unsafe {
            cmd.pre_exec(move || {
                libc::umask(mask);
                Ok(())
            })
        };
        let mut child = cmd.spawn().unwrap();
        let tid = child.id();
        // Asleep in its sleep, not in a call of its start (a busy machine
        // may show one): the same call twice, 10 ms apart.
        let mut before = None;
        for _ in 0..500 {
            let read = |f: &str| std::fs::read_to_string(format!("/proc/{tid}/{f}"));
            let comm = read("comm").unwrap_or_default();
            let nr = read("syscall").unwrap_or_default();
            let nr = nr.split_whitespace().next().and_then(|n| n.parse().ok());
            if let (true, Some(nr)) = (comm.trim() == "sleep", nr) {
                if before == Some(nr) {
                    return (child, tid, nr);
                }
                before = Some(nr);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("sleep {tid} never slept");
    }

    #[test]
    fn the_umask_is_read_never_guessed() {
        let (mut child, tid, _) = sleeper(0o027);
        let u = FsContexts::default();
        let read = u.umask(tid);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(read, Ok(0o027));
        // A thread that is not there (pids stop below 2^22): no guess.
        assert_eq!(u.umask(1 << 23), Err(libc::EIO));
    }

    #[test]
    fn a_mask_is_remembered_only_while_nothing_can_have_changed_it() {
        let (mut child, tid, nr) = sleeper(0o027);
        let u = FsContexts::default();
        assert_eq!(u.umask(tid), Ok(0o027));
        assert_eq!(u.remembered(tid), Some(0o027));
        // A umask(2) anywhere, let through: forgotten, read again, and
        // remembered again once the call is seen done (`sleep` is in
        // another call).
        u.changing(1, Some(tid), nr + 1);
        assert_eq!(u.remembered(tid), None);
        assert_eq!(u.umask(tid), Ok(0o027));
        assert_eq!(u.remembered(tid), Some(0o027));
        // A call not known done: read, never remembered, until the thread
        // that made it is seen in another.
        u.changing(2, None, 95);
        assert_eq!(u.umask(tid), Ok(0o027));
        assert_eq!(u.remembered(tid), None);
        u.seen(2);
        assert_eq!(u.umask(tid), Ok(0o027));
        assert_eq!(u.remembered(tid), Some(0o027));
        // A thread still in the call it made (`sleep`'s, by its number).
        u.changing(3, Some(tid), nr);
        assert_eq!(u.umask(tid), Ok(0o027));
        assert_eq!(u.remembered(tid), None);
        u.seen(3);
        // Gone: nothing remembered holds, and nothing is guessed.
        assert_eq!(u.umask(tid), Ok(0o027));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(u.remembered(tid), None);
        assert_eq!(u.umask(tid), Err(libc::EIO));
    }

    #[test]
    fn a_process_of_several_threads_is_read_every_time() {
        // This test process runs the harness's threads besides this one.
        let me = u32::try_from(nix::unistd::gettid().as_raw()).unwrap();
        let u = FsContexts::default();
        assert!(u.umask(me).is_ok());
        assert_eq!(u.remembered(me), None);
        assert_eq!(u.in_cwd(me, |_| ()), None);
    }

    #[test]
    fn a_working_directory_is_kept_only_while_the_context_is_remembered() {
        let dir = std::env::temp_dir().join(format!("csb-fsctx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        let (mut child, tid, nr) = sleeper_in(0o022, &dir);
        let u = FsContexts::default();
        let cwd = |u: &FsContexts| u.in_cwd(tid, super::super::resolve::fd_path);
        // Nothing read yet: nothing kept.
        assert_eq!(cwd(&u), None);
        assert_eq!(u.umask(tid), Ok(0o022));
        let want = Some(Some(dir.as_os_str().as_bytes().to_vec()));
        assert_eq!(cwd(&u), want);
        // A change noted anywhere (a `chdir` let through): void until the
        // context is read again, the directory opened again then.
        u.changing(1, Some(tid), nr + 1);
        assert_eq!(cwd(&u), None);
        assert_eq!(u.umask(tid), Ok(0o022));
        assert_eq!(cwd(&u), want);
        // Gone: nothing kept holds.
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(cwd(&u), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn proc_syscall_texts_are_read_as_the_kernel_writes_them() {
        assert!(in_another_call(
            b"0 0x3 0x7ffc 0x1 0x0 0x0 0x0 0x7ffc 0x7f12\n",
            95
        ));
        assert!(in_another_call(b"-1 0x7ffc 0x7f12\n", 95));
        assert!(!in_another_call(
            b"95 0x12 0x0 0x0 0x0 0x0 0x0 0x7ffc 0x7f12\n",
            95
        ));
        assert!(!in_another_call(b"running\n", 95));
        assert!(!in_another_call(b"", 95));
        let status = b"Name:\tx\nUmask:\t0027\nState:\tS\nThreads:\t1\nSigQ:\t0/1\n";
        assert_eq!(umask_in(status), Some(0o027));
        assert!(one_thread(status));
        assert!(!one_thread(b"Name:\tx\nThreads:\t12\n"));
        assert_eq!(umask_in(b"Name:\tx\nUmask:\t\n"), None);
        assert_eq!(umask_in(b"Name:\tUmask:\t0022\n"), None);
    }
}
