//! Gathering the host facts a plan is built from ([`crate::plan::Facts`]).
//! This is the only place the plan's inputs touch the file system.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::config::Config;
use crate::error::bad_input;
use crate::plan::{self, Facts, ProcMode};
use crate::sys::user::Identity;

/// This launch's session id, the same for every attempt.
pub(crate) fn session_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        crate::egress::policy::session_id(crate::sys::clock::now_secs(), std::process::id())
    })
}

/// What the user turned off of Claude Code's traffic: the launching
/// environment first, then the `env` of `~/.claude/settings.json` (as
/// Claude Code applies it). An unreadable file turns nothing off.
fn claude_traffic(home: &Path) -> crate::egress::policy::ClaudeTraffic {
    let settings = crate::sys::files::read_text(&home.join(".claude/settings.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let from_settings = |k: &str| {
        let v = settings.as_ref()?.get("env")?.get(k)?;
        Some(match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    crate::egress::policy::ClaudeTraffic::from_vars(&|k| {
        std::env::var(k).ok().or_else(|| from_settings(k))
    })
}

/// Take the snapshot. `proc_mode` is decided by the caller (the executor
/// tries a fresh `/proc` first and falls back when the kernel refuses it).
pub(crate) fn gather(cfg: &Config, proc_mode: ProcMode) -> anyhow::Result<Facts> {
    let Identity {
        uid,
        gid,
        user,
        home,
    } = crate::sys::user::identity().map_err(bad_input)?;
    let jailed = plan::jailed(cfg);
    let facts_home = home.clone();
    let cwd = std::env::current_dir().map_err(|e| {
        bad_input(format!(
            "the current directory is not usable: {e}; cd into your project"
        ))
    })?;
    let existing: BTreeSet<PathBuf> = plan::candidates(&home)
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    let resolved: BTreeMap<PathBuf, Option<PathBuf>> = plan::rw_requests(cfg, &cwd)
        .into_iter()
        .map(|p| {
            let r = p.canonicalize().ok();
            (p, r)
        })
        .collect();
    let workspace = plan::rw_requests(cfg, &cwd)
        .first()
        .and_then(|ws| resolved.get(ws).cloned().flatten());
    let discovered = workspace
        .as_deref()
        .map(crate::plan::protect::discover)
        .unwrap_or_default();
    let protected = workspace
        .as_deref()
        .map(|ws| protected_paths(ws, &discovered))
        .unwrap_or_default();
    let (root_masks, hidden_whole) = root_view(uid, &resolved);
    let passwd_home = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .and_then(|p| p.dir.canonicalize().ok())
        .filter(|p| *p != home);
    Ok(Facts {
        uid,
        gid,
        user,
        passwd_home,
        home,
        cwd,
        env: std::env::vars_os().collect(),
        existing,
        run_dirs: plan::SYSTEM_TMPFS
            .iter()
            .map(PathBuf::from)
            .filter(|d| d.symlink_metadata().is_ok_and(|m| m.is_dir()))
            .collect(),
        run_keep: run_keep(),
        root_masks,
        hidden_whole,
        resolved,
        proc_mode,
        launcher_ns: crate::sys::kernel::NS_KINDS
            .iter()
            .filter_map(|k| Some((k.to_string(), crate::sys::kernel::ns_inode(k)?)))
            .collect(),
        // Only the jail makes host loopback unreachable; without it there is
        // nothing for `verify` to try.
        host_loopback_tcp: if jailed {
            loopback_listeners()
        } else {
            Vec::new()
        },
        protected,
        discovered,
        jail: if jailed {
            Some(crate::egress::host_facts(
                plan::egress(cfg) == crate::egress::policy::Egress::Open,
            )?)
        } else {
            None
        },
        // Missing, or no small text file (a FIFO is never waited on): nothing to bind.
        managed_settings: crate::sys::files::read_text(Path::new(
            crate::sys::paths::MANAGED_SETTINGS,
        ))
        .ok(),
        session: session_id().to_string(),
        claude_traffic: if plan::egress(cfg) == crate::egress::policy::Egress::Allowlist {
            claude_traffic(&facts_home)
        } else {
            Default::default()
        },
    })
}

/// The protected paths of the workspace (§4.8) that exist, to bind
/// read-only. A symlink is followed only to a file or directory inside the
/// workspace (that target is what a host tool would read); one pointing
/// elsewhere is not bound (outside the read-write roots it is read-only
/// already) and the tripwire watches it like a missing path.
fn protected_paths(
    workspace: &Path,
    discovered: &crate::plan::protect::Protected,
) -> Vec<crate::sandbox::RwBind> {
    discovered
        .paths
        .iter()
        .cloned()
        .filter_map(|p| {
            let m = p.symlink_metadata().ok()?;
            let resolved = if m.file_type().is_symlink() {
                p.canonicalize().ok().filter(|t| t.starts_with(workspace))?
            } else {
                p.clone()
            };
            Some(crate::sandbox::RwBind {
                requested: p,
                resolved,
            })
        })
        .collect()
}

/// Create the sandbox's private `~/.cache` and `~/.local/share` on the host
/// ([`plan::HOME_PRIVATE`]), owner-only, when they are missing.
pub(crate) fn ensure_private_state(home: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    for (_, name) in plan::HOME_PRIVATE {
        let dir = plan::private_dir(home, name);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                crate::error::setup(format!(
                    "cannot create the sandbox's private directory {}: {e}; check the ownership of {}",
                    dir.display(),
                    home.display()
                ))
            })?;
    }
    Ok(())
}

/// TCP ports listening on loopback or the wildcard address, for the launch
/// record. Asked of the kernel over netlink (sock_diag, LISTEN sockets only),
/// which walks only the listening table: reading /proc/net/tcp walks the whole
/// connection hash table on every read() — measured here at ~2.7 ms a call,
/// over 15 ms a launch. /proc/net/tcp, read in one go, only when netlink fails.
pub(crate) fn loopback_listeners() -> Vec<u16> {
    let mut ports = std::collections::BTreeSet::new();
    for family in [nix::libc::AF_INET, nix::libc::AF_INET6] {
        match diag_listeners(family as u8) {
            Ok(p) => ports.extend(p),
            Err(_) => {
                let read = |p: &str| {
                    let mut buf = Vec::with_capacity(1 << 20);
                    let _ = std::fs::File::open(p)
                        .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut buf));
                    String::from_utf8_lossy(&buf).into_owned()
                };
                return crate::sys::kernel::loopback_listeners(
                    &read("/proc/net/tcp"),
                    &read("/proc/net/tcp6"),
                );
            }
        }
    }
    ports.into_iter().take(64).collect()
}

