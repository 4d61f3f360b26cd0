//! The shadow launch of SPEC §2: `claude ARGS…` (and the process
//! wrapper's entry, §6) builds the sandbox and runs the real binary in it,
//! attempt by attempt: a refused fresh `/proc` is retried with the host's
//! bound read-only (§4.1), a vanished root-view mask with the facts
//! gathered again; any other failure stops the launch (exit 125). Nothing
//! the launch started outlives it, and the tripwire reports afterwards; a
//! Claude Code login the session refreshed through the credential broker
//! is written back to the host's file (decision 0017).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use nix::libc;

use super::exec::{execute, forwarded_signals, Net, Outcome, Run};
use super::host;
use super::preflight::{apparmor_restricts_userns_here, apparmor_userns_fix, preflight};
use crate::config::{self, Config};
use crate::error::{not_installed, setup};
use crate::plan::{self, ProcMode};
use crate::sandbox::{Network, Sandbox};
use crate::{egress, sys::inside, sys::paths, tripwire};

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
    super::integrity::check_launch()?;
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

/// What a launch says before the session starts. Issue #22: a pointer out
/// of the workspace is not followed, and said. Issue #48: a kept root view
/// not trusted is said; the directories a root session gets hidden whole
/// are told to the session at its start (its notices file, which the
/// `SessionStart` hook reads).
fn tell_at_start(
    first: &Sandbox,
    facts: &plan::Facts,
    notices: Option<&crate::notices::SessionFile>,
) {
    if let Some(ws) = first.workspace() {
        for o in &facts.discovered.outside {
            eprintln!("{}", o.notice(ws));
        }
    }
    let told = &facts.root_view_told;
    if let Some(line) = &told.discarded {
        eprintln!("{line}");
    }
    if let Some(fd) = notices.and_then(|n| n.writer().ok()) {
        for line in told.session_lines() {
            crate::notices::append(std::os::fd::AsRawFd::as_raw_fd(&fd), &line);
        }
    }
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
pub(super) fn launch(cfg: &Config, args: &[OsString]) -> anyhow::Result<i32> {
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    // A root launch's walk runs while the rest is prepared.
    host::prefetch_root_view(cfg);
    let bwrap = preflight()?;
    // pasta's start is the longest step of a jailed launch: it begins now,
    // while the rest is prepared (docs/decisions/0019).
    let early = egress::Early::start(cfg);
    let home = crate::sys::user::identity()
        .map_err(crate::error::bad_input)?
        .home;
    host::ensure_private_state(&home)?;
    // Issue #44: what the sandbox refuses, told to the agent as it happens.
    let notices = host::session_notices(&home);
    // Issue #24: the private state within its bound before anything runs.
    let private = crate::limits::PrivateState::at_launch(&home, cfg.private_state_max)?;
    // Issue #25: started once, before the first plan, for every attempt.
    let broker = start_broker(cfg, &home)?;
    // Issue #44: the workspace's hooks directories, held copies inside.
    let copies = crate::held::Copies::new(&home, host::session_id());
    let (first, facts) =
        sandbox_with(cfg, args, ProcMode::Fresh, broker.as_deref(), Some(&copies))?;
    // The git identity (a `git config` process) is looked up while
    // bubblewrap builds the sandbox, which waits for it: started any
    // earlier, it competes with a root launch's walk for the CPU and
    // delays the plan (issue #48 item 3: ~2 ms on a 2-core machine).
    let git = host::GitIdentity::start(home.clone());
    // Issue #24: the process limit the plan chose, in force for every attempt.
    let pids = crate::limits::Enforced::start(&first.limits.pids)?;
    tell_at_start(&first, &facts, notices.as_ref().ok());
    // publish-port: each port free on the host's loopback, or nothing starts.
    let mut published = egress::Published::open(&first.network)?;
    let watch = first
        .workspace()
        .map(|ws| tripwire::Watch::start(&home, ws, facts.discovered));
    let mut net = None;
    let mut run = Run {
        bwrap: &bwrap,
        git: &git,
        published: &mut published,
        limits: pids.spawn(),
        premask: true,
        notices: notices.as_ref().ok(),
    };
    let from = Planning {
        cfg,
        args,
        broker: broker.as_ref(),
        notices: notices.as_ref().ok(),
        copies: &copies,
    };
    let result = attempts(&from, first, &mut net, &mut run, early);
    published.finish();
    match net {
        // The broker's proxy, if any, closes; pasta ends (its keeper
        // waits until it is gone).
        Some(Net::Jail(j)) => j.finish(),
        // Open connections close and log their lines; one line on stderr
        // if anything was refused.
        Some(Net::Proxy(p)) => p.finish(),
        None => {}
    }
    reap_orphans();
    after_session(broker.as_ref(), notices.as_ref().err(), result.is_ok());
    pids.finish();
    // The private state is measured for the next launch while the
    // tripwire walks the workspace (issue #24).
    let measuring = private.map(|p| std::thread::spawn(move || p.at_exit()));
    // `Ok` only when the sandbox was built and the real binary ran.
    if let (Ok(_), Some(w)) = (&result, watch) {
        let notices = notices.map(|n| n.text()).unwrap_or_default();
        tripwire_at_exit(w, copies, &notices);
    }
    if let Some(m) = measuring {
        let _ = m.join();
    }
    result
}

/// Issue #44: what the session left held (`copies`, and the keys its
/// `notices` text names), gathered now that nothing inside runs, recorded
/// with the tripwire's record of the session (`watch`).
fn tripwire_at_exit(watch: tripwire::Watch, copies: crate::held::Copies, notices: &str) {
    let held = copies.gather(notices);
    // Removed while the tripwire walks the workspace: on ext4 each
    // directory's removal costs ~0.1 ms (issue #48 item 3).
    let removing = std::thread::spawn(move || copies.remove());
    watch.finish(held);
    let _ = removing.join();
}

/// Once nothing inside runs any more: decision 0017's refreshed login
/// written back to the host's file (one line either way), and, after a
/// session that ran, the line saying the agent had no notices file.
fn after_session(
    broker: Option<&std::sync::Arc<egress::Broker>>,
    no_notices: Option<&String>,
    ran: bool,
) {
    if let (Some(line), true) = (no_notices, ran) {
        eprintln!("{line}");
    }
    match broker.and_then(|b| b.write_back_login()) {
        Some(Ok(p)) => eprintln!(
            "claude-sandbox: Claude Code's login was refreshed in the session; its new tokens are in {}",
            p.display()
        ),
        Some(Err(e)) => eprintln!("claude-sandbox: Claude Code's refreshed login was not saved: {e}; log in again with /login if claude asks"),
        None => {}
    }
}

/// What every attempt plans from: the configuration, Claude Code's
/// arguments and the launch's credential broker (issue #25), if any.
struct Planning<'a> {
    cfg: &'a Config,
    args: &'a [OsString],
    broker: Option<&'a std::sync::Arc<egress::Broker>>,
    /// The session's notices file (issue #44), which the proxy tells too.
    notices: Option<&'a crate::notices::SessionFile>,
    /// The held copies of the workspace's hooks directories (issue #44).
    copies: &'a crate::held::Copies,
}

