//! The sandbox plan (SPEC §4.1–4.7): a typed [`Sandbox`] built by pure
//! functions from the configuration and a snapshot of host facts
//! ([`Facts`], gathered by [`crate::launch::host`]).
//!
//! Nothing here touches the file system, so every rule is unit-tested
//! without namespaces; [`crate::sandbox::render`] turns the result into
//! bubblewrap's arguments and [`crate::launch`] executes it.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::egress::policy::JailFacts;
use crate::egress::policy::{ClaudeTraffic, Egress};
use crate::error::bad_input;
use crate::sandbox::record::LaunchRecord;
use crate::sandbox::{
    Capabilities, Data, JailNet, Mount, Namespace, Network, Program, ProxyNet, RwBind, Sandbox,
    Seccomp,
};
use crate::sys::paths;

/// System directories that lead `PATH` inside the sandbox.
pub(crate) const SYSTEM_PATH: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Variables passed through from the launching environment when set (§4.5).
pub(crate) const PASS_THROUGH: &[&str] = &[
    "TERM",
    "COLORTERM",
    "LANG",
    "VIRTUAL_ENV",
    "UV_PROJECT_ENVIRONMENT",
    "UV_CACHE_DIR",
    "UV_PYTHON_CACHE_DIR",
    "PRE_COMMIT_HOME",
    "CLAUDE_SANDBOX_WORKSPACE_ROOT",
];

/// Claude Code's own state under `$HOME`, bound back read-write when present (§4.2).
pub(crate) const HOME_RW: &[&str] = &[".claude", ".claude.json"];
/// Directories every tool both writes and runs code from (completions,
/// systemd and D-Bus units, editor plugins, tool installs). Inside they are
/// the sandbox's own persistent directories, [`PRIVATE_STATE`]`/NAME` under
/// `$HOME` on the host, never the user's (§4.8): nothing written there is
/// read by a host tool, and nothing of the host's shows inside.
pub(crate) const HOME_PRIVATE: &[(&str, &str)] = &[(".cache", "cache"), (".local/share", "share")];
/// Where the private directories live on the host, relative to `$HOME`
/// (hidden from the sandbox like the rest of `$HOME`).
pub(crate) const PRIVATE_STATE: &str = ".local/state/claude-sandbox";
/// Forge token directories, bound back read-only unless `no-forge`: `gh`
/// aliases and extensions written there would run on the host.
pub(crate) const HOME_FORGE: &[&str] = &[".config/gh", ".config/glab-cli"];
/// Claude Code's own runtime writes under `.local/share`, kept ephemeral.
pub(crate) const HOME_SHARE_MASKED: &[&str] = &[".local/share/applications", ".local/share/claude"];
/// uv's binaries: bound back read-only, so nothing inside can trojan a
/// program the user later runs outside the sandbox.
pub(crate) const HOME_RO: &[&str] = &[".local/bin/uv", ".local/bin/uvx"];
/// Files under `$HOME` that always read as empty inside.
pub(crate) const HOME_NULLED: &[&str] = &[".netrc", ".Xauthority", ".ICEauthority"];
/// System files that always read as empty inside, where they exist.
pub(crate) const SYSTEM_NULLED: &[&str] = &["/etc/shadow", "/etc/gshadow", "/etc/sudoers"];
/// The memory files of the sandbox's PID 1 in a fresh `/proc`, masked
/// with the empty file (which bubblewrap's `nodev` bind makes unopenable:
/// EACCES): PID 1 is bubblewrap's init, with the session's uid and outside
/// the seccomp filter, so its memory written from inside would run code
/// free of it (the filter refuses `ptrace` and `process_vm_writev` of PID 1).
pub(crate) const PID1_MEM: &[&str] = &["/proc/1/mem", "/proc/1/task/1/mem"];
/// Directories replaced by an empty tmpfs, where they exist as directories:
/// every socket, secret and per-user runtime directory under `/run` is gone,
/// including those a daemon creates after the launch (§4.1, issue #13).
pub(crate) const SYSTEM_TMPFS: &[&str] = &["/run", "/var/run"];
/// What a session needs from `/run`, bound back read-only where it exists:
/// systemd-resolved's files and lookup socket (name resolution). The target
/// of `/etc/resolv.conf`, when it points into `/run`, is bound back too
/// ([`Facts::run_keep`]).
pub(crate) const RUN_KEEP: &[&str] = &["/run/systemd/resolve"];

/// How `/proc` is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcMode {
    /// A fresh procfs for the sandbox's PID namespace: host PIDs invisible.
    Fresh,
    /// The host's `/proc` bound read-only, where the kernel refuses a fresh mount.
    HostReadOnly,
}

/// One entry an unprivileged user could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreadable {
    pub(crate) path: PathBuf,
    /// A directory (masked by a tmpfs) or a file (by `/dev/null`).
    pub(crate) dir: bool,
}

