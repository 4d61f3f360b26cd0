//! Executing a plan: the shadow launch of SPEC §2.
//!
//! bubblewrap is spawned (directly, or by the egress-jail holder) with the
//! plan's arguments and numbered fds. Its stderr goes to a pipe until our shim
//! (`claude-sandbox __shim`, the first program run inside) signals on the
//! ready fd that the sandbox was built; the shim then restores the caller's
//! stderr and execs the real binary. So a failure to build the sandbox is
//! known for certain, with bubblewrap's own words, before anything runs
//! inside: a refused fresh `/proc` is retried with the host's bound read-only
//! (§4.1), any other failure stops the launch (exit 125).

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::libc;
use nix::sys::signal::{SigSet, Signal};

use crate::config::{self, Config};
use crate::error::{not_installed, setup};
use crate::plan::{self, ProcMode};
use crate::sandbox::{FdContent, Network, Rendered, RwBind, Sandbox};
use crate::{egress, launch::host, sys::inside, sys::paths, tripwire};

/// The network runtime of a launch: the open jail's pasta, or allowlist
/// mode's proxy. Prepared once, used by every attempt.
pub(crate) enum Net {
    Jail(egress::Jail),
    Proxy(egress::Proxy),
}

/// Where bubblewrap is looked for (never through `PATH`).
const BWRAP_CANDIDATES: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// The way out when the sandbox cannot be built, named in every such message:
/// never a silent fallback, an explicit operator decision instead.
pub(crate) fn escape_hatch() -> String {
    format!(
        "claude will not run unsandboxed by itself; an operator who accepts that can create {} and run {} directly",
        paths::ALLOW_UNWRAPPED,
        paths::REAL_CLAUDE
    )
}

