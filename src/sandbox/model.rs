//! The typed description of one sandbox ([`Sandbox`]): namespaces, mounts,
//! environment, seccomp program, network mode and the shim's command, as
//! plain data (`claude-sandbox plan --json`). Its one renderer, to
//! bubblewrap's terms, is [`super::render()`].
//!
//! [`crate::plan::build`] produces a `Sandbox` from the configuration and the
//! host facts; nothing else adds to it except the test mutations
//! ([`crate::testhooks::apply`], test builds only).

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use serde::{Serialize, Serializer};

use super::record::LaunchRecord;

/// One launch's sandbox, as plain data (`claude-sandbox plan --json`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Sandbox {
    /// The uid and gid the sandbox runs as, in its own user namespace.
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// Namespaces unshared besides the user namespace (the network's is [`Sandbox::network`]).
    pub(crate) namespaces: Vec<Namespace>,
    /// No further user namespaces inside (`--disable-userns`): nothing in a
    /// coding session needs one, and each is kernel attack surface.
    pub(crate) nested_userns: bool,
    pub(crate) capabilities: Capabilities,
    /// File system operations, applied in this order (later ones cover earlier).
    pub(crate) mounts: Vec<Mount>,
    /// The working directory inside.
    pub(crate) chdir: PathBuf,
    /// The whole environment inside (§4.5), in order.
    #[serde(serialize_with = "lossy_pairs")]
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) seccomp: Seccomp,
    pub(crate) network: Network,
    /// The protected paths no call inside may create, existing or not
    /// (§4.8): the shim's supervisor refuses them (`crate::creation_guard`). Empty:
    /// no supervisor.
    // `guard` in `plan --json`, as before the field was named for its defence.
    #[serde(rename = "guard")]
    pub(crate) creation_guard: Vec<PathBuf>,
    /// The git directories' `hooks` bound to held copies (issue #44,
    /// [`Mount::ReadWrite`]): the guard lets anything be written there.
    pub(crate) held_hooks: Vec<PathBuf>,
    /// The workspace's file system folds case (issue #45 item 8): the
    /// guard decides names by lookup. Not in `plan --json` when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) folds: bool,
    /// The session's notices file (issue #44): bound read-only at
    /// `paths::INSIDE_NOTICES`, and appended to by the guard's supervisor.
    pub(crate) notices: bool,
    /// What the session may exhaust (issue #24): processes, tmpfs sizes.
    pub(crate) limits: super::limits::Limits,
    /// What runs inside, after our shim.
    pub(crate) command: Program,
}

/// A namespace bubblewrap unshares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Namespace {
    Pid,
    Ipc,
    Uts,
    /// Where the kernel supports it.
    CgroupIfSupported,
}

/// The capability set inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Capabilities {
    /// Every capability dropped (§4.4).
    DropAll,
    /// Every capability kept: a test mutation only.
    #[cfg(feature = "test-mutations")]
    KeepAll,
}

/// One file system operation, in bubblewrap's terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub(crate) enum Mount {
    /// `--ro-bind SRC DST`.
    ReadOnly { src: PathBuf, dst: PathBuf },
    /// `--bind SRC DST`: Claude Code's state under `$HOME` (§4.2), the
    /// sandbox's private `~/.cache` and `~/.local/share` (§4.8).
    ReadWrite { src: PathBuf, dst: PathBuf },
    /// `--bind-fd`: a read-write root (workspace, allow-write; §4.3), bound
    /// by the fd the executor opens and checks just before exec.
    Checked(RwBind),
    /// `--ro-bind-fd`: a protected workspace path (§4.8), read-only, bound
    /// by a checked fd like [`Mount::Checked`] (no symlink swapped in
    /// between can redirect it to a secret).
    CheckedReadOnly(RwBind),
    /// `--tmpfs DST`: an empty directory, private to this sandbox.
    Tmpfs { dst: PathBuf },
    /// `/dev/null` bound read-only over DST: it reads as empty.
    Empty { dst: PathBuf },
    /// `--dev DST`: a minimal /dev.
    Dev { dst: PathBuf },
    /// `--proc DST`: a fresh procfs for the sandbox's PID namespace.
    Proc { dst: PathBuf },
    /// `--ro-bind-data`: a file with these contents, read-only
    /// (`--bind-data` for [`Data::Writable`]).
    Data { dst: PathBuf, data: Data },
}

/// Contents of a [`Mount::Data`] file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Data {
    /// The curated git config (§4.6), rendered by the executor once the
    /// user's identity is known; `forge`: with the gh/glab helpers.
    GitConfig { forge: bool },
    /// The launch record `verify` reads (§7).
    Record(Box<LaunchRecord>),
    /// Literal text (the jail's resolv.conf).
    Text(String),
    /// Literal text in a file the session may rewrite (`--bind-data`,
    /// mode 0600): a copy private to the sandbox, gone with it (the
    /// broker's stand-in credentials file, decision 0017).
    Writable(String),
}

/// A read-write root, checked again just before exec (§4.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RwBind {
    /// As configured (or the current directory).
    pub(crate) requested: PathBuf,
    /// Where it resolved when the sandbox was planned; what is bound.
    pub(crate) resolved: PathBuf,
}

