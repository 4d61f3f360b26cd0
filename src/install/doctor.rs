//! `claude-sandbox doctor`: what is and is not in place, one line per fact;
//! exit 0 only when all is.

use std::path::Path;
use std::process::Command;

use crate::plan::managed_settings;
use crate::{config, egress, launch, launch::integrity, sys::paths};

/// Command-line arguments of `claude-sandbox doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// First remove what stops every launch in the sandbox's private
    /// ~/.cache and ~/.local/share (a tree nested too deep, a directory
    /// that cannot be read): whole top-level entries, never through a
    /// symlink or outside them; only while no session of yours runs.
    #[arg(long)]
    fix: bool,
}

struct Report {
    failed: usize,
}

impl Report {
    fn line(&mut self, ok: bool, what: &str, detail: impl std::fmt::Display) {
        if !ok {
            self.failed += 1;
        }
        println!("{} {what}: {detail}", if ok { "ok  " } else { "FAIL" });
    }

    /// A fact that weakens the sandbox without stopping it, which only
    /// the host or the operator can change (not counted as a failure).
    fn warn(&mut self, what: &str, detail: impl std::fmt::Display) {
        println!("WARN {what}: {detail}");
    }
}

/// A minimal sandbox with the namespaces every launch uses (no `/proc`: a
/// launch falls back to the host's when a fresh one is refused).
fn probe_bwrap(bwrap: &Path) -> Result<(), String> {
    let out = Command::new(bwrap)
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--",
            "/bin/true",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let msg = String::from_utf8_lossy(&out.stderr)
        .trim()
        .replace('\n', " ");
    Err(if msg.is_empty() {
        format!("{} exited with {}", bwrap.display(), out.status)
    } else {
        msg
    })
}

/// The PATH a fresh login of the current user gets: their login shell from
/// the user database, run as a login shell with only the variables `login`
/// sets (so the caller's own PATH does not leak into the answer; `echo
/// "$PATH"`, not printenv: zsh does not export a PATH it made itself). Returns
/// the shell and its PATH (None when it cannot be asked).
fn login_path() -> (String, Option<String>) {
    let shell = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.shell)
        .filter(|s| {
            // nologin and false answer nothing; a terminal would not start either.
            !s.as_os_str().is_empty() && !s.ends_with("nologin") && !s.ends_with("false")
        })
        .unwrap_or_else(|| "/bin/sh".into());
    // Name and home exactly as a launch takes them.
    let (name, home) = crate::sys::user::identity()
        .map(|id| (id.user, id.home))
        .unwrap_or_else(|_| (String::new(), "/".into()));
    let out = Command::new(&shell)
        .args(["-l", "-c", "echo \"$PATH\""])
        .env_clear()
        .env("HOME", &home)
        .env("USER", &name)
        .env("LOGNAME", &name)
        .env("SHELL", &shell)
        .env("TERM", "dumb")
        .current_dir(&home)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let path = out.ok().filter(|o| o.status.success()).and_then(|o| {
        // Profile scripts may print; PATH is the last line.
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .map(str::to_string)
    });
    (shell.display().to_string(), path)
}

/// Every executable `name` along `path`, in order (what `type -ap` lists;
/// an empty entry is the current directory).
fn claude_on_path(path: &str, name: &Path) -> Vec<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut found: Vec<std::path::PathBuf> = Vec::new();
    for dir in path.split(':') {
        let p = Path::new(if dir.is_empty() { "." } else { dir }).join(name);
        let exec = p
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if exec && !found.contains(&p) {
            found.push(p);
        }
    }
    found
}

