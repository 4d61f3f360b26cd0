//! The one renderer of a [`Sandbox`]: bubblewrap's argument list plus the
//! table of numbered fds the executor must provide. Every fd number lives in
//! this file: the executor, the jail's holder and the shim learn theirs from
//! the [`Rendered`] table or from the argument lists rendered here.

use std::ffi::{OsStr, OsString};

use super::limits::Limits;
use super::model::{Capabilities, Data, Mount, Namespace, Network, RwBind, Sandbox};
use crate::sys::paths;

/// Fixed fd numbers, by role. Read-write roots, and text files after the
/// first, are numbered from [`FD_DYNAMIC_BASE`] up in order.
const FD_SECCOMP: i32 = 200;
const FD_GITCONFIG: i32 = 201;
const FD_FIRST_TEXT: i32 = 202;
const FD_SHIM_STDERR: i32 = 203;
const FD_SHIM_READY: i32 = 204;
const FD_HOLDER_ROUTES: i32 = 205;
const FD_HOLDER_JOIN: i32 = 206;
const FD_HOLDER_GO: i32 = 207;
const FD_RECORD: i32 = 208;
const FD_JAIL_GATE: i32 = 209;
const FD_DYNAMIC_BASE: i32 = 210;
const FD_HOLDER_GATE: i32 = 199;
const FD_PROXY_CHANNEL: i32 = 198;
const FD_SHIM_CREATION_GUARD: i32 = 197;
const FD_INWARD_CHANNEL: i32 = 196;
const FD_NOTICES_BIND: i32 = 195;
const FD_SHIM_NOTICES: i32 = 194;

/// What the executor places at one numbered fd of bubblewrap (or of the
/// jail's holder, which execs bubblewrap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FdContent {
    /// A pipe holding these bytes, written before the spawn.
    Bytes(Vec<u8>),
    /// A pipe the executor writes the rendered git config to after the spawn.
    GitConfig {
        forge: bool,
    },
    /// An `O_PATH` fd of this read-write root, re-checked just before exec.
    Checked(RwBind),
    /// The caller's stderr, which the shim restores.
    ShimStderr,
    /// The write end of the pipe the shim signals "built" on.
    ShimReady,
    /// The read end of the jail's gate: the shim waits on it.
    JailGate,
    /// The holder's ends of the jail's pipes (see [`Holder`]); `HolderJoin`
    /// is a pidfd of the jail's namespace owner.
    HolderJoin,
    HolderGo,
    HolderGate,
    /// Allowlist mode: the holder's end of the socket it sends the proxy's
    /// listening socket over.
    ProxyChannel,
    /// Allowlist mode with `publish-port`: the holder's end of the socket
    /// its connector takes requests on (`egress/proxy/publish.rs`).
    InwardChannel,
    /// The session's notices file, read-only, for bubblewrap to bind.
    NoticesBind,
    /// The session's notices file, appending, for the guard's supervisor.
    NoticesWriter,
}

/// The fd numbers the jail's holder receives, in its argument order
/// (`__holder IP ROUTES JOIN GO GATE [PROXY] -- BWRAP ARGS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holder {
    /// The route batch to read.
    pub(crate) routes: i32,
    /// A pidfd of the namespace owner, whose user and network namespaces
    /// the holder joins (docs/decisions/0019).
    pub(crate) join: i32,
    /// "go" from the shadow: pasta is attached.
    pub(crate) go: i32,
    /// The write end of the shim's gate.
    pub(crate) gate: i32,
}

impl Holder {
    /// The numbers as the holder's arguments.
    pub(crate) fn args(&self) -> [OsString; 4] {
        [self.routes, self.join, self.go, self.gate].map(|n| n.to_string().into())
    }
}

/// A [`Sandbox`] in bubblewrap's terms.
#[derive(Debug, Clone)]
pub(crate) struct Rendered {
    /// bubblewrap's arguments (program name not included).
    pub(crate) args: Vec<OsString>,
    /// Every numbered fd bubblewrap (or the holder) must receive.
    pub(crate) fds: Vec<(i32, FdContent)>,
    /// With the jail: the holder's fd numbers.
    pub(crate) holder: Option<Holder>,
    /// In allowlist mode, and in the open jail with the broker's proxy: the
    /// fd the holder sends the proxy's listener on.
    pub(crate) proxy_channel: Option<i32>,
    /// Allowlist mode with `publish-port`: the allowlist holder's arguments
    /// for its connector (`FD PORT,PORT…`, before its `--`); else empty.
    pub(crate) inward_args: Vec<OsString>,
}

