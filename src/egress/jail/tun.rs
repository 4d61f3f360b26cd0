//! Is `/dev/net/tun` usable by this user, and if not, what exactly to do
//! (for the launch's refusal and `doctor`).
//!
//! Where it comes from in a devcontainer with the feature (SPEC §9): under
//! Docker the entrypoint makes a node of the container's own, mode 0666;
//! where no device node can be made (rootless Podman, rootful Podman
//! without `CAP_MKNOD`) it is a link to the host's node, which the
//! feature's `mounts` binds at [`HOST_TUN`]. The host's node keeps the
//! host's mode and owner (seen as the overflow uid, `nobody`, through a
//! user namespace), so its fix is on the host, not in the container.
//! [`observe`] reads the facts, [`diagnose`] (pure) words the problem.
//! [`TX_FILTER`] and [`PASTA_MAC`]: what the jail's tap passes to pasta.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// The device the jail opens.
pub(super) const TUN: &str = "/dev/net/tun";
/// Where the feature's metadata binds the host's device.
pub(super) const HOST_TUN: &str = "/dev/net/host-tun";

/// pasta's own MAC address toward the jail (pasta's `-M`, a locally
/// administered unicast address). The jail's tap passes pasta only frames
/// to it and to the broadcast address ([`TX_FILTER`]): no multicast frame
/// ever reaches pasta, which would relay it from the host's namespace
/// (issue #45 item 10, docs/decisions/0034).
pub(super) const PASTA_MAC: [u8; 6] = [0x02, 0x63, 0x73, 0x62, 0x00, 0x01];

/// The tap's transmit filter (`TUNSETTXFILTER`): a `struct tun_filter`
/// with no flags (so no `TUN_FLT_ALLMULTI`) and two exact addresses,
/// [`PASTA_MAC`] and the broadcast address (ARP asks for the gateway by
/// broadcast). With an exact list and an empty multicast hash the tap
/// driver drops every other frame the jail sends, multicast included.
pub(super) const TX_FILTER: [u8; 16] = {
    let mut f = [0u8; 16];
    // `flags` (u16 at 0) stays 0; `count` (u16 at 2) is 2; then the addresses.
    let count = 2u16.to_ne_bytes();
    f[2] = count[0];
    f[3] = count[1];
    let mut i = 0;
    while i < 6 {
        f[4 + i] = PASTA_MAC[i];
        f[10 + i] = 0xff;
        i += 1;
    }
    f
};

/// [`PASTA_MAC`] as pasta's `-M` reads it.
pub(super) fn pasta_mac_text() -> String {
    PASTA_MAC
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// What `/dev/net/tun` looks like to this user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TunFacts {
    /// A character device (through a link, if it is one).
    pub(super) exists: bool,
    /// This user may open it for reading and writing.
    pub(super) usable: bool,
    /// It is the host's node: a link to [`HOST_TUN`], or owned by the
    /// overflow uid (its owner is outside this user namespace).
    pub(super) hosts: bool,
    /// [`HOST_TUN`] is a character device (the feature's mount is there).
    pub(super) host_bound: bool,
    /// Permission bits and owner of the device.
    pub(super) mode: u32,
    pub(super) uid: u32,
}