/// Run `claude-sandbox doctor`; returns the number of failed facts (capped at 1 for the exit status).
pub(crate) fn main(args: &Args) -> anyhow::Result<i32> {
    if args.fix {
        fix_private_state()?;
    }
    let mut r = Report { failed: 0 };
    check_shadow(&mut r);
    check_login_path(&mut r);
    check_local_bin(&mut r);
    check_pin(&mut r);
    let cfg = check_config(&mut r);
    if let Ok(c) = &cfg {
        check_rw_paths(&mut r, c);
    }
    check_prerequisites(&mut r);
    if let Ok(c) = &cfg {
        check_egress_jail(&mut r, c);
        check_broker(&mut r, c);
    }
    check_guard_hooks(&mut r);
    check_lockdown(&mut r);
    check_host_git(&mut r);
    check_claude_alias(&mut r);
    if let Ok(c) = &cfg {
        check_limits(&mut r, c);
        check_root_view(&mut r, c);
    }
    if r.failed > 0 {
        println!("{} problem(s) found", r.failed);
        Ok(1)
    } else {
        println!("all in place: `claude` runs sandboxed");
        Ok(0)
    }
}

/// `--fix`: the private state's entries a launch cannot walk, removed.
fn fix_private_state() -> anyhow::Result<()> {
    let home = crate::sys::user::identity()
        .map_err(crate::error::setup)?
        .home;
    let done = crate::limits::clear_unwalkable(&home)?;
    if done.is_empty() {
        println!("fix  private state: nothing a launch stops at");
    }
    for line in done {
        println!("fix  private state: {line}");
    }
    Ok(())
}

/// Run by root: what a root launch's walk examines, how long it takes, and
/// what it masks whole (issue #24) and how the kept view served (issue
/// #48). Informational: masking
/// more than needed is safe; the setting widens the bound.
fn check_root_view(r: &mut Report, c: &config::Config) {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let cwd = std::env::current_dir().into_iter().collect::<Vec<_>>();
    let t = std::time::Instant::now();
    let v = launch::rootview::view(&cwd, c.root_view_max_entries, !crate::plan::jailed(c));
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let whole = match v.unfinished.len() {
        0 => "nothing masked whole unexamined".to_string(),
        n => format!(
            "{n} director{} masked whole unexamined (unreadable, changing, too deep, or past root-view-max-entries = {} in {}): {}",
            if n == 1 { "y" } else { "ies" },
            c.root_view_max_entries,
            paths::CONFIG_FILE,
            crate::plan::protect::printable(
                &v.unfinished.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
                300
            )
        ),
    };
    r.line(
        true,
        "root view",
        format!(
            "{} entries examined in {ms:.1} ms ({}), {} masks; {whole}",
            v.examined,
            v.kept
                .iter()
                .map(|(state, k)| match k {
                    launch::rootview::Kept::Reused(n) => format!(
                        "the kept view {} reused, {n} changed directories examined afresh",
                        state.display()
                    ),
                    launch::rootview::Kept::Whole =>
                        format!("{} walked whole, kept", state.display()),
                    launch::rootview::Kept::Discarded(why) => format!(
                        "the kept view {} not trusted ({why}): walked whole",
                        state.display()
                    ),
                })
                .collect::<Vec<_>>()
                .join("; "),
            v.masks.len()
        ),
    );
}

/// The shadow must be this binary, or `claude` runs unsandboxed.
fn check_shadow(r: &mut Report) {
    let shadow_ok = std::fs::canonicalize(paths::SHADOW).ok()
        == std::fs::canonicalize(paths::SELF_BIN).ok()
        && Path::new(paths::SELF_BIN).exists();
    r.line(
        shadow_ok,
        "shadow",
        if shadow_ok {
            format!("{} -> {}", paths::SHADOW, paths::SELF_BIN)
        } else {
            format!(
                "{} is not the claude-sandbox binary; run: sudo claude-sandbox install",
                paths::SHADOW
            )
        },
    );
}

/// What a login shell of this user resolves `claude` to, and anything else named `claude` on its PATH.
fn check_login_path(r: &mut Report) {
    let (shell, path) = login_path();
    let found: Vec<String> = path
        .as_deref()
        .map(|p| claude_on_path(p, Path::new("claude")))
        .unwrap_or_default()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let first_ok = found.first().map(String::as_str) == Some(paths::SHADOW);
    r.line(
        first_ok,
        "PATH",
        match (&path, first_ok) {
            (None, _) => format!("cannot ask {shell} (the login shell) for its PATH; check that it runs"),
            (Some(_), true) => format!("a login shell ({shell}) runs {} for `claude`", paths::SHADOW),
            (Some(_), false) => format!("a login shell ({shell}) resolves `claude` to {:?}, not {}; fix PATH or remove the stray binary", found.first(), paths::SHADOW),
        },
    );
    let strays: Vec<&String> = found
        .iter()
        .filter(|p| p.as_str() != paths::SHADOW)
        .collect();
    r.line(
        strays.is_empty(),
        "stray claude on PATH",
        if strays.is_empty() {
            "none".to_string()
        } else {
            format!(
                "{strays:?}: remove them (claude-sandbox install relocates ~/.local/bin/claude)"
            )
        },
    );
}

