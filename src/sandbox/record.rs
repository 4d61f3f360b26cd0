//! The launch record: what the shadow knew at launch and the sandbox cannot
//! see (the jail setting, the launcher's namespaces, the host's loopback
//! listeners, the read-write paths), bound read-only over
//! [`crate::sys::paths::LAUNCH_RECORD`] and read by `verify` from inside. Plain
//! data, below everything that uses it (plan, launch, verify).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the shadow knew at launch, bound read-only into the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LaunchRecord {
    /// Format version.
    pub(crate) version: u32,
    /// The effective egress mode (config, then environment).
    pub(crate) egress: crate::egress::policy::Egress,
    /// `no-forge` in effect.
    pub(crate) no_forge: bool,
    /// `$HOME` as the sandbox sees it.
    pub(crate) home: PathBuf,
    /// The read-write workspace root, resolved.
    pub(crate) workspace: PathBuf,
    /// Whether `workspace-root` was configured (a broad root is then deliberate).
    pub(crate) workspace_configured: bool,
    /// `allow-write` paths, resolved.
    pub(crate) allow_write: Vec<PathBuf>,
    /// Names forwarded by `pass-env` (an operator's deliberate choice).
    pub(crate) pass_env: Vec<String>,
    /// `allow-ip` hosts the jail punches through.
    pub(crate) allow_ip: Vec<Ipv4Addr>,
    /// The host's connected IPv4 subnets (address, prefix length), when the jail is on.
    pub(crate) site_subnets: Vec<(Ipv4Addr, u8)>,
    /// The launcher's namespace inode numbers, by kind (`ipc`, `uts`, `pid`, `net`, …).
    pub(crate) launcher_ns: BTreeMap<String, u64>,
    /// TCP ports listening on the host's loopback (or on every address) at launch.
    pub(crate) host_loopback_tcp: Vec<u16>,
    /// Homes masked besides `$HOME` (the user database's, when it differs).
    #[serde(default)]
    pub(crate) other_homes: Vec<PathBuf>,
    /// Launched by root: what only root can read is masked (`verify` checks it).
    #[serde(default)]
    pub(crate) root_view: bool,
    /// `allow-env-overrides` in the configuration file.
    #[serde(default)]
    pub(crate) allow_env_overrides: bool,
    /// `CLAUDE_SANDBOX_*` overrides that weakened this sandbox (`NAME=value`).
    #[serde(default)]
    pub(crate) weakened_by_env: Vec<String>,
    /// `publish-port`: the ports forwarded in from the host's loopback
    /// (empty with the host's network). Absent from the file when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) publish_port: Vec<u16>,
    /// What the session may exhaust and how it is enforced (issue #24).
    #[serde(default)]
    pub(crate) limits: super::limits::Limits,
    /// The credential broker's digests of the real values (issue #25):
    /// present when the broker runs for this session. `verify` looks for
    /// the real values inside by them; no value is here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) broker: Option<crate::egress::policy::broker::Digests>,
    /// `broker = off` in the configuration file. Absent from the file
    /// when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) broker_off: bool,
}

impl LaunchRecord {
    /// The bytes bound into the sandbox.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).expect("a launch record serializes");
        v.push(b'\n');
        v
    }
}

/// The current record format.
pub(crate) const RECORD_VERSION: u32 = 2;