/// A snapshot of the host, taken by [`crate::launch::host::gather`].
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub uid: u32,
    pub gid: u32,
    /// The real user's login name.
    pub user: String,
    /// `$HOME`, canonical.
    pub home: PathBuf,
    /// The home directory the user database gives, canonical, when it exists
    /// and differs from `$HOME` (sudo keeping HOME, tools that set it): it is
    /// masked too, or the real home would show through the read-only root.
    pub passwd_home: Option<PathBuf>,
    /// The current directory, canonical.
    pub cwd: PathBuf,
    /// The launching environment.
    pub env: BTreeMap<OsString, OsString>,
    /// Which of [`candidates`] exist.
    pub existing: BTreeSet<PathBuf>,
    /// The [`SYSTEM_TMPFS`] entries that are real directories (a `/var/run`
    /// symlink to `/run` is not masked twice).
    pub run_dirs: Vec<PathBuf>,
    /// What to bind back into the fresh `/run` ([`RUN_KEEP`] entries and the
    /// `/etc/resolv.conf` target under `/run`) that exists.
    pub run_keep: Vec<PathBuf>,
    /// Launched by root: what an unprivileged user could not read under the
    /// system directories ([`crate::launch::rootview`]), and the directories hidden
    /// whole. Empty otherwise.
    pub root_masks: Vec<Unreadable>,
    pub hidden_whole: Vec<PathBuf>,
    /// Every read-write path (workspace, allow-write) resolved, symlinks followed;
    /// `None` when it does not exist.
    pub resolved: BTreeMap<PathBuf, Option<PathBuf>>,
    pub proc_mode: ProcMode,
    /// The launcher's namespace inodes, by kind (for the launch record).
    pub launcher_ns: BTreeMap<String, u64>,
    /// TCP ports listening on the host's loopback (for the launch record).
    pub host_loopback_tcp: Vec<u16>,
    /// What the egress jail is planned from, when [`jailed`].
    pub jail: Option<JailFacts>,
    /// The protected workspace paths that exist (§4.8, [`crate::plan::protect`]),
    /// each as found and as resolved (a symlink to a file in the workspace
    /// protects that file).
    pub protected: Vec<RwBind>,
    /// What the walk of the workspace found ([`crate::plan::protect::discover`]),
    /// existing or not: the tripwire watches all of it.
    pub discovered: crate::plan::protect::Protected,
    /// The host's managed settings ([`paths::MANAGED_SETTINGS`]) when they
    /// exist and read as text; the sandbox gets them without the lockdown.
    pub managed_settings: Option<String>,
    /// This launch's session id ([`crate::egress::policy::session_id`]).
    pub session: String,
    /// What the user turned off of Claude Code's own traffic (allowlist mode).
    pub claude_traffic: ClaudeTraffic,
}

/// How the sandbox reaches the network: the one place this is decided
/// (facts are gathered for it, the plan adds it; everything after reads
/// [`Sandbox::network`]).
pub(crate) fn egress(cfg: &Config) -> Egress {
    cfg.egress
}

/// Whether the sandbox gets a network namespace of its own (open jail or
/// allowlist): the host's routes are then gathered ([`Facts::jail`]).
pub(crate) fn jailed(cfg: &Config) -> bool {
    egress(cfg).jailed()
}

/// Paths whose existence the plan depends on; [`crate::launch::host::gather`] stats exactly these.
pub(crate) fn candidates(home: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = HOME_RW
        .iter()
        .chain(HOME_FORGE)
        .chain(HOME_RO)
        .map(|r| home.join(r))
        .collect();
    v.extend(SYSTEM_NULLED.iter().map(PathBuf::from));
    v.push(PathBuf::from(paths::LAUNCH_RECORD));
    v
}

/// The host directory behind the private `~/NAME` of [`HOME_PRIVATE`].
pub(crate) fn private_dir(home: &Path, name: &str) -> PathBuf {
    home.join(PRIVATE_STATE).join(name)
}

/// The read-write paths the plan will ask [`Facts::resolved`] about.
pub(crate) fn rw_requests(cfg: &Config, cwd: &Path) -> Vec<PathBuf> {
    let mut v = vec![cfg
        .workspace_root
        .clone()
        .unwrap_or_else(|| cwd.to_path_buf())];
    v.extend(cfg.allow_write.iter().cloned());
    v
}

/// Security inputs a read-write bind must never cover.
const PROTECTED: &[&str] = &[
    paths::SHADOW,
    paths::LIBEXEC_DIR,
    paths::CONFIG_FILE,
    paths::GITCONFIG,
    "/etc/claude-code",
];

/// Refuse a read-write root that would expose `$HOME` wholesale, the whole
/// file system, or one of our own security inputs.
fn check_rw_root(
    what: &str,
    requested: &Path,
    resolved: &Path,
    homes: &[&Path],
) -> anyhow::Result<()> {
    let shown = if requested == resolved {
        format!("{}", requested.display())
    } else {
        format!(
            "{} (resolves to {})",
            requested.display(),
            resolved.display()
        )
    };
    if resolved == Path::new("/") {
        return Err(bad_input(format!(
            "refusing {what} {shown}: the whole file system would be writable; cd into a project directory or set workspace-root in {}",
            paths::CONFIG_FILE
        )));
    }
    if let Some(home) = homes.iter().find(|h| h.starts_with(resolved)) {
        return Err(bad_input(format!(
            "refusing {what} {shown}: it holds $HOME ({}), which would expose every credential in it; cd into a project directory or set workspace-root in {}",
            home.display(),
            paths::CONFIG_FILE
        )));
    }
    // The workspace inside a hidden entry of a home (`docs -> ~/.ssh`, a
    // project in ~/.config): everything there is masked (§4.2) and the bind
    // would show it, writable.
    if what == "workspace" {
        if let Some((home, entry)) = homes.iter().find_map(|h| {
            let first = resolved.strip_prefix(h).ok()?.components().next()?;
            let first = first.as_os_str().to_string_lossy();
            first.starts_with('.').then(|| (h, first.into_owned()))
        }) {
            return Err(bad_input(format!(
                "refusing {what} {shown}: it lies in {}, which the sandbox hides; cd into a project directory",
                home.join(entry).display()
            )));
        }
    }
    if let Some(p) = PROTECTED
        .iter()
        .find(|p| Path::new(p).starts_with(resolved))
    {
        return Err(bad_input(format!(
            "refusing {what} {shown}: it holds {p}, a security input of the sandbox; choose a narrower directory"
        )));
    }
    Ok(())
}

/// The version queries Claude Code answers on a fast path (~15 ms) only when
/// they are its sole argument; anything more loads the whole app (~220 ms).
const VERSION_ONLY: &[&str] = &["--version", "-v", "-V"];