/// A `~/.local/bin/claude` bypasses the sandbox whenever a PATH leads there first.
fn check_local_bin(r: &mut Report) {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let stray_local = home
        .as_ref()
        .map(|h| h.join(".local/bin/claude"))
        .filter(|p| p.exists());
    r.line(stray_local.is_none(), "~/.local/bin/claude", match &stray_local { None => "absent".to_string(), Some(p) => format!("{} exists and would bypass the sandbox if PATH led there; remove it or re-run install", p.display()) });
}

/// The real binary must match its pin, or every launch refuses.
fn check_pin(r: &mut Report) {
    match integrity::check(Path::new(paths::REAL_CLAUDE), Path::new(paths::PIN_FILE)) {
        Ok(()) => r.line(
            true,
            "pin",
            format!("{} matches {}", paths::REAL_CLAUDE, paths::PIN_FILE),
        ),
        Err(e) => r.line(false, "pin", e),
    }
}

/// The config must load; returned for the checks that depend on it. Says
/// whether the environment may weaken the sandbox, and which variables do.
fn check_config(r: &mut Report) -> anyhow::Result<config::Config> {
    let loaded = config::load(Path::new(paths::CONFIG_FILE), &config::process_env);
    match &loaded {
        Ok(l) => r.line(
            true,
            "config",
            format!(
                "{} valid (egress = {}; {})",
                paths::CONFIG_FILE,
                l.config.egress.name(),
                env_overrides_note(l)
            ),
        ),
        Err(e) => r.line(false, "config", e),
    }
    loaded.map(|l| l.config)
}

/// What `allow-env-overrides` means for this launch environment.
fn env_overrides_note(l: &config::Applied) -> String {
    if !l.config.allow_env_overrides {
        return "allow-env-overrides off: CLAUDE_SANDBOX_* variables cannot weaken the sandbox"
            .into();
    }
    if l.weakened.is_empty() {
        return "allow-env-overrides on: CLAUDE_SANDBOX_* variables may weaken the sandbox; none does now".into();
    }
    let vars: Vec<&str> = l.weakened.iter().map(|w| w.var).collect();
    format!(
        "allow-env-overrides on: CLAUDE_SANDBOX_* variables may weaken the sandbox; weakened now by {}",
        vars.join(", ")
    )
}

/// Read-write paths named in the config must exist, or every launch refuses.
fn check_rw_paths(r: &mut Report, c: &config::Config) {
    let named = c
        .workspace_root
        .iter()
        .map(|p| ("workspace-root", p))
        .chain(c.allow_write.iter().map(|p| ("allow-write", p)));
    for (key, p) in named {
        let ok = p.exists();
        r.line(
            ok,
            key,
            if ok {
                format!("{} exists", p.display())
            } else {
                format!(
                    "{} does not exist, and every launch refuses until it does; create it or fix {}",
                    p.display(),
                    paths::CONFIG_FILE
                )
            },
        );
    }
}

