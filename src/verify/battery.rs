//! `claude-sandbox verify` (SPEC §7): the deterministic battery, run from
//! inside a session. Each check proves one defence from what the process can
//! observe itself — kernel facts (`/proc/self/*`, namespace ownership, route
//! lookups that send no packet), the mount table, the environment — plus the
//! *launch record*: a small JSON file the shadow binds read-only over
//! [`paths::LAUNCH_RECORD`] at every launch, saying what the launcher knew and
//! the sandbox cannot see (the jail setting, the launcher's namespaces, the
//! host's loopback listeners, the configured read-write paths). Outside a
//! sandbox that file is the empty placeholder the installer wrote.
//!
//! Output: a table (or `--json`, an array of `{id, name, status, detail,
//! defence}`), then `N PASS / M FAIL`; the exit status is M. A check of the
//! egress jail passes with a note when the jail is deliberately off, and
//! fails when it is on but incomplete. docs/verify.md maps every check to the
//! defence and the mechanism behind it.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::sandbox::LaunchRecord;
#[cfg(test)]
use crate::sandbox::{self, Data, Namespace, Sandbox};
use crate::sys::kernel::{ns_inode, parse_routes, Route, NS_KINDS};
use crate::{plan, sys::inside, sys::paths};

/// Command-line arguments of `claude-sandbox verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Print one JSON array of {id, name, status, detail, defence} instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// PASS or FAIL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Status {
    Pass,
    Fail,
}

/// One result.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    pub id: u32,
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    /// The defence this check proves.
    pub defence: &'static str,
}

/// One entry of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    /// The path within its file system that is mounted (a bind's source).
    pub root: PathBuf,
    pub point: PathBuf,
    pub read_only: bool,
    pub fstype: String,
    pub source: String,
}

/// Undo mountinfo's octal escapes (`\040` for a space, …).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if let (b'\\', Some(d)) = (b[i], octal) {
            let v =
                u32::from(d[0] - b'0') * 64 + u32::from(d[1] - b'0') * 8 + u32::from(d[2] - b'0');
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse `/proc/self/mountinfo`, in mount order.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            if pre.len() < 6 || post.len() < 2 {
                return None;
            }
            Some(Mount {
                root: PathBuf::from(unescape(pre[3])),
                point: PathBuf::from(unescape(pre[4])),
                read_only: pre[5].split(',').any(|o| o == "ro"),
                fstype: post[0].to_string(),
                source: unescape(post[1]),
            })
        })
        .collect()
}

/// The mount visible at exactly `point` (the last one mounted there).
fn top_mount<'a>(mounts: &'a [Mount], point: &Path) -> Option<&'a Mount> {
    mounts.iter().rev().find(|m| m.point == point)
}

/// The ranges the jail must blackhole, and link-local, which it makes unreachable.
pub(crate) fn required_rejects() -> Vec<(Ipv4Addr, u8)> {
    let mut v: Vec<(Ipv4Addr, u8)> = crate::egress::policy::BLACKHOLES.to_vec();
    v.push(crate::egress::policy::UNREACHABLE);
    v
}

/// Required ranges (as `addr/len`) with a sample host that `routable` says
/// the kernel would route. (Blackhole routes do not show in /proc/net/route,
/// so the ranges are proven by route lookups, which send no packet.)
pub(crate) fn open_ranges(
    required: &[(Ipv4Addr, u8)],
    routable: &dyn Fn(Ipv4Addr) -> bool,
) -> Vec<String> {
    required
        .iter()
        .filter(|(net, len)| subnet_samples(*net, *len).into_iter().any(routable))
        .map(cidr)
        .collect()
}

/// `addr/len`, for people.
fn cidr((net, len): &(Ipv4Addr, u8)) -> String {
    format!("{net}/{len}")
}

/// Mount points under `home` that are not among the allowed bind-backs and
/// masks (§4.2) and not inside a configured read-write path.
/// The plan's masks and read-only bind-backs around `$HOME` that are not in
/// effect: the runtime directories under a bound-back `~/.local/share` must
/// be tmpfs ([`plan::HOME_SHARE_MASKED`]), uv's binaries and the real
/// binary read-only ([`plan::HOME_RO`]), the user database's own home a
/// tmpfs when it differs from `$HOME`.
pub(crate) fn home_masks_missing(mounts: &[Mount], record: &LaunchRecord) -> Vec<String> {
    let home = &record.home;
    let mut out = Vec::new();
    if top_mount(mounts, &home.join(".local/share")).is_some() {
        for rel in plan::HOME_SHARE_MASKED {
            let p = home.join(rel);
            if top_mount(mounts, &p).is_none_or(|m| m.fstype != "tmpfs") {
                out.push(format!("{} is not a fresh tmpfs", p.display()));
            }
        }
    }
    for rel in plan::HOME_RO
        .iter()
        .chain(std::iter::once(&paths::INSIDE_REAL_CLAUDE_REL))
    {
        let p = home.join(rel);
        if top_mount(mounts, &p).is_some_and(|m| !m.read_only) {
            out.push(format!("{} is bound back writable", p.display()));
        }
    }
    for h in &record.other_homes {
        if top_mount(mounts, h).is_none_or(|m| m.fstype != "tmpfs") {
            out.push(format!(
                "the user database's home {} is not masked",
                h.display()
            ));
        }
    }
    out
}

/// Mounts under `$HOME` the plan's allowlist does not name (as `~/REL`).
pub(crate) fn unexpected_home_mounts(mounts: &[Mount], record: &LaunchRecord) -> Vec<String> {
    let home = &record.home;
    let mut allowed: Vec<PathBuf> = plan::HOME_RW
        .iter()
        .chain(plan::HOME_PRIVATE.iter().map(|(rel, _)| rel))
        .chain(plan::HOME_SHARE_MASKED)
        .chain(plan::HOME_RO)
        .chain(plan::HOME_NULLED)
        .chain(std::iter::once(&paths::INSIDE_REAL_CLAUDE_REL))
        .map(|r| home.join(r))
        .collect();
    if !record.no_forge {
        allowed.extend(plan::HOME_FORGE.iter().map(|r| home.join(r)));
    }
    let rw: Vec<&PathBuf> = std::iter::once(&record.workspace)
        .chain(&record.allow_write)
        .collect();
    let mut out = Vec::new();
    for m in mounts {
        if m.point == *home || !m.point.starts_with(home) {
            continue;
        }
        if allowed.contains(&m.point) || rw.iter().any(|p| m.point.starts_with(p)) {
            continue;
        }
        // Mounts the host had below an allowed directory come along with it.
        if allowed.iter().any(|a| {
            m.point.starts_with(a) && !plan::HOME_NULLED.iter().any(|n| home.join(n) == *a)
        }) {
            continue;
        }
        let rel = m.point.strip_prefix(home).unwrap_or(&m.point);
        let entry = format!("~/{}", rel.display());
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

/// Variables that carry credentials or open an IDE channel.
pub(crate) fn is_secret_var(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "KUBECONFIG",
        "DOCKER_HOST",
        "VSCODE_IPC_HOOK_CLI",
        "VSCODE_GIT_IPC_HANDLE",
        "VSCODE_GIT_ASKPASS_MAIN",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
    ];
    const PREFIX: &[&str] = &["AWS_", "AZURE_", "ARM_CLIENT_", "VAULT_"];
    const PART: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY"];
    // Claude Code sets CLAUDE_CODE_* for its own children inside the sandbox;
    // the launcher never forwards such a name (only §4.5's list and pass-env).
    if name.starts_with("CLAUDE_CODE_") || name == "CLAUDECODE" {
        return false;
    }
    let up = name.to_ascii_uppercase();
    EXACT.contains(&name)
        || PREFIX.iter().any(|p| up.starts_with(p))
        || PART.iter().any(|p| up.contains(p))
}

/// Entries `bwrap --dev` creates; anything else in `/dev` came from the host.
pub(crate) const DEV_EXPECTED: &[&str] = &[
    "console", "core", "fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm", "stderr",
    "stdin", "stdout", "tty", "urandom", "zero",
];

/// What the battery observes, gathered once.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub env: BTreeMap<String, String>,
    pub facts: inside::Facts,
    pub status: String,
    pub mounts: Vec<Mount>,
    /// The launch record, or why there is none.
    pub record: Result<LaunchRecord, String>,
    pub ns_ino: BTreeMap<String, u64>,
    pub dev_entries: Vec<String>,
    pub tmp_entries: Vec<String>,
    /// Unix sockets still reachable under `/run`.
    pub run_sockets: Vec<PathBuf>,
    /// Every file the plan's tables mask with `/dev/null` ([`plan::HOME_NULLED`],
    /// [`plan::SYSTEM_NULLED`]) → its size inside (absent: not listed).
    pub nulled_sizes: BTreeMap<String, u64>,
    /// Every protected path of the workspace ([`crate::plan::protect::discover`]),
    /// whether it exists and whether this process may write it.
    pub protected: Vec<ProtectedPath>,
    pub gitconfig: Result<String, String>,
    pub gitconfig_writable: bool,
    /// `/etc/claude-sandbox.conf`: (exists, writable by us, owned by us).
    pub config_file: ConfigFileAccess,
    /// Claude Code's managed settings as this process reads them (`None`:
    /// absent), or why they could not be read.
    pub managed_settings: Result<Option<String>, String>,
    pub managed_settings_writable: bool,
    pub routes: Vec<Route>,
    /// Route lookups (UDP connect, no packet): destination → Ok or the error.
    pub lookups: BTreeMap<IpAddr, Result<(), String>>,
    /// IPv4 nameservers of /etc/resolv.conf inside (punched through the jail on purpose).
    pub resolvers: Vec<Ipv4Addr>,
    /// IPv6 addresses configured (lines of /proc/net/if_inet6).
    pub ipv6_addrs: Vec<String>,
    /// Host loopback ports answering from inside.
    pub loopback_reached: Vec<u16>,
    /// Host loopback ports listening inside too (not tested: they are ours).
    pub loopback_own: Vec<u16>,
    pub pin: Result<(), String>,
    /// errno of ioctl(TIOCSTI) on /dev/null, of keyctl(GET_KEYRING_ID).
    pub tiocsti_errno: i32,
    pub keyctl_errno: i32,
    /// Launched by root: the entries only root may read on the host that are
    /// readable here (the same walk as the plan's, [`crate::launch::rootview`]).
    pub root_only_readable: Vec<PathBuf>,
    /// errno of `unshare(CLONE_NEWUSER)` in a forked child (0: it worked).
    pub userns_errno: i32,
    /// Calls the seccomp filter must refuse, tried with arguments the kernel
    /// itself would reject differently ([`syscall_samples`]).
    pub syscall_samples: Vec<SyscallSample>,
    /// The calls that would drive the sandbox's PID 1 (bubblewrap's init,
    /// outside the seccomp filter), tried harmlessly ([`pid1_samples`]).
    pub pid1_samples: Vec<SyscallSample>,
    /// PID 1's memory files that opened for writing as memory (not the
    /// empty file over them).
    pub pid1_mem_writable: Vec<String>,
    /// Allowlist mode: the proxy's status line for a name on no list
    /// ([`ALLOWLIST_PROBE`]), or why there is none. `None` in other modes.
    pub proxy_probe: Option<Result<String, String>>,
}

/// One refused call the battery tries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyscallSample {
    /// The call as a person reads it.
    pub call: &'static str,
    /// The errno the seccomp filter answers.
    pub want: i32,
    /// The errno it got (0: it succeeded).
    pub got: i32,
}