/// The arguments the real binary receives: `--no-chrome` first, any user
/// `--chrome` dropped (up to a literal `--`, after which arguments are data).
/// A lone version query is passed as it is: it starts no session, so there is
/// no browser integration to refuse, and it keeps Claude Code's fast path.
pub(crate) fn claude_args(user_args: &[OsString]) -> Vec<OsString> {
    if let [only] = user_args {
        if VERSION_ONLY.iter().any(|v| only == v) {
            return vec![only.clone()];
        }
    }
    let mut out = vec![OsString::from("--no-chrome")];
    let mut literal = false;
    for a in user_args {
        if !literal {
            if a == "--" {
                literal = true;
            } else if a == "--chrome"
                || a.as_bytes().starts_with(b"--chrome=")
                || a == "--no-chrome"
            {
                continue;
            }
        }
        out.push(a.clone());
    }
    out
}

/// The environment inside the sandbox (§4.5), in a stable order.
pub(crate) fn environment(cfg: &Config, facts: &Facts) -> Vec<(OsString, OsString)> {
    let get = |k: &str| facts.env.get(OsStr::new(k)).cloned();
    let home = facts.home.as_os_str();
    let mut path: Vec<OsString> = SYSTEM_PATH.iter().map(OsString::from).collect();
    // Other absolute, system-wide entries of the caller's PATH keep their
    // order after the system directories (toolchains under /usr/local/...);
    // entries under $HOME or relative ones are dropped.
    if let Some(p) = get("PATH") {
        for entry in std::env::split_paths(&p) {
            if entry.is_absolute()
                && !entry.starts_with(&facts.home)
                && !entry.starts_with("/tmp")
                && !path.iter().any(|e| Path::new(e) == entry)
            {
                path.push(entry.into_os_string());
            }
        }
    }
    path.push(facts.home.join(".local/bin").into_os_string());
    if let Some(venv) = get("VIRTUAL_ENV").filter(|v| Path::new(v).is_absolute()) {
        path.push(Path::new(&venv).join("bin").into_os_string());
    }
    let mut env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), join_paths(&path)),
        ("HOME".into(), home.to_os_string()),
        ("USER".into(), facts.user.clone().into()),
        ("IS_SANDBOX".into(), "1".into()),
        ("GIT_CONFIG_GLOBAL".into(), paths::GITCONFIG.into()),
        ("GIT_CONFIG_SYSTEM".into(), "/dev/null".into()),
    ];
    // Allowlist mode: tools find the proxy (§4.9); nothing may override it.
    if egress(cfg) == Egress::Allowlist {
        env.extend(
            crate::egress::policy::proxy_env()
                .into_iter()
                .map(|(k, v)| (k.into(), v.into())),
        );
    }
    let mut push = |k: &OsStr, v: OsString| {
        if !env.iter().any(|(e, _)| e == k) {
            env.push((k.to_os_string(), v));
        }
    };
    for k in PASS_THROUGH {
        if let Some(v) = get(k) {
            push(OsStr::new(k), v);
        }
    }
    for (k, v) in &facts.env {
        if k.as_bytes().starts_with(b"LC_") && config_name_ok(k) {
            push(k, v.clone());
        }
    }
    for k in &cfg.pass_env {
        // Re-checked here so no path around the parser can forward a protected name.
        if crate::config::pass_env_refusal(k).is_none() {
            if let Some(v) = get(k) {
                push(OsStr::new(k), v);
            }
        }
    }
    env
}

fn config_name_ok(k: &OsStr) -> bool {
    k.to_str()
        .is_some_and(|s| crate::config::pass_env_refusal(s).is_none())
}

fn join_paths(parts: &[OsString]) -> OsString {
    let mut out = OsString::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(":");
        }
        out.push(p);
    }
    out
}

/// Build the sandbox for one launch of the real binary with `user_args`.
pub(crate) fn build(
    cfg: &Config,
    facts: &Facts,
    user_args: &[OsString],
) -> anyhow::Result<Sandbox> {
    let rw = rw_binds(cfg, facts)?;
    let workspace = rw[0].resolved.clone();
    let (network, resolv_conf) = network(cfg, facts, &rw)?;
    let mut mounts = system_mounts(facts);
    mounts.extend(home_mounts(cfg, facts));
    // §4.6 curated git config, rendered per launch, read-only.
    mounts.push(Mount::Data {
        dst: paths::GITCONFIG.into(),
        data: Data::GitConfig {
            forge: !cfg.no_forge,
        },
    });
    // What `verify` needs to know from outside, read-only (§7).
    if facts.existing.contains(Path::new(paths::LAUNCH_RECORD)) {
        mounts.push(Mount::Data {
            dst: paths::LAUNCH_RECORD.into(),
            data: Data::Record(Box::new(record(cfg, facts, &rw, &network))),
        });
    }
    // §4.3 workspace, then allow-write (after the masks, so it can punch through one).
    mounts.extend(rw.into_iter().map(Mount::Checked));
    // §4.8 protected paths, read-only over the read-write roots.
    mounts.extend(facts.protected.iter().cloned().map(Mount::CheckedReadOnly));
    if let Some(text) = resolv_conf {
        mounts.push(Mount::Data {
            dst: "/etc/resolv.conf".into(),
            data: Data::Text(text),
        });
    }
    // §6: the managed settings without the lockdown, which is there for
    // unsandboxed sessions only (decisions/0005): the user's own hooks and
    // MCP servers run here, the guard hooks too. A file that does not parse
    // is left as the host has it.
    if let Some(text) = facts
        .managed_settings
        .as_deref()
        .and_then(crate::plan::managed_settings::inside_managed)
    {
        mounts.push(Mount::Data {
            dst: paths::MANAGED_SETTINGS.into(),
            data: Data::Text(text),
        });
    }
    let chdir = if facts.cwd.starts_with(&workspace) {
        facts.cwd.clone()
    } else {
        workspace
    };
    Ok(Sandbox {
        uid: facts.uid,
        gid: facts.gid,
        // §4.4 process isolation.
        namespaces: vec![
            Namespace::Pid,
            Namespace::Ipc,
            Namespace::Uts,
            Namespace::CgroupIfSupported,
        ],
        nested_userns: false,
        capabilities: Capabilities::DropAll,
        mounts,
        chdir,
        env: environment(cfg, facts),
        // §4.4 terminal-injection defence (TIOCSTI/TIOCLINUX), keyrings, and
        // the kernel interfaces a session does not need (decision 0007).
        seccomp: Seccomp {
            program: crate::seccomp::program_bytes(),
        },
        network,
        // §4.8: what is protected and does not exist cannot be created
        // either (what exists is bound read-only above).
        guard: facts.discovered.paths.clone(),
        command: Program {
            path: facts.home.join(paths::INSIDE_REAL_CLAUDE_REL),
            args: claude_args(user_args),
        },
    })
}