struct Out {
    args: Vec<OsString>,
    fds: Vec<(i32, FdContent)>,
    /// The next number from [`FD_DYNAMIC_BASE`].
    next: i32,
}

impl Out {
    fn push<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&mut self, items: I) {
        self.args
            .extend(items.into_iter().map(|s| s.as_ref().to_os_string()));
    }

    fn dynamic(&mut self) -> i32 {
        self.next += 1;
        self.next - 1
    }

    /// `FLAG N REST…` with fd N holding `content`.
    fn with_fd(&mut self, flag: &str, num: i32, content: FdContent, rest: &[&OsStr]) {
        self.push([OsStr::new(flag), OsStr::new(&num.to_string())]);
        self.push(rest);
        self.fds.push((num, content));
    }
}

/// `--size N --tmpfs DST` (issue #24: every tmpfs sized; no `--size` only
/// when a test mutation took the size away).
fn tmpfs(o: &mut Out, dst: &std::path::Path, size: u64) {
    if size > 0 {
        o.push([OsStr::new("--size"), OsStr::new(&size.to_string())]);
    }
    o.push([OsStr::new("--tmpfs"), dst.as_os_str()]);
}

fn mount(o: &mut Out, m: &Mount, limits: &Limits) {
    match m {
        Mount::ReadOnly { src, dst } => {
            o.push([OsStr::new("--ro-bind"), src.as_os_str(), dst.as_os_str()])
        }
        Mount::ReadWrite { src, dst } => {
            o.push([OsStr::new("--bind"), src.as_os_str(), dst.as_os_str()])
        }
        Mount::CheckedReadOnly(b) => {
            let num = o.dynamic();
            o.with_fd(
                "--ro-bind-fd",
                num,
                FdContent::Checked(b.clone()),
                &[b.resolved.as_os_str()],
            );
        }
        Mount::Checked(b) => {
            let num = o.dynamic();
            o.with_fd(
                "--bind-fd",
                num,
                FdContent::Checked(b.clone()),
                &[b.resolved.as_os_str()],
            );
        }
        Mount::Tmpfs { dst } => tmpfs(o, dst, limits.tmpfs_size_of(dst)),
        Mount::Empty { dst } => o.push([
            OsStr::new("--ro-bind"),
            OsStr::new("/dev/null"),
            dst.as_os_str(),
        ]),
        // bubblewrap's /dev is a tmpfs it cannot size, writable by the
        // session, with `shm` a plain directory in it: a sized tmpfs on
        // `/dev/shm`, and the rest of /dev read-only (its nodes are binds
        // of their own and stay usable).
        Mount::Dev { dst } => {
            o.push([OsStr::new("--dev"), dst.as_os_str()]);
            tmpfs(o, &dst.join("shm"), limits.tmpfs_size);
            o.push([OsStr::new("--remount-ro"), dst.as_os_str()]);
        }
        Mount::Proc { dst } => o.push([OsStr::new("--proc"), dst.as_os_str()]),
        Mount::Data { dst, data } => {
            let (num, content) = match data {
                Data::GitConfig { forge } => (FD_GITCONFIG, FdContent::GitConfig { forge: *forge }),
                Data::Record(r) => (FD_RECORD, FdContent::Bytes(r.to_bytes())),
                Data::Text(t) => {
                    let first = !o.fds.iter().any(|(n, _)| *n == FD_FIRST_TEXT);
                    let num = if first { FD_FIRST_TEXT } else { o.dynamic() };
                    (num, FdContent::Bytes(t.clone().into_bytes()))
                }
                Data::Writable(t) => {
                    o.push(["--perms", "0600"]);
                    let num = o.dynamic();
                    o.with_fd(
                        "--bind-data",
                        num,
                        FdContent::Bytes(t.clone().into_bytes()),
                        &[dst.as_os_str()],
                    );
                    return;
                }
            };
            o.with_fd("--ro-bind-data", num, content, &[dst.as_os_str()]);
        }
    }
}

