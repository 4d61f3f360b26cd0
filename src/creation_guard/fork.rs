//! The shim's side of the guard: fork into the guarded child (which loads
//! the guard's filter and hands its listener over) and the supervisor,
//! which reads the protected paths, serves the listener, forwards the
//! shadow's signals and ends with the real binary's status.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;

use super::filter::{guard_program, load_with_listener};
use super::resolve::last_errno;
use super::serve::Supervisor;
use super::table::Table;

/// Which side of [`fork_guarded`] this is.
enum Role {
    /// The child: the guard filter loaded and the supervisor serving it;
    /// go on to exec the program.
    Guarded,
    /// The parent: serve `listener` for `child`; write one byte on `go` to
    /// let the child run (drop it unsent: the child exits, nothing runs).
    Supervisor {
        listener: OwnedFd,
        child: libc::pid_t,
        go: OwnedFd,
    },
}

/// Fork into the guarded child and its supervisor. The child loads the
/// guard filter, hands its listener to the parent and waits for "go"; any
/// failure is one line naming it, and nothing is exec'd.
fn fork_guarded() -> Result<Role, String> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    let (parent_end, child_end) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| format!("creation guard: cannot make its socket: {e}"))?;
    // SAFETY: the shim is single-threaded here; the child only makes
    // syscalls before it execs or exits.
    match unsafe { nix::unistd::fork() } {
        Err(e) => Err(format!("creation guard: cannot fork its supervisor: {e}")),
        Ok(nix::unistd::ForkResult::Child) => {
            drop(parent_end);
            let listener = match load_with_listener(&guard_program()) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("creation guard: the kernel refused its seccomp listener: {e}");
                    // SAFETY: leaving the forked child without running destructors.
                    unsafe { libc::_exit(crate::error::EXIT_SETUP) };
                }
            };
            if crate::sys::fd::send_fd(child_end.as_raw_fd(), listener.as_raw_fd()).is_err() {
                // SAFETY: as above.
                unsafe { libc::_exit(crate::error::EXIT_SETUP) };
            }
            drop(listener);
            if crate::sys::fd::read_byte(child_end.as_raw_fd()).is_none() {
                // The supervisor is not serving: run nothing.
                // SAFETY: as above.
                unsafe { libc::_exit(crate::error::EXIT_SETUP) };
            }
            Ok(Role::Guarded)
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            // Not dumpable before the child can run anything: once traced,
            // a tracer stays attached whatever this becomes later.
            // SAFETY: prctl on this process only.
            unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
            drop(child_end);
            match crate::sys::fd::recv_fd(parent_end.as_raw_fd()) {
                Some(listener) => Ok(Role::Supervisor {
                    listener,
                    child: child.as_raw(),
                    go: parent_end,
                }),
                None => {
                    let _ = nix::sys::wait::waitpid(child, None);
                    Err("creation guard: the sandbox's first process could not load the guard's filter; nothing was started".into())
                }
            }
        }
    }
}

/// Signals the supervisor passes on to the real binary (the shadow sends
/// them to the sandbox's first process, which is now the supervisor).
const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT];

/// Be the supervisor of `child` until it exits; returns the exit status the
/// sandbox's first process should end with (or ends by the same signal).
fn supervise(sup: Supervisor, listener: OwnedFd, child: libc::pid_t) -> i32 {
    seal_and_hold_signals();
    let sup = start_serving(sup, listener);
    std::thread::spawn(move || forward_signals(child));
    let status = wait_for(child);
    report_refused(sup);
    // Issue #44: the configs a plain copy made, checked and put in place.
    for line in sup.asides.place_all(&sup.git) {
        eprintln!("{line}");
    }
    end_like(status)
}

/// Not dumpable, the session's subreaper, deaf to job control and
/// `SIGPIPE`; the forwarded signals blocked here, for their thread.
fn seal_and_hold_signals() {
    // SAFETY: prctl and signal calls on this process only.
    unsafe {
        // Nothing inside may trace us, read our memory or steal our fds.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        // Orphans inside stay our descendants (ptrace-scoped reads) and are reaped here.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        for s in [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU, libc::SIGPIPE] {
            libc::signal(s, libc::SIG_IGN);
        }
        // Blocked first, then default: taken by the forwarding thread,
        // never acted on here.
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        for s in FORWARDED {
            libc::signal(s, libc::SIG_DFL);
        }
    }
    // Before any thread starts: every one inherits the block.
    super::fifo_wait::hold();
}