fn is_executable_file(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The shadow: `claude ARGS…` (SPEC §2). Returns the exit status.
pub(crate) fn shadow_main(args: &[OsString]) -> anyhow::Result<i32> {
    // 1. Recursion: inside the sandbox, run the real binary directly.
    if inside::is_inside() {
        let err = Command::new(paths::REAL_CLAUDE)
            .arg0("claude")
            .args(plan::claude_args(args))
            .exec();
        return Err(not_installed(format!(
            "cannot run {}: {err}",
            paths::REAL_CLAUDE
        )));
    }
    // Signals are taken by a forwarding thread once the sandbox runs; block
    // them now, before any thread exists (children get a clear mask in pre_exec).
    forwarded_signals().thread_block()?;
    // 2. Integrity of the real binary (SPEC §5).
    crate::launch::integrity::check_launch()?;
    // 3. Configuration: compile-time path, environment on top (an override
    // that weakens the sandbox is refused unless the file allows it, and
    // then said aloud).
    let loaded = config::load(Path::new(paths::CONFIG_FILE), &config::process_env)?;
    for w in &loaded.weakened {
        eprintln!("claude-sandbox: {}", w.notice());
    }
    // 4–6.
    launch(&loaded.config, args)
}

/// `CLAUDE_CODE_PROCESS_WRAPPER` entry (SPEC §6), installed as
/// `/usr/libexec/claude-sandbox/claude-wrapper`: Claude Code runs it as
/// `claude-wrapper BINARY ARGS…` for the processes it starts from its own
/// binary. Only the pinned real binary is accepted; it is then launched
/// exactly as the shadow launches it (inside the sandbox: directly).
pub(crate) fn wrapper_main(args: &[OsString]) -> anyhow::Result<i32> {
    let Some((program, rest)) = args.split_first() else {
        return Err(crate::error::bad_input(
            "claude-wrapper: usage: claude-wrapper CLAUDE_BINARY [ARGS…]",
        ));
    };
    if !same_file(Path::new(program), Path::new(paths::REAL_CLAUDE)) {
        return Err(setup(format!(
            "claude-wrapper: refusing to launch {}: only the pinned Claude Code binary {} is launched through the sandbox wrapper",
            Path::new(program).display(),
            paths::REAL_CLAUDE
        )));
    }
    shadow_main(rest)
}

/// Whether `a` and `b` are the same file (inside the sandbox the real binary
/// is also bound at `$HOME/.local/bin/claude`).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (a.metadata(), b.metadata()) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Build the sandbox for `cfg` and run the real binary in it. Nothing it
/// started outlives it: the shadow is the child subreaper of its tree, ends
/// pasta's keeper (which waits until pasta is gone) and reaps every orphan
/// before it returns, so no process is left for the container's init.
/// However a session that ran ends (exit, crash, a signal to the shadow),
/// the tripwire then reports what it changed that runs outside (§4.8).
pub(crate) fn launch(cfg: &Config, args: &[OsString]) -> anyhow::Result<i32> {
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let bwrap = preflight()?;
    let home = crate::sys::user::identity()
        .map_err(crate::error::bad_input)?
        .home;
    host::ensure_private_state(&home)?;
    let git = host::GitIdentity::start(home.clone());
    let (first, facts) = sandbox(cfg, args, ProcMode::Fresh)?;
    let watch = first
        .workspace()
        .map(|ws| tripwire::Watch::start(&home, ws, facts.discovered));
    let mut net = None;
    let result = attempts(cfg, args, first, &bwrap, &mut net, &git);
    match net {
        // Ends pasta (its keeper waits until it is gone).
        Some(Net::Jail(j)) => drop(j),
        // Open connections close and log their lines; one line on stderr
        // if anything was refused.
        Some(Net::Proxy(p)) => p.finish(),
        None => {}
    }
    reap_orphans();
    // `Ok` only when the sandbox was built and the real binary ran.
    if let (Ok(_), Some(w)) = (&result, watch) {
        w.finish();
    }
    result
}

fn attempts(
    cfg: &Config,
    args: &[OsString],
    first: Sandbox,
    bwrap: &Path,
    net: &mut Option<Net>,
    git: &host::GitIdentity,
) -> anyhow::Result<i32> {
    let mut mode = ProcMode::Fresh;
    let mut userns_lock = true;
    let mut replans = 0;
    let mut next = Some(first);
    loop {
        let mut sb = match next.take() {
            Some(sb) => sb,
            None => sandbox(cfg, args, mode)?.0,
        };
        if !userns_lock {
            sb.nested_userns = true;
        }
        match (&sb.network, &*net) {
            (Network::Jail(_), Some(Net::Jail(_)))
            | (Network::Allowlist(_), Some(Net::Proxy(_))) => {}
            (Network::Jail(_), _) => *net = Some(Net::Jail(egress::Jail::prepare()?)),
            (Network::Allowlist(p), _) => *net = Some(Net::Proxy(egress::Proxy::prepare(p)?)),
            (Network::Host, _) => {}
        }
        match execute(bwrap, &sb, net.as_mut(), git)? {
            Outcome::Exited(code) => return Ok(code),
            // A root launch masks what its walk found; one of those removed
            // since (a rotated log, another program's temporary file) fails
            // the build. Plan again from a fresh walk, a few times.
            Outcome::SetupFailed(_) if replans < 3 && a_root_mask_vanished(&sb) => {
                replans += 1;
            }
            // bubblewrap's own words for a refused procfs ("Can't mount proc on
            // /newroot/proc: …"); other failures naming /proc are not retried.
            Outcome::SetupFailed(msg) if mode == ProcMode::Fresh && msg.contains("mount proc") => {
                // The kernel refuses a fresh procfs here (typical in a nested
                // container); §4.1 allows the host's bound read-only.
                mode = ProcMode::HostReadOnly;
            }
            // bubblewrap's `--disable-userns` writes the sandbox's
            // /proc/sys/user/max_user_namespaces, which a Docker container
            // mounts read-only. The seccomp filter refuses CLONE_NEWUSER
            // (and clone3) on its own (decision 0007): the first lock stays,
            // the second is dropped, here only.
            Outcome::SetupFailed(msg)
                if userns_lock
                    && !sb.nested_userns
                    && !sb.seccomp.program.is_empty()
                    && msg.contains("max_user_namespaces") =>
            {
                userns_lock = false;
            }
            Outcome::SetupFailed(msg) if apparmor_restricts_userns_here() => {
                return Err(setup(format!(
                    "the sandbox could not be built: {msg}; {}",
                    apparmor_userns_fix()
                )))
            }
            Outcome::SetupFailed(msg) => {
                return Err(setup(format!(
                    "the sandbox could not be built: {msg}; run `/usr/libexec/claude-sandbox/claude-sandbox doctor` for the missing piece{}",
                    if sb.network.is_jail() { " (escape hatch for the network jail only: egress-jail = 0 in /etc/claude-sandbox.conf)" } else { "" }
                )))
            }
        }
    }
}

/// Whether a mask of the root view ([`crate::launch::rootview`]) covers a path
/// that no longer exists: bubblewrap cannot mount over it on the read-only
/// root.
fn a_root_mask_vanished(sb: &Sandbox) -> bool {
    sb.mounts.iter().any(|m| match m {
        crate::sandbox::Mount::Tmpfs { dst } | crate::sandbox::Mount::Empty { dst } => {
            crate::launch::rootview::ROOTS
                .iter()
                .any(|(root, _)| dst.starts_with(root))
                && dst.symlink_metadata().is_err()
        }
        _ => false,
    })
}

/// Reap every child left (orphans adopted as subreaper), for at most 2 s:
/// each of them dies with the sandbox already (parent-death signals).
fn reap_orphans() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
        match r {
            0 if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
            r if r > 0 => continue,
            _ => return, // ECHILD: none left (or the deadline passed)
        }
    }
}

