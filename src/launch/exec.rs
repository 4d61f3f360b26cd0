//! Executing one attempt of a plan. bubblewrap is spawned (directly, or by
//! the egress-jail holder) with the plan's arguments and numbered fds
//! (handed over here, read-write roots re-checked just before exec, §4.3).
//! Its stderr goes to a pipe until our shim (`claude-sandbox __shim`, the
//! first program run inside) signals on the ready fd that the sandbox was
//! built; the shim then restores the caller's stderr and execs the real
//! binary. So a failure to build the sandbox is known for certain, with
//! bubblewrap's own words, before anything runs inside. The shadow forwards
//! the signals it receives to the sandbox meanwhile.

use std::borrow::Cow;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::libc;
use nix::sys::signal::{SigSet, Signal};

use super::host;
use super::premask::PreMasks;
use crate::egress;
use crate::error::setup;
use crate::sandbox::{FdContent, Network, Rendered, RwBind, Sandbox};

/// The network runtime of a launch: the open jail's pasta, or allowlist
/// mode's proxy. Prepared once, used by every attempt.
pub(super) enum Net {
    Jail(egress::Jail),
    Proxy(egress::Proxy),
}

/// How an attempt ended.
#[derive(Debug)]
pub(super) enum Outcome {
    /// The sandbox ran; the real binary's exit status (128+N for signal N).
    Exited(i32),
    /// The sandbox was never built; the builder's message.
    SetupFailed(String),
    /// The child could not make the root view's file masks itself
    /// ([`super::premask`]); nothing was started. Try again without.
    PreMaskRefused,
}

fn cloexec_pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(OFlag::O_CLOEXEC)?)
}

/// A pipe holding `bytes`, written before the spawn (nobody reads it yet).
/// Most contents are small (seccomp program, resolv.conf, the launch
/// record); the managed settings may hold up to [`crate::sys::files::LIMIT`], so
/// the pipe grows to fit what a default pipe (64 KiB) would not.
fn data_pipe(bytes: &[u8]) -> anyhow::Result<OwnedFd> {
    let (r, w) = cloexec_pipe()?;
    if bytes.len() > DEFAULT_PIPE_SIZE {
        let got = fcntl(w.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(bytes.len() as i32))
            .map_err(|e| crate::error::setup(format!("cannot hand {} bytes to bubblewrap through a pipe: {e} (see /proc/sys/fs/pipe-max-size)", bytes.len())))?;
        if (got as usize) < bytes.len() {
            return Err(crate::error::setup(format!(
                "cannot hand {} bytes to bubblewrap: the pipe holds only {got}",
                bytes.len()
            )));
        }
    }
    File::from(w).write_all(bytes)?;
    Ok(r)
}

/// What a new pipe holds before it would block a writer (16 pages).
const DEFAULT_PIPE_SIZE: usize = 64 << 10;

/// Signals the shadow forwards to the sandbox (terminal-generated SIGINT and
/// SIGQUIT reach it directly through the shared process group).
pub(super) fn forwarded_signals() -> SigSet {
    let mut s = SigSet::empty();
    for sig in [
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
    ] {
        s.add(sig);
    }
    s
}

/// The shadow's ends of one attempt's pipes.
struct ShadowEnds {
    /// The shim writes one byte here once the sandbox is built.
    ready: OwnedFd,
    /// bubblewrap's stderr (and the shim's, until it restores the caller's).
    err: OwnedFd,
    /// Where the git config goes once the identity is known, with or without forge helpers.
    git: Option<(OwnedFd, bool)>,
}

/// Every fd of the rendered table, opened: (fd, number in the child).
struct Handover {
    fds: Vec<(OwnedFd, RawFd)>,
    ready: Option<OwnedFd>,
    git: Option<(OwnedFd, bool)>,
}

