//! `claude-sandbox __shim`, the first program inside the sandbox: waits for
//! the egress jail's routes, starts the creation guard's supervisor when
//! there are protected paths, tells the shadow the sandbox is built, and
//! execs the real binary.

use std::ffi::OsString;

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::libc;

/// The terminal's signals bubblewrap and the shim run with ignored, by the
/// names `ignore=` and [`crate::plan::Facts::ignored_at_launch`] give them.
pub(super) const TERMINAL_SIGNALS: [(&str, libc::c_int); 2] =
    [("INT", libc::SIGINT), ("QUIT", libc::SIGQUIT)];

/// `claude-sandbox __shim STDERR_FD READY_FD GATE_FD|- GUARD_FD|- [ignore=INT,QUIT] [notices=FD] -- PROGRAM ARGS…`:
/// the first program inside the sandbox. With the egress jail, waits on
/// GATE_FD until the jail's routes are locked (EOF: they never were; nothing
/// runs). With GUARD_FD (the protected paths), forks the creation guard's
/// supervisor (`crate::creation_guard`) and runs PROGRAM under its filter. Then
/// restores the caller's stderr, tells the shadow the sandbox is built,
/// closes every other inherited fd and execs PROGRAM with SIGINT and
/// SIGQUIT as the launcher had them: ignored where `ignore=` names them
/// (bubblewrap and the shim ran with both ignored), else at their defaults.
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
            "claude-sandbox: __shim is internal (usage: __shim STDERR_FD READY_FD GATE_FD|- GUARD_FD|- [ignore=INT,QUIT] -- PROGRAM ARGS)"
        );
        return 2;
    };
    let Some((ignored, notices, program)) = options(args) else {
        return 2;
    };
    if args.get(program - 1).map(|a| a.as_os_str()) != Some("--".as_ref()) || args.len() <= program
    {
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
        if let Some(status) = crate::creation_guard::guarded(guard_fd, err_fd, ready_fd, notices) {
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
    for (_, sig) in TERMINAL_SIGNALS {
        let how = if ignored.contains(&sig) {
            libc::SIG_IGN
        } else {
            libc::SIG_DFL
        };
        // SAFETY: a disposition for the program about to be executed.
        unsafe { libc::signal(sig, how) };
    }
    let err = Command::new(&args[program])
        .args(&args[program + 1..])
        .exec();
    eprintln!(
        "claude-sandbox: cannot run {}: {err}",
        args[program].to_string_lossy()
    );
    127
}

/// The options between the fds and `--`: `ignore=INT,QUIT` and
/// `notices=FD` (the session's notices file, for the guard's supervisor).
/// Returns them and where `PROGRAM` is; None (said) for anything else.
fn options(args: &[OsString]) -> Option<(Vec<libc::c_int>, Option<RawFd>, usize)> {
    let (mut ignored, mut notices, mut at) = (Vec::new(), None, 4);
    while let Some(opt) = args.get(at).and_then(|a| a.to_str()) {
        if let Some(list) = opt.strip_prefix("ignore=") {
            let Some(sigs) = terminal_signals(list) else {
                eprintln!("claude-sandbox: __shim: `{opt}`: expected ignore=INT, QUIT or INT,QUIT");
                return None;
            };
            ignored = sigs;
        } else if let Some(fd) = opt.strip_prefix("notices=") {
            let Ok(fd) = fd.parse::<RawFd>() else {
                eprintln!("claude-sandbox: __shim: `{opt}`: expected notices=FD");
                return None;
            };
            notices = Some(fd);
        } else {
            break;
        }
        at += 1;
    }
    Some((ignored, notices, at + 1))
}

/// `INT`, `QUIT` or `INT,QUIT` as signal numbers; None for anything else.
fn terminal_signals(list: &str) -> Option<Vec<libc::c_int>> {
    list.split(',')
        .map(|name| {
            TERMINAL_SIGNALS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, sig)| *sig)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_terminals_signals_can_be_kept_ignored() {
        assert_eq!(terminal_signals("INT"), Some(vec![libc::SIGINT]));
        assert_eq!(
            terminal_signals("INT,QUIT"),
            Some(vec![libc::SIGINT, libc::SIGQUIT])
        );
        for bad in ["", "TERM", "INT,", "int", "INT QUIT", "9"] {
            assert_eq!(terminal_signals(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_bad_ignore_list_runs_nothing() {
        let args: Vec<OsString> = ["2", "2", "-", "-", "ignore=TERM", "--", "/bin/true"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(shim_main(&args), 2);
    }
}