/// What a session may exhaust (issue #24): the process limit and what
/// enforces it here, the tmpfs sizes, the private state against its bound.
fn check_limits(r: &mut Report, c: &config::Config) {
    use crate::sandbox::Pids;
    let id = crate::sys::user::identity();
    let (uid, user) = id
        .as_ref()
        .map_or((nix::unistd::getuid().as_raw(), String::new()), |i| {
            (i.uid, i.user.clone())
        });
    let pids = match (c.pids_limit, crate::limits::detect_pids(uid)) {
        (None, _) => Pids::Off,
        (Some(max), crate::plan::PidsMechanism::Cgroup { parent }) => Pids::Cgroup {
            dir: parent.join("claude-sandbox-SESSION"),
            max,
        },
        (Some(max), crate::plan::PidsMechanism::Rlimit) => Pids::Rlimit { max },
        (Some(max), crate::plan::PidsMechanism::Neither(why)) => Pids::Unenforced { max, why },
    };
    let detail = crate::limits::describe_pids(&pids, &user);
    if matches!(pids, Pids::Unenforced { .. }) {
        // Every launch says so too, and verify's pids-limit fails; the
        // sandbox is built all the same (decision 0014).
        r.warn("pids limit", format!(
            "none can be in force: {detail}; a fork bomb inside can exhaust this machine. Launch as a non-root user, give the container a writable cgroup, or set `pids-limit = off` in {} to say it is intended",
            paths::CONFIG_FILE
        ));
    } else {
        r.line(true, "pids limit", detail);
    }
    let memory = crate::limits::memory();
    let size = crate::plan::tmpfs_size(c.tmpfs_size, memory);
    r.line(
        true,
        "tmpfs size",
        format!(
            "{} each for /tmp, $HOME, ~/.local/share/claude and /dev/shm (tmpfs-size = {} of {} memory), {} for every mask",
            config::show_bytes(size),
            c.tmpfs_size.text(),
            config::show_bytes(memory),
            config::show_bytes(crate::plan::MASK_TMPFS_SIZE)
        ),
    );
    let Ok(home) = id.map(|i| i.home) else {
        return;
    };
    check_claude_dir(r, &home, c.claude_dir_warn);
    let Some(max) = c.private_state_max else {
        r.line(true, "private state", "unbounded (private-state-max = off)");
        return;
    };
    let dirs: Vec<std::path::PathBuf> = crate::limits::private_roots(&home)
        .into_iter()
        .filter(|d| d.is_dir())
        .collect();
    match crate::limits::measure(&dirs, false) {
        Ok(m) => r.line(
            true,
            "private state",
            format!(
                "{} in {} entries of at most {} (private-state-max; pruned at launch past it)",
                config::show_bytes(m.bytes),
                m.entries,
                config::show_bytes(max)
            ),
        ),
        Err(e) => r.line(
            false,
            "private state",
            format!("cannot be measured, and every launch refuses until it can: {e}; `claude-sandbox doctor --fix` removes what stops it"),
        ),
    }
}

/// `~/.claude` (read-write inside, on the host's disk, no bound a launch
/// enforces: Claude Code's own transcripts live there): its size, with a
/// warning past `claude-dir-warn`.
fn check_claude_dir(r: &mut Report, home: &Path, warn: Option<u64>) {
    let dir = home.join(".claude");
    if !dir.is_dir() {
        return;
    }
    let Ok(m) = crate::limits::measure(std::slice::from_ref(&dir), false) else {
        r.warn(
            "~/.claude",
            format!(
                "{} cannot be measured (nested too deep, or unreadable)",
                dir.display()
            ),
        );
        return;
    };
    let size = config::show_bytes(m.bytes);
    match warn {
        Some(max) if m.bytes > max => r.warn(
            "~/.claude",
            format!(
                "{} holds {size}, over claude-dir-warn = {} (a session writes there without a bound): look at what grew (du -sh {}/*), or raise claude-dir-warn in {}",
                dir.display(),
                config::show_bytes(max),
                dir.display(),
                paths::CONFIG_FILE
            ),
        ),
        Some(max) => r.line(true, "~/.claude", format!("{size} (warned past {}, claude-dir-warn)", config::show_bytes(max))),
        None => r.line(true, "~/.claude", format!("{size} (claude-dir-warn = off)")),
    }
}