/// Open what each numbered fd of `r` holds. Read-write roots are checked
/// again here (§4.3); the jail's pipe ends come from `ends`.
fn handover(
    r: &Rendered,
    mut ends: Option<egress::Ends>,
    notices: Option<&crate::notices::SessionFile>,
) -> anyhow::Result<Handover> {
    let mut h = Handover {
        fds: Vec::new(),
        ready: None,
        git: None,
    };
    for (num, content) in &r.fds {
        let fd = match content {
            FdContent::Bytes(bytes) => data_pipe(bytes)?,
            FdContent::GitConfig { forge } => {
                let (rd, wr) = cloexec_pipe()?;
                h.git = Some((wr, *forge));
                rd
            }
            FdContent::Checked(b) => recheck(b)?,
            FdContent::NoticesBind | FdContent::NoticesWriter => {
                let n = notices.ok_or_else(|| {
                    setup(format!("internal error: no notices file for fd {num}"))
                })?;
                if matches!(content, FdContent::NoticesBind) {
                    n.reader()?
                } else {
                    n.writer()?
                }
            }
            FdContent::ShimStderr => {
                let fd = nix::unistd::dup(2).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })?;
                fcntl(fd.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
                fd
            }
            FdContent::ShimReady => {
                let (rd, wr) = cloexec_pipe()?;
                h.ready = Some(rd);
                wr
            }
            FdContent::JailGate
            | FdContent::HolderJoin
            | FdContent::HolderGo
            | FdContent::HolderGate
            | FdContent::ProxyChannel
            | FdContent::InwardChannel => ends
                .as_mut()
                .and_then(|e| e.take(content))
                .ok_or_else(|| setup(format!("internal error: no network pipe for fd {num}")))?,
        };
        h.fds.push((fd, *num));
    }
    Ok(h)
}

/// Start bubblewrap for `sb` (through the jail's holder when jailed), its
/// fds in place, the file masks of `pre` made first. Returns the child and
/// the shadow's ends of its pipes, or (`Ok(Err)`) why nothing was started:
/// the child could not make the masks of `pre`, or the jail's namespace
/// owner failed ([`egress::StepFailed`], reported as bubblewrap's failure).
fn spawn(
    run: &mut Run<'_>,
    sb: &Sandbox,
    net: Option<&mut Net>,
    pre: Option<PreMasks>,
) -> anyhow::Result<Result<(Child, ShadowEnds), Outcome>> {
    let (bwrap, limits) = (run.bwrap, run.limits);
    let r = crate::sandbox::render(sb);
    let (mut cmd, ends) = match network_command(bwrap, sb, &r, net, run.published) {
        Ok(c) => c,
        // The jail's namespace owner failed: reported as bubblewrap's failure is.
        Err(e) => {
            return e
                .downcast::<egress::StepFailed>()
                .map(|failed| Err(Outcome::SetupFailed(failed.0)))
        }
    };
    let h = handover(&r, ends, run.notices)?;
    let (err_r, err_w) = cloexec_pipe()?;
    cmd.env_clear().stderr(Stdio::from(err_w));
    let map: Vec<(RawFd, RawFd)> = h.fds.iter().map(|(fd, n)| (fd.as_raw_fd(), *n)).collect();
    let nofile = nofile_room(&map)?;
    let premasked = pre.is_some();
    unsafe {
        cmd.pre_exec(move || {
            set_nofile(nofile.as_ref())?;
            // Into the session's pids cgroup, under its RLIMIT_NPROC (issue
            // #24): everything the sandbox runs descends from here. First,
            // before any fd is moved over the cgroup's.
            limits.enter()?;
            // The root view's file masks, where this launch makes them.
            if let Some(pre) = &pre {
                pre.enter()?;
            }
            // The shadow blocks the signals it forwards; the sandbox must start
            // with a clear mask or Ctrl-C and SIGTERM would never reach it.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Terminal-generated SIGINT/SIGQUIT reach the whole foreground
            // process group, bubblewrap included; bubblewrap ignores them so the
            // real binary (whose shim restores the defaults) decides what Ctrl-C means.
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::signal(libc::SIGQUIT, libc::SIG_IGN);
            // Die with the shadow, whatever kills it.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            for &(src, dst) in &map {
                crate::sys::fd::move_fd(src, dst)?;
            }
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(_) if premasked => return Ok(Err(Outcome::PreMaskRefused)),
        Err(e) => return Err(setup(format!("cannot start {}: {e}", bwrap.display()))),
    };
    // Our copies of the child's ends close here (the ready pipe's write end
    // among them, so EOF on it means the shim never signalled).
    drop(cmd);
    let ready = h
        .ready
        .ok_or_else(|| setup("internal error: no ready pipe in the rendered sandbox"))?;
    Ok(Ok((
        child,
        ShadowEnds {
            ready,
            err: err_r,
            git: h.git,
        },
    )))
}

/// The open-file limit to spawn the sandbox with, where the caller's soft
/// one leaves no room for the highest of the numbered fds in `map`: None
/// when it does. bubblewrap, the shim and what runs inside inherit it.
fn nofile_room(map: &[(RawFd, RawFd)]) -> anyhow::Result<Option<libc::rlimit>> {
    let top = map.iter().map(|(_, n)| *n).max().unwrap_or(2);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills `lim`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(None);
    }
    let soft = nofile_soft(top, lim.rlim_cur, lim.rlim_max).map_err(setup)?;
    Ok(soft.map(|rlim_cur| libc::rlimit {
        rlim_cur,
        rlim_max: lim.rlim_max,
    }))
}