/// Local ports of LISTEN TCP sockets of `family` bound to loopback or the
/// wildcard address (netlink SOCK_DIAG_BY_FAMILY dump).
const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const TCP_LISTEN: u32 = 10;

/// A sock_diag dump request for `family`'s listening TCP sockets: nlmsghdr
/// (16 bytes) + inet_diag_req_v2 (56), host byte order but the ports.
fn diag_request(family: u8) -> Vec<u8> {
    use nix::libc;
    let mut req = Vec::with_capacity(72);
    req.extend_from_slice(&72u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // seq
    req.extend_from_slice(&0u32.to_ne_bytes()); // pid
    req.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]);
    req.extend_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    req.extend_from_slice(&[0u8; 48]); // inet_diag_sockid: match all
    req
}

/// The port of one inet_diag_msg payload when it listens on loopback or on
/// every address. Layout: family, state, timer, retrans, then the sockid:
/// sport (big-endian) at 4, source address at 8..24.
fn local_listener(p: &[u8]) -> Option<u16> {
    if p.len() < 24 {
        return None;
    }
    let port = u16::from_be_bytes([p[4], p[5]]);
    let src = &p[8..24];
    let local = if p[0] == nix::libc::AF_INET as u8 {
        src[0] == 127 || src[..4] == [0, 0, 0, 0]
    } else {
        let v4mapped = src[..10] == [0; 10] && src[10..12] == [0xff, 0xff];
        src == [0u8; 16] || src[..15] == [0u8; 15] && src[15] == 1 || v4mapped && src[12] == 127
    };
    local.then_some(port)
}