/// bubblewrap and user namespaces must be there, and must actually build a sandbox here.
fn check_prerequisites(r: &mut Report) {
    match launch::preflight() {
        Ok(b) => {
            r.line(
                true,
                "sandbox prerequisites",
                format!("bubblewrap at {}, user namespaces enabled", b.display()),
            );
            // The sysctls can say yes while a container's seccomp profile (or
            // AppArmor) says no: build a throw-away sandbox to know.
            let sysctl = std::fs::read_to_string(launch::APPARMOR_USERNS_SYSCTL).ok();
            let root = nix::unistd::geteuid().is_root();
            let apparmor = launch::apparmor_restricts_userns(sysctl.as_deref(), root);
            let probe = probe_bwrap(&b);
            match &probe {
                Ok(()) => r.line(true, "bubblewrap", "builds a sandbox here (user, PID and mount namespaces)"),
                Err(why) if apparmor => r.line(false, "bubblewrap", format!("cannot build a sandbox here: {why}; {}", launch::apparmor_userns_fix())),
                Err(why) => r.line(false, "bubblewrap", format!("cannot build a sandbox here: {why}; inside a Docker container the usual cause is its default seccomp profile, which refuses new namespaces: add \"--security-opt\", \"seccomp=unconfined\" to runArgs in devcontainer.json (or use Podman) and rebuild")),
            }
            check_apparmor(r, sysctl.as_deref(), root, apparmor && probe.is_ok());
        }
        Err(e) => r.line(false, "sandbox prerequisites", e),
    }
}

/// AppArmor's restriction of unprivileged user namespaces (Ubuntu 24.04),
/// named whenever it is on: for a non-root user whose bubblewrap works, an
/// AppArmor profile lets it (a failing one is named on the bubblewrap line);
/// root is exempt, but every other user's `claude` needs that profile.
fn check_apparmor(r: &mut Report, sysctl: Option<&str>, root: bool, allowed: bool) {
    if !launch::apparmor_restricts_userns(sysctl, false) {
        return;
    }
    let on = format!(
        "{} is 1 (unprivileged user namespaces restricted)",
        launch::APPARMOR_USERNS_SYSCTL
    );
    if root {
        r.line(
            true,
            "AppArmor",
            format!(
                "root is exempt, but not every other user: {}",
                launch::apparmor_userns_fix()
            ),
        );
    } else if allowed {
        r.line(
            true,
            "AppArmor",
            format!("{on}, and an AppArmor profile lets bubblewrap create them"),
        );
    }
}

/// When the config turns the egress jail on, its tools must be usable, or every launch refuses.
fn check_egress_jail(r: &mut Report, c: &config::Config) {
    if crate::plan::egress(c) == crate::egress::policy::Egress::Allowlist {
        match egress::host_facts(false) {
            Ok(_) => r.line(
                true,
                "egress allowlist",
                "the host's routes are readable (no pasta needed in this mode)",
            ),
            Err(e) => r.line(false, "egress allowlist", e),
        }
    } else if crate::plan::jailed(c) {
        match egress::Jail::prepare().and_then(|_| egress::host_facts(true)) {
            Ok(_) => r.line(
                true,
                "egress jail prerequisites",
                "pasta, ip and /dev/net/tun usable",
            ),
            Err(e) => r.line(false, "egress jail prerequisites", e),
        }
    } else {
        r.line(true, "egress jail", "deliberately off in the configuration");
    }
}

/// The managed settings must carry the guard hooks, which catch a session started outside the sandbox.
fn check_guard_hooks(r: &mut Report) {
    let settings = std::fs::read_to_string(paths::MANAGED_SETTINGS).unwrap_or_default();
    let hooks = settings.contains(managed_settings::SESSION_START_CMD)
        && settings.contains(managed_settings::PROMPT_GATE_CMD)
        && settings.contains(managed_settings::NOTICES_CMD)
        && serde_json::from_str::<serde_json::Value>(&settings).is_ok();
    r.line(
        hooks,
        "guard hooks",
        if hooks {
            format!(
                "{} has the session-start, prompt-gate and notices hooks",
                paths::MANAGED_SETTINGS
            )
        } else {
            format!(
                "{} lacks the guard hooks; run: sudo claude-sandbox install",
                paths::MANAGED_SETTINGS
            )
        },
    );
}

