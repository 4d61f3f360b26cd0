//! Kernel files only root may read, masked for a root session (issue #24
//! item 4). Found by experiment (every file under `/sys` and `/proc` that
//! uid 0 with no capability could read and others could not, on the
//! project's machine kind) and from the kernel's documentation of what is
//! root-only elsewhere (DMI serial numbers, EFI variables, pstore crash
//! logs, RAPL energy counters). `/sys` is far too large to walk at each
//! launch; the trees holding such files are masked whole instead, and
//! those too mixed to mask whole are named file by file.

use std::path::{Path, PathBuf};

use crate::plan::Unreadable;

/// Kernel trees replaced by an empty tmpfs, where they exist as directories:
/// firmware tables (ACPI, DMI, EFI variables, QEMU's fw_cfg), slab and DAMON
/// internals, debugfs, tracefs, securityfs (IMA and TPM measurement logs),
/// configfs, pstore (crash logs), pinned BPF objects, FUSE connections,
/// module parameters and section addresses, RAPL energy counters (a side
/// channel), DMI identity (serial numbers, UUID), zram control (reading
/// `hot_add` creates a device). Masked whether or not anything is mounted
/// there yet: a mount made after the launch would show through.
pub(crate) const KERNEL_DIRS: &[&str] = &[
    "/sys/firmware",
    "/sys/kernel/slab",
    "/sys/kernel/mm/damon",
    "/sys/kernel/debug",
    "/sys/kernel/tracing",
    "/sys/kernel/security",
    "/sys/kernel/config",
    "/sys/fs/pstore",
    "/sys/fs/bpf",
    "/sys/fs/fuse/connections",
    "/sys/module",
    "/sys/devices/virtual/powercap",
    "/sys/devices/virtual/dmi",
    "/sys/class/zram-control",
];

/// Kernel files replaced by `/dev/null`, where they exist: the host's
/// timers (with the names and pids of host processes: no PID namespace
/// hides them) and the slab, page and vmalloc layout (what a kernel exploit
/// wants). The session's `/proc` is its own (or the host's, read-only): the
/// same kernel, the same files. Root-only files left readable, values and
/// not secrets, each mask costing a launch a read of the mount table:
/// `/proc/sys/kernel/cad_pid`, `usermodehelper/{bset,inheritable}`,
/// `/proc/sys/vm/{mmap_rnd_bits,mmap_rnd_compat_bits,stat_refresh}`,
/// `/proc/sys/net/core/bpf_jit_{harden,kallsyms,limit}`.
pub(crate) const KERNEL_FILES: &[&str] = &[
    "/proc/timer_list",
    "/proc/slabinfo",
    "/proc/pagetypeinfo",
    "/proc/vmallocinfo",
];

/// The host network namespace's secret, masked when the session shares it
/// (the jail off): the TCP Fast Open key (cookies for the host's address
/// forged with it). Each interface's IPv6 stable-privacy secret is masked
/// too where one is set ([`stable_secrets`]). A jailed session has a
/// namespace of its own, with its own values.
pub(crate) const HOST_NET_FILES: &[&str] = &["/proc/sys/net/ipv4/tcp_fastopen_key"];

/// Where each interface's IPv6 settings lie (`stable_secret` in each).
const IPV6_CONF: &str = "/proc/sys/net/ipv6/conf";

/// Every kernel path a root session gets masked, as planned on this host:
/// [`KERNEL_DIRS`] and [`KERNEL_FILES`] that exist, and with
/// `host_net` the network namespace's ([`HOST_NET_FILES`] and each
/// interface's `stable_secret`).
pub(super) fn masks(host_net: bool) -> Vec<Unreadable> {
    let dirs = KERNEL_DIRS
        .iter()
        .map(PathBuf::from)
        .filter(|d| d.symlink_metadata().is_ok_and(|m| m.is_dir()))
        .map(|path| Unreadable { path, dir: true });
    let files = kernel_files(host_net)
        .filter(|f| f.symlink_metadata().is_ok_and(|m| m.is_file()))
        .map(|path| Unreadable { path, dir: false });
    dirs.chain(files).collect()
}

/// Each interface's `stable_secret` in this network namespace that is set
/// (one never set reads as an error: nothing to hide).
fn stable_secrets() -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(IPV6_CONF) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path().join("stable_secret"))
        .filter(|f| std::fs::read(f).is_ok())
        .collect()
}

/// Whether `p` is one of the kernel paths a root session gets masked.
pub(super) fn covers(p: &Path) -> bool {
    KERNEL_DIRS.iter().any(|d| p.starts_with(d))
        || KERNEL_FILES
            .iter()
            .chain(HOST_NET_FILES)
            .any(|f| p == Path::new(f))
        || (p.starts_with(IPV6_CONF) && p.file_name().is_some_and(|n| n == "stable_secret"))
}

/// The kernel files to audit from inside, those that exist here (the trees
/// are walked by the caller); the network namespace's only when it is the
/// host's (`host_net`).
pub(super) fn audited_files(host_net: bool) -> Vec<PathBuf> {
    kernel_files(host_net)
        .filter(|f| f.symlink_metadata().is_ok())
        .collect()
}

/// [`KERNEL_FILES`], and with `host_net` the network namespace's
/// ([`HOST_NET_FILES`], each set `stable_secret`), whether they exist or not.
fn kernel_files(host_net: bool) -> impl Iterator<Item = PathBuf> {
    KERNEL_FILES
        .iter()
        .chain(if host_net { HOST_NET_FILES } else { &[] })
        .map(PathBuf::from)
        .chain(if host_net {
            stable_secrets()
        } else {
            Vec::new()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_namespace_s_files_only_when_it_is_the_host_s() {
        let jailed = masks(false);
        assert!(!jailed.iter().any(|u| u.path.starts_with("/proc/sys/net")));
        let host = masks(true);
        assert!(host.len() >= jailed.len());
        for u in &host {
            assert!(covers(&u.path), "{:?}", u.path);
            // Directories are tmpfs mounts, files /dev/null: never mixed up.
            assert_eq!(u.dir, u.path.is_dir(), "{:?}", u.path);
        }
        if Path::new("/proc/sys/net/ipv4/tcp_fastopen_key").exists() {
            assert!(host
                .iter()
                .any(|u| u.path == Path::new("/proc/sys/net/ipv4/tcp_fastopen_key")));
        }
    }

    #[test]
    fn acpi_tables_are_covered_where_they_exist() {
        assert!(covers(Path::new("/sys/firmware/acpi/tables/DSDT")));
        assert!(covers(Path::new(
            "/proc/sys/net/ipv6/conf/eth0/stable_secret"
        )));
        assert!(!covers(Path::new(
            "/proc/sys/net/ipv6/conf/eth0/disable_ipv6"
        )));
        assert!(!covers(Path::new("/sys/devices/system/cpu/online")));
        if Path::new("/sys/firmware").is_dir() {
            assert!(masks(false)
                .iter()
                .any(|u| u.path == Path::new("/sys/firmware") && u.dir));
        }
    }
}