/// In the child before its fds are moved: room for the numbered fds (up
/// to ~250), where the caller's soft open-file limit is lower.
fn set_nofile(lim: Option<&libc::rlimit>) -> std::io::Result<()> {
    match lim {
        // SAFETY: setrlimit reads `lim`; async-signal-safe.
        Some(lim) if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, lim) } != 0 => {
            Err(std::io::Error::last_os_error())
        }
        _ => Ok(()),
    }
}

/// The soft open-file limit a spawn needs to place fd number `top`, given
/// the current `soft` and `hard` ones: None when `soft` already allows it;
/// otherwise the usual default (1024), or the hard limit below that. The
/// soft limit is no boundary (any process may raise it to the hard one),
/// so raising it costs the sandbox nothing; a hard limit too low is the
/// caller's to raise.
fn nofile_soft(top: RawFd, soft: u64, hard: u64) -> Result<Option<u64>, String> {
    let need = u64::try_from(top).unwrap_or(0) + 1;
    if soft >= need {
        return Ok(None);
    }
    if hard < need {
        return Err(format!(
            "the open-file limit (hard {hard}) leaves no room for the descriptors a launch numbers up to {top}; raise it (ulimit -Hn 1024, or the container's nofile limit) and launch again"
        ));
    }
    Ok(Some(hard.min(1024).max(need)))
}

/// bubblewrap's command, started through the network runtime the sandbox
/// was planned with, and the ends the shadow hands over to it.
fn network_command(
    bwrap: &Path,
    sb: &Sandbox,
    r: &crate::sandbox::Rendered,
    net: Option<&mut Net>,
    published: &mut egress::Published,
) -> anyhow::Result<(Command, Option<egress::Ends>)> {
    Ok(match (net, &sb.network, r.holder, r.proxy_channel) {
        (Some(Net::Jail(j)), Network::Jail(jn), Some(holder), _) => {
            let (c, e) = j.command(bwrap, r, holder, jn)?;
            (c, Some(e))
        }
        (Some(Net::Proxy(p)), Network::Allowlist(_), _, Some(channel)) => {
            let (c, mut e) = p.command(bwrap, r, channel)?;
            // publish-port: the allowlist holder's connector (egress/proxy/publish.rs).
            if let Some(end) = published.attempt()? {
                e.add(FdContent::InwardChannel, end);
            }
            (c, Some(e))
        }
        (_, Network::Host, _, _) => {
            let mut c = Command::new(bwrap);
            c.args(&r.args);
            (c, None)
        }
        // Never a sandbox without the network it was planned with.
        _ => {
            return Err(setup(
                "internal error: the sandbox's network runtime is missing",
            ))
        }
    })
}

/// What every attempt at building the sandbox runs with.
pub(super) struct Run<'a> {
    pub(super) bwrap: &'a Path,
    pub(super) git: &'a host::GitIdentity,
    /// The `publish-port` listeners.
    pub(super) published: &'a mut egress::Published,
    pub(super) limits: crate::limits::Spawn,
    /// Whether the child may make the root view's file masks itself
    /// ([`super::premask`]); off once it could not.
    pub(super) premask: bool,
    /// The session's notices file (issue #44): bound read-only inside,
    /// appended to by the guard's supervisor.
    pub(super) notices: Option<&'a crate::notices::SessionFile>,
}

/// `sb` as this attempt runs it: the root view's file masks the child
/// makes itself taken out ([`PreMasks`]), and the notices file dropped
/// where this session has none (a read-only `$HOME`: nothing to bind,
/// nothing for the supervisor to append to).
fn as_run<'s>(sb: &'s Sandbox, run: &Run<'_>) -> (Cow<'s, Sandbox>, Option<PreMasks>) {
    let (mut sb, pre) = match PreMasks::split(sb, run.premask) {
        Some((rest, pre)) => (Cow::Owned(rest), Some(pre)),
        None => (Cow::Borrowed(sb), None),
    };
    if sb.notices && run.notices.is_none() {
        sb.to_mut().notices = false;
    }
    (sb, pre)
}