/// The managed settings must carry the lockdown (decisions 0005, 0012), or
/// hooks, MCP servers, helpers, bypass mode and code-loading `env` a
/// sandboxed session planted in user or project settings take effect when
/// Claude Code is started outside the sandbox.
fn check_lockdown(r: &mut Report) {
    let settings = std::fs::read_to_string(paths::MANAGED_SETTINGS).unwrap_or_default();
    match managed_settings::lockdown_report(&settings) {
        Ok(keys) => r.line(
            true,
            "lockdown",
            format!(
                "{} keeps the hooks, MCP servers, helpers and other command keys, bypass mode, code-loading env variables and the endpoint, proxy and CA variables of user and project settings from taking effect unsandboxed ({keys}){}",
                paths::MANAGED_SETTINGS,
                overridden_note(&managed_settings::endpoints_overridden(&settings, |n| {
                    std::env::var(n).ok()
                }))
            ),
        ),
        Err(why) => r.line(
            false,
            "lockdown",
            format!(
                "{}: {why}; code a sandboxed session plants in ~/.claude or the workspace would run when Claude Code is started unsandboxed; run: sudo claude-sandbox install",
                paths::MANAGED_SETTINGS
            ),
        ),
    }
}

/// The note for endpoint variables this environment sets otherwise than
/// the managed settings pin them (decision 0031): outside the sandbox
/// Claude Code uses the pinned value.
fn overridden_note(vars: &[String]) -> String {
    if vars.is_empty() {
        return String::new();
    }
    format!(
        "; note: set otherwise in this environment than pinned, so not used by Claude Code started outside the sandbox: {}; to pin yours, set them in the env of {} (or uninstall, then install with them set)",
        vars.join(", "),
        paths::MANAGED_SETTINGS
    )
}

/// Host git must ignore bare repositories it discovers (issue #22), or a
/// bare-style directory a session planted in the workspace runs its config's
/// commands when an IDE or the user runs `git status` there.
fn check_host_git(r: &mut Report) {
    match super::host_git::check() {
        Ok(detail) => r.line(true, "host git", detail),
        Err(why) => r.line(false, "host git", why),
    }
}

/// Which credentials the broker keeps out of the sandbox, which it does
/// not and why (issue #25); `broker = off` named as weaker. A FAIL only
/// when a launch would stop: something to broker and no system CA bundle.
fn check_broker(r: &mut Report, c: &config::Config) {
    let home = crate::sys::user::identity().map(|i| i.home).ok();
    let has = |rel: &str| home.as_ref().is_some_and(|h| h.join(rel).exists());
    let forwarded = |n: &str| c.pass_env.iter().any(|p| p == n) && std::env::var_os(n).is_some();
    // The launch's own test: a forwarded ANTHROPIC_BASE_URL or one in
    // ~/.claude/settings.json's env.
    let gateway = home
        .as_deref()
        .is_some_and(|h| crate::launch::base_url_elsewhere(c, h));
    let held = Held {
        gh: has(crate::plan::FORGE_FILES.gh) && !c.no_forge,
        glab: has(crate::plan::FORGE_FILES.glab) && !c.no_forge,
        gitlab_env: crate::egress::policy::broker::GITLAB_VARS
            .iter()
            .any(|n| forwarded(n)),
        api_key: forwarded("ANTHROPIC_API_KEY"),
        gateway,
        login: has(crate::egress::policy::claude_oauth::CREDENTIALS_REL),
        login_elsewhere: std::env::var_os("CLAUDE_CONFIG_DIR").is_some(),
        primary_key: home.as_ref().is_some_and(|h| {
            let p = h.join(crate::egress::policy::claude_oauth::CLAUDE_JSON_REL);
            crate::sys::files::read_text(&p)
                .ok()
                .and_then(|t| crate::egress::policy::claude_oauth::primary_api_key(&t))
                .is_some()
        }),
    };
    let (ok, detail) = broker_summary(
        c,
        &held,
        std::path::Path::new(crate::egress::policy::broker::SYSTEM_BUNDLE).is_file(),
    );
    r.line(ok, "credential broker", detail);
}