/// What one datagram of the dump adds: `Ok(true)` once the dump is done.
fn read_dump_datagram(mut msg: &[u8], ports: &mut Vec<u16>) -> std::io::Result<bool> {
    while msg.len() >= 16 {
        let len = u32::from_ne_bytes(msg[0..4].try_into().expect("4 bytes")) as usize;
        let kind = u16::from_ne_bytes(msg[4..6].try_into().expect("2 bytes"));
        if len < 16 || len > msg.len() {
            return Err(std::io::Error::other("malformed netlink message"));
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => return Err(std::io::Error::other("sock_diag refused the dump")),
            _ => {}
        }
        if let Some(port) = local_listener(&msg[16..len]) {
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        let step = (len + 3) & !3;
        msg = &msg[step.min(msg.len())..];
    }
    Ok(false)
}

/// The listening TCP ports of `family` on loopback or every address, asked
/// of the kernel's sock_diag over netlink.
fn diag_listeners(family: u8) -> std::io::Result<Vec<u16>> {
    use nix::libc;
    use std::os::fd::{FromRawFd, OwnedFd};
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let req = diag_request(family);
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut ports = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if read_dump_datagram(&buf[..n as usize], &mut ports)? {
            return Ok(ports);
        }
    }
}

/// Launched by root: what an unprivileged user could not read (masked), and
/// the directories hidden whole, sparing the read-write roots (issue #13).
fn root_view(
    uid: u32,
    resolved: &BTreeMap<PathBuf, Option<PathBuf>>,
) -> (Vec<crate::plan::Unreadable>, Vec<PathBuf>) {
    if uid != 0 {
        return (Vec::new(), Vec::new());
    }
    let keep: Vec<PathBuf> = resolved.values().flatten().cloned().collect();
    let hidden = crate::launch::rootview::HIDDEN_WHOLE
        .iter()
        .map(PathBuf::from)
        .filter(|d| d.symlink_metadata().is_ok_and(|m| m.is_dir()))
        .filter(|d| !keep.iter().any(|k| d.starts_with(k)))
        .collect();
    (
        crate::launch::rootview::unreadable(&keep).unreadable,
        hidden,
    )
}

/// What the fresh `/run` gets back ([`plan::RUN_KEEP`], and the target of
/// `/etc/resolv.conf` when it lies under `/run`), where it exists.
fn run_keep() -> Vec<PathBuf> {
    let mut keep: Vec<PathBuf> = plan::RUN_KEEP
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    if let Ok(target) = Path::new("/etc/resolv.conf").canonicalize() {
        let under_run = plan::SYSTEM_TMPFS.iter().any(|r| target.starts_with(r));
        if under_run && !keep.iter().any(|k| target.starts_with(k)) {
            keep.push(target);
        }
    }
    keep
}

/// Unix sockets under `/run` (three levels deep), as `stat` sees them through
/// any mount: what `verify` finds reachable inside. A socket masked by
/// `/dev/null` is a character device here, not a socket.
pub(crate) fn run_sockets() -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk_sockets(Path::new("/run"), 0, &mut out);
    out.sort();
    out
}

fn walk_sockets(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 3 || plan::RUN_KEEP.iter().any(|s| dir == Path::new(s)) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(m) = p.symlink_metadata() else {
            continue;
        };
        if m.file_type().is_socket() {
            out.push(p);
        } else if m.is_dir() {
            walk_sockets(&p, depth + 1, out);
        }
    }
}

/// The user's git identity, looked up by a `git` child started early so the
/// wait overlaps other launch work (bubblewrap reads it last).
pub(crate) struct GitIdentity {
    job: std::sync::Mutex<Option<std::thread::JoinHandle<NameEmail>>>,
    done: std::sync::OnceLock<NameEmail>,
}

/// `user.name` and `user.email`, when set.
pub(crate) type NameEmail = (Option<String>, Option<String>);

impl GitIdentity {
    /// Start looking up the identity of the user whose home is `home`.
    pub(crate) fn start(home: PathBuf) -> GitIdentity {
        GitIdentity {
            job: std::sync::Mutex::new(Some(std::thread::spawn(move || git_identity(&home)))),
            done: std::sync::OnceLock::new(),
        }
    }

    /// (name, email), waiting for the lookup the first time.
    pub(crate) fn get(&self) -> (Option<&str>, Option<&str>) {
        let (n, e) = self.done.get_or_init(|| {
            let job = self.job.lock().ok().and_then(|mut j| j.take());
            job.and_then(|j| j.join().ok()).unwrap_or((None, None))
        });
        (n.as_deref(), e.as_deref())
    }
}