/// Run one attempt of `sb`.
pub(super) fn execute(
    run: &mut Run<'_>,
    sb: &Sandbox,
    mut net: Option<&mut Net>,
) -> anyhow::Result<Outcome> {
    let (sb, pre) = as_run(sb, run);
    let (mut child, ends) = match spawn(run, &sb, net.as_deref_mut(), pre)? {
        Ok(started) => started,
        Err(not_started) => return Ok(not_started),
    };
    let (git, published) = (run.git, &mut *run.published);
    let mut jail = match net {
        Some(Net::Jail(j)) => Some(j),
        Some(Net::Proxy(p)) => {
            // The holder sends the listener before it execs bubblewrap; if
            // it fails instead, its message is bubblewrap's (below).
            p.serve();
            published.serve();
            None
        }
        None => None,
    };
    // pasta's keeper started before the holder and attaches pasta as soon
    // as the holder reports; the git config is written meanwhile (bubblewrap
    // blocks on it while it builds namespaces, so the lookup costs no wall time).
    if let Some((w, forge)) = ends.git {
        let (name, email) = git.get();
        // A bubblewrap that already failed closed its end; its own message says why.
        let _ =
            File::from(w).write_all(crate::plan::gitconfig::render(name, email, forge).as_bytes());
    }
    let jail_failed = jail.as_deref_mut().and_then(|j| j.release().err());
    if let Some(e) = jail_failed {
        // bubblewrap builds the sandbox while pasta attaches. If it failed
        // first, the jail lost its namespace with it: bubblewrap's own words
        // decide (below), so a refused fresh /proc is retried as usual.
        if !matches!(child.try_wait(), Ok(Some(_))) {
            // Never SIGKILL bubblewrap mid-build: its child waits for it
            // without a parent-death signal and would hang for ever. The
            // gate stays shut (the route keeper sees "go" close), so the
            // shim exits and bubblewrap with it; nothing ran inside.
            if let Some(j) = jail {
                j.abandon();
            }
            let _ = child.wait();
            return Err(e);
        }
    }
    let mut err = File::from(ends.err);
    if !built(ends.ready) {
        let mut msg = String::new();
        let _ = err.read_to_string(&mut msg);
        let _ = child.wait();
        let msg = msg.trim().replace('\n', "; ");
        return Ok(Outcome::SetupFailed(if msg.is_empty() {
            "bubblewrap exited before the sandbox started".into()
        } else {
            msg
        }));
    }
    // Built. Relay anything bubblewrap itself still says; forward signals.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut err, &mut std::io::stderr());
    });
    forward_signals(nix::unistd::Pid::from_raw(child.id() as i32));
    let status = loop {
        match child.wait() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other?,
        }
    };
    Ok(Outcome::Exited(
        status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
    ))
}

/// Whether the shim signalled on `ready` (EOF: the sandbox was never built).
fn built(ready: OwnedFd) -> bool {
    let mut ready = File::from(ready);
    let mut byte = [0u8; 1];
    loop {
        match ready.read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other.unwrap_or(0) == 1,
        }
    }
}

/// Pass the signals the shadow receives on to the sandbox, from a thread.
fn forward_signals(bwrap: nix::unistd::Pid) {
    std::thread::spawn(move || {
        let set = forwarded_signals();
        loop {
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let raw = unsafe { libc::sigwaitinfo(set.as_ref(), &mut info) };
            let Ok(sig) = Signal::try_from(raw) else {
                continue; // EINTR
            };
            // Ctrl-C and Ctrl-\ from the terminal (si_code SI_KERNEL) already
            // reached the whole foreground process group, the real binary
            // included: forwarding them would deliver them twice. Sent by a
            // process (kill), they reach only us and must be passed on.
            let from_terminal = info.si_code == libc::SI_KERNEL;
            if matches!(sig, Signal::SIGINT | Signal::SIGQUIT) && from_terminal {
                continue;
            }
            // The real binary gets the signal itself, so it can restore the
            // terminal and save its state. Failing that, bubblewrap gets it,
            // and the sandbox dies with bubblewrap.
            let target = sandbox_program(bwrap).unwrap_or(bwrap);
            let _ = nix::sys::signal::kill(target, sig);
        }
    });
}