impl Planning<'_> {
    /// A replan's sandbox.
    fn plan(&self, mode: ProcMode) -> anyhow::Result<Sandbox> {
        let broker = self.broker.map(|b| &**b);
        Ok(sandbox_with(self.cfg, self.args, mode, broker, Some(self.copies))?.0)
    }
}

fn attempts(
    from: &Planning<'_>,
    first: Sandbox,
    net: &mut Option<Net>,
    run: &mut Run<'_>,
    early: egress::Early,
) -> anyhow::Result<i32> {
    // The early wiring goes to the first attempt's jail; unused, it ends
    // with this function.
    let mut early = Some(early);
    let mut mode = ProcMode::Fresh;
    let mut userns_lock = true;
    let mut replans = 0;
    let mut next = Some(first);
    loop {
        let mut sb = match next.take() {
            Some(sb) => sb,
            None => from.plan(mode)?,
        };
        if !userns_lock {
            sb.nested_userns = true;
        }
        network_for(from, &sb, net, &mut early)?;
        match execute(run, &sb, net.as_mut())? {
            Outcome::Exited(code) => return Ok(code),
            // This launch cannot make the root view's file masks before
            // bubblewrap (an AppArmor profile refusing mounts, a mask gone
            // since the walk): bubblewrap makes them, as it would anyway.
            Outcome::PreMaskRefused => {
                run.premask = false;
                next = Some(sb);
            }
            // A root-view mask gone since the walk: plan again, or fail.
            Outcome::SetupFailed(msg) if vanished_root_mask(&sb, &msg).is_some() => {
                replan_or_fail(&sb, &msg, &mut replans)?
            }
            // A mount gone while bubblewrap bound / (a jail's netns): retry.
            Outcome::SetupFailed(msg) if replans < 3 && vanished_submount(&msg) => replans += 1,
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
            // RLIMIT_NPROC counts the user's other processes too (issue #24).
            Outcome::SetupFailed(msg) if run.limits.refused_by_rlimit(&msg).is_some() => {
                return Err(setup(format!(
                    "the sandbox could not be built: {msg}; {}",
                    run.limits.refused_by_rlimit(&msg).unwrap_or_default()
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

/// The network runtime `sb` was planned with, kept from an earlier attempt
/// when it is the same kind; the open jail takes the wiring started early.
fn network_for(
    from: &Planning<'_>,
    sb: &Sandbox,
    net: &mut Option<Net>,
    early: &mut Option<egress::Early>,
) -> anyhow::Result<()> {
    match (&sb.network, &*net) {
        (Network::Jail(_), Some(Net::Jail(_))) | (Network::Allowlist(_), Some(Net::Proxy(_))) => {}
        (Network::Jail(j), _) => {
            let jail = egress::Jail::prepare()?
                .with_broker(j, from.broker.cloned())?
                .with_early(early.take());
            *net = Some(Net::Jail(jail))
        }
        (Network::Allowlist(p), _) => {
            let notices = match from.notices {
                Some(n) => Some(n.writer().map_err(|e| {
                    setup(format!(
                        "cannot hand the session's notices file to the proxy: {e}"
                    ))
                })?),
                None => None,
            };
            *net = Some(Net::Proxy(egress::Proxy::prepare(
                p,
                from.broker.cloned(),
                notices,
            )?))
        }
        (Network::Host, _) => {}
    }
    Ok(())
}

/// The credential broker (issue #25, decision 0015), in allowlist mode
/// unless `broker = off`: `None` when there is nothing to broker; a broker
/// that cannot start stops the launch (exit 125).
fn start_broker(
    cfg: &Config,
    home: &Path,
) -> anyhow::Result<Option<std::sync::Arc<egress::Broker>>> {
    if !cfg.broker || !egress::policy::broker::brokers_in(plan::egress(cfg)) {
        return Ok(None);
    }
    let home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    let forge = |rel: &str| {
        let p = home.join(rel);
        (!cfg.no_forge && p.symlink_metadata().is_ok()).then_some(p)
    };
    let forwarded = |name: &str| {
        cfg.pass_env
            .iter()
            .any(|n| n == name)
            .then(|| std::env::var(name).ok())
            .flatten()
            .filter(|v| !v.is_empty())
    };
    let key = "ANTHROPIC_API_KEY";
    let src = egress::Sources {
        session: host::session_id().to_string(),
        gh_hosts: forge(plan::FORGE_FILES.gh),
        glab_config: forge(plan::FORGE_FILES.glab),
        gitlab_env: egress::policy::broker::GITLAB_VARS
            .iter()
            .filter_map(|n| Some((n.to_string(), forwarded(n)?)))
            .collect(),
        // glab's GITLAB_HOST (or GL_HOST) when forwarded, else gitlab.com.
        gitlab_env_host: forwarded("GITLAB_HOST")
            .or_else(|| forwarded("GL_HOST"))
            .unwrap_or_else(|| "gitlab.com".into()),
        anthropic_key: forwarded(key).filter(|_| !base_url_elsewhere(cfg, &home)),
        extra_hosts: cfg.broker_hosts.clone(),
        bundle: egress::policy::broker::SYSTEM_BUNDLE.into(),
        // Claude Code's login (decision 0017): a regular file only (Claude
        // Code refuses a symbolic link there too).
        claude_credentials: Some(home.join(egress::policy::claude_oauth::CREDENTIALS_REL))
            .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_file())),
        // Its Console API key (issue #45, decision 0030).
        // With a gateway, a stand-in would break the key there (as for a
        // forwarded ANTHROPIC_API_KEY): the file is then left as it is.
        claude_json: Some(home.join(egress::policy::claude_oauth::CLAUDE_JSON_REL))
            .filter(|_| !base_url_elsewhere(cfg, &home))
            .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_file())),
    };
    let broker = egress::Broker::start(&src)?;
    if broker.is_some() {
        // The real values are in this process's memory (and, for
        // ANTHROPIC_API_KEY, its initial environment): not dumpable, so no
        // process without CAP_SYS_PTRACE here reads /proc/PID/mem or
        // environ, even where the sandbox sees the host's /proc (§4.1).
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    }
    Ok(broker.map(std::sync::Arc::new))
}

/// Whether Claude Code inside would send `ANTHROPIC_API_KEY` to a host
/// the broker does not serve: an `ANTHROPIC_BASE_URL` (forwarded, or in
/// the `env` of `~/.claude/settings.json`) other than
/// `https://api.anthropic.com`. Such a key is left as it is (a stand-in
/// would break that gateway) and stays readable inside.
pub(crate) fn base_url_elsewhere(cfg: &Config, home: &Path) -> bool {
    let name = "ANTHROPIC_BASE_URL";
    let forwarded = cfg
        .pass_env
        .iter()
        .any(|n| n == name)
        .then(|| std::env::var(name).ok())
        .flatten();
    let settings = crate::sys::files::read_text(&home.join(".claude/settings.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("env")?.get(name)?.as_str().map(str::to_string));
    [forwarded, settings].into_iter().flatten().any(|u| {
        let u = u.trim().trim_end_matches('/');
        !u.is_empty() && u != "https://api.anthropic.com"
    })
}

/// Whether a mask of the root view ([`crate::launch::rootview`]) covers a path
/// that no longer exists: bubblewrap cannot mount over it on the read-only
/// root.
fn vanished_root_mask<'a>(sb: &'a Sandbox, msg: &str) -> Option<&'a Path> {
    sb.mounts.iter().find_map(|m| match m {
        crate::sandbox::Mount::Tmpfs { dst } | crate::sandbox::Mount::Empty { dst }
            if super::rootview::covers(dst)
                && dst.symlink_metadata().is_err()
                && names(msg, dst) =>
        {
            Some(dst.as_path())
        }
        _ => None,
    })
}

/// Whether bubblewrap's failure `msg` names `dst` or a directory above it
/// (a mask is not made when its directory went away). A mask planned on a
/// path that does not exist on the host by design (one bubblewrap makes in
/// a tmpfs, such as `~/.local/share/applications` under a home in `/var`)
/// is not what failed unless the message says so: taking it for churn cost
/// three replans and hid the real failure behind them.
fn names(msg: &str, dst: &Path) -> bool {
    let walked = |a: &Path| super::rootview::ROOTS.iter().any(|r| a == Path::new(r));
    dst.ancestors()
        .take_while(|a| a.parent().is_some() && !walked(a))
        .any(|a| {
            let a = a.to_string_lossy();
            // The whole path (not one below it): followed by the end or punctuation.
            msg.match_indices(&*a).any(|(i, _)| {
                msg[i + a.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| matches!(c, ':' | ' ' | '\'' | '"' | ',' | '\n'))
            })
        })
}

/// Whether bubblewrap failed because a mount point below `/` went away
/// while it bound `/` recursively (`remount "/newroot/P": No such file or
/// directory`, and `P` is gone on the host now): a race with another
/// session's ending (its jail's `/run/netns` entry), not a refusal.
fn vanished_submount(msg: &str) -> bool {
    const AT: &str = "remount \"/newroot";
    let Some(i) = msg.find(AT) else {
        return false;
    };
    let rest = &msg[i + AT.len()..];
    let Some(end) = rest.find("\": No such file or directory") else {
        return false;
    };
    let path = &rest[..end];
    path.starts_with('/') && Path::new(path).symlink_metadata().is_err()
}

/// A root launch masks what its walk found; one of those removed since (a
/// rotated log, another program's temporary file) fails the build. Plan
/// again from a fresh walk, three times; still vanishing, something keeps
/// churning there: fail closed, saying where ([`churning`]).
fn replan_or_fail(sb: &Sandbox, msg: &str, replans: &mut usize) -> anyhow::Result<()> {
    if let (3, Some(gone)) = (*replans, vanished_root_mask(sb, msg)) {
        return Err(setup(churning(gone, *replans + 1)));
    }
    *replans += 1;
    Ok(())
}

/// The one line a root launch ends with when a path its root view masks
/// vanished before every one of its `attempts`: which path, which
/// directory churns, and what to do (issue #43).
fn churning(gone: &Path, attempts: usize) -> String {
    let dir = gone.parent().unwrap_or(gone);
    format!(
        "the sandbox could not be built: {} vanished between the root view's walk and the mount on {attempts} attempts: something keeps creating and deleting entries in {} (a build, a package manager, a cleaner?), and a root session masks what only root may read there rather than guess; run claude again once that work has finished there, or start the session as a non-root user, whose view needs no walk",
        gone.display(),
        dir.display()
    )
}

/// Reap every child left (orphans adopted as subreaper), for at most 2 s:
/// each of them dies with the sandbox already (parent-death signals),
/// most within a few hundred microseconds of bubblewrap, so the first
/// looks come soon (a flat 1 ms sleep cost every launch ~1 ms at exit).
fn reap_orphans() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut pause = std::time::Duration::from_micros(25);
    loop {
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
        match r {
            0 if std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(1));
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
    sandbox_with(cfg, args, mode, None, None)
}

/// [`sandbox`] with what the sandbox sees of the launch's credential broker.
fn sandbox_with(
    cfg: &Config,
    args: &[OsString],
    mode: ProcMode,
    broker: Option<&egress::Broker>,
    copies: Option<&crate::held::Copies>,
) -> anyhow::Result<(Sandbox, plan::Facts)> {
    let mut facts = host::gather(cfg, mode)?;
    facts.broker = broker.map(|b| b.inside().clone());
    if let Some(c) = copies {
        host::hold_hooks(&mut facts, c);
    }
    let mut sb = plan::build(cfg, &facts, args)?;
    crate::testhooks::apply(&mut sb, &facts.home, &facts.env);
    Ok((sb, facts))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_submount_gone_while_bubblewrap_bound_root_is_retried() {
        let gone = format!("/run/netns/csb-gone-{}", std::process::id());
        let msg = |p: &str| {
            format!("bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount \"/newroot{p}\": No such file or directory")
        };
        assert!(vanished_submount(&msg(&gone)));
        assert!(!vanished_submount(&msg("/etc")), "it is still there");
        assert!(!vanished_submount(
            "bwrap: Can't bind mount /oldroot/ on /newroot/: Permission denied"
        ));
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
        let msg = format!(
            "Can't create file at /newroot{}: No such file",
            file.display()
        );
        assert_eq!(vanished_root_mask(&sb, &msg), None, "it exists");
        std::fs::remove_file(&file).unwrap();
        assert_eq!(
            vanished_root_mask(&sb, &msg),
            Some(file.as_path()),
            "it is gone"
        );
        // Its directory gone, named by bubblewrap instead of the mask.
        let _ = std::fs::remove_dir_all(&dir);
        let msg = format!("Can't mkdir {}: No such file", dir.display());
        assert_eq!(vanished_root_mask(&sb, &msg), Some(file.as_path()));
        // Another failure (a refused /proc) is not taken for churn.
        let msg = "Can't mount proc on /newroot/proc: Operation not permitted";
        assert_eq!(vanished_root_mask(&sb, msg), None, "{msg}");
        // Nor one naming a sibling that merely starts the same, or the tree.
        let msg = format!("Can't mkdir {}-other: No such file", dir.display());
        assert_eq!(vanished_root_mask(&sb, &msg), None, "{msg}");
        assert_eq!(vanished_root_mask(&sb, "Can't bind /var: busy"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_churning_directory_is_named_with_what_to_do() {
        let m = churning(Path::new("/var/cache/build/obj-17"), 4);
        assert!(m.contains("/var/cache/build/obj-17 vanished"), "{m}");
        assert!(m.contains("entries in /var/cache/build "), "{m}");
        assert!(m.contains("4 attempts"), "{m}");
        assert!(m.contains("once that work has finished"), "{m}");
        assert!(!m.contains('\n'), "one line: {m}");
    }
}