/// The credentials a session of this user would hold, as doctor sees them.
#[derive(Default)]
struct Held {
    /// `gh`'s token file, [`crate::plan::FORGE_FILES`] (the forge
    /// directories bound).
    gh: bool,
    /// `glab`'s token file, [`crate::plan::FORGE_FILES`] (the forge
    /// directories bound).
    glab: bool,
    /// `GITLAB_TOKEN` or its kin, forwarded.
    gitlab_env: bool,
    /// `ANTHROPIC_API_KEY`, forwarded.
    api_key: bool,
    /// `ANTHROPIC_BASE_URL` (forwarded, or in the settings' `env`) names
    /// another host than api.anthropic.com.
    gateway: bool,
    /// `~/.claude/.credentials.json`.
    login: bool,
    /// `CLAUDE_CONFIG_DIR` is set: the login the session uses is elsewhere.
    login_elsewhere: bool,
    /// `~/.claude.json` holds a Console API key (`primaryApiKey`),
    /// brokered with a private copy of the file (decision 0030).
    primary_key: bool,
}

/// The broker's line for [`check_broker`]: what is brokered, what is not
/// and why; `bundle`: whether the system CA bundle is there. A FAIL only
/// when a launch would stop.
fn broker_summary(c: &config::Config, h: &Held, bundle: bool) -> (bool, String) {
    let mut held = Vec::new();
    let mut not = Vec::new();
    if h.gh {
        held.push("gh's tokens (every host of hosts.yml)");
    }
    if h.glab {
        held.push("glab's tokens (every host of config.yml)");
    }
    if h.gitlab_env {
        held.push("GITLAB_TOKEN");
    }
    match (h.api_key, h.gateway) {
        (true, false) => held.push("ANTHROPIC_API_KEY"),
        (true, true) => not.push(
            "ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL names a gateway, which a stand-in would break)",
        ),
        _ => {}
    }
    if h.login_elsewhere {
        not.push("Claude Code's login under CLAUDE_CONFIG_DIR (only ~/.claude/.credentials.json is brokered)");
    } else if h.login {
        held.push("Claude Code's own login (~/.claude/.credentials.json)");
    }
    match (h.primary_key, h.gateway) {
        (true, false) => held.push("the Console API key in ~/.claude.json (primaryApiKey; the session writes a private copy of that file, which is not kept)"),
        (true, true) => not.push("the Console API key in ~/.claude.json (ANTHROPIC_BASE_URL names a gateway, which a stand-in would break)"),
        _ => {}
    }
    let mode = crate::plan::egress(c);
    if !c.broker || !crate::egress::policy::broker::brokers_in(mode) {
        let why = if c.broker {
            format!(
                "egress = {} (the broker does not run on the host's network, decision 0016; weaker)",
                mode.name()
            )
        } else {
            "broker = off in the configuration (weaker)".to_string()
        };
        held.extend(not);
        let readable = if held.is_empty() {
            "no credential found to broker".to_string()
        } else {
            format!("readable inside: {}", held.join(", "))
        };
        return (true, format!("off: {why}; {readable}"));
    }
    if !held.is_empty() && !bundle {
        return (
            false,
            format!(
                "{} is missing: every launch that brokers {} stops (exit 125); install ca-certificates",
                crate::egress::policy::broker::SYSTEM_BUNDLE,
                held.join(" and ")
            ),
        );
    }
    let mut d = if held.is_empty() {
        "nothing to broker".to_string()
    } else {
        format!("stand-ins inside for {}", held.join(", "))
    };
    if !not.is_empty() {
        d.push_str(&format!(
            "; not brokered, readable inside: {}",
            not.join(", ")
        ));
    }
    (true, d)
}