/// The read-write roots (§4.3): the workspace first, then `allow-write`,
/// each resolved and refused when it would expose too much.
fn rw_binds(cfg: &Config, facts: &Facts) -> anyhow::Result<Vec<RwBind>> {
    let homes: Vec<&Path> = std::iter::once(facts.home.as_path())
        .chain(facts.passwd_home.as_deref())
        .collect();
    let mut out = Vec::new();
    for (i, requested) in rw_requests(cfg, &facts.cwd).into_iter().enumerate() {
        let what = if i == 0 { "workspace" } else { "allow-write" };
        let resolved = facts
            .resolved
            .get(&requested)
            .cloned()
            .flatten()
            .ok_or_else(|| {
                bad_input(format!(
                    "{what} {} does not exist; create it or fix {}",
                    requested.display(),
                    paths::CONFIG_FILE
                ))
            })?;
        check_rw_root(what, &requested, &resolved, &homes)?;
        out.push(RwBind {
            requested,
            resolved,
        });
    }
    Ok(out)
}

/// The network mode (§4.7, §4.9) and, with the jail, the resolv.conf to
/// bind over the host's when the host's would not work inside.
fn network(
    cfg: &Config,
    facts: &Facts,
    rw: &[RwBind],
) -> anyhow::Result<(Network, Option<String>)> {
    let mode = egress(cfg);
    if !mode.jailed() {
        return Ok((Network::Host, None));
    }
    let j = facts.jail.as_ref().ok_or_else(|| {
        crate::error::setup("internal error: the egress jail's host facts were not gathered")
    })?;
    if mode == Egress::Allowlist {
        return Ok((Network::Allowlist(proxy_net(cfg, facts, j, rw)?), None));
    }
    let plan = crate::egress::policy::plan_jail(&j.routes, &j.resolv, &cfg.allow_ip);
    let resolv_conf = plan.resolv_conf.filter(|_| !j.resolv_missing);
    Ok((
        Network::Jail(JailNet {
            route_batch: plan.route_batch,
            dns_forward: plan.dns_forward,
            iface: j.routes.iface.clone(),
        }),
        resolv_conf,
    ))
}

/// Allowlist mode's proxy: the configuration's rules and presets, Claude
/// Code's own domains, and what the open jail would block. The log must lie
/// outside every read-write root, or the session could rewrite it.
fn proxy_net(
    cfg: &Config,
    facts: &Facts,
    j: &crate::egress::policy::JailFacts,
    rw: &[RwBind],
) -> anyhow::Result<ProxyNet> {
    let log = crate::egress::policy::log_path(&facts.home, &facts.session);
    if let Some(b) = rw.iter().find(|b| log.starts_with(&b.resolved)) {
        return Err(bad_input(format!(
            "refusing egress = allowlist: the connection log {} would lie in the read-write {}; narrow workspace-root or allow-write in {}",
            log.display(),
            b.resolved.display(),
            paths::CONFIG_FILE
        )));
    }
    Ok(ProxyNet {
        listen: crate::egress::policy::PROXY_ADDR,
        policy: crate::egress::policy::Policy::new(
            &cfg.allow_domain,
            &cfg.allow_domains,
            facts.claude_traffic,
            &cfg.allow_ip,
            crate::egress::policy::blocked_ranges(&j.routes),
        ),
        session: facts.session.clone(),
        log,
    })
}

/// §4.1 and §4.4: the read-only root, fresh /dev, /proc and /tmp, masked
/// runtime directories, sockets and secret system files.
fn system_mounts(facts: &Facts) -> Vec<Mount> {
    let has = |p: &str| facts.existing.contains(Path::new(p));
    let mut m = vec![
        Mount::ReadOnly {
            src: "/".into(),
            dst: "/".into(),
        },
        Mount::Dev { dst: "/dev".into() },
        match facts.proc_mode {
            ProcMode::Fresh => Mount::Proc {
                dst: "/proc".into(),
            },
            ProcMode::HostReadOnly => Mount::ReadOnly {
                src: "/proc".into(),
                dst: "/proc".into(),
            },
        },
        Mount::Tmpfs { dst: "/tmp".into() },
    ];
    // (The host's /proc is bound read-only: no memory file opens for writing.)
    if facts.proc_mode == ProcMode::Fresh {
        m.extend(PID1_MEM.iter().map(|f| Mount::Empty { dst: f.into() }));
    }
    m.extend(
        facts
            .run_dirs
            .iter()
            .map(|d| Mount::Tmpfs { dst: d.clone() }),
    );
    m.extend(facts.run_keep.iter().map(|k| Mount::ReadOnly {
        src: k.clone(),
        dst: k.clone(),
    }));
    // Root sees what a user would (issue #13).
    m.extend(
        facts
            .hidden_whole
            .iter()
            .map(|d| Mount::Tmpfs { dst: d.clone() }),
    );
    m.extend(facts.root_masks.iter().map(|u| match u.dir {
        true => Mount::Tmpfs {
            dst: u.path.clone(),
        },
        false => Mount::Empty {
            dst: u.path.clone(),
        },
    }));
    m.extend(
        SYSTEM_NULLED
            .iter()
            .filter(|f| has(f))
            .map(|f| Mount::Empty { dst: f.into() }),
    );
    m
}

