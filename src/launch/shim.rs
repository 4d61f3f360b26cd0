//! `claude-sandbox __shim`, the first program inside the sandbox: waits for
//! the egress jail's routes, starts the creation guard's supervisor when
//! there are protected paths, tells the shadow the sandbox is built, and
//! execs the real binary.

use std::ffi::OsString;

use std::os::fd::RawFd;
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
    let (Some(err_fd), Some(ready_fd), Some(gate), Some(guard_fd)) =
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
    if let Some(guard_fd) = guard_fd {
        if let Some(status) = crate::creation_guard::guarded(guard_fd, err_fd, ready_fd) {
            return status;
        }
    }
    unsafe {
        libc::dup2(err_fd, 2);
        libc::close(err_fd);
        if guard_fd.is_none() {
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