/// §4.4 process isolation: namespaces, ids, capabilities.
fn process(o: &mut Out, sb: &Sandbox) {
    // §4.4 process isolation.
    o.push(["--die-with-parent", "--unshare-user"]);
    if !sb.nested_userns {
        o.push(["--disable-userns"]);
    }
    o.push(["--uid", &sb.uid.to_string(), "--gid", &sb.gid.to_string()]);
    for ns in &sb.namespaces {
        o.push([match ns {
            Namespace::Pid => "--unshare-pid",
            Namespace::Ipc => "--unshare-ipc",
            Namespace::Uts => "--unshare-uts",
            Namespace::CgroupIfSupported => "--unshare-cgroup-try",
        }]);
    }
    match sb.capabilities {
        Capabilities::DropAll => o.push(["--cap-drop", "ALL"]),
        #[cfg(feature = "test-mutations")]
        Capabilities::KeepAll => o.push(["--cap-add", "ALL"]),
    }
}

/// Render `sb` as bubblewrap's arguments and fd table. Mounts come first,
/// in order; the working directory, environment and seccomp program after
/// them (bubblewrap applies those once the mounts are done, whatever their
/// place on the command line).
pub(crate) fn render(sb: &Sandbox) -> Rendered {
    let mut o = Out {
        args: Vec::new(),
        fds: Vec::new(),
        next: FD_DYNAMIC_BASE,
    };
    process(&mut o, sb);
    for m in &sb.mounts {
        mount(&mut o, m, &sb.limits);
    }
    if sb.notices {
        o.with_fd(
            "--ro-bind-fd",
            FD_NOTICES_BIND,
            FdContent::NoticesBind,
            &[OsStr::new(paths::INSIDE_NOTICES)],
        );
    }
    after_mounts(&mut o, sb);
    let (holder, proxy_channel) = network(&mut o, &sb.network);
    let inward_args = inward(&mut o, &sb.network);
    shim_command(&mut o, sb, holder.is_some());
    Rendered {
        args: o.args,
        fds: o.fds,
        holder,
        proxy_channel,
        inward_args,
    }
}

/// The working directory, the cleared environment and the seccomp program.
fn after_mounts(o: &mut Out, sb: &Sandbox) {
    o.push([OsStr::new("--chdir"), sb.chdir.as_os_str()]);
    o.push(["--clearenv"]);
    for (k, v) in &sb.env {
        o.push([OsStr::new("--setenv"), k, v]);
    }
    o.with_fd(
        "--seccomp",
        FD_SECCOMP,
        FdContent::Bytes(sb.seccomp.program.clone()),
        &[],
    );
}

/// The network mode's fds: the jail's holder numbers, or the allowlist
/// holder's channel.
fn network(o: &mut Out, net: &Network) -> (Option<Holder>, Option<i32>) {
    match net {
        Network::Host => (None, None),
        Network::Allowlist(_) => {
            o.fds.push((FD_PROXY_CHANNEL, FdContent::ProxyChannel));
            (None, Some(FD_PROXY_CHANNEL))
        }
        Network::Jail(net) => {
            o.fds.extend([
                (
                    FD_HOLDER_ROUTES,
                    FdContent::Bytes(net.route_batch.clone().into_bytes()),
                ),
                (FD_HOLDER_JOIN, FdContent::HolderJoin),
                (FD_HOLDER_GO, FdContent::HolderGo),
                (FD_HOLDER_GATE, FdContent::HolderGate),
                (FD_JAIL_GATE, FdContent::JailGate),
            ]);
            let holder = Holder {
                routes: FD_HOLDER_ROUTES,
                join: FD_HOLDER_JOIN,
                go: FD_HOLDER_GO,
                gate: FD_HOLDER_GATE,
            };
            // The credential broker's proxy (decision 0016): the holder
            // sends its listener over this channel too.
            let channel = net.proxy.as_ref().map(|_| {
                o.fds.push((FD_PROXY_CHANNEL, FdContent::ProxyChannel));
                FD_PROXY_CHANNEL
            });
            (Some(holder), channel)
        }
    }
}

/// Allowlist mode's `publish-port`: the connector's channel in the table
/// and its arguments for the allowlist holder. (The open jail's pasta
/// forwards the ports itself: no fd.)
fn inward(o: &mut Out, net: &Network) -> Vec<OsString> {
    match net {
        Network::Allowlist(p) if !p.publish.is_empty() => {
            o.fds.push((FD_INWARD_CHANNEL, FdContent::InwardChannel));
            let ports: Vec<String> = p.publish.iter().map(u16::to_string).collect();
            vec![FD_INWARD_CHANNEL.to_string().into(), ports.join(",").into()]
        }
        _ => Vec::new(),
    }
}

