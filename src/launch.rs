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
use std::process::{Command, Stdio};

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::libc;
use nix::sys::signal::{SigSet, Signal};

use crate::config::{self, Config};
use crate::error::{not_installed, setup};
use crate::plan::{self, Plan, ProcMode};
use crate::{host, inside, jail, paths};

/// Where bubblewrap is looked for (never through `PATH`).
const BWRAP_CANDIDATES: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// The way out when the sandbox cannot be built, named in every such message:
/// never a silent fallback, an explicit operator decision instead.
pub fn escape_hatch() -> String {
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
pub fn shadow_main(args: &[OsString]) -> anyhow::Result<i32> {
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
    crate::integrity::check_launch()?;
    // 3. Configuration: compile-time path, environment on top.
    let cfg = config::load(Path::new(paths::CONFIG_FILE), &config::process_env)?;
    // 4–6.
    launch(&cfg, args)
}

/// `CLAUDE_CODE_PROCESS_WRAPPER` entry (SPEC §6), installed as
/// `/usr/libexec/claude-sandbox/claude-wrapper`: Claude Code runs it as
/// `claude-wrapper BINARY ARGS…` for the processes it starts from its own
/// binary. Only the pinned real binary is accepted; it is then launched
/// exactly as the shadow launches it (inside the sandbox: directly).
pub fn wrapper_main(args: &[OsString]) -> anyhow::Result<i32> {
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
pub fn launch(cfg: &Config, args: &[OsString]) -> anyhow::Result<i32> {
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let bwrap = preflight()?;
    let home = host::identity()?.home;
    let git = host::GitIdentity::start(home);
    let mut jail = if cfg.egress_jail {
        Some(jail::Jail::prepare(cfg)?)
    } else {
        None
    };
    let result = attempts(cfg, args, &bwrap, &mut jail, &git);
    drop(jail);
    reap_orphans();
    result
}

fn attempts(
    cfg: &Config,
    args: &[OsString],
    bwrap: &Path,
    jail: &mut Option<jail::Jail>,
    git: &host::GitIdentity,
) -> anyhow::Result<i32> {
    let mut mode = ProcMode::Fresh;
    loop {
        let plan = build(cfg, args, mode, jail.as_ref())?;
        match execute(bwrap, &plan, jail.as_mut(), git)? {
            Outcome::Exited(code) => return Ok(code),
            // bubblewrap's own words for a refused procfs ("Can't mount proc on
            // /newroot/proc: …"); other failures naming /proc are not retried.
            Outcome::SetupFailed(msg) if mode == ProcMode::Fresh && msg.contains("mount proc") => {
                // The kernel refuses a fresh procfs here (typical in a nested
                // container); §4.1 allows the host's bound read-only.
                mode = ProcMode::HostReadOnly;
            }
            Outcome::SetupFailed(msg) => {
                return Err(setup(format!(
                    "the sandbox could not be built: {msg}; run `/usr/libexec/claude-sandbox/claude-sandbox doctor` for the missing piece{}",
                    if cfg.egress_jail { " (escape hatch for the network jail only: CLAUDE_SANDBOX_EGRESS_JAIL=0)" } else { "" }
                )))
            }
        }
    }
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

/// The complete plan for one attempt, jail additions included.
pub fn build(
    cfg: &Config,
    args: &[OsString],
    mode: ProcMode,
    jail: Option<&jail::Jail>,
) -> anyhow::Result<Plan> {
    let facts = host::gather(cfg, mode)?;
    let mut plan = plan::build(cfg, &facts, args)?;
    if let Some(j) = jail {
        plan.insert_before_command(j.bwrap_args());
        plan.data_fds.extend(j.data_fds());
        if let Some(r) = plan.record.as_mut() {
            r.site_subnets = j.site_subnets().to_vec();
        }
    }
    if let Some(r) = &plan.record {
        plan.data_fds.push((plan::FD_LAUNCH_RECORD, r.to_bytes()));
    }
    Ok(plan)
}

/// Everything a launch needs that is not ours to create: bubblewrap, our
/// installed files, user namespaces. Returns bubblewrap's path.
pub fn preflight() -> anyhow::Result<PathBuf> {
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
pub fn userns_available() -> anyhow::Result<()> {
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

/// How an attempt ended.
#[derive(Debug)]
pub enum Outcome {
    /// The sandbox ran; the real binary's exit status (128+N for signal N).
    Exited(i32),
    /// The sandbox was never built; the builder's message.
    SetupFailed(String),
}

fn cloexec_pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(OFlag::O_CLOEXEC)?)
}

fn data_pipe(bytes: &[u8]) -> anyhow::Result<OwnedFd> {
    let (r, w) = cloexec_pipe()?;
    // Small contents only (seccomp program, git config, resolv.conf): they fit the pipe buffer.
    File::from(w).write_all(bytes)?;
    Ok(r)
}

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

/// Run one attempt of `plan`.
pub fn execute(
    bwrap: &Path,
    plan: &Plan,
    jail: Option<&mut jail::Jail>,
    git: &host::GitIdentity,
) -> anyhow::Result<Outcome> {
    let (ready_r, ready_w) = cloexec_pipe()?;
    let (err_r, err_w) = cloexec_pipe()?;
    let keep_stderr: OwnedFd = nix::unistd::dup(2).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })?;
    fcntl(
        keep_stderr.as_raw_fd(),
        FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC),
    )?;
    let mut owned: Vec<OwnedFd> = Vec::new();
    let mut map: Vec<(RawFd, RawFd)> = Vec::new();
    for (num, bytes) in &plan.data_fds {
        let r = data_pipe(bytes)?;
        map.push((r.as_raw_fd(), *num));
        owned.push(r);
    }
    // The git config is written after the spawn: bubblewrap blocks on it while
    // it builds namespaces, so the identity lookup costs no wall time.
    let (git_r, git_w) = cloexec_pipe()?;
    map.push((git_r.as_raw_fd(), plan::FD_GITCONFIG));
    owned.push(git_r);
    map.push((keep_stderr.as_raw_fd(), plan::FD_SHIM_STDERR));
    map.push((ready_w.as_raw_fd(), plan::FD_SHIM_READY));

    let mut jail = jail;
    let mut cmd = match jail.as_deref_mut() {
        Some(j) => {
            let (c, fds) = j.command(bwrap, &plan.bwrap_args)?;
            for (fd, num) in fds {
                map.push((fd.as_raw_fd(), num));
                owned.push(fd);
            }
            c
        }
        None => {
            let mut c = Command::new(bwrap);
            c.args(&plan.bwrap_args);
            c
        }
    };
    cmd.env_clear().stderr(Stdio::from(err_w));
    // §4.3: read-write paths re-resolved and pinned by fd; a swapped symlink aborts.
    for (fd, num) in recheck(plan)? {
        map.push((fd.as_raw_fd(), num));
        owned.push(fd);
    }
    let map_for_child = map.clone();
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
            for &(src, dst) in &map_for_child {
                crate::kernel::move_fd(src, dst)?;
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| setup(format!("cannot start {}: {e}", bwrap.display())))?;
    drop(cmd);
    drop(ready_w);
    drop(keep_stderr);
    drop(owned);
    // pasta's keeper started before the holder and attaches pasta as soon
    // as the holder reports; the git config is written meanwhile.
    let (name, email) = git.get();
    // A bubblewrap that already failed closed its end; its own message says why.
    let _ = File::from(git_w).write_all(plan::gitconfig_data(plan, name, email).as_bytes());
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
    let mut ready = File::from(ready_r);
    let mut byte = [0u8; 1];
    let got = loop {
        match ready.read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other.unwrap_or(0),
        }
    };
    let mut err = File::from(err_r);
    if got == 0 {
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
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
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
            let target = sandbox_program(pid).unwrap_or(pid);
            let _ = nix::sys::signal::kill(target, sig);
        }
    });
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