/// `user.name` and `user.email` from the user's own global git config.
pub(crate) fn git_identity(home: &Path) -> NameEmail {
    let Some(git) = ["/usr/bin/git", "/usr/local/bin/git", "/bin/git"]
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
    else {
        return (None, None);
    };
    let out = Command::new(git)
        .args([
            "config",
            "--global",
            "--includes",
            "-z",
            "--get-regexp",
            r"^user\.(name|email)$",
        ])
        .env_remove("GIT_CONFIG_GLOBAL")
        .env_remove("GIT_CONFIG_SYSTEM")
        .env_remove("GIT_CONFIG")
        .env("HOME", home)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let Ok(out) = out else { return (None, None) };
    let (mut name, mut email) = (None, None);
    for rec in out.stdout.split(|b| *b == 0) {
        let rec = String::from_utf8_lossy(rec);
        if let Some((k, v)) = rec.split_once('\n') {
            match k {
                "user.name" => name = Some(v.to_string()),
                "user.email" => email = Some(v.to_string()),
                _ => {}
            }
        }
    }
    (name, email)
}

#[cfg(test)]
mod listener_tests {
    #[test]
    fn loopback_listeners_found_over_netlink_as_in_proc_net_tcp() {
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p4 = v4.local_addr().unwrap().port();
        let v6 = std::net::TcpListener::bind("[::1]:0").ok();
        let found = super::loopback_listeners();
        assert!(found.contains(&p4), "{p4} not in {found:?}");
        if let Some(l) = &v6 {
            let p6 = l.local_addr().unwrap().port();
            assert!(found.contains(&p6), "{p6} not in {found:?}");
        }
        // The same answer as the /proc parser (netlink is only faster).
        let from_proc = crate::sys::kernel::loopback_listeners(
            &std::fs::read_to_string("/proc/net/tcp").unwrap(),
            &std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default(),
        );
        assert_eq!(
            found.iter().filter(|p| !from_proc.contains(p)).count(),
            0,
            "netlink {found:?} vs /proc {from_proc:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sock_diag message: header, then family, state, timer, retrans,
    /// sport (big-endian), dport, the source address.
    fn diag_msg(family: u8, port: u16, src: &[u8]) -> Vec<u8> {
        let mut p = vec![family, 10, 0, 0];
        p.extend_from_slice(&port.to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        let mut addr = [0u8; 16];
        addr[..src.len()].copy_from_slice(src);
        p.extend_from_slice(&addr);
        p.extend_from_slice(&[0u8; 48]);
        let mut m = ((16 + p.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend_from_slice(&p);
        m
    }

    #[test]
    fn sock_diag_dump_keeps_loopback_and_wildcard_listeners() {
        let (v4, v6) = (nix::libc::AF_INET as u8, nix::libc::AF_INET6 as u8);
        let mut dgram = diag_msg(v4, 22, &[127, 0, 0, 1]);
        dgram.extend(diag_msg(v4, 80, &[0, 0, 0, 0]));
        dgram.extend(diag_msg(v4, 5432, &[10, 0, 0, 5]));
        dgram.extend(diag_msg(
            v6,
            8080,
            &[0; 15].iter().chain(&[1]).copied().collect::<Vec<_>>(),
        ));
        dgram.extend(diag_msg(
            v6,
            9000,
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
        ));
        dgram.extend(diag_msg(v6, 9999, &[0x20, 0x01, 0x0d, 0xb8]));
        dgram.extend(diag_msg(v4, 22, &[127, 0, 0, 1]));
        let mut ports = Vec::new();
        assert!(!read_dump_datagram(&dgram, &mut ports).unwrap());
        assert_eq!(ports, [22, 80, 8080, 9000]);
        let mut done = 16u32.to_ne_bytes().to_vec();
        done.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        done.extend_from_slice(&[0u8; 10]);
        assert!(read_dump_datagram(&done, &mut ports).unwrap());
        // A length past the datagram is refused, not read.
        let mut bad = diag_msg(v4, 1, &[127, 0, 0, 1]);
        bad[0] = 200;
        assert!(read_dump_datagram(&bad, &mut Vec::new()).is_err());
    }
}