impl Default for Observed {
    /// Nothing observed: every fact absent, every file unread.
    fn default() -> Observed {
        let unread = || Err("not observed".to_string());
        Observed {
            env: BTreeMap::new(),
            facts: inside::Facts::default(),
            status: String::new(),
            mounts: Vec::new(),
            record: Err("not observed".into()),
            ns_ino: BTreeMap::new(),
            dev_entries: Vec::new(),
            tmp_entries: Vec::new(),
            run_sockets: Vec::new(),
            nulled_sizes: BTreeMap::new(),
            protected: Vec::new(),
            gitconfig: unread(),
            gitconfig_writable: false,
            config_file: ConfigFileAccess::default(),
            managed_settings: Err("not observed".into()),
            managed_settings_writable: false,
            routes: Vec::new(),
            lookups: BTreeMap::new(),
            resolvers: Vec::new(),
            ipv6_addrs: Vec::new(),
            loopback_reached: Vec::new(),
            loopback_own: Vec::new(),
            pin: Err("not observed".into()),
            tiocsti_errno: 0,
            keyctl_errno: 0,
            userns_errno: 0,
            root_only_readable: Vec::new(),
            syscall_samples: Vec::new(),
            pid1_samples: Vec::new(),
            pid1_mem_writable: Vec::new(),
            proxy_probe: None,
        }
    }
}

/// Cloud metadata.
pub(crate) const METADATA: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
/// A public address (TEST-NET-2) whose route is looked up, never contacted.
pub(crate) const PUBLIC_SAMPLE: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
/// An IPv6 address (documentation range) whose route is looked up.
pub(crate) const V6_SAMPLE: &str = "2001:db8::1";

/// Hosts of the subnet `a/l` to look up: the first and the last usable.
pub(crate) fn subnet_samples(a: Ipv4Addr, l: u8) -> Vec<Ipv4Addr> {
    if !(8..=30).contains(&l) {
        return Vec::new();
    }
    let base = u32::from(a) & (u32::MAX << (32 - l));
    let last = base | !(u32::MAX << (32 - l));
    vec![Ipv4Addr::from(base + 1), Ipv4Addr::from(last - 1)]
}

fn lookup(ip: IpAddr) -> Result<(), String> {
    let bind = match ip {
        IpAddr::V4(_) => "0.0.0.0:0",
        IpAddr::V6(_) => "[::]:0",
    };
    let s = UdpSocket::bind(bind).map_err(|e| e.to_string())?;
    s.connect(SocketAddr::new(ip, 9)).map_err(|e| e.to_string())
}

fn errno_of(r: i64) -> i32 {
    if r < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    } else {
        0
    }
}

/// Tracing PID 1 and writing its memory, tried so that nothing happens to
/// it when they work: `PTRACE_SEIZE` does not stop it (and is undone at
/// once), `process_vm_writev` with no iovec writes nothing.
fn pid1_samples() -> Vec<SyscallSample> {
    use nix::libc::{self, syscall};
    let null = std::ptr::null::<u8>();
    const PTRACE_SEIZE: libc::c_long = 0x4206;
    vec![
        sample("ptrace(PTRACE_SEIZE, 1)", libc::EPERM, &|| unsafe {
            let r = syscall(libc::SYS_ptrace, PTRACE_SEIZE, 1, 0, 0);
            if r == 0 {
                syscall(libc::SYS_ptrace, libc::PTRACE_DETACH, 1, 0, 0);
            }
            r
        }),
        sample("process_vm_writev(1, no iovec)", libc::EPERM, &|| unsafe {
            syscall(libc::SYS_process_vm_writev, 1, null, 0, null, 0, 0)
        }),
    ]
}

/// PID 1's memory files that open read-write as memory (a fresh /proc
/// masks them with the empty file; the host's is mounted read-only).
fn pid1_mem_writable() -> Vec<String> {
    use std::os::unix::fs::FileTypeExt;
    crate::plan::PID1_MEM
        .iter()
        .filter(|p| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(p)
                .and_then(|f| f.metadata())
                .is_ok_and(|m| !m.file_type().is_char_device())
        })
        .map(|p| p.to_string())
        .collect()
}

fn names_in(dir: &str) -> Option<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Some(v)
}

fn writable(p: &Path) -> bool {
    nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok()
}

impl Observed {
    /// Observe this process and its sandbox.
    pub(crate) fn gather() -> Observed {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let record = read_launch_record();
        let rec: LaunchRecord = record.clone().unwrap_or_default();
        let nulled_sizes = nulled_sizes(&env);
        let run_sockets = run_sockets(&rec);
        let routes = parse_routes(&read("/proc/net/route"));
        let lookups = route_lookups(&rec);
        let loopback = probe_host_loopback(&rec);
        let tiocsti_errno = tiocsti_errno();
        let keyctl_errno = keyctl_errno();
        let userns_errno = userns_errno();
        let mounts = parse_mountinfo(&read("/proc/self/mountinfo"));
        let root_only_readable = root_only_readable(&rec, &mounts);
        let syscall_samples = syscall_samples();
        let ns_ino = ns_inodes();
        let config_file = config_file_access();
        let proxy_probe = (rec.egress == crate::egress::policy::Egress::Allowlist)
            .then(|| probe_proxy(env.get("HTTPS_PROXY").map(String::as_str)));
        Observed {
            facts: inside::Facts::read(),
            status: read("/proc/self/status"),
            mounts,
            record,
            ns_ino,
            dev_entries: names_in("/dev").unwrap_or_default(),
            tmp_entries: names_in("/tmp").unwrap_or_default(),
            run_sockets,
            nulled_sizes,
            protected: protected_paths(&rec),
            gitconfig: std::fs::read_to_string(paths::GITCONFIG).map_err(|e| e.to_string()),
            gitconfig_writable: writable(Path::new(paths::GITCONFIG)),
            config_file,
            managed_settings: managed_settings(),
            managed_settings_writable: writable(Path::new(paths::MANAGED_SETTINGS)),
            routes,
            lookups,
            resolvers: crate::egress::policy::parse_resolv(&read("/etc/resolv.conf")).nameservers,
            ipv6_addrs: read("/proc/net/if_inet6")
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(String::from)
                .collect(),
            loopback_reached: loopback.reached,
            loopback_own: loopback.own,
            pin: crate::launch::integrity::verify_pin(),
            tiocsti_errno,
            keyctl_errno,
            userns_errno,
            root_only_readable,
            syscall_samples,
            pid1_samples: pid1_samples(),
            pid1_mem_writable: pid1_mem_writable(),
            proxy_probe,
            env,
        }
    }
}

/// A name no allowlist holds (RFC 2606 reserves `.invalid`): the proxy
/// must refuse it without a lookup.
pub(crate) const ALLOWLIST_PROBE: &str = "claude-sandbox-verify.invalid:443";