/// An alias or function named `claude` in a shell startup file runs
/// instead of the shadow in every interactive shell (issue #24); Claude
/// Code's old installer wrote one that runs `~/.claude/local/claude`.
fn check_claude_alias(r: &mut Report) {
    let Ok(id) = crate::sys::user::identity() else {
        return r.line(
            false,
            "claude alias",
            "cannot tell this user's home; set HOME",
        );
    };
    let found = super::shell_alias::find(&id.home);
    if found.is_empty() {
        return r.line(
            true,
            "claude alias",
            "no alias or function named claude in the shell startup files",
        );
    }
    for d in found {
        r.line(
            false,
            "claude alias",
            format!(
                "{}:{}: `{}` makes an interactive shell run something else than {} for `claude`, unsandboxed; delete that line (or the function), then open a new shell",
                d.file.display(),
                d.line,
                crate::plan::protect::printable(&d.text, 120),
                paths::SHADOW
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_walk_lists_each_executable_in_order() {
        let d = std::env::temp_dir().join(format!("csb-doctor-{}", std::process::id()));
        let (a, b, c) = (d.join("a"), d.join("b"), d.join("c"));
        for (dir, mode) in [(&a, 0o755), (&b, 0o644), (&c, 0o755)] {
            std::fs::create_dir_all(dir).unwrap();
            let f = dir.join("claude");
            std::fs::write(&f, "").unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let path = format!(
            "{}:{}:/nonexistent:{}:{}",
            c.display(),
            b.display(),
            a.display(),
            c.display()
        );
        let found = claude_on_path(&path, Path::new("claude"));
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(found, vec![c.join("claude"), a.join("claude")]);
    }

    #[test]
    fn the_broker_line_names_what_is_brokered_and_what_is_weaker() {
        let allow = config::Config {
            egress: crate::egress::policy::Egress::Allowlist,
            ..config::Config::default()
        };
        let all = Held {
            gh: true,
            glab: true,
            gitlab_env: true,
            api_key: true,
            login: true,
            ..Held::default()
        };
        let (ok, d) = broker_summary(&allow, &all, true);
        assert_eq!(
            (ok, d.as_str()),
            (true, "stand-ins inside for gh's tokens (every host of hosts.yml), glab's tokens (every host of config.yml), GITLAB_TOKEN, ANTHROPIC_API_KEY, Claude Code's own login (~/.claude/.credentials.json)")
        );
        // What is not brokered is named, with why.
        let gw = Held {
            gateway: true,
            login_elsewhere: true,
            ..all
        };
        let (ok, d) = broker_summary(&allow, &gw, true);
        assert!(ok, "{d}");
        assert!(
            d.contains("not brokered, readable inside: ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL")
                && d.contains("CLAUDE_CONFIG_DIR")
                && !d.contains("own login"),
            "{d}"
        );
        // No CA bundle: a launch that brokers stops; nothing held, none stops.
        let login = Held {
            login: true,
            ..Held::default()
        };
        let (ok, d) = broker_summary(&allow, &login, false);
        assert!(
            !ok && d.contains("Claude Code's own login (~/.claude/.credentials.json) stops")
                && d.contains("exit 125"),
            "{d}"
        );
        assert!(broker_summary(&allow, &Held::default(), false).0);
        // A Console API key in ~/.claude.json: every brokering launch stops.
        let key = Held {
            primary_key: true,
            ..Held::default()
        };
        let (ok, d) = broker_summary(&allow, &key, true);
        assert!(
            ok && d.contains("primaryApiKey; the session writes a private copy"),
            "{d}"
        );
        let off = config::Config {
            broker: false,
            ..allow.clone()
        };
        let (ok, d) = broker_summary(&off, &login, true);
        assert!(
            ok && d.contains("broker = off")
                && d.contains("weaker")
                && d.contains("readable inside: Claude"),
            "{d}"
        );
        // The open jail brokers too (decision 0016); egress = off does not.
        let gh = Held {
            gh: true,
            ..Held::default()
        };
        let (ok, d) = broker_summary(&config::Config::default(), &gh, true);
        assert!(
            ok && d.starts_with("stand-ins inside for gh's tokens"),
            "{d}"
        );
        let host = config::Config {
            egress: crate::egress::policy::Egress::Off,
            ..Default::default()
        };
        let (_, d) = broker_summary(&host, &gh, true);
        assert!(
            d.starts_with("off: egress = off") && d.contains("weaker") && d.contains("gh's tokens"),
            "{d}"
        );
        let (_, d) = broker_summary(&off, &Held::default(), true);
        assert!(d.ends_with("no credential found to broker"), "{d}");
    }
}