/// §4.2 `$HOME` by inversion: an empty tmpfs with Claude Code's state bound
/// back; the user database's home masked too, when it differs and `$HOME`
/// does not already cover it.
fn home_mounts(cfg: &Config, facts: &Facts) -> Vec<Mount> {
    let home = &facts.home;
    let present = |rel: &&&str| facts.existing.contains(&home.join(rel));
    let mut m = Vec::new();
    m.extend(
        other_homes(facts)
            .into_iter()
            .map(|dst| Mount::Tmpfs { dst }),
    );
    m.push(Mount::Tmpfs { dst: home.clone() });
    m.extend(HOME_RW.iter().filter(present).map(|rel| Mount::ReadWrite {
        src: home.join(rel),
        dst: home.join(rel),
    }));
    for (rel, name) in HOME_PRIVATE {
        m.push(Mount::ReadWrite {
            src: private_dir(home, name),
            dst: home.join(rel),
        });
    }
    m.extend(HOME_SHARE_MASKED.iter().map(|rel| Mount::Tmpfs {
        dst: home.join(rel),
    }));
    if !cfg.no_forge {
        m.extend(
            HOME_FORGE
                .iter()
                .filter(present)
                .map(|rel| Mount::ReadOnly {
                    src: home.join(rel),
                    dst: home.join(rel),
                }),
        );
    }
    m.extend(HOME_RO.iter().filter(present).map(|rel| Mount::ReadOnly {
        src: home.join(rel),
        dst: home.join(rel),
    }));
    m.push(Mount::ReadOnly {
        src: paths::REAL_CLAUDE.into(),
        dst: home.join(paths::INSIDE_REAL_CLAUDE_REL),
    });
    m.extend(HOME_NULLED.iter().map(|rel| Mount::Empty {
        dst: home.join(rel),
    }));
    m
}

/// The user database's home, masked too when it differs from `$HOME` and
/// `$HOME` does not already cover it.
fn other_homes(facts: &Facts) -> Vec<PathBuf> {
    facts
        .passwd_home
        .iter()
        .filter(|ph| !ph.starts_with(&facts.home) && ph.as_path() != Path::new("/"))
        .cloned()
        .collect()
}