/// The sandbox for one attempt: host facts gathered, plan built (and, in
/// test builds only, the requested mutations applied).
pub(crate) fn sandbox(
    cfg: &Config,
    args: &[OsString],
    mode: ProcMode,
) -> anyhow::Result<(Sandbox, plan::Facts)> {
    let facts = host::gather(cfg, mode)?;
    let mut sb = plan::build(cfg, &facts, args)?;
    crate::testhooks::apply(&mut sb, &facts.home, &facts.env);
    Ok((sb, facts))
}

/// Everything a launch needs that is not ours to create: bubblewrap, our
/// installed files, user namespaces. Returns bubblewrap's path.
pub(crate) fn preflight() -> anyhow::Result<PathBuf> {
    for (path, what) in [
        (paths::REAL_CLAUDE, "the real Claude Code binary"),
        (paths::SELF_BIN, "claude-sandbox's own binary"),
        (paths::GITCONFIG, "the curated git config"),
    ] {
        if !Path::new(path).exists() {
            return Err(not_installed(format!(
                "{path} ({what}) is missing; install the sandbox: sudo claude-sandbox install"
            )));
        }
    }
    let bwrap = BWRAP_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| is_executable_file(p))
        .ok_or_else(|| {
            setup(format!("bubblewrap (bwrap) is not installed; install it: sudo apt-get install bubblewrap (Debian/Ubuntu). {}", escape_hatch()))
        })?;
    userns_available()?;
    Ok(bwrap)
}

/// Refuse early, with the fix, where the kernel forbids user namespaces.
pub(crate) fn userns_available() -> anyhow::Result<()> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Err(setup(format!("user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0); enable them: sudo sysctl -w user.max_user_namespaces=15000. {}", escape_hatch())));
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0")
        && !nix::unistd::geteuid().is_root()
    {
        return Err(setup(format!("unprivileged user namespaces are disabled (/proc/sys/kernel/unprivileged_userns_clone is 0); enable them: sudo sysctl -w kernel.unprivileged_userns_clone=1. {}", escape_hatch())));
    }
    Ok(())
}

/// The sysctl with which AppArmor (Ubuntu 24.04 and later by default)
/// confines the user namespaces an unprivileged, unconfined program creates:
/// no capabilities inside, so bubblewrap cannot build a sandbox unless an
/// AppArmor profile for bubblewrap allows `userns`.
pub(crate) const APPARMOR_USERNS_SYSCTL: &str =
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";

/// Whether AppArmor's restriction applies to this caller: `value` is the
/// sysctl's content (None where the kernel has no such file), `root` whether
/// the caller is root, whom the restriction does not confine.
pub(crate) fn apparmor_restricts_userns(value: Option<&str>, root: bool) -> bool {
    !root
        && value
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|v| v != 0)
}

/// The same question asked of this machine and this process.
pub(crate) fn apparmor_restricts_userns_here() -> bool {
    let value = std::fs::read_to_string(APPARMOR_USERNS_SYSCTL).ok();
    apparmor_restricts_userns(value.as_deref(), nix::unistd::geteuid().is_root())
}

/// The fix for AppArmor's restriction, in one line: a profile that lets
/// bubblewrap alone create user namespaces, or (wider) lifting the restriction.
pub(crate) fn apparmor_userns_fix() -> String {
    format!(
        "AppArmor restricts unprivileged user namespaces ({APPARMOR_USERNS_SYSCTL} is 1, Ubuntu 24.04's default), so bubblewrap cannot build a sandbox for a non-root user unless an AppArmor profile allows it; \
         allow bubblewrap alone: printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\nprofile bwrap /usr/bin/bwrap flags=(unconfined) {{\\n  userns,\\n}}\\n' | sudo tee /etc/apparmor.d/bwrap && sudo apparmor_parser -r /etc/apparmor.d/bwrap \
         (or, wider, lift the restriction for every program: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, which reopens to all of them the kernel surface it closes)"
    )
}

/// How an attempt ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The sandbox ran; the real binary's exit status (128+N for signal N).
    Exited(i32),
    /// The sandbox was never built; the builder's message.
    SetupFailed(String),
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
fn forwarded_signals() -> SigSet {
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
fn handover(r: &Rendered, mut ends: Option<egress::Ends>) -> anyhow::Result<Handover> {
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
            | FdContent::HolderReady
            | FdContent::HolderGo
            | FdContent::HolderGate
            | FdContent::ProxyChannel => ends
                .as_mut()
                .and_then(|e| e.take(content))
                .ok_or_else(|| setup(format!("internal error: no network pipe for fd {num}")))?,
        };
        h.fds.push((fd, *num));
    }
    Ok(h)
}