/// Read the facts (no side effects).
pub(super) fn observe() -> TunFacts {
    let tun = Path::new(TUN);
    let meta = tun
        .metadata()
        .ok()
        .filter(|m| m.file_type().is_char_device());
    let linked = std::fs::read_link(tun).is_ok_and(|t| t.ends_with("host-tun"));
    let overflow: u32 = std::fs::read_to_string("/proc/sys/kernel/overflowuid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65534);
    let usable = meta.is_some()
        && nix::unistd::access(
            tun,
            nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK,
        )
        .is_ok();
    TunFacts {
        exists: meta.is_some(),
        usable,
        hosts: linked || meta.as_ref().is_some_and(|m| m.uid() == overflow),
        host_bound: Path::new(HOST_TUN)
            .metadata()
            .is_ok_and(|m| m.file_type().is_char_device()),
        mode: meta.as_ref().map_or(0, |m| m.mode() & 0o7777),
        uid: meta.as_ref().map_or(0, |m| m.uid()),
    }
}

/// The problem and its fix, or None when the device is usable.
pub(super) fn diagnose(f: &TunFacts) -> Option<(String, String)> {
    const RUN_ARGS: &str =
        "add \"runArgs\": [\"--device=/dev/net/tun\"] to devcontainer.json and rebuild";
    if !f.exists && f.host_bound {
        return Some((
            format!("{TUN} does not exist, though the host's device is bound at {HOST_TUN}: the feature's entrypoint links it only when the container starts as root"),
            format!("start the container as root (no non-root \"containerUser\"), or {RUN_ARGS}"),
        ));
    }
    if !f.exists {
        return Some((
            format!("{TUN} does not exist"),
            format!("give the container the device: {RUN_ARGS}"),
        ));
    }
    if f.usable {
        return None;
    }
    if f.hosts {
        return Some((
            format!(
                "{TUN} is the host's device (mode {:04o}, owner uid {}) and not readable and writable by this user",
                f.mode, f.uid
            ),
            format!("on the host, not in the container, run sudo chmod 0666 {TUN} (udev's default on Debian and Fedora; hosts without udev leave it 0600) and restart the container; or, with rootful Podman, which withholds CAP_MKNOD, add \"runArgs\": [\"--cap-add=MKNOD\"] so the feature makes a device of the container's own"),
        ));
    }
    Some((
        format!("{TUN} is not readable and writable by this user"),
        format!("make it so (containers give it mode 0666): sudo chmod 0666 {TUN}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> TunFacts {
        TunFacts {
            exists: true,
            usable: true,
            hosts: false,
            host_bound: false,
            mode: 0o666,
            uid: 0,
        }
    }

    #[test]
    fn the_transmit_filter_passes_pasta_and_broadcast_only() {
        // struct tun_filter: flags (no TUN_FLT_ALLMULTI), count, addresses.
        assert_eq!(u16::from_ne_bytes([TX_FILTER[0], TX_FILTER[1]]), 0);
        assert_eq!(u16::from_ne_bytes([TX_FILTER[2], TX_FILTER[3]]), 2);
        assert_eq!(TX_FILTER[4..10], PASTA_MAC);
        assert_eq!(TX_FILTER[10..16], [0xff; 6]);
        // A unicast (bit 0 clear), locally administered (bit 1 set) address.
        assert_eq!(PASTA_MAC[0] & 0b11, 0b10);
        assert_eq!(pasta_mac_text(), "02:63:73:62:00:01");
    }

    #[test]
    fn a_usable_device_needs_nothing() {
        assert_eq!(diagnose(&facts()), None);
        let host = TunFacts {
            hosts: true,
            host_bound: true,
            ..facts()
        };
        assert_eq!(diagnose(&host), None);
    }

    #[test]
    fn a_missing_device_names_the_run_arg() {
        let f = TunFacts {
            exists: false,
            usable: false,
            ..facts()
        };
        let (what, fix) = diagnose(&f).unwrap();
        assert_eq!(what, "/dev/net/tun does not exist");
        assert!(
            fix.contains("\"runArgs\": [\"--device=/dev/net/tun\"]"),
            "{fix}"
        );
    }

    #[test]
    fn a_bound_but_unlinked_host_device_names_the_entrypoint() {
        let f = TunFacts {
            exists: false,
            usable: false,
            host_bound: true,
            ..facts()
        };
        let (what, fix) = diagnose(&f).unwrap();
        assert!(
            what.contains("/dev/net/host-tun") && what.contains("as root"),
            "{what}"
        );
        assert!(
            fix.contains("containerUser") && fix.contains("--device=/dev/net/tun"),
            "{fix}"
        );
    }

    #[test]
    fn the_hosts_device_is_fixed_on_the_host() {
        let f = TunFacts {
            usable: false,
            hosts: true,
            host_bound: true,
            mode: 0o600,
            uid: 65534,
            ..facts()
        };
        let (what, fix) = diagnose(&f).unwrap();
        assert!(
            what.contains("host's device (mode 0600, owner uid 65534)"),
            "{what}"
        );
        assert!(
            fix.starts_with("on the host, not in the container, run sudo chmod 0666 /dev/net/tun"),
            "{fix}"
        );
        assert!(fix.contains("--cap-add=MKNOD"), "{fix}");
    }

    #[test]
    fn the_containers_own_device_is_fixed_in_place() {
        let f = TunFacts {
            usable: false,
            mode: 0o600,
            ..facts()
        };
        let (what, fix) = diagnose(&f).unwrap();
        assert_eq!(
            what,
            "/dev/net/tun is not readable and writable by this user"
        );
        assert!(fix.contains("sudo chmod 0666 /dev/net/tun"), "{fix}");
        assert!(!fix.contains("on the host"), "{fix}");
    }
}