/// The launch record `verify` reads from inside.
fn record(cfg: &Config, facts: &Facts, rw: &[RwBind], network: &Network) -> LaunchRecord {
    LaunchRecord {
        version: crate::sandbox::record::RECORD_VERSION,
        egress: egress(cfg),
        no_forge: cfg.no_forge,
        home: facts.home.clone(),
        workspace: rw[0].resolved.clone(),
        workspace_configured: cfg.workspace_root.is_some(),
        allow_write: rw[1..].iter().map(|b| b.resolved.clone()).collect(),
        pass_env: cfg.pass_env.clone(),
        allow_ip: cfg.allow_ip.clone(),
        site_subnets: match (network, &facts.jail) {
            (Network::Jail(_), Some(j)) => j.routes.connected.clone(),
            _ => Vec::new(),
        },
        launcher_ns: facts.launcher_ns.clone(),
        host_loopback_tcp: facts.host_loopback_tcp.clone(),
        other_homes: other_homes(facts),
        allow_env_overrides: cfg.allow_env_overrides,
        root_view: facts.uid == 0,
        weakened_by_env: cfg.weakened_by_env.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixtures::facts;

    fn args_of(plan: &Sandbox) -> Vec<String> {
        crate::sandbox::render(plan)
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The `--setenv` pairs of a plan.
    fn env_of(plan: &Sandbox) -> BTreeMap<String, String> {
        let a = args_of(plan);
        let mut m = BTreeMap::new();
        let mut i = 0;
        while i < a.len() {
            if a[i] == "--setenv" {
                m.insert(a[i + 1].clone(), a[i + 2].clone());
                i += 3;
            } else if a[i] == "--" {
                break;
            } else {
                i += 1;
            }
        }
        m
    }

    fn has_seq(plan: &Sandbox, seq: &[&str]) -> bool {
        args_of(plan).windows(seq.len()).any(|w| w == seq)
    }

    fn pos(plan: &Sandbox, seq: &[&str]) -> usize {
        args_of(plan)
            .windows(seq.len())
            .position(|w| w == seq)
            .unwrap_or_else(|| panic!("{seq:?} not in plan"))
    }

    /// The git config the executor would render for this sandbox.
    fn gitconfig_data(plan: &Sandbox, name: Option<&str>, email: Option<&str>) -> String {
        let forge = plan
            .mounts
            .iter()
            .find_map(|m| match m {
                Mount::Data {
                    data: Data::GitConfig { forge },
                    ..
                } => Some(*forge),
                _ => None,
            })
            .expect("a git config mount");
        crate::plan::gitconfig::render(name, email, forge)
    }

    #[test]
    fn no_secret_reaches_the_sandbox() {
        let cfg = Config {
            pass_env: vec!["FOO".into()],
            ..Config::default()
        };
        let plan = build(&cfg, &facts(), &[]).unwrap();
        let all = args_of(&plan).join("\n");
        for secret in [
            "ghp_secret",
            "ghs_secret",
            "sk-ant-secret",
            "ssh-agent.sock",
            "aws-secret",
            "evil",
        ] {
            assert!(!all.contains(secret), "{secret} leaked into the plan");
        }
        let env = env_of(&plan);
        for name in [
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "SSH_AUTH_SOCK",
            "DISPLAY",
            "AWS_SECRET_ACCESS_KEY",
            "LD_PRELOAD",
            "BASH_ENV",
        ] {
            assert!(!env.contains_key(name), "{name} in the sandbox environment");
        }
        assert_eq!(env["FOO"], "foo-value");
    }

    #[test]
    fn pass_env_of_protected_names_forwards_none() {
        // Even if a Config were built around the parser, the plan re-checks.
        let cfg = Config {
            pass_env: vec!["LD_PRELOAD".into(), "PATH".into(), "IS_SANDBOX".into()],
            ..Config::default()
        };
        let plan = build(&cfg, &facts(), &[]).unwrap();
        let env = env_of(&plan);
        assert!(!env.contains_key("LD_PRELOAD"));
        assert_eq!(env["IS_SANDBOX"], "1");
        assert!(
            env["PATH"].starts_with("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        );
    }

    #[test]
    fn environment_is_exactly_the_spec() {
        let plan = build(&Config::default(), &facts(), &[]).unwrap();
        let env = env_of(&plan);
        let keys: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "GIT_CONFIG_GLOBAL",
                "GIT_CONFIG_SYSTEM",
                "HOME",
                "IS_SANDBOX",
                "LANG",
                "LC_ALL",
                "PATH",
                "TERM",
                "USER"
            ]
        );
        assert_eq!(
            env["USER"], "dev",
            "USER is the real user, not the caller's variable"
        );
        assert_eq!(env["HOME"], "/home/dev");
        assert_eq!(env["GIT_CONFIG_GLOBAL"], "/etc/claude-gitconfig");
        assert_eq!(env["GIT_CONFIG_SYSTEM"], "/dev/null");
        assert_eq!(
            env["PATH"],
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/cargo/bin:/home/dev/.local/bin"
        );
        assert!(has_seq(&plan, &["--clearenv"]));
    }

    #[test]
    fn virtualenv_bin_appended_last() {
        let mut f = facts();
        f.env
            .insert("VIRTUAL_ENV".into(), "/workspaces/app/.venv".into());
        let env = env_of(&build(&Config::default(), &f, &[]).unwrap());
        assert!(
            env["PATH"].ends_with(":/home/dev/.local/bin:/workspaces/app/.venv/bin"),
            "{}",
            env["PATH"]
        );
        assert_eq!(env["VIRTUAL_ENV"], "/workspaces/app/.venv");
    }

    #[test]
    fn home_by_inversion() {
        let plan = build(&Config::default(), &facts(), &[]).unwrap();
        let tmpfs_home = pos(&plan, &["--tmpfs", "/home/dev"]);
        for rel in [".claude", ".claude.json"] {
            let p = format!("/home/dev/{rel}");
            assert!(
                pos(&plan, &["--bind", &p, &p]) > tmpfs_home,
                "{rel} bound back after the tmpfs"
            );
        }
        // §4.8: the sandbox's own cache and share, never the user's.
        for (rel, name) in [(".cache", "cache"), (".local/share", "share")] {
            let src = format!("/home/dev/.local/state/claude-sandbox/{name}");
            let dst = format!("/home/dev/{rel}");
            assert!(pos(&plan, &["--bind", &src, &dst]) > tmpfs_home, "{rel}");
            assert!(
                !has_seq(&plan, &["--bind", &dst, &dst]),
                "{rel} of the host"
            );
        }
        // The forge dirs read-only (gh aliases and extensions run on the host).
        let gh = "/home/dev/.config/gh";
        assert!(pos(&plan, &["--ro-bind", gh, gh]) > tmpfs_home);
        assert!(!has_seq(&plan, &["--bind", gh, gh]));
        // Absent entries are not bound (bwrap would fail or create them on the host).
        assert!(!has_seq(
            &plan,
            &[
                "--bind",
                "/home/dev/.config/glab-cli",
                "/home/dev/.config/glab-cli"
            ]
        ));
        assert!(has_seq(
            &plan,
            &["--tmpfs", "/home/dev/.local/share/applications"]
        ));
        assert!(has_seq(
            &plan,
            &["--tmpfs", "/home/dev/.local/share/claude"]
        ));
        assert!(has_seq(
            &plan,
            &[
                "--ro-bind",
                "/usr/libexec/claude-sandbox/claude",
                "/home/dev/.local/bin/claude"
            ]
        ));
        for f in [".netrc", ".Xauthority", ".ICEauthority"] {
            assert!(has_seq(
                &plan,
                &["--ro-bind", "/dev/null", &format!("/home/dev/{f}")]
            ));
        }
        let all = args_of(&plan).join("\n");
        for hidden in [
            ".ssh",
            ".aws",
            ".gnupg",
            ".docker",
            ".kube",
            ".gitconfig",
            ".bash_history",
            ".config/gcloud",
        ] {
            assert!(!all.contains(hidden), "{hidden} appears in the plan");
        }
    }

    #[test]
    fn no_forge_drops_forge_dirs_and_helpers() {
        let mut f = facts();
        f.existing
            .insert(PathBuf::from("/home/dev/.config/glab-cli"));
        let cfg = Config {
            no_forge: true,
            ..Config::default()
        };
        let plan = build(&cfg, &f, &[]).unwrap();
        assert!(!args_of(&plan).join("\n").contains(".config/g"));
        let git = gitconfig_data(&plan, Some("Dev"), None);
        assert!(!git.contains("auth git-credential"), "{git}");
        let plan = build(&Config::default(), &f, &[]).unwrap();
        assert!(has_seq(
            &plan,
            &[
                "--ro-bind",
                "/home/dev/.config/glab-cli",
                "/home/dev/.config/glab-cli"
            ]
        ));
        let git = gitconfig_data(&plan, Some("Dev"), None);
        assert!(git.contains("gh auth git-credential") && git.contains("glab auth git-credential"));
    }

    #[test]
    fn system_masks_and_process_isolation() {
        let plan = build(&Config::default(), &facts(), &[]).unwrap();
        for seq in [
            &["--ro-bind", "/", "/"][..],
            &["--dev", "/dev"],
            &["--proc", "/proc"],
            &["--tmpfs", "/tmp"],
            &["--tmpfs", "/run"],
            &["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"],
            &["--ro-bind", "/dev/null", "/etc/shadow"],
            &["--cap-drop", "ALL"],
            &["--unshare-pid"],
            &["--unshare-ipc"],
            &["--unshare-uts"],
            &["--unshare-user"],
            &["--die-with-parent"],
            &["--seccomp", "200"],
        ] {
            assert!(has_seq(&plan, seq), "{seq:?} missing");
        }
        assert!(
            pos(&plan, &["--tmpfs", "/run"])
                < pos(
                    &plan,
                    &["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]
                ),
            "the resolver's files come back after /run is replaced"
        );
        assert!(!has_seq(&plan, &["--ro-bind", "/dev/null", "/etc/gshadow"]));
        let mut f = facts();
        f.proc_mode = ProcMode::HostReadOnly;
        let plan = build(&Config::default(), &f, &[]).unwrap();
        assert!(has_seq(&plan, &["--ro-bind", "/proc", "/proc"]));
        assert!(!has_seq(&plan, &["--proc", "/proc"]));
    }

    /// The managed settings the plan binds, if any.
    fn managed_of(plan: &Sandbox) -> Option<String> {
        plan.mounts.iter().find_map(|m| match m {
            Mount::Data {
                dst,
                data: Data::Text(t),
            } if dst == Path::new(paths::MANAGED_SETTINGS) => Some(t.clone()),
            _ => None,
        })
    }

    #[test]
    fn managed_settings_bound_without_the_lockdown_only_when_they_parse() {
        // None on the host: nothing bound (the golden plans have none).
        let plan = build(&Config::default(), &facts(), &[]).unwrap();
        assert_eq!(managed_of(&plan), None);
        // As install writes them: bound read-only, lockdown gone, guard kept.
        let (host, _) =
            crate::plan::managed_settings::merge_managed(Some(r#"{"model": "corp"}"#), true)
                .unwrap();
        let mut f = facts();
        f.managed_settings = Some(host.clone());
        let plan = build(&Config::default(), &f, &[]).unwrap();
        let inside = managed_of(&plan).expect("managed settings bound");
        assert_eq!(
            Some(inside.clone()),
            crate::plan::managed_settings::inside_managed(&host)
        );
        assert!(
            inside.contains(crate::plan::managed_settings::PROMPT_GATE_CMD),
            "{inside}"
        );
        assert!(inside.contains("\"corp\""), "{inside}");
        for k in [
            "allowManagedHooksOnly",
            "allowManagedMcpServersOnly",
            "apiKeyHelper",
        ] {
            assert!(!inside.contains(k), "{k} inside: {inside}");
        }
        let args = args_of(&plan);
        let at = args
            .iter()
            .position(|a| a == paths::MANAGED_SETTINGS)
            .unwrap();
        assert_eq!(args[at - 2], "--ro-bind-data", "{args:?}");
        // Bound after the read-only root, which it lies on.
        let mount_at = |dst: &str| {
            plan.mounts
                .iter()
                .position(|m| m.dst() == Path::new(dst))
                .unwrap()
        };
        assert!(mount_at("/") < mount_at(paths::MANAGED_SETTINGS));
        // Not JSON: nothing bound, the host's file stands as it is.
        for bad in ["{ not json", "[]"] {
            f.managed_settings = Some(bad.into());
            let plan = build(&Config::default(), &f, &[]).unwrap();
            assert_eq!(managed_of(&plan), None, "{bad}");
        }
    }

    #[test]
    fn workspace_and_allow_write_come_after_masks() {
        let mut f = facts();
        let sock = PathBuf::from("/run/user/1000/podman/podman.sock");
        f.resolved.insert(sock.clone(), Some(sock.clone()));
        let cfg = Config {
            allow_write: vec![sock],
            ..Config::default()
        };
        let plan = build(&cfg, &f, &[]).unwrap();
        let ws = pos(&plan, &["--bind-fd", "210", "/workspaces/app"]);
        let aw = pos(
            &plan,
            &["--bind-fd", "211", "/run/user/1000/podman/podman.sock"],
        );
        assert!(
            pos(&plan, &["--tmpfs", "/run"]) < aw,
            "allow-write punches through /run"
        );
        assert!(pos(&plan, &["--tmpfs", "/home/dev"]) < ws);
        assert!(has_seq(&plan, &["--chdir", "/workspaces/app"]));
        assert_eq!(plan.rw_binds().count(), 2);
    }

    #[test]
    fn symlinked_workspace_binds_its_target() {
        let mut f = facts();
        f.cwd = PathBuf::from("/workspaces/link");
        f.resolved
            .insert(f.cwd.clone(), Some(PathBuf::from("/srv/real")));
        let plan = build(&Config::default(), &f, &[]).unwrap();
        assert!(has_seq(&plan, &["--bind-fd", "210", "/srv/real"]));
        let ws = plan.rw_binds().next().unwrap();
        assert_eq!(ws.resolved, PathBuf::from("/srv/real"));
        assert_eq!(ws.requested, PathBuf::from("/workspaces/link"));
    }

    #[test]
    fn refuses_home_root_and_security_inputs_as_workspace() {
        for (cwd, target, needle) in [
            ("/home/dev", "/home/dev", "holds $HOME"),
            ("/", "/", "whole file system"),
            ("/home", "/home", "holds $HOME"),
            ("/etc", "/etc", "/etc/claude-sandbox.conf"),
            ("/usr/local", "/usr/local", "/usr/local/bin/claude"),
            ("/workspaces/evil", "/home/dev", "resolves to /home/dev"),
        ] {
            let mut f = facts();
            f.cwd = PathBuf::from(cwd);
            f.resolved
                .insert(f.cwd.clone(), Some(PathBuf::from(target)));
            let e = build(&Config::default(), &f, &[]).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2);
            assert!(e.to_string().contains(needle), "{cwd}: {e}");
        }
        let mut f = facts();
        f.resolved.insert(
            PathBuf::from("/etc/claude-code"),
            Some(PathBuf::from("/etc/claude-code")),
        );
        let cfg = Config {
            allow_write: vec![PathBuf::from("/etc/claude-code")],
            ..Config::default()
        };
        assert!(build(&cfg, &f, &[])
            .unwrap_err()
            .to_string()
            .contains("allow-write"));
    }

    #[test]
    fn the_user_databases_home_is_masked_when_home_differs() {
        let mut f = facts();
        f.passwd_home = Some(PathBuf::from("/home/real"));
        let plan = build(&Config::default(), &f, &[]).unwrap();
        let args = args_of(&plan);
        let masked = args.windows(2).position(|w| w == ["--tmpfs", "/home/real"]);
        let home = args.windows(2).position(|w| w == ["--tmpfs", "/home/dev"]);
        assert!(masked.is_some() && masked < home, "{args:?}");
        // A workspace holding the real home is refused like one holding $HOME.
        f.cwd = PathBuf::from("/home");
        f.resolved
            .insert(f.cwd.clone(), Some(PathBuf::from("/home")));
        assert!(build(&Config::default(), &f, &[])
            .unwrap_err()
            .to_string()
            .contains("holds $HOME (/home/"));
        // Under $HOME already, or /: nothing more to mask.
        for ph in ["/home/dev/sub", "/"] {
            let mut f = facts();
            f.passwd_home = Some(PathBuf::from(ph));
            let plan = build(&Config::default(), &f, &[]).unwrap();
            let n = args_of(&plan).iter().filter(|a| *a == "--tmpfs").count();
            assert_eq!(
                n,
                args_of(&build(&Config::default(), &facts(), &[]).unwrap())
                    .iter()
                    .filter(|a| *a == "--tmpfs")
                    .count(),
                "{ph}"
            );
        }
    }

    #[test]
    fn protected_paths_are_read_only_by_checked_fd_over_the_workspace() {
        let mut f = facts();
        let cfgp = PathBuf::from("/workspaces/app/.git/config");
        f.protected = vec![RwBind {
            requested: cfgp.clone(),
            resolved: cfgp,
        }];
        let plan = build(&Config::default(), &f, &[]).unwrap();
        let ws = pos(&plan, &["--bind-fd", "210", "/workspaces/app"]);
        let ro = pos(
            &plan,
            &["--ro-bind-fd", "211", "/workspaces/app/.git/config"],
        );
        assert!(ro > ws, "protected paths come after the workspace bind");
    }

    #[test]
    fn a_workspace_in_a_hidden_home_entry_is_refused() {
        for (cwd, target) in [
            ("/workspaces/app/docs", "/home/dev/.ssh"),
            ("/home/dev/.config/proj", "/home/dev/.config/proj"),
            ("/workspaces/x", "/home/real/.aws/sub"),
        ] {
            let mut f = facts();
            f.passwd_home = Some(PathBuf::from("/home/real"));
            f.cwd = PathBuf::from(cwd);
            f.resolved
                .insert(f.cwd.clone(), Some(PathBuf::from(target)));
            let e = build(&Config::default(), &f, &[]).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2);
            assert!(e.to_string().contains("which the sandbox hides"), "{e}");
            assert!(
                e.to_string().contains(
                    target
                        .split('/')
                        .take(4)
                        .collect::<Vec<_>>()
                        .join("/")
                        .as_str()
                ),
                "{e}"
            );
        }
        // A project directory under $HOME is still a workspace.
        let mut f = facts();
        f.cwd = PathBuf::from("/home/dev/projects/app");
        f.resolved.insert(f.cwd.clone(), Some(f.cwd.clone()));
        assert!(build(&Config::default(), &f, &[]).is_ok());
    }

    #[test]
    fn missing_workspace_is_an_error() {
        let mut f = facts();
        let cfg = Config {
            workspace_root: Some("/nope".into()),
            ..Config::default()
        };
        f.resolved.insert(PathBuf::from("/nope"), None);
        let e = build(&cfg, &f, &[]).unwrap_err();
        assert!(e.to_string().contains("/nope does not exist"), "{e}");
    }

    #[test]
    fn lone_version_query_keeps_its_fast_path() {
        for v in ["--version", "-v", "-V"] {
            assert_eq!(claude_args(&[OsString::from(v)]), [OsString::from(v)]);
        }
        // With anything else, --no-chrome is injected as always.
        let a = claude_args(&["--version".into(), "--chrome".into()]);
        assert_eq!(a, ["--no-chrome", "--version"].map(OsString::from));
        assert_eq!(claude_args(&[]), ["--no-chrome"].map(OsString::from));
    }

    #[test]
    fn chrome_flag_dropped_no_chrome_injected() {
        let args: Vec<OsString> = ["-p", "--chrome", "hi", "--chrome=x", "--", "--chrome"]
            .iter()
            .map(OsString::from)
            .collect();
        let out = claude_args(&args);
        assert_eq!(
            out,
            ["--no-chrome", "-p", "hi", "--", "--chrome"].map(OsString::from)
        );
        let plan = build(&Config::default(), &facts(), &args).unwrap();
        let a = args_of(&plan);
        let tail = &a[a.iter().position(|x| x == "--").unwrap()..];
        assert_eq!(
            tail,
            [
                "--",
                "/usr/libexec/claude-sandbox/claude-sandbox",
                "__shim",
                "203",
                "204",
                if Config::default().egress == Egress::Open {
                    "209"
                } else {
                    "-"
                },
                // No protected path in these facts: no creation guard.
                "-",
                "--",
                "/home/dev/.local/bin/claude",
                "--no-chrome",
                "-p",
                "hi",
                "--",
                "--chrome"
            ]
        );
    }
}