/// Ask the proxy at `url` (`http://ADDR:PORT`) to CONNECT to
/// [`ALLOWLIST_PROBE`]; its status line.
fn probe_proxy(url: Option<&str>) -> Result<String, String> {
    use std::io::{BufRead, Write};
    let url = url.ok_or("HTTPS_PROXY is not set")?;
    let addr: SocketAddr = url
        .strip_prefix("http://")
        .and_then(|a| a.trim_end_matches('/').parse().ok())
        .ok_or_else(|| format!("HTTPS_PROXY={url} is not http://ADDR:PORT"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(
        format!("CONNECT {ALLOWLIST_PROBE} HTTP/1.1\r\nHost: {ALLOWLIST_PROBE}\r\n\r\n").as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut line = String::new();
    std::io::BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    Ok(line.trim_end().to_string())
}

/// The launch record the shadow bound in, or why there is none (so the checks can say what is missing).
fn read_launch_record() -> Result<LaunchRecord, String> {
    match std::fs::read_to_string(paths::LAUNCH_RECORD) {
        Err(e) => Err(format!("{} unreadable: {e}", paths::LAUNCH_RECORD)),
        Ok(t) if t.trim().is_empty() || t.trim() == "{}" => Err(format!(
            "{} is the empty placeholder: this process was not started by the shadow",
            paths::LAUNCH_RECORD
        )),
        Ok(t) => {
            serde_json::from_str(&t).map_err(|e| format!("{} malformed: {e}", paths::LAUNCH_RECORD))
        }
    }
}

/// The managed settings as Claude Code inside reads them (a FIFO is never waited on).
fn managed_settings() -> Result<Option<String>, String> {
    match crate::sys::files::read_text(Path::new(paths::MANAGED_SETTINGS)) {
        Ok(t) => Ok(Some(t)),
        Err(crate::sys::files::ReadError::Missing) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Sizes of the home's `.netrc` and `.Xauthority` when present (masked, they must be empty).
fn nulled_sizes(env: &BTreeMap<String, String>) -> BTreeMap<String, u64> {
    let home = env.get("HOME").map(PathBuf::from).unwrap_or_default();
    let mut sizes = BTreeMap::new();
    let files = plan::HOME_NULLED
        .iter()
        .map(|f| home.join(f))
        .chain(plan::SYSTEM_NULLED.iter().map(PathBuf::from));
    for f in files {
        if let Ok(m) = std::fs::metadata(&f) {
            sizes.insert(f.display().to_string(), m.len());
        }
    }
    sizes
}

/// Unix sockets reachable under `/run` inside, outside the configured
/// read-write paths.
fn run_sockets(rec: &LaunchRecord) -> Vec<PathBuf> {
    let mut sockets = crate::launch::run_sockets();
    sockets.retain(|s| !rec.allow_write.iter().any(|a| s.starts_with(a)));
    sockets
}

/// Route lookups (no packet sent) for samples of every range the jail must
/// reject, the metadata address, a public address, the site subnets and IPv6.
fn route_lookups(rec: &LaunchRecord) -> BTreeMap<IpAddr, Result<(), String>> {
    let mut lookups = BTreeMap::new();
    let mut dests: Vec<Ipv4Addr> = required_rejects()
        .into_iter()
        .flat_map(|(n, l)| subnet_samples(n, l))
        .collect();
    dests.push(METADATA);
    dests.push(PUBLIC_SAMPLE);
    for (n, l) in &rec.site_subnets {
        dests.extend(subnet_samples(*n, *l));
    }
    for d in dests {
        lookups.insert(IpAddr::V4(d), lookup(IpAddr::V4(d)));
    }
    let v6: IpAddr = V6_SAMPLE.parse().expect("valid");
    lookups.insert(v6, lookup(v6));
    lookups
}

/// The host's loopback listeners as seen from inside, split by whether they answer.
struct LoopbackProbe {
    /// Host loopback ports answering from inside.
    reached: Vec<u16>,
    /// Host loopback ports listening inside too (not tested: they are ours).
    own: Vec<u16>,
}

/// Try each host loopback port the launcher saw; connecting only from a jail's
/// own network namespace, where an answer means the host's loopback leaks in.
fn probe_host_loopback(rec: &LaunchRecord) -> LoopbackProbe {
    // This network namespace's own listeners (the jail's, not the host's).
    let own_listen = crate::launch::loopback_listeners();
    let mut probe = LoopbackProbe {
        reached: Vec::new(),
        own: Vec::new(),
    };
    let jail_netns = rec.launcher_ns.get("net") != ns_inode("net").as_ref();
    for &p in &rec.host_loopback_tcp {
        if own_listen.contains(&p) {
            probe.own.push(p);
        } else if jail_netns
            && TcpStream::connect_timeout(
                &SocketAddr::from((Ipv4Addr::LOCALHOST, p)),
                Duration::from_millis(300),
            )
            .is_ok()
        {
            probe.reached.push(p);
        }
    }
    probe
}

/// errno of ioctl(TIOCSTI) on /dev/null (0 when it succeeds): the seccomp filter must refuse it.
fn tiocsti_errno() -> i32 {
    match std::fs::File::open("/dev/null") {
        Ok(f) => {
            let b = b'x';
            errno_of(
                unsafe { nix::libc::ioctl(f.as_raw_fd(), nix::libc::TIOCSTI, &b as *const u8) }
                    as i64,
            )
        }
        Err(_) => 0,
    }
}

/// errno of keyctl(GET_KEYRING_ID) (0 when it succeeds): the seccomp filter must refuse it.
fn keyctl_errno() -> i32 {
    errno_of(unsafe { nix::libc::syscall(nix::libc::SYS_keyctl, 0, -3i64, 0) })
}

/// With a root launch: what the plan's walk finds that only root could read
/// on the host and that this process can still read (masked ones read as an
/// empty `/dev/null` or an empty tmpfs, which anyone may read).
fn root_only_readable(rec: &LaunchRecord, mounts: &[Mount]) -> Vec<PathBuf> {
    if !rec.root_view {
        return Vec::new();
    }
    let keep: Vec<PathBuf> = std::iter::once(rec.workspace.clone())
        .chain(rec.allow_write.iter().cloned())
        .collect();
    crate::launch::rootview::unreadable(&keep)
        .unreadable
        .into_iter()
        .map(|u| u.path)
        // What the plan mounted there (the rendered git config, the jail's
        // resolv.conf: bubblewrap makes data files 0600) is not the host's.
        .filter(|p| top_mount(mounts, p).is_none())
        .filter(|p| nix::unistd::access(p, nix::unistd::AccessFlags::R_OK).is_ok())
        .collect()
}

/// The refused calls the battery tries. Each is made with arguments the
/// kernel itself rejects with EFAULT, EINVAL or EBADF before doing anything,
/// even for root: so EPERM (ENOSYS for clone3) can only be the seccomp
/// filter's answer, and nothing happens if the filter is missing.
/// Make the call `f` and record the errno it got against the one wanted.
fn sample(call: &'static str, want: i32, f: &dyn Fn() -> nix::libc::c_long) -> SyscallSample {
    let r = f();
    // c_long is i64 here, i32 on 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    let got = errno_of(r as i64);
    SyscallSample { call, want, got }
}

fn syscall_samples() -> Vec<SyscallSample> {
    use nix::libc::{self, syscall};
    let (eperm, enosys) = (libc::EPERM, libc::ENOSYS);
    let null = std::ptr::null::<u8>();
    vec![
        // A NULL attribute: EFAULT (kernels before 6.5 check privilege first).
        sample("bpf(BPF_MAP_CREATE, NULL)", eperm, &|| unsafe {
            syscall(libc::SYS_bpf, 0, null, 8)
        }),
        // Unknown flags are refused before anything else: EINVAL.
        sample("perf_event_open(NULL, flags ~0)", eperm, &|| unsafe {
            syscall(libc::SYS_perf_event_open, null, 0, -1, -1, !0u64)
        }),
        // UFFD_USER_MODE_ONLY is open to everyone; the extra bit is EINVAL.
        sample("userfaultfd(UFFD_USER_MODE_ONLY | 2)", eperm, &|| unsafe {
            syscall(libc::SYS_userfaultfd, 1 | 2)
        }),
        sample("io_uring_setup(0, NULL)", eperm, &|| unsafe {
            syscall(libc::SYS_io_uring_setup, 0, null)
        }),
        // A NULL mount point: EFAULT.
        sample("mount(NULL, NULL)", eperm, &|| unsafe {
            syscall(libc::SYS_mount, null, null, null, 0, null)
        }),
        // Bit 0 is no unshare flag: EINVAL.
        sample("unshare(CLONE_NEWNS | 1)", eperm, &|| unsafe {
            syscall(libc::SYS_unshare, libc::CLONE_NEWNS | 1)
        }),
        // CLONE_SIGHAND without CLONE_VM: EINVAL before any process exists.
        sample("clone(CLONE_NEWNS | CLONE_SIGHAND)", eperm, &|| unsafe {
            let r = syscall(
                libc::SYS_clone,
                libc::CLONE_NEWNS | libc::CLONE_SIGHAND,
                0,
                0,
                0,
                0,
            );
            if r == 0 {
                libc::_exit(0)
            }
            if r > 0 {
                libc::waitpid(r as i32, std::ptr::null_mut(), 0);
            }
            r
        }),
        sample("setns(-1, 0)", eperm, &|| unsafe {
            syscall(libc::SYS_setns, -1, 0)
        }),
        // A size below the first version: EINVAL.
        sample("clone3(NULL, 0)", enosys, &|| unsafe {
            syscall(libc::SYS_clone3, null, 0)
        }),
    ]
}

/// errno of creating a user namespace, tried in a forked child (so this
/// process, which may have threads, keeps its own); 0 when it worked.
fn userns_errno() -> i32 {
    use nix::sys::wait::{waitpid, WaitStatus};
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            let r = unsafe { nix::libc::unshare(nix::libc::CLONE_NEWUSER) };
            let code = if r == 0 {
                0
            } else {
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(255)
            };
            unsafe { nix::libc::_exit(code.min(255)) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => code,
            _ => -1,
        },
        Err(_) => -1,
    }
}

/// This process's namespace inodes, by kind, to compare with the launcher's.
fn ns_inodes() -> BTreeMap<String, u64> {
    let mut ns_ino = BTreeMap::new();
    for k in NS_KINDS {
        if let Some(i) = ns_inode(k) {
            ns_ino.insert(k.to_string(), i);
        }
    }
    ns_ino
}

/// `/etc/claude-sandbox.conf`: (exists, writable by us, owned by us); the config must be out of the session's reach.
/// One protected path as seen from inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ProtectedPath {
    pub(crate) path: PathBuf,
    pub(crate) exists: bool,
    pub(crate) writable: bool,
    /// Absent, and this process could create it (it was removed at once).
    pub(crate) creatable: bool,
}

fn protected_paths(rec: &LaunchRecord) -> Vec<ProtectedPath> {
    if rec.workspace.as_os_str().is_empty() {
        return Vec::new();
    }
    crate::plan::protect::discover(&rec.workspace)
        .paths
        .into_iter()
        .map(|path| {
            let exists = path.symlink_metadata().is_ok();
            ProtectedPath {
                exists,
                writable: writable(&path),
                creatable: !exists && created_and_removed(&path),
                path,
            }
        })
        .collect()
}

/// Try to create the missing `path` as a file; if that worked (the creation
/// guard is missing), remove it again at once and say so.
fn created_and_removed(path: &Path) -> bool {
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .is_ok();
    if made {
        let _ = std::fs::remove_file(path);
    }
    made
}

/// How this process may touch `/etc/claude-sandbox.conf`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct ConfigFileAccess {
    pub(crate) exists: bool,
    pub(crate) writable: bool,
    /// Owned by this process's uid.
    pub(crate) ours: bool,
}

fn config_file_access() -> ConfigFileAccess {
    let cfg = Path::new(paths::CONFIG_FILE);
    match cfg.metadata() {
        Ok(m) => ConfigFileAccess {
            exists: true,
            writable: writable(cfg),
            ours: m.uid() == nix::unistd::getuid().as_raw(),
        },
        Err(_) => ConfigFileAccess::default(),
    }
}

/// A check's outcome: PASS with a note, or FAIL saying what regressed.
type Outcome = Result<String, String>;

struct Def {
    name: &'static str,
    defence: &'static str,
    run: fn(&Observed) -> Outcome,
}

const fn def(name: &'static str, defence: &'static str, run: fn(&Observed) -> Outcome) -> Def {
    Def { name, defence, run }
}

/// The battery, in order; ids are positions (1-based) and stay stable.
const BATTERY: &[Def] = &[
    def("inside-marker", "the recursion rule and the prompt gate tell a sandbox by kernel facts, not IS_SANDBOX alone (§2.1)", check_inside),
    def("no-new-privs", "no setuid or file-capability gain inside (§4.4)", check_nnp),
    def("strict-home", "$HOME by inversion: only the allowlisted entries are bound back (§4.2)", check_home),
    def("token-env-absent", "credentials in the environment never arrive (§4.5)", check_tokens),
    def("display-empty", "no X11/Wayland display to drive (§4.5)", check_display),
    def("capabilities-dropped", "every capability dropped (§4.4)", check_caps),
    def("pid-namespace", "own PID namespace: host processes invisible and unsignalable (§4.4)", check_pid_ns),
    def("ipc-uts-namespaces", "own IPC and UTS namespaces (§4.4)", check_ipc_uts),
    def("dev-fresh", "a fresh /dev: no host devices (§4.1)", check_dev),
    def("tmp-tmpfs", "a fresh /tmp: no VS Code IPC sockets or host temp files (§4.1)", check_tmp),
    def("run-masked", "/run is a fresh tmpfs: no host socket, secret or runtime directory under it, even one created after the launch (§4.1)", check_run),
    def("masked-files-empty", "~/.netrc, ~/.Xauthority, ~/.ICEauthority, /etc/shadow, /etc/gshadow, /etc/sudoers read as empty (§4.1, §4.2)", check_masked_files),
    def("gitconfig-curated", "the curated git config is in effect and read-only (§4.6)", check_gitconfig),
    def("workspace-scoped", "only the workspace and allow-write paths are writable (§4.3)", check_workspace),
    def("config-pinned", "the config is read from /etc only and cannot be changed from inside (§1, §3)", check_config),
    def("jail-routes", "egress jail: internal ranges blackholed, link-local unreachable (§4.7)", check_jail_routes),
    def("internal-unroutable", "egress jail: site subnets and cloud metadata unroutable while the gateway carries internet traffic (§4.7)", check_internal),
    def("no-ipv6", "egress jail: no IPv6 at all (§4.7)", check_ipv6),
    def("host-loopback-unreachable", "egress jail: the host's loopback services are out of reach (§4.7)", check_loopback),
    def("real-binary-pinned", "the real Claude Code matches its install-time SHA-256 (§5)", check_pin),
    def("tiocsti-refused", "no terminal injection into the caller's terminal (§4.4)", check_tiocsti),
    def("keyring-refused", "no reach into the caller's kernel keyring (§4.4)", check_keyring),
    def("protected-paths", "git config, hooks and attributes, editor, devcontainer, direnv and MCP files of the workspace and its repositories are read-only (§4.8)", check_protected),
    def("private-state", "~/.cache and ~/.local/share are the sandbox's own, the forge dirs read-only (§4.8)", check_private_state),
    def("no-nested-userns", "no new user namespaces inside: kernel attack surface nothing in a session needs (§4.4)", check_userns),
    def("env-overrides", "the launching environment cannot weaken the sandbox unless /etc allows it (§4.8)", check_env_overrides),
    def("root-view", "launched by root, the sandbox reads no more than an unprivileged user could (issue #13)", check_root_view),
    def("managed-settings-inside", "the user's own hooks and MCP servers run inside: the managed settings' lockdown for unsandboxed sessions is not in effect here, the guard hooks are (§6)", check_managed_settings),
    def("syscalls-refused", "kernel interfaces a session does not need are refused: namespaces, mounts, bpf, perf, userfaultfd, io_uring (§4.4, issue #13)", check_syscalls),
    def("egress-allowlist", "allowlist mode: no route at all, tools pointed at the proxy, a name on no list refused (§4.9)", check_egress_allowlist),
    def("protected-creation", "a protected path that does not exist cannot be created either: the creation guard refuses it (§4.8)", check_protected_creation),
    def("pid1-sealed", "the sandbox's PID 1 (bubblewrap's init, outside the seccomp filter) cannot be traced or have its memory written from inside (§4.4)", check_pid1),
];

#[cfg(test)]
/// The battery check that fails when `m` is missing from a sandbox whose
/// launch record is `rec`, read off the same tables the plan is built from;
/// `None` for an operation no check notices. The unit test
/// `every_plan_operation_has_a_check` builds a full sandbox and requires a
/// check for each of its operations: so a defence added to the plan needs a
/// check here, or that test fails.
pub(crate) fn covering_check(m: &sandbox::Mount, rec: &LaunchRecord) -> Option<&'static str> {
    let home = &rec.home;
    let in_home = |table: &[&str], p: &Path| table.iter().any(|r| home.join(r) == p);
    let in_system = |table: &[&str], p: &Path| table.iter().any(|t| Path::new(t) == p);
    let real = home.join(paths::INSIDE_REAL_CLAUDE_REL);
    let check = match m {
        sandbox::Mount::ReadOnly { src, dst } if src == Path::new("/") && dst == Path::new("/") => {
            "workspace-scoped"
        }
        sandbox::Mount::ReadOnly { dst, .. } if dst == Path::new("/proc") => "pid-namespace",
        sandbox::Mount::ReadOnly { dst, .. } if in_home(plan::HOME_RO, dst) || *dst == real => {
            "strict-home"
        }
        sandbox::Mount::ReadWrite { src, dst } if src == dst && in_home(plan::HOME_RW, dst) => {
            "strict-home"
        }
        sandbox::Mount::ReadWrite { src, dst }
            if plan::HOME_PRIVATE.iter().any(|(rel, name)| {
                home.join(rel) == *dst && plan::private_dir(home, name) == *src
            }) =>
        {
            "private-state"
        }
        sandbox::Mount::ReadOnly { dst, .. } if in_home(plan::HOME_FORGE, dst) => "private-state",
        sandbox::Mount::CheckedReadOnly(_) => "protected-paths",
        sandbox::Mount::Checked(_) => "workspace-scoped",
        sandbox::Mount::Tmpfs { dst } if dst == Path::new("/tmp") => "tmp-tmpfs",
        sandbox::Mount::Tmpfs { dst } if in_system(plan::SYSTEM_TMPFS, dst) => "run-masked",
        sandbox::Mount::ReadOnly { dst, .. } if dst.starts_with("/run") => "run-masked",
        sandbox::Mount::Tmpfs { dst }
            if dst == home
                || in_home(plan::HOME_SHARE_MASKED, dst)
                || rec.other_homes.contains(dst) =>
        {
            "strict-home"
        }
        sandbox::Mount::Empty { dst }
            if in_system(plan::SYSTEM_NULLED, dst) || in_home(plan::HOME_NULLED, dst) =>
        {
            "masked-files-empty"
        }
        // Sockets under /run: verify looks for every socket there.
        sandbox::Mount::Empty { dst } if dst.starts_with("/run") => "run-masked",
        sandbox::Mount::Empty { dst } | sandbox::Mount::Tmpfs { dst }
            if rec.root_view
                && (crate::launch::rootview::ROOTS
                    .iter()
                    .any(|(r, _)| dst.starts_with(r))
                    || in_system(crate::launch::rootview::HIDDEN_WHOLE, dst)) =>
        {
            "root-view"
        }
        sandbox::Mount::Dev { .. } => "dev-fresh",
        sandbox::Mount::Proc { .. } => "pid-namespace",
        sandbox::Mount::Empty { dst } if in_system(plan::PID1_MEM, dst) => "pid1-sealed",
        sandbox::Mount::Data { dst, .. } if dst == Path::new(paths::GITCONFIG) => {
            "gitconfig-curated"
        }
        sandbox::Mount::Data {
            data: Data::Record(_),
            ..
        } => "inside-marker",
        sandbox::Mount::Data { dst, .. } if dst == Path::new("/etc/resolv.conf") => "jail-routes",
        sandbox::Mount::Data { dst, .. } if dst == Path::new(paths::MANAGED_SETTINGS) => {
            "managed-settings-inside"
        }
        _ => return None,
    };
    Some(check)
}

#[cfg(test)]
/// Every defence of `sb` with the check that notices its absence (see
/// [`covering_check`]); `None` where no check does.
pub(crate) fn coverage(sb: &Sandbox, rec: &LaunchRecord) -> Vec<(String, Option<&'static str>)> {
    let mut v: Vec<(String, Option<&'static str>)> = sb
        .namespaces
        .iter()
        .map(|ns| {
            let check = match ns {
                Namespace::Pid => Some("pid-namespace"),
                Namespace::Ipc | Namespace::Uts => Some("ipc-uts-namespaces"),
                Namespace::CgroupIfSupported => None,
            };
            (format!("namespace {ns:?}"), check)
        })
        .collect();
    v.push((
        format!("capabilities {:?}", sb.capabilities),
        Some("capabilities-dropped"),
    ));
    v.push(("seccomp".into(), Some("syscalls-refused")));
    if !sb.nested_userns {
        v.push((
            "nested user namespaces disabled".into(),
            Some("no-nested-userns"),
        ));
    }
    v.push(("environment".into(), Some("token-env-absent")));
    match &sb.network {
        sandbox::Network::Jail(_) => v.push(("network jail".into(), Some("jail-routes"))),
        sandbox::Network::Allowlist(_) => {
            v.push(("allowlist proxy".into(), Some("egress-allowlist")))
        }
        sandbox::Network::Host => {}
    }
    v.extend(
        sb.mounts
            .iter()
            .map(|m| (format!("{m:?}"), covering_check(m, rec))),
    );
    v
}

#[cfg(test)]
/// Operations of the plan no check covers, each with the reason.
pub(crate) const UNCHECKED: &[(&str, &str)] = &[(
    "namespace CgroupIfSupported",
    "best effort: bubblewrap skips it where the kernel has no cgroup namespaces; the cgroup tree is read-only inside anyway",
)];

/// Evaluate every check against `o`.
pub(crate) fn evaluate(o: &Observed) -> Vec<Check> {
    BATTERY
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let (status, detail) = match (d.run)(o) {
                Ok(note) => (Status::Pass, note),
                Err(why) => (Status::Fail, why),
            };
            Check {
                id: i as u32 + 1,
                name: d.name,
                status,
                detail,
                defence: d.defence,
            }
        })
        .collect()
}

