//! pasta's keeper (`claude-sandbox __pasta-keeper`, SPEC §4.7,
//! docs/decisions/0004): the shadow's child that runs pasta against the
//! route keeper's PID, adopts pasta's daemon (child subreaper) and kills it
//! when the shadow's lifeline pipe closes — on any end of the shadow,
//! `kill -9` included. [`Keeper`] is the shadow's handle on it.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use nix::fcntl::OFlag;

use super::host::missing;
use crate::error::setup;

/// The fd the keeper reads its lifeline from.
const FD_KEEPER_LIFELINE: RawFd = 3;

/// pasta's keeper (`claude-sandbox __pasta-keeper -- PASTA ARGS…`): a child
/// of the shadow that runs pasta, adopts its daemon (child subreaper) and
/// kills it when the lifeline closes. The shadow holds the lifeline's only
/// write end, so the kernel closes it however the shadow ends, `kill -9`
/// included; dropping a `Keeper` closes it and waits until pasta is gone.
#[derive(Debug)]
pub(super) struct Keeper {
    child: Child,
    lifeline: Option<OwnedFd>,
}

impl Keeper {
    /// Run pasta under a keeper; [`Keeper::wait_attached`] waits for it.
    pub(super) fn start(pasta: &[OsString], target: OwnedFd) -> anyhow::Result<Keeper> {
        let (life_r, life_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let me = std::env::current_exe()
            .map_err(|e| setup(format!("cannot find our own binary: {e}")))?;
        let mut cmd = Command::new(me);
        cmd.arg0("claude-sandbox-pasta")
            .arg("__pasta-keeper")
            .arg("--")
            .args(pasta)
            .env_clear()
            .stdin(Stdio::from(target))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let life_raw = std::os::fd::AsRawFd::as_raw_fd(&life_r);
        unsafe {
            cmd.pre_exec(move || {
                // Out of the terminal's job control: Ctrl-C, Ctrl-Z and a
                // closed terminal never reach the keeper, only the lifeline does.
                nix::libc::setsid();
                let mut empty: nix::libc::sigset_t = std::mem::zeroed();
                nix::libc::sigemptyset(&mut empty);
                nix::libc::sigprocmask(nix::libc::SIG_SETMASK, &empty, std::ptr::null_mut());
                crate::sys::fd::move_fd(life_raw, FD_KEEPER_LIFELINE)
            });
        }
        let child = cmd.spawn().map_err(|e| {
            setup(format!(
                "egress jail: cannot start pasta's keeper: {e}; reinstall: sudo claude-sandbox install"
            ))
        })?;
        drop(cmd);
        drop(life_r);
        Ok(Keeper {
            child,
            lifeline: Some(life_w),
        })
    }

    /// Wait until pasta is attached (its foreground process exited well):
    /// true; false when no namespace owner was reported (it failed and said why).
    pub(super) fn wait_attached(&mut self) -> anyhow::Result<bool> {
        let mut said = String::new();
        if let Some(out) = self.child.stdout.take() {
            let _ = std::io::BufReader::new(out).read_line(&mut said);
        }
        match said.trim() {
            "attached" => return Ok(true),
            "no-holder" => return Ok(false),
            _ => {}
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let said = err
            .lines()
            .rfind(|l| !l.trim().is_empty() && !l.contains("syslog"))
            .unwrap_or("no message")
            .trim()
            .to_string();
        Err(missing(
            &format!("pasta could not attach to the jail namespace ({said})"),
            "check that /dev/net/tun works in this container",
        ))
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // "x", then closing the lifeline: an orderly end (the sandbox is gone
        // already), so the keeper only kills pasta; its exit says pasta is
        // gone. Without the "x" (the shadow was killed) the keeper also
        // sweeps the jail. This waits until pasta is reaped: otherwise pasta
        // or its keeper would be left for the container's init to reap. Its
        // tap is persistent, so its exit does not wait for the kernel to
        // unregister the device (docs/decisions/0004).
        if let Some(l) = self.lifeline.take() {
            let _ = File::from(l).write_all(b"x");
        }
        let _ = self.child.wait();
    }
}

/// What a terminal or a process-group kill sends, ignored by the keeper
/// (and restored to the defaults for pasta).
const KEEPER_IGNORES: [i32; 5] = [
    nix::libc::SIGINT,
    nix::libc::SIGQUIT,
    nix::libc::SIGHUP,
    nix::libc::SIGTERM,
    nix::libc::SIGPIPE,
];

/// `claude-sandbox __pasta-keeper -- PASTA ARGS…` (see [`Keeper`]): reads
/// the PID to attach to from stdin (the jail's namespace owner's, which the
/// shadow writes once the owner reported it; EOF: `no-holder`),
/// appends it to pasta's arguments. Prints `attached` once pasta's
/// foreground process exited successfully (else `failed`, pasta's words on
/// stderr), then waits for the lifeline (fd 3) to close, sweeps the jail
/// unless the shadow said "x" first, and kills every child it has (pasta's
/// daemon, adopted as child subreaper). Ignores the signals a terminal or a
/// process-group kill sends: only the lifeline ends it.
pub(crate) fn keeper_main(args: &[OsString]) -> i32 {
    use nix::libc;
    let [sep, pasta, rest @ ..] = args else {
        eprintln!("__pasta-keeper is internal (usage: __pasta-keeper -- PASTA ARGS)");
        return 2;
    };
    if sep != "--" {
        eprintln!("__pasta-keeper: missing `--`");
        return 2;
    }
    unsafe {
        for sig in KEEPER_IGNORES {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::fcntl(FD_KEEPER_LIFELINE, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    let mut target = String::new();
    let _ = std::io::stdin().read_line(&mut target);
    let Ok(target) = target.trim().parse::<u32>() else {
        // The namespace owner failed (and said why to the shadow) or never ran.
        let _ = std::io::stdout().write_all(b"no-holder\n");
        return 1;
    };
    // The jail's network namespace, known for certain: the namespace owner
    // is our parent's (the shadow's) child, and its namespace is not our
    // own (the host's), so a sweep can never reach the host. It stays open
    // until we exit: the kernel hands a freed namespace's number to the
    // next namespace made anywhere, and the sweep must never reach that one.
    let jail_net = jail_namespace(target);
    let mut cmd = Command::new(pasta);
    cmd.args(rest)
        .arg(target.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    unsafe {
        cmd.pre_exec(|| {
            for sig in KEEPER_IGNORES {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let attached = match cmd.output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => {
            let _ = std::io::stderr().write_all(&out.stderr);
            false
        }
        Err(e) => {
            eprintln!("cannot run {}: {e}", Path::new(pasta).display());
            false
        }
    };
    let _ = std::io::stdout().write_all(if attached { b"attached\n" } else { b"failed\n" });
    let _ = std::io::stdout().flush();
    // Nothing more to say: close stdout and stderr so the shadow's reads end.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let null = std::os::fd::AsRawFd::as_raw_fd(&null);
        unsafe {
            libc::dup2(null, 1);
            libc::dup2(null, 2);
        }
    }
    // Block until the shadow closes its end or dies (EOF either way).
    let orderly = crate::sys::fd::read_byte(FD_KEEPER_LIFELINE) == Some(b'x');
    if !orderly {
        if let Some(net) = &jail_net {
            sweep_namespace(net);
        }
    }
    reap_all_children();
    if attached {
        0
    } else {
        1
    }
}

/// The jail's network namespace, held open: the namespace of the jail's
/// namespace owner `pid`, if it is ours: its parent is the shadow (our own
/// parent), and it is not the namespace we run in. Checked after opening,
/// so a PID reused in between is never taken for the owner.
fn jail_namespace(pid: u32) -> Option<File> {
    let ppid = |p: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let net = File::open(format!("/proc/{pid}/ns/net")).ok()?;
    if ppid(pid)? != nix::unistd::getppid().as_raw() as u32 {
        return None;
    }
    let ours = std::fs::metadata("/proc/self/ns/net").ok()?;
    let theirs = net.metadata().ok()?;
    (identity(&theirs) != identity(&ours)).then_some(net)
}

/// A namespace's identity: unique among the namespaces alive.
fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

/// The shadow died without an orderly end (`kill -9`): kill every process
/// in the jail's network namespace `net` (held open, so its identity cannot
/// pass to another namespace meanwhile), which is the whole sandbox.
/// bubblewrap alone does not cover this: killed while it builds the
/// sandbox, its child waits for it with no parent-death signal set yet,
/// for ever.
fn sweep_namespace(net: &File) {
    let Ok(net) = net.metadata().map(|m| identity(&m)) else {
        return;
    };
    let me = std::process::id();
    for _ in 0..10 {
        let mut found = false;
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let in_jail =
                std::fs::metadata(format!("/proc/{pid}/ns/net")).is_ok_and(|m| identity(&m) == net);
            if in_jail {
                unsafe { nix::libc::kill(pid as i32, nix::libc::SIGKILL) };
                found = true;
            }
        }
        if !found {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Kill every child of this (single-threaded) process and reap them all.
fn reap_all_children() {
    use nix::libc;
    for pid in crate::sys::kernel::children(std::process::id() as i32) {
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    loop {
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) };
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
}