/// The program the sandbox runs, seen from the host: bubblewrap (our child;
/// or the jail holder, which execs it) has one child in a new PID namespace,
/// the sandbox's PID 1, whose one child is the shim, which execs the real
/// binary in place. (With the jail, bubblewrap can also still have the
/// route keeper as a child for a moment: it is not in a new PID namespace.)
pub(super) fn sandbox_program(bwrap: nix::unistd::Pid) -> Option<nix::unistd::Pid> {
    let nested_pid_ns = |p: &i32| {
        std::fs::read_to_string(format!("/proc/{p}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("NSpid:"))
                    .map(|v| v.split_whitespace().count() > 1)
            })
            .unwrap_or(false)
    };
    let mut inits = crate::sys::kernel::children(bwrap.as_raw())
        .into_iter()
        .filter(nested_pid_ns);
    let (Some(init), None) = (inits.next(), inits.next()) else {
        return None;
    };
    match crate::sys::kernel::children(init)[..] {
        [only] => Some(nix::unistd::Pid::from_raw(only)),
        _ => None,
    }
}

/// §4.3, just before exec: a read-write path must still resolve where it
/// did when the sandbox was planned. It is opened (`O_PATH`) and the fd's
/// own path checked, and bubblewrap binds the fd (`--bind-fd`), not the
/// path: so it mounts exactly the inode checked here, and a symlink swapped
/// in between aborts the launch instead of winning.
pub(super) fn recheck(b: &RwBind) -> anyhow::Result<OwnedFd> {
    let changed = |now: Option<PathBuf>| {
        setup(format!(
            "aborting: {} resolved to {} when the sandbox was planned but to {} just before launch (a symlink changed); check who is modifying it",
            b.requested.display(),
            b.resolved.display(),
            now.map_or("nothing".into(), |p| p.display().to_string())
        ))
    };
    let now = b.requested.canonicalize().ok();
    if now.as_deref() != Some(b.resolved.as_path()) {
        return Err(changed(now));
    }
    let fd = nix::fcntl::open(
        &b.resolved,
        OFlag::O_PATH | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
    .map_err(|_| changed(None))?;
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok();
    if opened.as_deref() != Some(b.resolved.as_path()) {
        return Err(changed(opened));
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::RwBind;

    #[test]
    fn a_low_open_file_limit_is_raised_to_room_for_the_numbered_fds() {
        // Room already: untouched.
        assert_eq!(nofile_soft(251, 1024, 4096), Ok(None));
        assert_eq!(nofile_soft(251, 252, 252), Ok(None));
        // Too low for fd 251: the usual default, or the hard limit below it.
        assert_eq!(nofile_soft(251, 64, 1_048_576), Ok(Some(1024)));
        assert_eq!(nofile_soft(251, 64, 300), Ok(Some(300)));
        assert_eq!(nofile_soft(251, 64, 252), Ok(Some(252)));
        // A hard limit that cannot hold it: a clear refusal naming it.
        let e = nofile_soft(251, 64, 128).unwrap_err();
        assert!(e.contains("hard 128") && e.contains("up to 251"), "{e}");
    }

    #[test]
    fn a_data_pipe_holds_the_largest_file_a_launch_passes() {
        // The managed settings can be as large as files::LIMIT; a default
        // pipe holds 64 KiB, and writing more before the spawn would block.
        for len in [0, 10, DEFAULT_PIPE_SIZE, crate::sys::files::LIMIT as usize] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let r = data_pipe(&bytes).unwrap();
            let mut back = Vec::new();
            std::io::Read::read_to_end(&mut File::from(r), &mut back).unwrap();
            assert_eq!(back.len(), len);
            assert!(back == bytes, "{len} bytes came back altered");
        }
    }

    #[test]
    fn swapped_symlink_aborts_before_exec() {
        let dir = std::env::temp_dir().join(format!("csb-recheck-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("project")).unwrap();
        std::fs::create_dir_all(dir.join("secret")).unwrap();
        let link = dir.join("ws");
        std::os::unix::fs::symlink(dir.join("project"), &link).unwrap();
        let bind = RwBind {
            requested: link.clone(),
            resolved: link.canonicalize().unwrap(),
        };
        let fd = recheck(&bind).unwrap();
        let target = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        assert_eq!(
            target,
            dir.join("project").canonicalize().unwrap(),
            "the fd pins the checked directory"
        );
        // The link now points at a masked location: the launch must not go on.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), &link).unwrap();
        let e = recheck(&bind).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_SETUP);
        assert!(
            e.to_string().contains("a symlink changed") && e.to_string().contains("secret"),
            "{e}"
        );
        // Gone entirely: also refused.
        std::fs::remove_file(&link).unwrap();
        assert!(recheck(&bind)
            .unwrap_err()
            .to_string()
            .contains("to nothing"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