/// `-- SELF __shim STDERR READY GATE GUARD [ignore=INT,QUIT] -- COMMAND
/// ARGS…`, with the shim's fds in the table.
fn shim_command(o: &mut Out, sb: &Sandbox, jail: bool) {
    o.fds.extend([
        (FD_SHIM_STDERR, FdContent::ShimStderr),
        (FD_SHIM_READY, FdContent::ShimReady),
    ]);
    let gate = if jail {
        OsString::from(FD_JAIL_GATE.to_string())
    } else {
        OsString::from("-")
    };
    let guard = if sb.creation_guard.is_empty() {
        OsString::from("-")
    } else {
        o.fds.push((
            FD_SHIM_CREATION_GUARD,
            FdContent::Bytes(super::guard_list::encode(
                &sb.creation_guard,
                &sb.held_hooks,
                sb.folds,
            )),
        ));
        OsString::from(FD_SHIM_CREATION_GUARD.to_string())
    };
    o.push([
        OsString::from("--"),
        paths::SELF_BIN.into(),
        "__shim".into(),
        FD_SHIM_STDERR.to_string().into(),
        FD_SHIM_READY.to_string().into(),
        gate,
        guard,
    ]);
    if !sb.command.ignored.is_empty() {
        o.push([OsString::from(format!(
            "ignore={}",
            sb.command.ignored.join(",")
        ))]);
    }
    if sb.notices && !sb.creation_guard.is_empty() {
        o.fds.push((FD_SHIM_NOTICES, FdContent::NoticesWriter));
        o.push([OsString::from(format!("notices={FD_SHIM_NOTICES}"))]);
    }
    o.push([
        OsString::from("--"),
        sb.command.path.clone().into_os_string(),
    ]);
    o.push(&sb.command.args);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::model::{JailNet, Program, ProxyNet, Seccomp};

    fn minimal(network: Network) -> Sandbox {
        Sandbox {
            uid: 1000,
            gid: 1000,
            namespaces: vec![Namespace::Pid],
            nested_userns: false,
            capabilities: Capabilities::DropAll,
            mounts: vec![
                Mount::Checked(RwBind {
                    requested: "/w".into(),
                    resolved: "/w".into(),
                }),
                Mount::Data {
                    dst: "/etc/resolv.conf".into(),
                    data: Data::Text("nameserver 9.9.9.9\n".into()),
                },
                Mount::Data {
                    dst: "/etc/other".into(),
                    data: Data::Text("second\n".into()),
                },
                Mount::Checked(RwBind {
                    requested: "/x".into(),
                    resolved: "/y".into(),
                }),
            ],
            chdir: "/w".into(),
            env: vec![("A".into(), "b".into())],
            seccomp: Seccomp {
                program: vec![1, 2, 3],
            },
            network,
            creation_guard: vec!["/w/.envrc".into()],
            held_hooks: Vec::new(),
            folds: false,
            notices: false,
            limits: Default::default(),
            command: Program {
                path: "/bin/true".into(),
                args: vec!["-x".into()],
                ignored: Vec::new(),
            },
        }
    }

    /// Every fd an argument names is in the table, once, and no two roles share a number.
    #[test]
    fn every_named_fd_is_in_the_table_once() {
        let proxy = ProxyNet {
            listen: crate::egress::policy::PROXY_ADDR,
            policy: crate::egress::policy::Policy::new(
                &[],
                &[],
                Default::default(),
                &[],
                Vec::new(),
            ),
            session: "s".into(),
            log: "/l".into(),
            publish: vec![3000],
        };
        let jail = JailNet {
            route_batch: "link set lo up\n".into(),
            dns_forward: None,
            iface: "eth0".into(),
            publish: vec![3000],
            proxy: None,
        };
        for net in [
            Network::Host,
            Network::Allowlist(proxy.clone()),
            Network::Jail(jail.clone()),
            // The open jail with the credential broker's proxy (decision 0016).
            Network::Jail(JailNet {
                proxy: Some(ProxyNet {
                    publish: Vec::new(),
                    ..proxy.clone()
                }),
                ..jail.clone()
            }),
        ] {
            let r = render(&minimal(net.clone()));
            let mut nums: Vec<i32> = r.fds.iter().map(|(n, _)| *n).collect();
            nums.sort();
            let before = nums.len();
            nums.dedup();
            assert_eq!(before, nums.len(), "duplicate fd numbers: {:?}", r.fds);
            let a: Vec<String> = r
                .args
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            for (i, w) in a.iter().enumerate() {
                if ["--bind-fd", "--ro-bind-data", "--seccomp"].contains(&w.as_str()) {
                    let n: i32 = a[i + 1].parse().unwrap();
                    assert!(nums.contains(&n), "{w} {n} not in the table");
                }
            }
            assert!(a.windows(3).any(|w| w == ["--bind-fd", "210", "/w"]));
            assert!(a
                .windows(3)
                .any(|w| w == ["--ro-bind-data", "202", "/etc/resolv.conf"]));
            assert!(a
                .windows(3)
                .any(|w| w == ["--ro-bind-data", "211", "/etc/other"]));
            assert!(a.windows(3).any(|w| w == ["--bind-fd", "212", "/y"]));
            let shim = a.iter().position(|x| x == "__shim").unwrap();
            let gate = &a[shim + 3];
            assert_eq!(net.is_jail(), gate != "-", "{gate}");
            assert_eq!(net.is_jail(), r.holder.is_some());
            let proxied = match &net {
                Network::Allowlist(_) => true,
                Network::Jail(j) => j.proxy.is_some(),
                Network::Host => false,
            };
            assert_eq!(proxied, r.proxy_channel.is_some());
            // publish-port: the allowlist holder's connector gets a channel;
            // pasta needs none.
            if matches!(net, Network::Allowlist(_)) {
                assert_eq!(r.inward_args, ["196", "3000"]);
                assert!(r.fds.contains(&(196, FdContent::InwardChannel)));
            } else {
                assert!(r.inward_args.is_empty());
                assert!(!r.fds.iter().any(|(_, c)| *c == FdContent::InwardChannel));
            }
            assert_eq!(&a[a.len() - 2..], ["/bin/true", "-x"]);
        }
    }

    #[test]
    fn the_shim_keeps_ignored_only_what_the_launcher_ignored() {
        let tail = |ignored: Vec<String>| {
            let mut sb = minimal(Network::Host);
            sb.command.ignored = ignored;
            let a: Vec<String> = render(&sb)
                .args
                .iter()
                .map(|x| x.to_string_lossy().into_owned())
                .collect();
            let shim = a.iter().position(|x| x == "__shim").unwrap();
            a[shim + 5..].to_vec()
        };
        assert_eq!(tail(Vec::new()), ["--", "/bin/true", "-x"]);
        assert_eq!(
            tail(vec!["INT".into(), "QUIT".into()]),
            ["ignore=INT,QUIT", "--", "/bin/true", "-x"]
        );
    }

    #[test]
    fn plan_json_names_every_operation() {
        let j = serde_json::to_value(minimal(Network::Host)).unwrap();
        assert_eq!(j["mounts"][0]["op"], "checked");
        assert_eq!(j["mounts"][0]["resolved"], "/w");
        assert_eq!(j["mounts"][1]["data"]["text"], "nameserver 9.9.9.9\n");
        assert_eq!(j["network"]["mode"], "host");
        assert_eq!(j["seccomp"]["bytes"], 3);
        assert_eq!(j["env"][0][0], "A");
    }

    /// Decision 0017: a writable data file is `--perms 0600 --bind-data`,
    /// its fd in the table with its text.
    #[test]
    fn a_writable_data_file_is_bound_read_write_and_private() {
        let mut sb = minimal(Network::Host);
        sb.mounts.push(Mount::Data {
            dst: "/h/.claude/.credentials.json".into(),
            data: Data::Writable("{}".into()),
        });
        let r = render(&sb);
        let a: Vec<String> = r
            .args
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let at = a.iter().position(|x| x == "--bind-data").unwrap();
        assert_eq!(a[at - 2..at], ["--perms", "0600"]);
        assert_eq!(a[at + 2], "/h/.claude/.credentials.json");
        let n: i32 = a[at + 1].parse().unwrap();
        assert!(r
            .fds
            .iter()
            .any(|(m, c)| *m == n && matches!(c, FdContent::Bytes(b) if b == b"{}")));
    }
}
