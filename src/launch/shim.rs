//! `claude-sandbox __shim`, the first program inside the sandbox: waits for
//! the egress jail's routes, starts the creation guard's supervisor when
//! there are protected paths, tells the shadow the sandbox is built, and
//! execs the real binary.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::libc;

/// `claude-sandbox __shim STDERR_FD READY_FD GATE_FD|- GUARD_FD|- -- PROGRAM ARGS…`:
/// the first program inside the sandbox. With the egress jail, waits on
/// GATE_FD until the jail's routes are locked (EOF: they never were; nothing
/// runs). With GUARD_FD (the protected paths), forks the creation guard's
/// supervisor (`crate::creation_guard`) and runs PROGRAM under its filter. Then
/// restores the caller's stderr, tells the shadow the sandbox is built,
/// closes every other inherited fd and execs PROGRAM.
pub(crate) fn shim_main(args: &[OsString]) -> i32 {
    let num = |i: usize| {
        args.get(i)
            .and_then(|a| a.to_str())
            .and_then(|s| s.parse::<RawFd>().ok())
    };
    let optional = |i: usize| match args.get(i).and_then(|a| a.to_str()) {
        Some("-") => Some(None),
        Some(s) => s.parse::<RawFd>().ok().map(Some),
        None => None,
    };
    let (Some(err_fd), Some(ready_fd), Some(gate), Some(guard)) =
        (num(0), num(1), optional(2), optional(3))
    else {
        eprintln!(
            "claude-sandbox: __shim is internal (usage: __shim STDERR_FD READY_FD GATE_FD|- GUARD_FD|- -- PROGRAM ARGS)"
        );
        return 2;
    };
    if args.get(4).map(|a| a.as_os_str()) != Some("--".as_ref()) || args.len() < 6 {
        eprintln!("claude-sandbox: __shim: missing `-- PROGRAM`");
        return 2;
    }
    if let Some(gate) = gate {
        if crate::sys::fd::read_byte(gate).is_none() {
            // The jail said why on this same stderr (the shadow's error pipe).
            eprintln!("egress jail: the routes were not locked; nothing was started");
            return crate::error::EXIT_SETUP;
        }
        unsafe { libc::close(gate) };
    }
    if let Some(guard) = guard {
        if let Some(status) = guarded(guard, err_fd, ready_fd) {
            return status;
        }
    }
    unsafe {
        libc::dup2(err_fd, 2);
        libc::close(err_fd);
        if guard.is_none() {
            libc::write(ready_fd, b"1".as_ptr().cast(), 1);
        }
        libc::close(ready_fd);
    }
    crate::sys::fd::close_fds_except(3, &[]);
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGQUIT, libc::SIG_DFL);
    }
    let err = Command::new(&args[5]).args(&args[6..]).exec();
    eprintln!(
        "claude-sandbox: cannot run {}: {err}",
        args[5].to_string_lossy()
    );
    127
}

/// The shim's creation guard (src/supervisor.rs): fork, the child going on
/// under the guard's filter (`None`), the parent becoming its supervisor
/// and ending with the real binary's status (`Some`). A failure is still
/// on the shadow's error pipe: the launch's (exit 125, nothing ran), never
/// a session without the guard.
fn guarded(table_fd: RawFd, err_fd: RawFd, ready_fd: RawFd) -> Option<i32> {
    use crate::creation_guard::supervisor::{
        fork_guarded, read_table, supervise, Role, Supervisor,
    };
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
    crate::sys::fd::close_fds_except(3, &[listener.as_raw_fd(), go.as_raw_fd()]);
    unsafe { libc::write(go.as_raw_fd(), b"1".as_ptr().cast(), 1) };
    drop(go);
    Some(supervise(Supervisor::new(table), listener, child))
}