/// Start bubblewrap for `sb` (through the jail's holder when jailed), its
/// fds in place. Returns the child and the shadow's ends of its pipes.
fn spawn(bwrap: &Path, sb: &Sandbox, net: Option<&mut Net>) -> anyhow::Result<(Child, ShadowEnds)> {
    let r = crate::sandbox::render(sb);
    let (mut cmd, ends) = match (net, &sb.network, r.holder, r.proxy_channel) {
        (Some(Net::Jail(j)), Network::Jail(jn), Some(holder), _) => {
            let (c, e) = j.command(bwrap, &r, holder, jn)?;
            (c, Some(e))
        }
        (Some(Net::Proxy(p)), Network::Allowlist(_), _, Some(channel)) => {
            let (c, e) = p.command(bwrap, &r, channel)?;
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
    };
    let h = handover(&r, ends)?;
    let (err_r, err_w) = cloexec_pipe()?;
    cmd.env_clear().stderr(Stdio::from(err_w));
    let map: Vec<(RawFd, RawFd)> = h.fds.iter().map(|(fd, n)| (fd.as_raw_fd(), *n)).collect();
    unsafe {
        cmd.pre_exec(move || {
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
    let child = cmd
        .spawn()
        .map_err(|e| setup(format!("cannot start {}: {e}", bwrap.display())))?;
    // Our copies of the child's ends close here (the ready pipe's write end
    // among them, so EOF on it means the shim never signalled).
    drop(cmd);
    let ready = h
        .ready
        .ok_or_else(|| setup("internal error: no ready pipe in the rendered sandbox"))?;
    Ok((
        child,
        ShadowEnds {
            ready,
            err: err_r,
            git: h.git,
        },
    ))
}

/// Run one attempt of `sb`.
pub(crate) fn execute(
    bwrap: &Path,
    sb: &Sandbox,
    mut net: Option<&mut Net>,
    git: &host::GitIdentity,
) -> anyhow::Result<Outcome> {
    let (mut child, ends) = spawn(bwrap, sb, net.as_deref_mut())?;
    let mut jail = match net {
        Some(Net::Jail(j)) => Some(j),
        Some(Net::Proxy(p)) => {
            // The holder sends the listener before it execs bubblewrap; if
            // it fails instead, its message is bubblewrap's (below).
            p.serve();
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
pub(crate) fn sandbox_program(bwrap: nix::unistd::Pid) -> Option<nix::unistd::Pid> {
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
pub(crate) fn recheck(b: &RwBind) -> anyhow::Result<OwnedFd> {
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

/// `claude-sandbox __shim STDERR_FD READY_FD GATE_FD|- GUARD_FD|- -- PROGRAM ARGS…`:
/// the first program inside the sandbox. With the egress jail, waits on
/// GATE_FD until the jail's routes are locked (EOF: they never were; nothing
/// runs). With GUARD_FD (the protected paths), forks the creation guard's
/// supervisor (src/supervisor.rs) and runs PROGRAM under its filter. Then
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::RwBind;

    #[test]
    fn apparmor_restriction_read_from_the_sysctl() {
        // Restricted: a non-root caller where the sysctl is on.
        assert!(apparmor_restricts_userns(Some("1\n"), false));
        assert!(apparmor_restricts_userns(Some("2"), false));
        // Root is not confined; off, absent (older kernels, Debian) or unreadable is no restriction.
        assert!(!apparmor_restricts_userns(Some("1\n"), true));
        assert!(!apparmor_restricts_userns(Some("0\n"), false));
        assert!(!apparmor_restricts_userns(None, false));
        assert!(!apparmor_restricts_userns(Some(""), false));
        assert!(!apparmor_restricts_userns(Some("garbage"), false));
        // The fix names both ways out, on one line.
        let fix = apparmor_userns_fix();
        assert!(!fix.contains('\n'), "{fix}");
        for needle in [
            APPARMOR_USERNS_SYSCTL,
            "/etc/apparmor.d/bwrap",
            "userns,",
            "apparmor_parser -r",
            "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
        ] {
            assert!(fix.contains(needle), "{needle} missing: {fix}");
        }
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
    fn a_vanished_root_mask_is_noticed() {
        // Under /var, one of the root view's walked directories.
        let dir = PathBuf::from(format!("/var/tmp/csb-vanish-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut sb =
            crate::plan::build(&Config::default(), &crate::plan::fixtures::facts(), &[]).unwrap();
        let file = dir.join("root-only");
        std::fs::write(&file, "x").unwrap();
        sb.mounts
            .push(crate::sandbox::Mount::Empty { dst: file.clone() });
        assert!(!a_root_mask_vanished(&sb), "it exists");
        std::fs::remove_file(&file).unwrap();
        assert!(a_root_mask_vanished(&sb), "{} is gone", file.display());
        let _ = std::fs::remove_dir_all(&dir);
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