/// The program the sandbox runs, seen from the host: bubblewrap (our child;
/// or the jail holder, which execs it) has one child in a new PID namespace,
/// the sandbox's PID 1, whose one child is the shim, which execs the real
/// binary in place. (With the jail, bubblewrap can also still have the
/// route keeper as a child for a moment: it is not in a new PID namespace.)
pub fn sandbox_program(bwrap: nix::unistd::Pid) -> Option<nix::unistd::Pid> {
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
    let mut inits = crate::kernel::children(bwrap.as_raw())
        .into_iter()
        .filter(nested_pid_ns);
    let (Some(init), None) = (inits.next(), inits.next()) else {
        return None;
    };
    match crate::kernel::children(init)[..] {
        [only] => Some(nix::unistd::Pid::from_raw(only)),
        _ => None,
    }
}

/// §4.3, just before exec: every read-write path must still resolve where it
/// did when the plan was built. Each is opened (`O_PATH`) and the fd's own
/// path checked, and bubblewrap binds the fd (`--bind-fd`), not the path: so
/// it mounts exactly the inode checked here, and a symlink swapped in between
/// aborts the launch instead of winning.
pub fn recheck(plan: &Plan) -> anyhow::Result<Vec<(OwnedFd, RawFd)>> {
    let changed = |b: &plan::RwBind, now: Option<PathBuf>| {
        setup(format!(
            "aborting: {} resolved to {} when the sandbox was planned but to {} just before launch (a symlink changed); check who is modifying it",
            b.requested.display(),
            b.resolved.display(),
            now.map_or("nothing".into(), |p| p.display().to_string())
        ))
    };
    let mut fds = Vec::new();
    for b in &plan.rw_binds {
        let now = b.requested.canonicalize().ok();
        if now.as_deref() != Some(b.resolved.as_path()) {
            return Err(changed(b, now));
        }
        let fd = nix::fcntl::open(
            &b.resolved,
            OFlag::O_PATH | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .map_err(|_| changed(b, None))?;
        let opened = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok();
        if opened.as_deref() != Some(b.resolved.as_path()) {
            return Err(changed(b, opened));
        }
        fds.push((fd, b.fd));
    }
    Ok(fds)
}

/// `claude-sandbox __shim STDERR_FD READY_FD GATE_FD|- -- PROGRAM ARGS…`: the
/// first program inside the sandbox. With the egress jail, waits on GATE_FD
/// until the jail's routes are locked (EOF: they never were; nothing runs).
/// Then restores the caller's stderr, tells the shadow the sandbox is built,
/// closes every other inherited fd and execs PROGRAM.
pub fn shim_main(args: &[OsString]) -> i32 {
    let num = |i: usize| {
        args.get(i)
            .and_then(|a| a.to_str())
            .and_then(|s| s.parse::<RawFd>().ok())
    };
    let gate = match args.get(2).and_then(|a| a.to_str()) {
        Some("-") => Some(None),
        Some(s) => s.parse::<RawFd>().ok().map(Some),
        None => None,
    };
    let (Some(err_fd), Some(ready_fd), Some(gate)) = (num(0), num(1), gate) else {
        eprintln!(
            "claude-sandbox: __shim is internal (usage: __shim STDERR_FD READY_FD GATE_FD|- -- PROGRAM ARGS)"
        );
        return 2;
    };
    if args.get(3).map(|a| a.as_os_str()) != Some("--".as_ref()) || args.len() < 5 {
        eprintln!("claude-sandbox: __shim: missing `-- PROGRAM`");
        return 2;
    }
    if let Some(gate) = gate {
        if crate::kernel::read_byte(gate).is_none() {
            // The jail said why on this same stderr (the shadow's error pipe).
            eprintln!("egress jail: the routes were not locked; nothing was started");
            return crate::error::EXIT_SETUP;
        }
        unsafe { libc::close(gate) };
    }
    unsafe {
        libc::dup2(err_fd, 2);
        libc::close(err_fd);
        libc::write(ready_fd, b"1".as_ptr().cast(), 1);
        libc::close(ready_fd);
    }
    crate::kernel::close_fds_except(3, &[]);
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGQUIT, libc::SIG_DFL);
    }
    let err = Command::new(&args[4]).args(&args[5..]).exec();
    eprintln!(
        "claude-sandbox: cannot run {}: {err}",
        args[4].to_string_lossy()
    );
    127
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::RwBind;

    fn plan_with(binds: Vec<RwBind>) -> Plan {
        Plan {
            bwrap_args: Vec::new(),
            data_fds: Vec::new(),
            gitconfig_forge: true,
            workspace: binds[0].resolved.clone(),
            rw_binds: binds,
            command_at: 0,
            record: None,
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
        let plan = plan_with(vec![RwBind {
            fd: crate::plan::FD_RW_BASE,
            requested: link.clone(),
            resolved: link.canonicalize().unwrap(),
        }]);
        let fds = recheck(&plan).unwrap();
        assert_eq!(fds.len(), 1);
        assert_eq!(fds[0].1, crate::plan::FD_RW_BASE);
        let target = std::fs::read_link(format!("/proc/self/fd/{}", fds[0].0.as_raw_fd())).unwrap();
        assert_eq!(
            target,
            dir.join("project").canonicalize().unwrap(),
            "the fd pins the checked directory"
        );
        // The link now points at a masked location: the launch must not go on.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), &link).unwrap();
        let e = recheck(&plan).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_SETUP);
        assert!(
            e.to_string().contains("a symlink changed") && e.to_string().contains("secret"),
            "{e}"
        );
        // Gone entirely: also refused.
        std::fs::remove_file(&link).unwrap();
        assert!(recheck(&plan)
            .unwrap_err()
            .to_string()
            .contains("to nothing"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