fn record(o: &Observed) -> Result<&LaunchRecord, String> {
    o.record
        .as_ref()
        .map_err(|e| format!("no launch record ({e})"))
}

fn check_inside(o: &Observed) -> Outcome {
    let f = &o.facts;
    let mut missing = Vec::new();
    if !f.is_sandbox_env {
        missing.push("IS_SANDBOX=1 is not set".to_string());
    }
    if !f.single_id_userns {
        missing.push("the user namespace maps more than one id (not bubblewrap's)".into());
    }
    if let Err(e) = &o.record {
        missing.push(format!("no launch record ({e})"));
    }
    if missing.is_empty() {
        Ok("IS_SANDBOX=1, a one-id user namespace, the shadow's launch record".into())
    } else {
        Err(format!("not inside claude-sandbox: {}", missing.join("; ")))
    }
}

fn check_nnp(o: &Observed) -> Outcome {
    match inside::status_field(&o.status, "NoNewPrivs") {
        Some("1") => Ok("NoNewPrivs: 1".into()),
        v => Err(format!(
            "NoNewPrivs is {}: setuid programs could gain privilege (bubblewrap's no-new-privs regressed)",
            v.unwrap_or("unknown")
        )),
    }
}

fn check_home(o: &Observed) -> Outcome {
    let rec = record(o)?;
    let home = &rec.home;
    match top_mount(&o.mounts, home) {
        Some(m) if m.fstype == "tmpfs" => {}
        Some(m) => {
            return Err(format!(
                "$HOME {} is a {} mount from {}, not a fresh tmpfs: the $HOME inversion regressed",
                home.display(),
                m.fstype,
                m.source
            ))
        }
        None => {
            return Err(format!(
            "$HOME {} is the host's directory, not a fresh tmpfs: the $HOME inversion regressed",
            home.display()
        ))
        }
    }
    let mut extra: Vec<String> = unexpected_home_mounts(&o.mounts, rec)
        .into_iter()
        .map(|e| format!("{e} bound in from the host"))
        .collect();
    extra.extend(home_masks_missing(&o.mounts, rec));
    if extra.is_empty() {
        Ok(format!(
            "$HOME is a tmpfs; only allowlisted entries are bound back{}",
            if rec.no_forge { " (no-forge)" } else { "" }
        ))
    } else {
        Err(format!(
            "{}: the $HOME inversion regressed",
            extra.join(", ")
        ))
    }
}

fn check_tokens(o: &Observed) -> Outcome {
    let passed: &[String] = o.record.as_ref().map(|r| &r.pass_env[..]).unwrap_or(&[]);
    let (opted, leaked): (Vec<&String>, Vec<&String>) = o
        .env
        .iter()
        .filter(|(k, v)| is_secret_var(k) && !v.is_empty())
        .map(|(k, _)| k)
        .partition(|k| passed.contains(k));
    if !leaked.is_empty() {
        let names: Vec<&str> = leaked.iter().map(|s| s.as_str()).collect();
        return Err(format!(
            "{} present: the environment is not cleared (or pass-through regressed)",
            names.join(", ")
        ));
    }
    if opted.is_empty() {
        Ok("no credential or IDE-channel variable".into())
    } else {
        let names: Vec<&str> = opted.iter().map(|s| s.as_str()).collect();
        Ok(format!(
            "none leaked; forwarded on purpose by pass-env: {}",
            names.join(", ")
        ))
    }
}

fn check_display(o: &Observed) -> Outcome {
    let set: Vec<&str> = ["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY"]
        .into_iter()
        .filter(|k| o.env.get(*k).is_some_and(|v| !v.is_empty()))
        .collect();
    if set.is_empty() {
        Ok("DISPLAY and WAYLAND_DISPLAY empty".into())
    } else {
        Err(format!("{} set: a display could be driven", set.join(", ")))
    }
}

fn check_caps(o: &Observed) -> Outcome {
    let mut bad = Vec::new();
    for k in ["CapEff", "CapPrm", "CapAmb"] {
        let v = inside::status_field(&o.status, k).unwrap_or("");
        if v.is_empty() || !v.chars().all(|c| c == '0') {
            bad.push(format!("{k} {v}"));
        }
    }
    if bad.is_empty() {
        Ok("CapEff, CapPrm, CapAmb all 0".into())
    } else {
        Err(format!(
            "{}: capabilities were kept (bubblewrap's --cap-drop ALL regressed)",
            bad.join(", ")
        ))
    }
}

/// Namespace `kind` is the sandbox's own: its inode differs from the one the
/// launcher recorded for itself. (Ownership by this process's user namespace
/// cannot be required: for a non-root user bubblewrap nests a second user
/// namespace after unsharing the others.)
fn own_ns(o: &Observed, kind: &str) -> Result<(), String> {
    let rec = record(o)?;
    match (rec.launcher_ns.get(kind), o.ns_ino.get(kind)) {
        (Some(l), Some(m)) if l != m => Ok(()),
        (Some(_), Some(_)) => Err(format!(
            "the {kind} namespace is the launcher's: bubblewrap's --unshare-{kind} regressed"
        )),
        _ => Err(format!("the {kind} namespace could not be identified")),
    }
}

fn check_pid_ns(o: &Observed) -> Outcome {
    own_ns(o, "pid")?;
    if !o.facts.nested_pid_ns() {
        return Err(
            "PID 1 is not bubblewrap and NSpid shows one level: host processes are visible".into(),
        );
    }
    Ok("own PID namespace, nested under the launcher's".into())
}

fn check_pid1(o: &Observed) -> Outcome {
    if o.pid1_samples.is_empty() {
        return Err("PID 1 was not probed".into());
    }
    let mut open = answered_otherwise(&o.pid1_samples);
    open.extend(
        o.pid1_mem_writable
            .iter()
            .map(|p| format!("{p} opened for writing")),
    );
    if open.is_empty() {
        Ok("PID 1 cannot be traced, and its memory cannot be written".into())
    } else {
        Err(format!(
            "PID 1 (bubblewrap's init, unfiltered) can be driven from inside: {}",
            open.join("; ")
        ))
    }
}

fn check_ipc_uts(o: &Observed) -> Outcome {
    own_ns(o, "ipc")?;
    own_ns(o, "uts")?;
    Ok("own IPC and UTS namespaces".into())
}

