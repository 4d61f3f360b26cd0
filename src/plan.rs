//! The sandbox plan (SPEC §4.1–4.6): the exact bubblewrap argument list,
//! built as plain data by pure functions from the configuration and a
//! snapshot of host facts ([`Facts`], gathered by [`crate::host`]).
//!
//! Nothing here touches the file system, so every rule is unit-tested
//! without namespaces; [`crate::launch`] executes the result.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::error::bad_input;
use crate::paths;

/// File descriptors the executor hands to bubblewrap at these fixed numbers,
/// so the argument list is the same in `plan` output and at exec.
pub const FD_SECCOMP: i32 = 200;
pub const FD_GITCONFIG: i32 = 201;
pub const FD_RESOLV_CONF: i32 = 202;
pub const FD_SHIM_STDERR: i32 = 203;
pub const FD_SHIM_READY: i32 = 204;
/// The launch record (`verify`), bound over [`paths::LAUNCH_RECORD`].
pub const FD_LAUNCH_RECORD: i32 = 208;
/// The egress jail's gate (read end): the shim waits on it until the jail's
/// routes are locked, so bubblewrap builds the sandbox while pasta attaches.
pub const FD_JAIL_GATE: i32 = 209;
/// Read-write binds are handed over as `O_PATH` fds from this number up
/// (`--bind-fd`), so bubblewrap mounts exactly the inode that was checked.
pub const FD_RW_BASE: i32 = 210;

/// System directories that lead `PATH` inside the sandbox.
pub const SYSTEM_PATH: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Variables passed through from the launching environment when set (§4.5).
pub const PASS_THROUGH: &[&str] = &[
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

/// Directories under `$HOME` bound back read-write when present (§4.2).
pub const HOME_RW: &[&str] = &[".claude", ".claude.json", ".cache", ".local/share"];
/// Forge token directories, bound back read-write unless `no-forge`.
pub const HOME_FORGE: &[&str] = &[".config/gh", ".config/glab-cli"];
/// Claude Code's own runtime writes under `.local/share`, kept ephemeral.
pub const HOME_SHARE_MASKED: &[&str] = &[".local/share/applications", ".local/share/claude"];
/// uv's binaries: bound back read-only, so nothing inside can trojan a
/// program the user later runs outside the sandbox.
pub const HOME_RO: &[&str] = &[".local/bin/uv", ".local/bin/uvx"];
/// Files under `$HOME` that always read as empty inside.
pub const HOME_NULLED: &[&str] = &[".netrc", ".Xauthority", ".ICEauthority"];
/// System files that always read as empty inside, where they exist.
pub const SYSTEM_NULLED: &[&str] = &["/etc/shadow", "/etc/gshadow", "/etc/sudoers"];
/// Directories replaced by an empty tmpfs, where they exist.
pub const SYSTEM_TMPFS: &[&str] = &["/run/user", "/run/secrets"];

/// How `/proc` is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcMode {
    /// A fresh procfs for the sandbox's PID namespace: host PIDs invisible.
    Fresh,
    /// The host's `/proc` bound read-only, where the kernel refuses a fresh mount.
    HostReadOnly,
}

/// A snapshot of the host, taken by [`crate::host::gather`].
#[derive(Debug, Clone)]
pub struct Facts {
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
    /// Unix sockets under `/run` to mask.
    pub run_sockets: Vec<PathBuf>,
    /// Every read-write path (workspace, allow-write) resolved, symlinks followed;
    /// `None` when it does not exist.
    pub resolved: BTreeMap<PathBuf, Option<PathBuf>>,
    pub proc_mode: ProcMode,
    /// The launcher's namespace inodes, by kind (for the launch record).
    pub launcher_ns: BTreeMap<String, u64>,
    /// TCP ports listening on the host's loopback (for the launch record).
    pub host_loopback_tcp: Vec<u16>,
}

/// A read-write bind whose resolution is checked again just before exec (§4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwBind {
    /// The fd number bubblewrap reads it from (`--bind-fd`).
    pub fd: i32,
    /// As configured (or the current directory).
    pub requested: PathBuf,
    /// Where it resolved to when the plan was built; what bubblewrap binds.
    pub resolved: PathBuf,
}

/// Everything the executor needs: argument list, data for the numbered fds,
/// and the binds to re-check.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Arguments to bubblewrap (program name not included).
    pub bwrap_args: Vec<OsString>,
    /// Content for `--ro-bind-data`/`--seccomp` fds, by fd number.
    pub data_fds: Vec<(i32, Vec<u8>)>,
    /// Whether the git config written to [`FD_GITCONFIG`] carries the forge
    /// helpers. The executor renders it ([`gitconfig_data`]) once the user's
    /// identity is known, while bubblewrap is already starting.
    pub gitconfig_forge: bool,
    pub rw_binds: Vec<RwBind>,
    /// The workspace root (resolved).
    pub workspace: PathBuf,
    /// Index in `bwrap_args` of the `--` before the command.
    pub command_at: usize,
    /// What `verify` reads inside, when the placeholder to bind it over exists.
    /// The executor serializes it (after the jail adds its part).
    pub record: Option<crate::record::LaunchRecord>,
}