/// The seccomp program bubblewrap loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seccomp {
    /// Raw `sock_filter`s ([`crate::seccomp::program_bytes`]).
    pub(crate) program: Vec<u8>,
}

impl Serialize for Seccomp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        use sha2::Digest;
        let mut st = s.serialize_struct("Seccomp", 2)?;
        st.serialize_field("bytes", &self.program.len())?;
        st.serialize_field(
            "sha256",
            &format!("{:x}", sha2::Sha256::digest(&self.program)),
        )?;
        st.end()
    }
}

/// How the sandbox reaches the network (§4.7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub(crate) enum Network {
    /// The host's network, unchanged (`egress = off`).
    Host,
    /// The egress jail: a network namespace of its own, wired by pasta.
    Jail(JailNet),
    /// Allowlist mode (§4.9): a network namespace with loopback only; the
    /// proxy outside serves the listening socket the holder makes there.
    Allowlist(ProxyNet),
}

impl Network {
    pub(crate) fn is_jail(&self) -> bool {
        matches!(self, Network::Jail(_))
    }

    /// The ports published from the host's loopback (`publish-port`): none
    /// with the host's network, which shares every port already.
    pub(crate) fn published(&self) -> &[u16] {
        match self {
            Network::Host => &[],
            Network::Jail(j) => &j.publish,
            Network::Allowlist(p) => &p.publish,
        }
    }
}

/// What allowlist mode needs: where the proxy listens inside, what it
/// lets through, and where it logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ProxyNet {
    pub(crate) listen: std::net::SocketAddrV4,
    pub(crate) policy: crate::egress::policy::Policy,
    /// The session id, which names the log.
    pub(crate) session: String,
    /// The connection log (outside everything the sandbox can write).
    pub(crate) log: PathBuf,
    /// `publish-port`: TCP ports the shadow relays from the host's
    /// 127.0.0.1 to the same port on the namespace's loopback.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) publish: Vec<u16>,
}

/// What the jail's processes need to wire the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct JailNet {
    /// Input for `ip -batch -` in the jail's namespace.
    pub(crate) route_batch: String,
    /// pasta's `--dns-forward` address, when DNS goes through its forwarder.
    pub(crate) dns_forward: Option<Ipv4Addr>,
    /// The jail's interface, named as the host's default-route interface
    /// (the route batch's `dev`): a persistent tap the holder makes, which
    /// pasta attaches to (`-I`).
    pub(crate) iface: String,
    /// `publish-port`: TCP ports pasta forwards from the host's 127.0.0.1
    /// into the namespace (`-t 127.0.0.1/PORT`); nothing else comes in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) publish: Vec<u16>,
    /// When the session holds a brokered credential (decision 0016): the
    /// proxy on the jail's loopback that the shadow serves, the credential
    /// broker in it; its policy lets every name through to the addresses
    /// the jail routes. `None`: no proxy at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) proxy: Option<ProxyNet>,
}

/// The program the shim execs inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Program {
    pub(crate) path: PathBuf,
    #[serde(serialize_with = "lossy_list")]
    pub(crate) args: Vec<OsString>,
    /// The terminal's signals (`INT`, `QUIT`) it starts with ignored, as the
    /// launcher was; the others at their defaults.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) ignored: Vec<String>,
}

fn lossy_pairs<S: Serializer>(v: &[(OsString, OsString)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(
        v.iter()
            .map(|(k, v)| (k.to_string_lossy(), v.to_string_lossy())),
    )
}

fn lossy_list<S: Serializer>(v: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|a| a.to_string_lossy()))
}

impl Mount {
    /// Where the operation takes effect inside.
    pub(crate) fn dst(&self) -> &std::path::Path {
        match self {
            Mount::ReadOnly { dst, .. }
            | Mount::Tmpfs { dst }
            | Mount::Empty { dst }
            | Mount::Dev { dst }
            | Mount::Proc { dst }
            | Mount::Data { dst, .. } => dst,
            Mount::ReadWrite { dst, .. } => dst,
            Mount::Checked(b) | Mount::CheckedReadOnly(b) => &b.resolved,
        }
    }
}

impl Sandbox {
    /// The workspace: the first read-write root, resolved (§4.3).
    pub(crate) fn workspace(&self) -> Option<&std::path::Path> {
        self.mounts.iter().find_map(|m| match m {
            Mount::Checked(b) => Some(b.resolved.as_path()),
            _ => None,
        })
    }

    /// The read-write roots, in order.
    #[cfg(test)]
    pub(crate) fn rw_binds(&self) -> impl Iterator<Item = &RwBind> {
        self.mounts.iter().filter_map(|m| match m {
            Mount::Checked(b) => Some(b),
            _ => None,
        })
    }

    /// The launch record, when the sandbox binds one.
    #[cfg(test)]
    pub(crate) fn record(&self) -> Option<&LaunchRecord> {
        self.mounts.iter().find_map(|m| match m {
            Mount::Data {
                data: Data::Record(r),
                ..
            } => Some(&**r),
            _ => None,
        })
    }
}