fn check_dev(o: &Observed) -> Outcome {
    match top_mount(&o.mounts, Path::new("/dev")) {
        Some(m) if m.fstype == "tmpfs" => {}
        other => {
            return Err(format!(
                "/dev is {}, not bubblewrap's fresh tmpfs",
                other.map_or("the host's".to_string(), |m| format!(
                    "a {} mount",
                    m.fstype
                ))
            ))
        }
    }
    let extra: Vec<&str> = o
        .dev_entries
        .iter()
        .map(String::as_str)
        .filter(|e| !DEV_EXPECTED.contains(e))
        .collect();
    if extra.is_empty() {
        Ok("fresh /dev with only the standard nodes".into())
    } else {
        Err(format!("/dev holds host entries: {}", extra.join(", ")))
    }
}

fn check_tmp(o: &Observed) -> Outcome {
    match top_mount(&o.mounts, Path::new("/tmp")) {
        Some(m) if m.fstype == "tmpfs" && !m.read_only => {}
        other => {
            return Err(format!(
                "/tmp is {}, not a fresh tmpfs: host temp files and IDE sockets are exposed (--tmpfs /tmp regressed)",
                other.map_or("the host's /tmp".to_string(), |m| format!("a {} mount from {}", m.fstype, m.source))
            ))
        }
    }
    let ide: Vec<&str> = o
        .tmp_entries
        .iter()
        .map(String::as_str)
        .filter(|e| e.starts_with("vscode-") || *e == ".X11-unix" || e.starts_with("ssh-"))
        .collect();
    if ide.is_empty() {
        Ok(format!(
            "tmpfs, {} entries, no IDE socket",
            o.tmp_entries.len()
        ))
    } else {
        Err(format!(
            "/tmp holds {}: IDE or agent sockets reachable",
            ide.join(", ")
        ))
    }
}

fn check_run(o: &Observed) -> Outcome {
    let mut bad: Vec<String> = Vec::new();
    match top_mount(&o.mounts, Path::new("/run")) {
        Some(m) if m.fstype == "tmpfs" => {}
        Some(m) => bad.push(format!("/run is a {} mount, not a fresh tmpfs", m.fstype)),
        None => bad.push("/run is the host's, not a fresh tmpfs".into()),
    }
    bad.extend(
        o.run_sockets
            .iter()
            .map(|s| format!("socket {} reachable", s.display())),
    );
    if bad.is_empty() {
        Ok("/run is a fresh tmpfs; no host socket under it".into())
    } else {
        Err(bad.join("; "))
    }
}

fn check_masked_files(o: &Observed) -> Outcome {
    let bad: Vec<String> = o
        .nulled_sizes
        .iter()
        .filter(|(_, s)| **s > 0)
        .map(|(f, s)| format!("{f} has {s} bytes"))
        .collect();
    if bad.is_empty() {
        Ok(format!(
            "{} masked files empty or absent",
            o.nulled_sizes.len()
        ))
    } else {
        Err(format!("{}: the /dev/null masks regressed", bad.join(", ")))
    }
}

fn check_gitconfig(o: &Observed) -> Outcome {
    let g = o.env.get("GIT_CONFIG_GLOBAL").map(String::as_str);
    let s = o.env.get("GIT_CONFIG_SYSTEM").map(String::as_str);
    if g != Some(paths::GITCONFIG) || s != Some("/dev/null") {
        return Err(format!(
            "GIT_CONFIG_GLOBAL={} GIT_CONFIG_SYSTEM={}: git may read the user's own config (tokens, hooks)",
            g.unwrap_or("unset"),
            s.unwrap_or("unset")
        ));
    }
    let text = o
        .gitconfig
        .as_ref()
        .map_err(|e| format!("{} unreadable: {e}", paths::GITCONFIG))?;
    if !text.contains("defaultBranch = main") || !text.contains("directory = *") {
        return Err(format!("{} is not the curated config", paths::GITCONFIG));
    }
    if o.gitconfig_writable {
        return Err(format!("{} is writable from inside", paths::GITCONFIG));
    }
    let forge = text.contains("auth git-credential");
    if let Ok(rec) = &o.record {
        if rec.no_forge && forge {
            return Err(
                "no-forge is set but the git config carries forge credential helpers".into(),
            );
        }
    }
    Ok(format!(
        "{} read-only, GIT_CONFIG_SYSTEM=/dev/null{}",
        paths::GITCONFIG,
        if forge {
            ", forge helpers"
        } else {
            ", no forge helpers"
        }
    ))
}

/// File systems that hold no host data (fresh per sandbox).
const VIRTUAL_FS: &[&str] = &[
    "tmpfs",
    "proc",
    "devpts",
    "mqueue",
    "sysfs",
    "cgroup",
    "cgroup2",
    "devtmpfs",
    "nsfs",
    "bpf",
    "securityfs",
    "debugfs",
    "tracefs",
    "pstore",
    "fusectl",
    "configfs",
    "hugetlbfs",
    "binfmt_misc",
    "autofs",
];

fn check_protected(o: &Observed) -> Outcome {
    record(o)?;
    let open: Vec<String> = o
        .protected
        .iter()
        .filter(|p| p.exists && p.writable)
        .map(|p| p.path.display().to_string())
        .collect();
    if !open.is_empty() {
        return Err(format!(
            "writable from inside, and run by host tools: {}",
            open.join(", ")
        ));
    }
    let (present, absent) = o.protected.iter().partition::<Vec<_>, _>(|p| p.exists);
    Ok(format!(
        "{} read-only; {} absent (protected-creation checks those)",
        present.len(),
        absent.len()
    ))
}

fn check_protected_creation(o: &Observed) -> Outcome {
    record(o)?;
    let made: Vec<String> = o
        .protected
        .iter()
        .filter(|p| p.creatable)
        .map(|p| p.path.display().to_string())
        .collect();
    if !made.is_empty() {
        return Err(format!(
            "created from inside (and removed again), and run by host tools: {}",
            made.join(", ")
        ));
    }
    let absent = o.protected.iter().filter(|p| !p.exists).count();
    Ok(format!("{absent} absent, each refused when created"))
}

fn check_private_state(o: &Observed) -> Outcome {
    let rec = record(o)?;
    let mut bad = Vec::new();
    for (rel, name) in plan::HOME_PRIVATE {
        let dst = rec.home.join(rel);
        let want = Path::new(plan::PRIVATE_STATE).join(name);
        match top_mount(&o.mounts, &dst) {
            Some(m) if m.root.ends_with(&want) && !m.read_only => {}
            Some(m) => bad.push(format!(
                "~/{rel} is {} (want the private ~/{})",
                m.root.display(),
                want.display()
            )),
            None => bad.push(format!("~/{rel} is not the sandbox's private directory")),
        }
    }
    if !rec.no_forge {
        for rel in plan::HOME_FORGE {
            if top_mount(&o.mounts, &rec.home.join(rel)).is_some_and(|m| !m.read_only) {
                bad.push(format!("~/{rel} is writable"));
            }
        }
    }
    if bad.is_empty() {
        Ok("~/.cache and ~/.local/share are the sandbox's own; forge dirs read-only".into())
    } else {
        Err(format!(
            "{}: host tools would run what is written there",
            bad.join("; ")
        ))
    }
}

fn check_workspace(o: &Observed) -> Outcome {
    let rec = record(o)?;
    let ws = &rec.workspace;
    let home_rw: Vec<PathBuf> = plan::HOME_RW
        .iter()
        .chain(plan::HOME_PRIVATE.iter().map(|(rel, _)| rel))
        .map(|r| rec.home.join(r))
        .collect();
    let allowed = |p: &Path| {
        p.starts_with(ws)
            || rec.allow_write.iter().any(|a| p.starts_with(a))
            || home_rw.iter().any(|h| p.starts_with(h))
    };
    let broad: Vec<String> = o
        .mounts
        .iter()
        .filter(|m| !m.read_only && !VIRTUAL_FS.contains(&m.fstype.as_str()))
        // A mount hidden under another at the same place is out of reach.
        .filter(|m| top_mount(&o.mounts, &m.point).is_some_and(|t| std::ptr::eq(t, *m)))
        // Under $HOME, strict-home decides.
        .filter(|m| !m.point.starts_with(&rec.home) || m.point.starts_with(ws))
        .filter(|m| !allowed(&m.point))
        .map(|m| m.point.display().to_string())
        .collect();
    if !broad.is_empty() {
        return Err(format!(
            "writable host mounts outside the workspace: {}",
            broad.join(", ")
        ));
    }
    let depth = ws.components().count();
    if depth <= 2 && !rec.workspace_configured {
        return Err(format!(
            "the workspace {} is a top-level directory (every project under it is writable) and workspace-root was not set to it deliberately",
            ws.display()
        ));
    }
    if !writable(ws) {
        return Err(format!("the workspace {} is not writable", ws.display()));
    }
    Ok(format!(
        "writable: {}{}",
        ws.display(),
        rec.allow_write
            .iter()
            .map(|a| format!(", {}", a.display()))
            .collect::<String>()
    ))
}

fn check_config(o: &Observed) -> Outcome {
    let ConfigFileAccess {
        exists,
        writable,
        ours,
    } = o.config_file;
    if paths::CONFIG_FILE != "/etc/claude-sandbox.conf" {
        return Err(format!("the config path is {}", paths::CONFIG_FILE));
    }
    let non_root_owner = ours && !nix::unistd::getuid().is_root();
    if exists && (writable || non_root_owner) {
        return Err(format!(
            "{} is {}: a session could rewrite its own sandbox",
            paths::CONFIG_FILE,
            if writable {
                "writable from inside"
            } else {
                "owned by this (non-root) user"
            }
        ));
    }
    Ok(format!(
        "{} (compile-time path){}",
        paths::CONFIG_FILE,
        if exists {
            ", read-only, not ours"
        } else {
            ", absent: defaults"
        }
    ))
}

/// Jail checks: PASS with a note when the jail is deliberately off.
/// The open jail's checks: `Ok(Err(note))` when the sandbox is not in that
/// mode (the note says which it is in).
fn jail_on(o: &Observed) -> Result<Result<&LaunchRecord, String>, String> {
    let rec = record(o)?;
    Ok(match rec.egress {
        crate::egress::policy::Egress::Open => Ok(rec),
        crate::egress::policy::Egress::Off => Err(JAIL_OFF.into()),
        crate::egress::policy::Egress::Allowlist => Err(ALLOWLIST_NOTE.into()),
    })
}

const JAIL_OFF: &str =
    "egress jail deliberately off (egress = off, egress-jail = 0 or CLAUDE_SANDBOX_EGRESS_JAIL=0 at launch)";
const ALLOWLIST_NOTE: &str = "egress = allowlist: no route at all, which egress-allowlist checks";

/// Destinations the jail opens on purpose: `allow-ip` hosts and resolvers.
fn punched(o: &Observed, rec: &LaunchRecord, ip: &Ipv4Addr) -> bool {
    rec.allow_ip.contains(ip) || o.resolvers.contains(ip)
}