/// The serving threads on `listener`, for as long as this process lives.
fn start_serving(sup: Supervisor, listener: OwnedFd) -> &'static Supervisor {
    let sup: &'static Supervisor = Box::leak(Box::new(sup));
    let raw = listener.as_raw_fd();
    // Wake the supervisor on the caller's CPU (Linux 6.6+; older kernels
    // refuse the flag and wake it as usual): a round trip costs less.
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
    // SAFETY: the ioctl reads a u64 of flags.
    unsafe {
        libc::ioctl(
            raw,
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
    std::mem::forget(listener);
    for _ in 0..serving_threads() {
        std::thread::spawn(move || sup.serve(raw));
    }
    sup
}

/// How many threads receive notifications: three where the supervisor may
/// run on two CPUs or more, else one. What may wait long (a FIFO's open)
/// is handed to a thread of its own besides.
///
/// Measured on this project's 2-CPU machine kind only (docs/benchmarks-history.md,
/// 2026-11-26 12:15), through the shadow, interleaved runs: one receiving
/// thread made four processes creating at once queue behind it (~200 µs a
/// creation) and a `tar -xf` of 20,000 files take 1.40 s; two, 1.08–1.18 s
/// and ~44 µs a creation in a tight loop; three, **1.08–1.12 s and ~37 µs**
/// (four processes ~85 µs); four, 1.32–1.36 s. Every waiting thread is
/// woken by each notification, so more than that cost more than they
/// serve. A `SCHED_IDLE` thread spinning during bursts (the fast path of
/// the 06:06 run) is gone: a runnable idle-policy thread waits for a CPU
/// the machine never leaves idle under load, and the session's end waited
/// for it (`tests/lifetime.rs`, seconds beside a parallel build); one at
/// nice 19 was measured too and not kept (decision 0024).
fn serving_threads() -> usize {
    match std::thread::available_parallelism().map_or(1, |n| n.get()) {
        1 => 1,
        _ => 3,
    }
}

/// Reap until `child` exits (orphans inside are reaped on the way); its
/// wait status.
fn wait_for(child: libc::pid_t) -> i32 {
    loop {
        let mut st = 0;
        // SAFETY: waitpid fills st.
        let pid = unsafe { libc::waitpid(-1, &mut st, 0) };
        if pid == child {
            return st;
        }
        if pid < 0 && last_errno() != libc::EINTR {
            return 0;
        }
    }
}

/// One line naming the protected paths a call tried to create, if any.
fn report_refused(sup: &Supervisor) {
    let refused = sup.refused();
    if !refused.is_empty() {
        eprintln!(
            "claude-sandbox: refused to create {} protected path{} (they would run outside the sandbox): {}",
            refused.len(),
            if refused.len() == 1 { "" } else { "s" },
            refused.join(", ")
        );
    }
}

/// End as the real binary did: by the same signal, or with its status.
fn end_like(status: i32) -> i32 {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: end this process by the same signal, as the real binary did.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        return 128 + sig;
    }
    libc::WEXITSTATUS(status)
}

fn forward_signals(child: libc::pid_t) {
    // SAFETY: sigwaitinfo on the blocked forwarded set; kill of our child.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        loop {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigwaitinfo(&set, &mut info);
            if sig < 0 {
                continue;
            }
            // From the terminal, the whole foreground group got it already.
            if info.si_code == libc::SI_KERNEL && matches!(sig, libc::SIGINT | libc::SIGQUIT) {
                continue;
            }
            libc::kill(child, sig);
        }
    }
}

/// The protected paths a launch guards: `paths` read from the shim's fd.
fn read_table(fd: RawFd) -> Result<Table, String> {
    use std::io::Read;
    // SAFETY: the fd is ours, handed over by bubblewrap.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| format!("creation guard: cannot read the protected paths: {e}"))?;
    let crate::sandbox::guard_list::GuardList { paths, held, folds } =
        crate::sandbox::guard_list::decode(&bytes);
    let mut table = Table::new(&paths);
    table.folds = folds;
    // Looked at before anything of the session runs: each held copy where
    // the launch bound it.
    table.held_hooks = held
        .iter()
        .filter_map(|p| nix::sys::stat::stat(p).ok())
        .map(|st| (st.st_dev, st.st_ino))
        .collect();
    // The git directories the launch found (each `hooks` is held, each
    // `commondir` protected): their work trees are recorded at the start.
    table.gitdirs = held
        .iter()
        .chain(
            paths
                .iter()
                .filter(|p| p.file_name() == Some("commondir".as_ref())),
        )
        .filter_map(|p| p.parent())
        .map(|g| std::os::unix::ffi::OsStrExt::as_bytes(g.as_os_str()).to_vec())
        .collect();
    Ok(table)
}

/// The shim's creation guard: fork, the child going on
/// under the guard's filter (`None`), the parent becoming its supervisor
/// and ending with the real binary's status (`Some`). A failure is still
/// on the shadow's error pipe: the launch's (exit 125, nothing ran), never
/// a session without the guard.
pub(crate) fn guarded(
    table_fd: RawFd,
    err_fd: RawFd,
    ready_fd: RawFd,
    notices_fd: Option<RawFd>,
) -> Option<i32> {
    let role = read_table(table_fd).and_then(|t| Ok((t, fork_guarded()?)));
    let (table, listener, child, go) = match role {
        Err(e) => {
            eprintln!("{e}");
            return Some(crate::error::EXIT_SETUP);
        }
        Ok((_, Role::Guarded)) => return None,
        Ok((
            table,
            Role::Supervisor {
                listener,
                child,
                go,
            },
        )) => (table, listener, child, go),
    };
    unsafe {
        libc::dup2(err_fd, 2);
        libc::close(err_fd);
        libc::write(ready_fd, b"1".as_ptr().cast(), 1);
        libc::close(ready_fd);
    }
    // The caller's terminal and pipes are the real binary's.
    if let Ok(null) = File::options().read(true).write(true).open("/dev/null") {
        unsafe {
            libc::dup2(null.as_raw_fd(), 0);
            libc::dup2(null.as_raw_fd(), 1);
        }
    }
    let keep = [
        listener.as_raw_fd(),
        go.as_raw_fd(),
        notices_fd.unwrap_or(-1),
    ];
    crate::sys::fd::close_fds_except(3, &keep);
    unsafe { libc::write(go.as_raw_fd(), b"1".as_ptr().cast(), 1) };
    drop(go);
    // SAFETY: the shim handed this descriptor over for the supervisor alone.
    let notices = notices_fd.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
    Some(supervise(Supervisor::new(table, notices), listener, child))
}