impl Plan {
    /// Insert bubblewrap options (e.g. the jail's resolv.conf bind) before the command.
    pub fn insert_before_command(&mut self, extra: Vec<OsString>) {
        let n = extra.len();
        self.bwrap_args
            .splice(self.command_at..self.command_at, extra);
        self.command_at += n;
    }

    /// The command bubblewrap runs inside (after the `--`).
    pub fn command(&self) -> &[OsString] {
        &self.bwrap_args[self.command_at + 1..]
    }
}

/// The git config text for [`FD_GITCONFIG`], given the user's identity.
pub fn gitconfig_data(plan: &Plan, name: Option<&str>, email: Option<&str>) -> String {
    crate::gitconfig::render(name, email, plan.gitconfig_forge)
}

/// Paths whose existence the plan depends on; [`crate::host::gather`] stats exactly these.
pub fn candidates(home: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = HOME_RW
        .iter()
        .chain(HOME_FORGE)
        .chain(HOME_SHARE_MASKED)
        .chain(HOME_RO)
        .map(|r| home.join(r))
        .collect();
    v.extend(SYSTEM_NULLED.iter().chain(SYSTEM_TMPFS).map(PathBuf::from));
    v.push(PathBuf::from(paths::LAUNCH_RECORD));
    v
}

/// The read-write paths the plan will ask [`Facts::resolved`] about.
pub fn rw_requests(cfg: &Config, cwd: &Path) -> Vec<PathBuf> {
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
pub fn claude_args(user_args: &[OsString]) -> Vec<OsString> {
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
pub fn environment(cfg: &Config, facts: &Facts) -> Vec<(OsString, OsString)> {
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
    if crate::testhooks::active(crate::testhooks::Mutation::PassGhToken) {
        if let Some(v) = get("GH_TOKEN") {
            push(OsStr::new("GH_TOKEN"), v);
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

struct Args(Vec<OsString>);

impl Args {
    fn push<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&mut self, items: I) {
        self.0
            .extend(items.into_iter().map(|s| s.as_ref().to_os_string()));
    }
}

/// Build the plan for one launch of the real binary with `user_args`.
pub fn build(cfg: &Config, facts: &Facts, user_args: &[OsString]) -> anyhow::Result<Plan> {
    let home = &facts.home;
    let has = |p: &Path| facts.existing.contains(p);

    // Read-write binds: resolve, validate.
    let mut rw_binds = Vec::new();
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
        let homes: Vec<&Path> = std::iter::once(home.as_path())
            .chain(facts.passwd_home.as_deref())
            .collect();
        check_rw_root(what, &requested, &resolved, &homes)?;
        let fd = FD_RW_BASE + rw_binds.len() as i32;
        rw_binds.push(RwBind {
            fd,
            requested,
            resolved,
        });
    }
    let workspace = rw_binds[0].resolved.clone();

    let mut a = Args(Vec::new());
    // §4.4 process isolation.
    a.push([
        "--die-with-parent",
        "--unshare-user",
        "--uid",
        &facts.uid.to_string(),
        "--gid",
        &facts.gid.to_string(),
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]);
    if crate::testhooks::active(crate::testhooks::Mutation::KeepCaps) {
        a.push(["--cap-add", "ALL"]);
    } else {
        a.push(["--cap-drop", "ALL"]);
    }
    // §4.1 file system.
    a.push(["--ro-bind", "/", "/", "--dev", "/dev"]);
    match facts.proc_mode {
        ProcMode::Fresh => a.push(["--proc", "/proc"]),
        ProcMode::HostReadOnly => a.push(["--ro-bind", "/proc", "/proc"]),
    }
    if !crate::testhooks::active(crate::testhooks::Mutation::TmpNotTmpfs) {
        a.push(["--tmpfs", "/tmp"]);
    }
    for d in SYSTEM_TMPFS {
        if has(Path::new(d)) {
            a.push(["--tmpfs", d]);
        }
    }
    for s in &facts.run_sockets {
        a.push([
            OsStr::new("--ro-bind"),
            OsStr::new("/dev/null"),
            s.as_os_str(),
        ]);
    }
    for f in SYSTEM_NULLED {
        if has(Path::new(f)) {
            a.push(["--ro-bind", "/dev/null", f]);
        }
    }
    // §4.2 $HOME by inversion; the user database's home too, when it differs
    // and $HOME does not already cover it.
    if let Some(ph) = facts
        .passwd_home
        .as_ref()
        .filter(|ph| !ph.starts_with(home) && ph.as_path() != Path::new("/"))
    {
        a.push([OsStr::new("--tmpfs"), ph.as_os_str()]);
    }
    a.push([OsStr::new("--tmpfs"), home.as_os_str()]);
    let bind_back = |a: &mut Args, flag: &str, rel: &str| {
        let p = home.join(rel);
        if has(&p) {
            a.push([OsStr::new(flag), p.as_os_str(), p.as_os_str()]);
        }
    };
    for rel in HOME_RW {
        bind_back(&mut a, "--bind", rel);
    }
    if has(&home.join(".local/share")) {
        for rel in HOME_SHARE_MASKED {
            a.push([OsStr::new("--tmpfs"), home.join(rel).as_os_str()]);
        }
    }
    if !cfg.no_forge {
        for rel in HOME_FORGE {
            bind_back(&mut a, "--bind", rel);
        }
    }
    for rel in HOME_RO {
        bind_back(&mut a, "--ro-bind", rel);
    }
    if crate::testhooks::active(crate::testhooks::Mutation::BindSsh) {
        let ssh = home.join(".ssh");
        a.push([OsStr::new("--bind"), ssh.as_os_str(), ssh.as_os_str()]);
    }
    let inside_claude = home.join(paths::INSIDE_REAL_CLAUDE_REL);
    a.push([
        OsStr::new("--ro-bind"),
        OsStr::new(paths::REAL_CLAUDE),
        inside_claude.as_os_str(),
    ]);
    for rel in HOME_NULLED {
        a.push([
            OsStr::new("--ro-bind"),
            OsStr::new("/dev/null"),
            home.join(rel).as_os_str(),
        ]);
    }
    // §4.6 curated git config, rendered per launch, read-only.
    a.push([
        OsString::from("--ro-bind-data"),
        FD_GITCONFIG.to_string().into(),
        paths::GITCONFIG.into(),
    ]);
    // What `verify` needs to know from outside, read-only (§7).
    let record = has(Path::new(paths::LAUNCH_RECORD)).then(|| crate::record::LaunchRecord {
        version: crate::record::RECORD_VERSION,
        egress_jail: cfg.egress_jail,
        no_forge: cfg.no_forge,
        home: home.clone(),
        workspace: workspace.clone(),
        workspace_configured: cfg.workspace_root.is_some(),
        allow_write: rw_binds[1..].iter().map(|b| b.resolved.clone()).collect(),
        pass_env: cfg.pass_env.clone(),
        allow_ip: cfg.allow_ip.clone(),
        site_subnets: Vec::new(),
        launcher_ns: facts.launcher_ns.clone(),
        host_loopback_tcp: facts.host_loopback_tcp.clone(),
    });
    if record.is_some() {
        a.push([
            OsString::from("--ro-bind-data"),
            FD_LAUNCH_RECORD.to_string().into(),
            paths::LAUNCH_RECORD.into(),
        ]);
    }
    // §4.3 workspace, then allow-write (after the masks, so it can punch through one).
    for b in &rw_binds {
        a.push([
            OsString::from("--bind-fd"),
            b.fd.to_string().into(),
            b.resolved.clone().into_os_string(),
        ]);
    }
    let chdir = if facts.cwd.starts_with(&workspace) {
        &facts.cwd
    } else {
        &workspace
    };
    a.push([OsStr::new("--chdir"), chdir.as_os_str()]);
    // §4.5 environment.
    a.push(["--clearenv"]);
    for (k, v) in environment(cfg, facts) {
        a.push([OsStr::new("--setenv"), &k, &v]);
    }
    // §4.4 terminal-injection defence: TIOCSTI/TIOCLINUX refused by seccomp.
    a.push([OsString::from("--seccomp"), FD_SECCOMP.to_string().into()]);
    let command_at = a.0.len();
    a.push([
        OsString::from("--"),
        paths::SELF_BIN.into(),
        "__shim".into(),
        FD_SHIM_STDERR.to_string().into(),
        FD_SHIM_READY.to_string().into(),
        if cfg.egress_jail {
            FD_JAIL_GATE.to_string().into()
        } else {
            OsString::from("-")
        },
        "--".into(),
        inside_claude.into_os_string(),
    ]);
    a.push(claude_args(user_args));

    Ok(Plan {
        bwrap_args: a.0,
        data_fds: vec![(FD_SECCOMP, crate::seccomp::program_bytes())],
        gitconfig_forge: !cfg.no_forge,
        rw_binds,
        workspace,
        command_at,
        record,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn facts() -> Facts {
        let home = PathBuf::from("/home/dev");
        let ws = PathBuf::from("/workspaces/app");
        let mut env = BTreeMap::new();
        for (k, v) in [
            (
                "PATH",
                "/home/dev/.local/bin:/usr/local/cargo/bin:/usr/bin:.:relative",
            ),
            ("HOME", "/home/dev"),
            ("USER", "mallory"),
            ("TERM", "xterm-256color"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C.UTF-8"),
            ("GH_TOKEN", "ghp_secret"),
            ("GITHUB_TOKEN", "ghs_secret"),
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock"),
            ("DISPLAY", ":0"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
            ("LD_PRELOAD", "/tmp/evil.so"),
            ("IS_SANDBOX", "0"),
            ("BASH_ENV", "/tmp/evil.sh"),
            ("FOO", "foo-value"),
        ] {
            env.insert(OsString::from(k), OsString::from(v));
        }
        let mut existing = BTreeSet::new();
        for rel in [
            ".claude",
            ".claude.json",
            ".cache",
            ".local/share",
            ".config/gh",
        ] {
            existing.insert(home.join(rel));
        }
        existing.insert(PathBuf::from("/etc/shadow"));
        existing.insert(PathBuf::from("/run/user"));
        let mut resolved = BTreeMap::new();
        resolved.insert(ws.clone(), Some(ws.clone()));
        Facts {
            uid: 1000,
            gid: 1000,
            user: "dev".into(),
            home,
            cwd: ws,
            env,
            existing,
            run_sockets: vec![PathBuf::from("/run/docker.sock")],
            resolved,
            proc_mode: ProcMode::Fresh,
            launcher_ns: BTreeMap::new(),
            host_loopback_tcp: Vec::new(),
            passwd_home: None,
        }
    }

    fn args_of(plan: &Plan) -> Vec<String> {
        plan.bwrap_args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The `--setenv` pairs of a plan.
    pub fn env_of(plan: &Plan) -> BTreeMap<String, String> {
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

    fn has_seq(plan: &Plan, seq: &[&str]) -> bool {
        args_of(plan).windows(seq.len()).any(|w| w == seq)
    }

    fn pos(plan: &Plan, seq: &[&str]) -> usize {
        args_of(plan)
            .windows(seq.len())
            .position(|w| w == seq)
            .unwrap_or_else(|| panic!("{seq:?} not in plan"))
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
        for rel in [
            ".claude",
            ".claude.json",
            ".cache",
            ".local/share",
            ".config/gh",
        ] {
            let p = format!("/home/dev/{rel}");
            assert!(
                pos(&plan, &["--bind", &p, &p]) > tmpfs_home,
                "{rel} bound back after the tmpfs"
            );
        }
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
                "--bind",
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
            &["--tmpfs", "/run/user"],
            &["--ro-bind", "/dev/null", "/etc/shadow"],
            &["--ro-bind", "/dev/null", "/run/docker.sock"],
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
            !has_seq(&plan, &["--tmpfs", "/run/secrets"]),
            "absent dirs are not mounted over"
        );
        assert!(!has_seq(&plan, &["--ro-bind", "/dev/null", "/etc/gshadow"]));
        let mut f = facts();
        f.proc_mode = ProcMode::HostReadOnly;
        let plan = build(&Config::default(), &f, &[]).unwrap();
        assert!(has_seq(&plan, &["--ro-bind", "/proc", "/proc"]));
        assert!(!has_seq(&plan, &["--proc", "/proc"]));
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
        assert!(pos(&plan, &["--tmpfs", "/run/user"]) < aw);
        assert!(pos(&plan, &["--tmpfs", "/home/dev"]) < ws);
        assert!(has_seq(&plan, &["--chdir", "/workspaces/app"]));
        assert_eq!(plan.rw_binds.len(), 2);
    }

    #[test]
    fn symlinked_workspace_binds_its_target() {
        let mut f = facts();
        f.cwd = PathBuf::from("/workspaces/link");
        f.resolved
            .insert(f.cwd.clone(), Some(PathBuf::from("/srv/real")));
        let plan = build(&Config::default(), &f, &[]).unwrap();
        assert!(has_seq(&plan, &["--bind-fd", "210", "/srv/real"]));
        assert_eq!(plan.rw_binds[0].resolved, PathBuf::from("/srv/real"));
        assert_eq!(
            plan.rw_binds[0].requested,
            PathBuf::from("/workspaces/link")
        );
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
        let args: Vec<String> = plan
            .bwrap_args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
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
            let n = plan.bwrap_args.iter().filter(|a| *a == "--tmpfs").count();
            assert_eq!(
                n,
                build(&Config::default(), &facts(), &[])
                    .unwrap()
                    .bwrap_args
                    .iter()
                    .filter(|a| *a == "--tmpfs")
                    .count(),
                "{ph}"
            );
        }
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
                if Config::default().egress_jail {
                    "209"
                } else {
                    "-"
                },
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