fn check_jail_routes(o: &Observed) -> Outcome {
    let rec = match jail_on(o)? {
        Ok(rec) => rec,
        Err(note) => return Ok(note),
    };
    if !o.routes.iter().any(|r| r.len == 0 && !r.reject) {
        return Err("the jail is on but has no default route".into());
    }
    let routable = |ip: Ipv4Addr| {
        !punched(o, rec, &ip) && matches!(o.lookups.get(&IpAddr::V4(ip)), Some(Ok(())))
    };
    let open = open_ranges(&required_rejects(), &routable);
    if open.is_empty() {
        Ok(format!(
            "no route into {} (first and last host of each looked up)",
            required_rejects()
                .iter()
                .map(cidr)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else {
        Err(format!(
            "the jail is on but incomplete: {} routable (its blackhole route is missing)",
            open.join(", ")
        ))
    }
}

fn check_internal(o: &Observed) -> Outcome {
    let rec = match jail_on(o)? {
        Ok(rec) => rec,
        Err(note) => return Ok(note),
    };
    let mut dests: Vec<Ipv4Addr> = vec![METADATA];
    for (n, l) in &rec.site_subnets {
        dests.extend(subnet_samples(*n, *l));
    }
    let reached: Vec<String> = dests
        .iter()
        .filter(|ip| !punched(o, rec, ip))
        .filter(|ip| matches!(o.lookups.get(&IpAddr::V4(**ip)), Some(Ok(()))))
        .map(|ip| ip.to_string())
        .collect();
    if !reached.is_empty() {
        return Err(format!(
            "routable from inside: {} (site network or cloud metadata)",
            reached.join(", ")
        ));
    }
    match o.lookups.get(&IpAddr::V4(PUBLIC_SAMPLE)) {
        Some(Ok(())) => Ok(format!(
            "site subnets [{}] and {METADATA} unroutable; internet routable via the gateway",
            rec.site_subnets
                .iter()
                .map(cidr)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Some(Err(e)) => Err(format!(
            "the internet is not routable ({PUBLIC_SAMPLE}: {e}): the default route via the gateway is missing"
        )),
        None => Err("the public route was not looked up".into()),
    }
}

fn check_ipv6(o: &Observed) -> Outcome {
    if let Err(note) = jail_on(o)? {
        return Ok(note);
    }
    if !o.ipv6_addrs.is_empty() {
        return Err(format!(
            "{} IPv6 address(es) configured inside the jail",
            o.ipv6_addrs.len()
        ));
    }
    let v6: IpAddr = V6_SAMPLE.parse().expect("valid");
    match o.lookups.get(&v6) {
        Some(Ok(())) => Err(format!("{V6_SAMPLE} is routable: IPv6 leaves the jail")),
        _ => Ok("no IPv6 address, no IPv6 route".into()),
    }
}

fn check_loopback(o: &Observed) -> Outcome {
    // Both the open jail and allowlist mode run in a namespace of their own.
    let rec = record(o)?;
    if !rec.egress.jailed() {
        return Ok(JAIL_OFF.into());
    }
    match (rec.launcher_ns.get("net"), o.ns_ino.get("net")) {
        (Some(a), Some(b)) if a != b => {}
        _ => {
            return Err(
                "the jail shares the launcher's network namespace: host loopback is reachable"
                    .into(),
            )
        }
    }
    if !o.loopback_reached.is_empty() {
        return Err(format!(
            "host loopback port(s) {:?} answer on 127.0.0.1 from inside (pasta forwards host loopback)",
            o.loopback_reached
        ));
    }
    Ok(format!(
        "own network namespace; {} host loopback listener(s) tried, none answers{}",
        rec.host_loopback_tcp.len() - o.loopback_own.len(),
        if o.loopback_own.is_empty() {
            String::new()
        } else {
            format!(" (ports {:?} also listen inside: skipped)", o.loopback_own)
        }
    ))
}

fn check_egress_allowlist(o: &Observed) -> Outcome {
    let rec = record(o)?;
    if rec.egress != crate::egress::policy::Egress::Allowlist {
        return Ok(format!(
            "egress = {}: not in allowlist mode",
            rec.egress.name()
        ));
    }
    if let Some(r) = o.routes.first() {
        return Err(format!(
            "{} route(s) inside (first: {}/{}): allowlist mode has none",
            o.routes.len(),
            r.dst,
            r.len
        ));
    }
    let routable: Vec<String> = o
        .lookups
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(ip, _)| ip.to_string())
        .collect();
    if !routable.is_empty() {
        return Err(format!("routable from inside: {}", routable.join(", ")));
    }
    for (k, want) in crate::egress::policy::proxy_env() {
        if o.env.get(&k) != Some(&want) {
            return Err(format!(
                "{k} is {} instead of {want}: tools would not find the proxy",
                o.env.get(&k).map_or("unset".into(), |v| format!("`{v}`"))
            ));
        }
    }
    match &o.proxy_probe {
        Some(Ok(status)) if status.starts_with("HTTP/1.1 403") => Ok(format!(
            "no route at all; the proxy variables point at {}; {ALLOWLIST_PROBE} refused ({status})",
            crate::egress::policy::PROXY_ADDR
        )),
        Some(Ok(status)) => Err(format!(
            "the proxy did not refuse {ALLOWLIST_PROBE}, a name on no list: `{status}`"
        )),
        Some(Err(e)) => Err(format!("the proxy did not answer: {e}")),
        None => Err("the proxy was not probed".into()),
    }
}

fn check_pin(o: &Observed) -> Outcome {
    match &o.pin {
        Ok(()) => Ok(format!("{} matches {}", paths::REAL_CLAUDE, paths::PIN_FILE)),
        Err(e) if e.starts_with("sha256") => Err(format!(
            "{e}: the real binary changed after install and was launched anyway (the launch-time pin check regressed)"
        )),
        Err(e) => Err(format!("{e}: the sandbox is not installed (sudo claude-sandbox install)")),
    }
}

fn check_tiocsti(o: &Observed) -> Outcome {
    match o.tiocsti_errno {
        nix::libc::EPERM => Ok("ioctl(TIOCSTI) refused with EPERM by the seccomp filter".into()),
        e => Err(format!(
            "ioctl(TIOCSTI) answered errno {e}, not EPERM: the seccomp filter is not in place"
        )),
    }
}

fn check_userns(o: &Observed) -> Outcome {
    match o.userns_errno {
        0 => Err("unshare(CLONE_NEWUSER) succeeded: a new user namespace (uid 0 in it) can be made inside".into()),
        e => Ok(format!(
            "a new user namespace is refused (errno {e}: {})",
            std::io::Error::from_raw_os_error(e)
        )),
    }
}

fn check_root_view(o: &Observed) -> Outcome {
    let rec = record(o)?;
    if !rec.root_view {
        return Ok("launched by an unprivileged user: the kernel's own permissions apply".into());
    }
    let mut bad: Vec<String> = o
        .root_only_readable
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    for d in crate::launch::rootview::HIDDEN_WHOLE {
        let d = Path::new(d);
        let hidden = top_mount(&o.mounts, d).is_some_and(|m| m.fstype == "tmpfs");
        if d.is_dir() && !hidden {
            bad.push(format!("{} (other users' homes)", d.display()));
        }
    }
    if bad.is_empty() {
        Ok("launched by root: nothing only root may read is readable".into())
    } else {
        Err(format!(
            "launched by root, and these only root may read on the host are readable: {}",
            bad.join(", ")
        ))
    }
}

fn check_env_overrides(o: &Observed) -> Outcome {
    let rec = record(o)?;
    match (&rec.weakened_by_env[..], rec.allow_env_overrides) {
        ([], _) => Ok("no CLAUDE_SANDBOX_* variable weakened this sandbox".into()),
        (w, true) => Ok(format!(
            "weakened deliberately ({}), allowed by allow-env-overrides in {}",
            w.join(", "),
            paths::CONFIG_FILE
        )),
        (w, false) => Err(format!(
            "{} weakened this sandbox although {} does not allow environment overrides",
            w.join(", "),
            paths::CONFIG_FILE
        )),
    }
}

/// The samples that did not get the errno they want, each as
/// "CALL answered WHAT (errno N)".
fn answered_otherwise(samples: &[SyscallSample]) -> Vec<String> {
    let name = |e: i32| match e {
        0 => "success".to_string(),
        e => std::io::Error::from_raw_os_error(e)
            .to_string()
            .split(" (os error")
            .next()
            .unwrap_or_default()
            .to_string(),
    };
    samples
        .iter()
        .filter(|s| s.got != s.want)
        .map(|s| format!("{} answered {} (errno {})", s.call, name(s.got), s.got))
        .collect()
}

fn check_syscalls(o: &Observed) -> Outcome {
    if o.syscall_samples.is_empty() {
        return Err("no refused call was tried".into());
    }
    let through = answered_otherwise(&o.syscall_samples);
    if through.is_empty() {
        Ok(format!(
            "{} calls refused by the seccomp filter ({})",
            o.syscall_samples.len(),
            o.syscall_samples
                .iter()
                .map(|s| s.call.split('(').next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else {
        Err(format!(
            "{}: the kernel answered, not the seccomp filter (docs/decisions/0007-seccomp-profile.md)",
            through.join("; ")
        ))
    }
}

fn check_keyring(o: &Observed) -> Outcome {
    match o.keyctl_errno {
        nix::libc::EPERM => Ok("keyctl refused with EPERM by the seccomp filter".into()),
        0 => Err(
            "keyctl(GET_KEYRING_ID) succeeded: the caller's session keyring is reachable".into(),
        ),
        e => Err(format!(
            "keyctl answered errno {e}, not EPERM: the seccomp filter is not in place"
        )),
    }
}

/// The launch binds the managed settings without the lockdown (decisions/0005);
/// with the host's file as it is, the user's hooks, status line, MCP servers
/// and apiKeyHelper would not run inside either.
fn check_managed_settings(o: &Observed) -> Outcome {
    let path = paths::MANAGED_SETTINGS;
    let text = match &o.managed_settings {
        Ok(None) => {
            return Ok(format!(
                "{path} absent: nothing restricts the user's settings"
            ))
        }
        Ok(Some(t)) => t,
        Err(e) => {
            return Ok(format!(
                "{path} unreadable ({e}): the launch leaves it as the host has it"
            ))
        }
    };
    if o.managed_settings_writable {
        return Err(format!(
            "{path} is writable from inside: a session could rewrite the guard"
        ));
    }
    let Ok(serde_json::Value::Object(root)) = serde_json::from_str::<serde_json::Value>(text)
    else {
        return Ok(format!(
            "{path} is not a JSON object: the launch leaves it as the host has it"
        ));
    };
    let in_effect = crate::plan::managed_settings::lockdown_in_effect(&root);
    if !in_effect.is_empty() {
        return Err(format!(
            "{path} holds the lockdown for unsandboxed sessions ({}): the user's own hooks, MCP servers and apiKeyHelper do not run inside (the launch did not bind its view without it)",
            in_effect.join(", ")
        ));
    }
    let guard = text.contains(crate::plan::managed_settings::PROMPT_GATE_CMD);
    Ok(format!(
        "{path} read-only, without the lockdown{}",
        if guard {
            ", guard hooks kept"
        } else {
            ", no guard hooks"
        }
    ))
}

/// The table a person reads.
pub(crate) fn render_table(checks: &[Check]) -> String {
    let mut out = String::new();
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in checks {
        let st = match c.status {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!(
            "{:>2}  {st}  {:width$}  {}\n",
            c.id, c.name, c.detail
        ));
    }
    out.push_str(&summary(checks));
    out.push('\n');
    out
}

/// `N PASS / M FAIL`.
pub(crate) fn summary(checks: &[Check]) -> String {
    let fail = failures(checks);
    format!("{} PASS / {fail} FAIL", checks.len() - fail)
}

fn failures(checks: &[Check]) -> usize {
    checks.iter().filter(|c| c.status == Status::Fail).count()
}

/// Run `claude-sandbox verify`; the exit status is the number of failures.
pub(crate) fn main(args: &Args) -> anyhow::Result<i32> {
    let checks = evaluate(&Observed::gather());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        print!("{}", render_table(&checks));
    }
    Ok(failures(&checks) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::RECORD_VERSION;
    use crate::sys::kernel::loopback_listeners;

    const MOUNTINFO: &str = "\
22 1 252:1 / / ro,relatime - ext4 /dev/vda1 rw\n\
23 22 0:5 / /dev rw,nosuid - tmpfs tmpfs rw\n\
24 22 0:6 / /tmp rw,nosuid - tmpfs tmpfs rw\n\
35 22 0:10 / /run rw,nosuid - tmpfs tmpfs rw\n\
25 22 0:7 / /home/dev rw - tmpfs tmpfs rw\n\
26 25 252:1 /home/dev/.claude /home/dev/.claude rw - ext4 /dev/vda1 rw\n\
27 25 252:1 /home/dev/.config/gh /home/dev/.config/gh ro - ext4 /dev/vda1 rw\n\
32 25 252:1 /home/dev/.local/state/claude-sandbox/cache /home/dev/.cache rw - ext4 /dev/vda1 rw\n\
33 25 252:1 /home/dev/.local/state/claude-sandbox/share /home/dev/.local/share rw - ext4 /dev/vda1 rw\n\
34 33 0:9 / /home/dev/.local/share/applications rw - tmpfs tmpfs rw\n\
28 33 0:8 / /home/dev/.local/share/claude rw - tmpfs tmpfs rw\n\
29 25 0:5 /null /home/dev/.netrc ro - tmpfs tmpfs rw\n\
30 22 252:1 /workspaces/app /workspaces/app rw - ext4 /dev/vda1 rw\n\
31 22 252:1 /home/dev/my\\040dir /home/dev/my\\040dir ro - ext4 /dev/vda1 rw\n";

    fn rec() -> LaunchRecord {
        LaunchRecord {
            version: RECORD_VERSION,
            egress: crate::egress::policy::Egress::Open,
            home: "/home/dev".into(),
            workspace: "/workspaces/app".into(),
            ..Default::default()
        }
    }

    /// A sandbox with every table of the plan in play.
    fn full_sandbox() -> (Sandbox, LaunchRecord) {
        let mut f = crate::plan::fixtures::facts();
        for p in plan::candidates(&f.home) {
            f.existing.insert(p);
        }
        f.passwd_home = Some(PathBuf::from("/home/real"));
        // A root launch, so the root-view masks are in play too.
        crate::plan::fixtures::as_root(&mut f);
        let extra = PathBuf::from("/srv/data");
        f.resolved.insert(extra.clone(), Some(extra.clone()));
        if let Some(j) = f.jail.as_mut() {
            j.resolv.nameservers = vec![Ipv4Addr::new(10, 77, 0, 1)];
        }
        f.managed_settings = Some(lockdown_settings());
        let cfg = crate::config::Config {
            allow_write: vec![extra],
            ..Default::default()
        };
        let sb = plan::build(&cfg, &f, &[]).unwrap();
        let rec = sb.record().expect("a launch record").clone();
        (sb, rec)
    }

    #[test]
    fn every_plan_operation_has_a_check() {
        let (sb, rec) = full_sandbox();
        let names: Vec<&str> = BATTERY.iter().map(|d| d.name).collect();
        let cov = coverage(&sb, &rec);
        assert!(cov.len() > 30, "{cov:?}");
        for (op, check) in &cov {
            match check {
                Some(c) => assert!(names.contains(c), "{op}: {c} is not in the battery"),
                None => assert!(
                    UNCHECKED.iter().any(|(o, _)| o == op),
                    "the plan's operation {op} has no check in the battery: add one (verify::covering_check) or list it in UNCHECKED with the reason"
                ),
            }
        }
        // Every table the plan masks from is covered, not just some entries.
        for dst in plan::SYSTEM_NULLED
            .iter()
            .map(PathBuf::from)
            .chain(plan::HOME_NULLED.iter().map(|r| rec.home.join(r)))
        {
            assert!(
                sb.mounts
                    .contains(&sandbox::Mount::Empty { dst: dst.clone() }),
                "{} not masked in the full sandbox",
                dst.display()
            );
        }
    }

    #[test]
    fn an_operation_no_check_knows_fails_the_coverage_test() {
        let (_, mut rec) = full_sandbox();
        // (A root launch's masks under /etc are the root-view check's.)
        rec.root_view = false;
        for m in [
            sandbox::Mount::Empty {
                dst: "/etc/new-secret".into(),
            },
            sandbox::Mount::Tmpfs {
                dst: "/var/lib/secrets".into(),
            },
            sandbox::Mount::ReadWrite {
                src: rec.home.join(".ssh"),
                dst: rec.home.join(".ssh"),
            },
        ] {
            assert_eq!(covering_check(&m, &rec), None, "{m:?}");
        }
    }

    #[test]
    fn home_masks_and_read_only_bind_backs_are_checked() {
        let mut r = rec();
        r.other_homes = vec!["/home/real".into()];
        let base = "\
22 1 252:1 / / ro,relatime - ext4 /dev/vda1 rw\n\
25 22 0:7 / /home/dev rw - tmpfs tmpfs rw\n\
26 25 252:1 /home/dev/.local/share /home/dev/.local/share rw - ext4 /dev/vda1 rw\n";
        let good = format!(
            "{base}\
27 26 0:8 / /home/dev/.local/share/applications rw - tmpfs tmpfs rw\n\
28 26 0:9 / /home/dev/.local/share/claude rw - tmpfs tmpfs rw\n\
29 25 252:1 /usr/libexec/claude-sandbox/claude /home/dev/.local/bin/claude ro - ext4 /dev/vda1 rw\n\
30 22 0:10 / /home/real rw - tmpfs tmpfs rw\n"
        );
        assert_eq!(
            home_masks_missing(&parse_mountinfo(&good), &r),
            Vec::<String>::new()
        );
        let bad = format!(
            "{base}\
27 26 0:8 / /home/dev/.local/share/applications rw - tmpfs tmpfs rw\n\
29 25 252:1 /usr/libexec/claude-sandbox/claude /home/dev/.local/bin/claude rw - ext4 /dev/vda1 rw\n"
        );
        let missing = home_masks_missing(&parse_mountinfo(&bad), &r);
        assert_eq!(
            missing,
            [
                "/home/dev/.local/share/claude is not a fresh tmpfs",
                "/home/dev/.local/bin/claude is bound back writable",
                "the user database's home /home/real is not masked"
            ]
        );
    }

    #[test]
    fn every_check_is_documented() {
        let doc = include_str!("../../docs/verify.md");
        for (i, d) in BATTERY.iter().enumerate() {
            assert!(
                doc.contains(&format!("| {} | {} |", i + 1, d.name)),
                "docs/verify.md lacks row {} {}",
                i + 1,
                d.name
            );
        }
    }

    #[test]
    fn slash_command_runs_the_battery_by_path_then_probes() {
        let cmd = crate::install::promote::VERIFY_COMMAND;
        assert!(cmd.contains(&format!("{} verify", paths::SELF_BIN)));
        for w in [
            "at least 10",
            "BLOCKED",
            "ESCAPED",
            "INCONCLUSIVE",
            "RESULT: SANDBOX LEAKING",
        ] {
            assert!(cmd.contains(w), "{w}");
        }
    }

    #[test]
    fn a_writable_mount_hidden_under_a_read_only_one_is_not_writable() {
        let mut o = healthy();
        // The host's writable /etc overlay, covered by the sandbox's read-only bind.
        let etc = |ro: bool| Mount {
            root: "/".into(),
            point: "/etc".into(),
            read_only: ro,
            fstype: "overlay".into(),
            source: "overlay".into(),
        };
        o.mounts.push(etc(false));
        o.mounts.push(etc(true));
        assert!(!check_workspace(&o).unwrap_or_else(|e| e).contains("/etc"));
        o.mounts.pop();
        assert!(check_workspace(&o).unwrap_err().contains("/etc"));
    }

    #[test]
    fn mountinfo_parsed_with_escapes() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 14);
        assert!(m[0].read_only && m[0].fstype == "ext4");
        assert_eq!(m[13].point, PathBuf::from("/home/dev/my dir"));
        assert_eq!(
            m[7].root,
            PathBuf::from("/home/dev/.local/state/claude-sandbox/cache")
        );
        assert_eq!(top_mount(&m, Path::new("/tmp")).unwrap().fstype, "tmpfs");
    }

    #[test]
    fn home_allowlist_catches_a_bound_back_ssh() {
        let mut m = parse_mountinfo(MOUNTINFO);
        m.pop(); // the odd "my dir" mount
        assert!(unexpected_home_mounts(&m, &rec()).is_empty());
        m.push(Mount {
            root: "/home/dev/.ssh".into(),
            point: "/home/dev/.ssh".into(),
            read_only: false,
            fstype: "ext4".into(),
            source: "/dev/vda1".into(),
        });
        assert_eq!(unexpected_home_mounts(&m, &rec()), ["~/.ssh"]);
        // no-forge: the gh dir is no longer allowed.
        let mut r = rec();
        r.no_forge = true;
        assert_eq!(unexpected_home_mounts(&m, &r), ["~/.config/gh", "~/.ssh"]);
        // A workspace under $HOME is allowed, with whatever is mounted inside it.
        r.workspace = "/home/dev/.ssh".into();
        assert_eq!(unexpected_home_mounts(&m, &r), ["~/.config/gh"]);
    }

    #[test]
    fn secret_variables_recognised() {
        for k in [
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "SSH_AUTH_SOCK",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_PROFILE",
            "NPM_TOKEN",
            "VSCODE_IPC_HOOK_CLI",
            "DB_PASSWORD",
        ] {
            assert!(is_secret_var(k), "{k}");
        }
        for k in [
            "PATH",
            "HOME",
            "TERM",
            "LANG",
            "IS_SANDBOX",
            "CLAUDE_CODE_ENTRYPOINT",
        ] {
            assert!(!is_secret_var(k), "{k}");
        }
    }

    const JAIL_ROUTES: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth0\t00000000\t01004D0A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
        *\t0000000A\t00000000\t0201\t0\t0\t0\t000000FF\t0\t0\t0\n\
        *\t000010AC\t00000000\t0201\t0\t0\t0\t0000F0FF\t0\t0\t0\n\
        *\t0000A8C0\t00000000\t0201\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
        *\t00004064\t00000000\t0201\t0\t0\t0\t0000C0FF\t0\t0\t0\n\
        *\t0000FEA9\t00000000\t0201\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
        *\t00004D0A\t00000000\t0201\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

    #[test]
    fn jail_routes_complete_or_named_missing() {
        let routes = parse_routes(JAIL_ROUTES);
        assert_eq!(routes.len(), 7);
        assert!(routes[0].len == 0 && !routes[0].reject);
        assert!(routes[1..].iter().all(|r| r.reject));
        // Every range closed: nothing open.
        assert!(open_ranges(&required_rejects(), &|_| false).is_empty());
        // Only the top of 172.16/12 routable (a narrower blackhole): named.
        let top = Ipv4Addr::new(172, 31, 255, 254);
        assert_eq!(
            open_ranges(&required_rejects(), &|ip| ip == top),
            ["172.16.0.0/12"]
        );
    }

    #[test]
    fn loopback_listeners_from_proc_net_tcp() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue\n\
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000000\n\
           1: 00000000:0016 00000000:0000 0A 00000000:00000000\n\
           2: 0900A8C0:0050 00000000:0000 0A 00000000:00000000\n\
           3: 0100007F:1F91 0100007F:C000 01 00000000:00000000\n";
        let tcp6 = "  sl  local_address\n\
           0: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 0A x\n";
        assert_eq!(loopback_listeners(tcp, tcp6), vec![22, 53, 8080]);
    }

    #[test]
    fn subnet_samples_first_and_last_host() {
        assert_eq!(
            subnet_samples(Ipv4Addr::new(10, 77, 0, 0), 24),
            [Ipv4Addr::new(10, 77, 0, 1), Ipv4Addr::new(10, 77, 0, 254)]
        );
        assert!(subnet_samples(Ipv4Addr::UNSPECIFIED, 0).is_empty());
        assert!(subnet_samples(Ipv4Addr::new(10, 77, 0, 9), 32).is_empty());
    }

    /// The managed settings as install writes them on the host.
    fn lockdown_settings() -> String {
        crate::plan::managed_settings::merge_managed(None, true)
            .unwrap()
            .0
    }

    /// An Observed that passes everything, for the per-check tests below.
    fn healthy() -> Observed {
        let mut o = Observed {
            record: Ok(rec()),
            facts: inside::Facts {
                is_sandbox_env: true,
                no_new_privs: true,
                cap_eff_zero: true,
                single_id_userns: true,
                nspid_nested: false,
                pid1_is_bwrap: true,
            },
            status: "NoNewPrivs:\t1\nCapEff:\t0000000000000000\nCapPrm:\t0000000000000000\nCapAmb:\t0000000000000000\n".into(),
            mounts: parse_mountinfo(MOUNTINFO),
            tiocsti_errno: nix::libc::EPERM,
            keyctl_errno: nix::libc::EPERM,
            userns_errno: nix::libc::ENOSPC,
            syscall_samples: syscall_samples_refused(),
            pid1_samples: ["ptrace(…, 1)", "process_vm_writev(1, …)"]
                .into_iter()
                .map(|call| SyscallSample {
                    call,
                    want: nix::libc::EPERM,
                    got: nix::libc::EPERM,
                })
                .collect(),
            routes: parse_routes(JAIL_ROUTES),
            gitconfig: Ok("[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n".into()),
            pin: Ok(()),
            managed_settings: Ok(crate::plan::managed_settings::inside_managed(&lockdown_settings())),
            ..Default::default()
        };
        o.mounts.pop();
        o.env
            .insert("GIT_CONFIG_GLOBAL".into(), paths::GITCONFIG.into());
        o.env.insert("GIT_CONFIG_SYSTEM".into(), "/dev/null".into());
        for (n, l) in required_rejects() {
            for ip in subnet_samples(n, l) {
                o.lookups
                    .insert(IpAddr::V4(ip), Err("Invalid argument".into()));
            }
        }
        o.lookups
            .insert(IpAddr::V4(METADATA), Err("No route to host".into()));
        o.lookups.insert(IpAddr::V4(PUBLIC_SAMPLE), Ok(()));
        let mut r = rec();
        for k in NS_KINDS {
            r.launcher_ns.insert(k.to_string(), 1);
            o.ns_ino.insert(k.to_string(), 2);
        }
        o.record = Ok(r);
        o
    }

    /// What the filter answers to the samples.
    fn syscall_samples_refused() -> Vec<SyscallSample> {
        ["bpf(…)", "mount(…)", "clone3(…)"]
            .into_iter()
            .zip([nix::libc::EPERM, nix::libc::EPERM, nix::libc::ENOSYS])
            .map(|(call, e)| SyscallSample {
                call,
                want: e,
                got: e,
            })
            .collect()
    }

    fn failing(o: &Observed) -> Vec<&'static str> {
        evaluate(o)
            .into_iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn each_regression_fails_exactly_its_check() {
        // (Workspace writability is a live probe; everything else is pure.)
        let base: Vec<&str> = failing(&healthy());
        assert_eq!(base, ["workspace-scoped"], "only the live probe fails here");
        type Mutate = Box<dyn Fn(&mut Observed)>;
        let cases: Vec<(&str, Mutate)> = vec![
            (
                "token-env-absent",
                Box::new(|o| {
                    o.env.insert("GH_TOKEN".into(), "ghp_x".into());
                }),
            ),
            (
                "capabilities-dropped",
                Box::new(|o| {
                    o.status = o
                        .status
                        .replace("CapEff:\t0000000000000000", "CapEff:\t000001ffffffffff")
                }),
            ),
            (
                "tmp-tmpfs",
                Box::new(|o| o.mounts.retain(|m| m.point != Path::new("/tmp"))),
            ),
            (
                "jail-routes",
                Box::new(|o| {
                    o.lookups
                        .insert(IpAddr::V4(Ipv4Addr::new(172, 16, 0, 1)), Ok(()));
                }),
            ),
            (
                "protected-paths",
                Box::new(|o| {
                    o.protected.push(ProtectedPath {
                        path: "/workspaces/app/.git/config".into(),
                        exists: true,
                        writable: true,
                        creatable: false,
                    })
                }),
            ),
            (
                "protected-creation",
                Box::new(|o| {
                    o.protected.push(ProtectedPath {
                        path: "/workspaces/app/.envrc".into(),
                        exists: false,
                        writable: false,
                        creatable: true,
                    })
                }),
            ),
            (
                "private-state",
                Box::new(|o| {
                    o.mounts
                        .retain(|m| m.point != Path::new("/home/dev/.cache"))
                }),
            ),
            (
                "private-state",
                Box::new(|o| {
                    for m in &mut o.mounts {
                        if m.point == Path::new("/home/dev/.config/gh") {
                            m.read_only = false;
                        }
                    }
                }),
            ),
            ("no-nested-userns", Box::new(|o| o.userns_errno = 0)),
            (
                "root-view",
                Box::new(|o| {
                    if let Ok(r) = o.record.as_mut() {
                        r.root_view = true;
                    }
                    o.root_only_readable = vec!["/etc/ssl/private".into()];
                }),
            ),
            (
                "syscalls-refused",
                Box::new(|o| o.syscall_samples[1].got = nix::libc::EFAULT),
            ),
            ("syscalls-refused", Box::new(|o| o.syscall_samples.clear())),
            ("pid1-sealed", Box::new(|o| o.pid1_samples[0].got = 0)),
            ("pid1-sealed", Box::new(|o| o.pid1_samples[1].got = 0)),
            ("pid1-sealed", Box::new(|o| o.pid1_samples.clear())),
            (
                "pid1-sealed",
                Box::new(|o| o.pid1_mem_writable.push("/proc/1/mem".into())),
            ),
            (
                "run-masked",
                Box::new(|o| o.mounts.retain(|m| m.point != Path::new("/run"))),
            ),
            (
                "run-masked",
                Box::new(|o| o.run_sockets.push("/run/docker.sock".into())),
            ),
            (
                "env-overrides",
                Box::new(|o| {
                    if let Ok(r) = o.record.as_mut() {
                        r.weakened_by_env = vec!["CLAUDE_SANDBOX_EGRESS_JAIL=0".into()];
                    }
                }),
            ),
            (
                "real-binary-pinned",
                Box::new(|o| o.pin = Err("sha256 differs".into())),
            ),
            (
                "strict-home",
                Box::new(|o| {
                    o.mounts.push(Mount {
                        root: "/home/dev/.ssh".into(),
                        point: "/home/dev/.ssh".into(),
                        read_only: false,
                        fstype: "ext4".into(),
                        source: "/dev/vda1".into(),
                    })
                }),
            ),
            (
                "tiocsti-refused",
                Box::new(|o| o.tiocsti_errno = nix::libc::ENOTTY),
            ),
            (
                "ipc-uts-namespaces",
                Box::new(|o| {
                    o.ns_ino.insert("uts".into(), 1);
                }),
            ),
            (
                "managed-settings-inside",
                Box::new(|o| o.managed_settings = Ok(Some(lockdown_settings()))),
            ),
            (
                "managed-settings-inside",
                Box::new(|o| o.managed_settings_writable = true),
            ),
        ];
        for (name, mutate) in cases {
            let mut o = healthy();
            mutate(&mut o);
            let mut f = failing(&o);
            f.retain(|n| *n != "workspace-scoped");
            assert_eq!(f, [name], "{name}");
        }
    }

    #[test]
    fn jail_checks_pass_with_a_note_when_deliberately_off() {
        let mut o = healthy();
        o.routes.clear();
        o.lookups.clear();
        if let Ok(r) = o.record.as_mut() {
            r.egress = crate::egress::policy::Egress::Off;
        }
        for c in evaluate(&o) {
            if [
                "jail-routes",
                "internal-unroutable",
                "no-ipv6",
                "host-loopback-unreachable",
            ]
            .contains(&c.name)
            {
                assert_eq!(c.status, Status::Pass, "{}", c.name);
                assert!(c.detail.contains("deliberately off"), "{}", c.detail);
            }
        }
        // On, but empty: every jail check fails.
        if let Ok(r) = o.record.as_mut() {
            r.egress = crate::egress::policy::Egress::Open;
        }
        let f = failing(&o);
        for n in ["jail-routes", "internal-unroutable"] {
            assert!(f.contains(&n), "{n}: {f:?}");
        }
    }

    /// What allowlist mode looks like from inside when it holds.
    fn healthy_allowlist() -> Observed {
        let mut o = healthy();
        o.routes.clear();
        for r in o.lookups.values_mut() {
            *r = Err("Network is unreachable (os error 101)".into());
        }
        if let Ok(r) = o.record.as_mut() {
            r.egress = crate::egress::policy::Egress::Allowlist;
        }
        for (k, v) in crate::egress::policy::proxy_env() {
            o.env.insert(k, v);
        }
        o.proxy_probe = Some(Ok("HTTP/1.1 403 Forbidden".into()));
        o
    }

    #[test]
    fn allowlist_mode_passes_and_each_weakening_fails_its_check() {
        // workspace-scoped probes the real file system: the live probe fails here.
        let failing = |o: &Observed| {
            let mut f = failing(o);
            f.retain(|n| *n != "workspace-scoped");
            f
        };
        let o = healthy_allowlist();
        assert_eq!(failing(&o), Vec::<&str>::new());
        let c = evaluate(&o);
        let detail = |n: &str| c.iter().find(|x| x.name == n).unwrap().detail.clone();
        assert!(
            detail("egress-allowlist").contains("refused (HTTP/1.1 403"),
            "{}",
            detail("egress-allowlist")
        );
        assert!(detail("jail-routes").contains("egress = allowlist"));
        assert!(!detail("host-loopback-unreachable").contains("deliberately off"));
        // A route back (the open jail's default route), one variable
        // missing, a proxy that lets the name through, one that is gone.
        let mut routed = healthy_allowlist();
        routed.routes = parse_routes(JAIL_ROUTES);
        let mut public = healthy_allowlist();
        public.lookups.insert(IpAddr::V4(PUBLIC_SAMPLE), Ok(()));
        let mut no_var = healthy_allowlist();
        no_var.env.remove("https_proxy");
        let mut open = healthy_allowlist();
        open.proxy_probe = Some(Ok("HTTP/1.1 200 Connection established".into()));
        let mut gone = healthy_allowlist();
        gone.proxy_probe = Some(Err("Connection refused".into()));
        for (what, o, says) in [
            ("route", routed, "route(s) inside"),
            (
                "public lookup",
                public,
                "routable from inside: 198.51.100.1",
            ),
            ("variable", no_var, "https_proxy is unset"),
            ("open proxy", open, "did not refuse"),
            ("no proxy", gone, "did not answer"),
        ] {
            assert_eq!(failing(&o), ["egress-allowlist"], "{what}");
            let c = evaluate(&o);
            let d = &c
                .iter()
                .find(|x| x.name == "egress-allowlist")
                .unwrap()
                .detail;
            assert!(d.contains(says), "{what}: {d}");
        }
        // In the other modes it passes with a note.
        let mut off = healthy();
        if let Ok(r) = off.record.as_mut() {
            r.egress = crate::egress::policy::Egress::Open;
        }
        let c = evaluate(&off);
        let d = &c.iter().find(|x| x.name == "egress-allowlist").unwrap();
        assert!(d.status == Status::Pass && d.detail.contains("not in allowlist mode"));
    }

    #[test]
    fn outside_fails_the_marker_and_names_it() {
        let mut o = healthy();
        o.record = Err("placeholder".into());
        o.facts.is_sandbox_env = false;
        let c = &evaluate(&o)[0];
        assert_eq!((c.name, c.status), ("inside-marker", Status::Fail));
        assert!(c.detail.contains("IS_SANDBOX=1 is not set"), "{}", c.detail);
        let table = render_table(&evaluate(&o));
        assert!(table.lines().last().unwrap().ends_with(" FAIL"));
    }
}
