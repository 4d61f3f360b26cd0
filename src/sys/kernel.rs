//! Small readers of kernel facts shared by the launch path and `verify`:
//! namespace identities, loopback listeners from `/proc/net/tcp*`, routes,
//! a process's children, signal dispositions, whether a session's launcher
//! still runs.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;

/// Whether the launcher a session's name ends with (`TIME-PID`) is still
/// running: a name that names no pid is a launcher gone.
pub(crate) fn launcher_alive(session: &str) -> bool {
    session
        .rsplit('-')
        .next()
        .and_then(|p| p.parse::<u32>().ok())
        .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
}

/// Whether signal `sig` is ignored in this process now; asked before the
/// launch changes any, it tells how the launcher was started (`SIG_IGN`
/// is inherited through `exec`: a background job of a script, `trap '' INT`).
pub(crate) fn ignored(sig: nix::libc::c_int) -> bool {
    // SAFETY: a query: no new action, the old one written to `old`.
    unsafe {
        let mut old: nix::libc::sigaction = std::mem::zeroed();
        nix::libc::sigaction(sig, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == nix::libc::SIG_IGN
    }
}

/// The namespace kinds the launcher records.
pub(crate) const NS_KINDS: &[&str] = &["ipc", "uts", "pid", "net", "user", "cgroup", "mnt"];

/// The inode of `/proc/self/ns/KIND` (the namespace's identity).
pub(crate) fn ns_inode(kind: &str) -> Option<u64> {
    std::fs::metadata(format!("/proc/self/ns/{kind}"))
        .ok()
        .map(|m| m.ino())
}

/// TCP ports listening on 127.0.0.0/8, ::1 or the wildcard addresses, from
/// the texts of `/proc/net/tcp` and `/proc/net/tcp6` (at most 64, sorted).
pub(crate) fn loopback_listeners(tcp: &str, tcp6: &str) -> Vec<u16> {
    let mut ports = BTreeSet::new();
    for (text, v6) in [(tcp, false), (tcp6, true)] {
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 || f[3] != "0A" {
                continue; // not LISTEN
            }
            let Some((addr, port)) = f[1].split_once(':') else {
                continue;
            };
            let local = if v6 {
                // Kernel order: four host-endian 32-bit words.
                addr == "00000000000000000000000000000000"
                    || addr == "00000000000000000000000001000000"
                    || addr == "0000000000000000FFFF00000100007F"
            } else {
                addr == "00000000" || addr.ends_with("7F")
            };
            if let (true, Ok(p)) = (local, u16::from_str_radix(port, 16)) {
                ports.insert(p);
            }
        }
    }
    ports.into_iter().take(64).collect()
}

/// An IPv4 route of `/proc/net/route` that is up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    /// Interface (`*` for reject routes).
    pub iface: String,
    pub dst: Ipv4Addr,
    pub len: u8,
    pub gateway: Ipv4Addr,
    /// Through a gateway (`RTF_GATEWAY`).
    pub via_gateway: bool,
    /// Blackhole, unreachable or prohibit: traffic is refused.
    pub reject: bool,
}

/// Parse `/proc/net/route`: the routes that are up, reject routes included.
/// The one parser of that file (the jail plans from it, `verify` checks it).
pub(crate) fn parse_routes(text: &str) -> Vec<Route> {
    let hex = |s: &str| {
        u32::from_str_radix(s, 16)
            .ok()
            .map(|v| Ipv4Addr::from(u32::from_be(v)))
    };
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let flags = u32::from_str_radix(f[3], 16).ok()?;
            const RTF_UP: u32 = 0x1;
            const RTF_GATEWAY: u32 = 0x2;
            const RTF_REJECT: u32 = 0x200;
            if flags & RTF_UP == 0 {
                return None;
            }
            Some(Route {
                iface: f[0].to_string(),
                dst: hex(f[1])?,
                gateway: hex(f[2])?,
                len: u32::from(hex(f[7])?).count_ones() as u8,
                via_gateway: flags & RTF_GATEWAY != 0,
                reject: flags & RTF_REJECT != 0,
            })
        })
        .collect()
}

/// The children of process `pid` (its main thread's), from
/// `/proc/PID/task/PID/children`; empty when it cannot be read.
pub(crate) fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|t| {
            t.split_whitespace()
                .filter_map(|k| k.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
