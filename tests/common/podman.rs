//! Rootless Podman in a private "host" of the test's own (tests/podman.rs
//! and tests/release.rs; the design is in tests/podman.rs's doc): the
//! unprivileged user, its namespaces and storage, the official CLI
//! against it, what a user notices in a container it brings up, the
//! jail probe, and the scan for anything left.

use super::devcontainer::*;
use super::{stderr, stdout, TestDir};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The unprivileged user Podman runs as (only in the host's /etc overlay).
pub(crate) const USER: &str = "csbpodman";
/// Its uid and its subordinate ids (/etc/subuid and /etc/subgid in the
/// overlay: first, count), by this process's PID, so that two runs at once
/// (developers share machines) can tell their processes apart.
pub(crate) fn ids() -> (u32, u32, u32) {
    let p = std::process::id();
    (40000 + p % 20000, 1_000_000 + (p % 4000) * 65536, 65536)
}
/// slirp4netns's gateway: with `allow_host_loopback` the host's loopback.
pub(crate) const GATEWAY: &str = "10.0.2.2";
/// The host's address (host.containers.internal), in netprobe's TEST_NETWORKS.
pub(crate) const HOST_ADDR: &str = "192.168.5.9";

/// Root, bubblewrap, the real Claude Code, Podman and what rootless Podman
/// needs; under CI a missing one fails, elsewhere the test is skipped loudly.
pub(crate) fn podman_prerequisites() -> Option<PathBuf> {
    let tools = [
        "podman",
        "newuidmap",
        "newgidmap",
        "slirp4netns",
        "conmon",
        "debootstrap",
        "ip",
        "nsenter",
        "setpriv",
        "python3",
    ];
    let dirs = [
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
        "/usr/libexec/podman",
    ];
    prerequisites(
        "podman_feature",
        &tools,
        &dirs,
        "podman, uidmap and slirp4netns",
    )
}

/// The namespace's init: reaps the orphans Podman leaves (conmon
/// double-forks), so none lingers as a zombie; exits on SIGTERM.
pub(crate) const REAPER: &str = "import os, signal, time
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.5)
";

/// The test's private host (see the file's doc); everything in it ends when
/// dropped.
pub(crate) struct Host {
    pub(crate) dir: TestDir,
    /// `unshare`, whose child is the namespace's init.
    holder: Child,
    /// The init's PID here, outside.
    pub(crate) init: u32,
    /// Its PID namespace, to find leftovers by.
    pidns: PathBuf,
}

impl Host {
    pub(crate) fn start() -> Host {
        let dir = TestDir::new("podman", "host");
        let d = dir.display();
        let (uid, sub, subn) = ids();
        let script = format!(
            r#"set -e
ip link set lo up
ip link add csbhost0 type bridge
ip addr add {HOST_ADDR}/32 dev csbhost0
ip link set csbhost0 up
mkdir -p {d}/ov/up {d}/ov/wk
mount -t overlay overlay -o volatile,lowerdir=/etc,upperdir={d}/ov/up,workdir={d}/ov/wk /etc
useradd -l -u {uid} -U -m -d {d}/home -s /bin/bash {USER}
echo {USER}:{sub}:{subn} > /etc/subuid
echo {USER}:{sub}:{subn} > /etc/subgid
mount -t tmpfs -o mode=755 tmpfs /dev/net
mknod -m 0666 /dev/net/tun c 10 200
install -d -m 0700 -o {uid} -g {uid} {d}/run {d}/fast
mount -t tmpfs -o mode=700,uid={uid},gid={uid} tmpfs {d}/fast
install -d -m 0700 -o {uid} -g {uid} {d}/fast/storage {d}/fast/tmp
install -d -m 0755 -o {uid} -g {uid} {d}/ws
mount --make-rshared /
touch {d}/ready
exec python3 -c '{REAPER}'
"#
        );
        let log = std::fs::File::create(dir.join("host.log")).unwrap();
        let holder = Command::new("unshare")
            .args([
                "--mount",
                "--net",
                "--pid",
                "--fork",
                "--kill-child",
                "--mount-proc",
            ])
            .args(["--propagation", "private", "bash", "-c", &script])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut h = Host {
            dir,
            init: 0,
            pidns: PathBuf::new(),
            holder,
        };
        let t0 = Instant::now();
        while !h.dir.join("ready").exists() {
            let log = std::fs::read_to_string(h.dir.join("host.log")).unwrap_or_default();
            assert!(
                t0.elapsed() < Duration::from_secs(30) && h.holder.try_wait().unwrap().is_none(),
                "the test's host did not come up: {log}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let children = format!("/proc/{0}/task/{0}/children", h.holder.id());
        h.init = std::fs::read_to_string(&children)
            .unwrap()
            .trim()
            .parse()
            .expect("the namespace's init");
        h.pidns = std::fs::read_link(format!("/proc/{}/ns/pid", h.init)).unwrap();
        h.configure_podman();
        h
    }

    /// The user's Podman configuration: the kernel's own overlayfs (no
    /// fuse-overlayfs) with the storage on the host's tmpfs (fast, and gone
    /// with the namespace however the test ends), cgroupfs and file events
    /// (no systemd user session), and the host's loopback at the gateway.
    fn configure_podman(&self) {
        let conf = self.dir.join("home/.config/containers");
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::write(
            conf.join("storage.conf"),
            format!(
                "[storage]\ndriver = \"overlay\"\ngraphroot = \"{}/fast/storage\"\n",
                self.dir.display()
            ),
        )
        .unwrap();
        std::fs::write(
            conf.join("containers.conf"),
            "[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n\
             network_cmd_options = [\"allow_host_loopback=true\"]\n",
        )
        .unwrap();
        self.give(&self.dir.join("home/.config"));
        // The CLI's `--docker-path`: Podman, except that `events` replays
        // the last minutes first. The CLI starts `podman events --filter
        // event=start` and, without waiting for it to subscribe, `podman
        // run`; a start logged before the subscription is missed and `up`
        // waits for ever (devcontainers/cli#1236, #1269; it hung a run
        // here). The CLI takes only the start of the container carrying
        // its workspace's labels, so a replayed older start is ignored.
        let wrapper = self.podman_wrapper();
        std::fs::create_dir_all(wrapper.parent().unwrap()).unwrap();
        std::fs::write(
            &wrapper,
            "#!/bin/sh\n\
             if [ \"$1\" = events ]; then shift; exec /usr/bin/podman events --since 10m \"$@\"; fi\n\
             exec /usr/bin/podman \"$@\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Where [`Host::configure_podman`] puts the CLI's Podman wrapper.
    pub(crate) fn podman_wrapper(&self) -> PathBuf {
        self.dir.join("bin/podman")
    }

    /// `argv` as the user, in the host.
    pub(crate) fn user_cmd(&self, argv: &[&str]) -> Command {
        let d = self.dir.display();
        let uid = ids().0.to_string();
        let mut c = Command::new("nsenter");
        c.args(["-t", &self.init.to_string(), "-m", "-n", "-p", "--"])
            .args(["setpriv", "--reuid", &uid, "--regid", &uid])
            .args(["--init-groups", "--", "env", "-i"])
            .arg(format!("HOME={d}/home"))
            .arg(format!("USER={USER}"))
            .arg(format!("LOGNAME={USER}"))
            .arg(format!("XDG_RUNTIME_DIR={d}/run"))
            .arg(format!("TMPDIR={d}/fast/tmp"))
            .arg("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .args(argv)
            .stdin(Stdio::null());
        c
    }

    pub(crate) fn user(&self, argv: &[&str]) -> Output {
        self.user_cmd(argv).output().unwrap()
    }

    pub(crate) fn podman(&self, args: &[&str]) -> Output {
        let mut argv = vec!["podman"];
        argv.extend_from_slice(args);
        self.user(&argv)
    }

    /// The official CLI against the user's rootless Podman: `SUBCOMMAND
    /// --docker-path PODMAN REST` (after the subcommand, before the
    /// command `exec` runs), PODMAN the wrapper of [`Host::configure_podman`].
    pub(crate) fn devcontainer(&self, args: &[&str]) -> Output {
        let podman = self.podman_wrapper().display().to_string();
        let mut argv = vec![CLI, args[0], "--docker-path", &podman];
        argv.extend_from_slice(&args[1..]);
        self.user(&argv)
    }

    /// `path` owned by the user (the workspaces the CLI and Podman use).
    pub(crate) fn give(&self, path: &Path) {
        let st = Command::new("chown")
            .args(["-R", &format!("{0}:{0}", ids().0)])
            .arg(path)
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// A network namespace of a process in the host, by its PID there.
    pub(crate) fn netns_of(&self, pid_inside: u32) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root/proc/{pid_inside}/ns/net", self.init))
    }

    /// Processes in the host's PID namespace, or running as the user or
    /// one of its subordinate ids (the containers' processes, in PID
    /// namespaces of their own).
    fn leftovers(pidns: &Path) -> Vec<String> {
        let (user, first, count) = ids();
        let subids = first..first + count;
        let mut left = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
            let uid: Option<u32> = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next()?.parse().ok());
            let ours = uid.is_some_and(|u| u == user || subids.contains(&u));
            if ours || std::fs::read_link(e.path().join("ns/pid")).is_ok_and(|l| l == pidns) {
                let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                left.push(format!("{name}: {}", String::from_utf8_lossy(&cmd)));
            }
        }
        left
    }

    /// End the namespace: its init is killed, and with it every process
    /// in it. Returns the processes still in it (none expected).
    pub(crate) fn stop(&mut self) -> Vec<String> {
        // unshare's --kill-child ends the init when unshare ends; the init
        // is killed first all the same (its PID is valid until unshare
        // reaps it).
        if self.init != 0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.init as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            self.init = 0;
        }
        let _ = self.holder.kill();
        let _ = self.holder.wait();
        if self.pidns.as_os_str().is_empty() {
            return Vec::new();
        }
        let t0 = Instant::now();
        loop {
            let left = Host::leftovers(&self.pidns);
            if left.is_empty() || t0.elapsed() > Duration::from_secs(10) {
                break left;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.stop();
        // TestDir's own drop removes the user's home, storage and runtime
        // directory (as root: the storage holds files of its subordinate ids).
        let _ = &self.dir;
    }
}

/// Whether the tun devices (the host's, and the link to it) are there.
pub(crate) const TUN_SEEN: &str =
    "{ [ -e /dev/net/host-tun ] || [ -e /dev/net/tun ]; } && echo TUN-VISIBLE || echo TUN-ABSENT";

/// The egress jail in the root container's sandbox: the container's
/// loopback, the host's loopback at the gateway and the host's address are
/// reached from the container outside the sandbox (the control) and
/// blocked from inside it ([`probe_the_jail`]). Neither tun device is
/// inside the sandbox.
pub(crate) fn jail_probe(host: &Host, id: &str, ws: &Path) {
    let pid = container_pid(&|a| host.podman(a), id);
    let lo = "127.0.0.1:47201";
    let gw = format!("{GATEWAY}:47202");
    let ha = format!("{HOST_ADDR}:47203");
    let host_ns = PathBuf::from(format!("/proc/{}/ns/net", host.init));
    let _in_container = Listener::start(&host.netns_of(pid), lo, "container-loopback");
    let _host_lo = Listener::start(&host_ns, "127.0.0.1:47202", "host-loopback");
    let _host_addr = Listener::start(&host_ns, &ha, "host-address");

    stage_probe(ws);
    host.give(ws);
    let targets = [
        (lo, "container-loopback"),
        (gw.as_str(), "host-loopback"),
        (ha.as_str(), "host-address"),
    ];
    let first = format!("{TUN_SEEN}; ");
    let (outside, inside) = probe_the_jail(&|a| host.podman(a), id, ws, &targets, &first);
    // The host's device is the container's, never the sandbox's.
    assert!(outside.contains("TUN-VISIBLE"), "{outside}");
    assert!(inside.contains("TUN-ABSENT"), "{inside}");
    // The jail's routes, not a sandbox without network: its blackholes.
    for r in ["blackhole 10.0.0.0/8", "blackhole 192.168.0.0/16"] {
        assert!(inside.contains(r), "{r}:\n{inside}");
    }
}

/// `devcontainer up` for the workspace `ws` (made by [`workspace`] or
/// [`registry_workspace`] under the host's `ws/`), then what a user
/// notices inside as `user` (its remoteUser; root when `None`). Returns
/// the container's id.
pub(crate) fn up_and_check(host: &Host, ws: &Path, user: Option<&str>, expected: &str) -> String {
    let who = user.unwrap_or("root");
    let name = ws.file_name().unwrap().to_string_lossy().to_string();
    host.give(ws);
    let wsf = ws.display().to_string();
    let id = up(&|a| host.devcontainer(a), &|a| host.podman(a), &wsf, who);
    // What the feature's metadata set: no privileged, no devices, its
    // security options and the host's device bound by its mounts.
    let hc = stdout(&host.podman(&[
        "inspect",
        "-f",
        "{{json .HostConfig.Privileged}} {{json .HostConfig.Devices}} {{json .HostConfig.SecurityOpt}} {{range .Mounts}}{{.Source}}>{{.Destination}} {{end}}",
        &id,
    ]));
    assert!(
        hc.starts_with("false [] ")
            && hc.contains("seccomp=unconfined")
            && hc.contains("/dev/net/tun>/dev/net/host-tun "),
        "{hc}"
    );
    let exec = |script: &str| {
        host.devcontainer(&["exec", "--workspace-folder", &wsf, "bash", "-lc", script])
    };
    let o = exec("id -un; stat -L -c '%F %t:%T %a' /dev/net/tun; readlink /dev/net/tun");
    assert_eq!(
        stdout(&o).trim(),
        format!("{who}\ncharacter special file a:c8 666\nhost-tun"),
        "{}",
        stderr(&o)
    );
    a_user_notices(&exec, &name, who, expected);
    id
}

/// What the test must leave as it found it on this machine.
pub(crate) fn machine_state() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| format!("({e})"));
    let known = Command::new("getent")
        .args(["passwd", USER])
        .output()
        .unwrap();
    format!(
        "subuid: {}\nsubgid: {}\nuser {USER}: {}\n/dev/net/tun: {:o}",
        read("/etc/subuid"),
        read("/etc/subgid"),
        known.status.success(),
        std::fs::metadata("/dev/net/tun").map_or(0, |m| m.permissions().mode()),
    )
}

/// The base image ([`image_root`] plus the real Claude Code `real`)
/// imported into the user's storage as [`IMAGE`].
pub(crate) fn import_image(host: &Host, real: &Path) {
    let root = image_root();
    let extra = image_extra(&host.dir, real);
    let mut tar = Command::new("bash")
        .args(["-o", "pipefail", "-c", &image_tar_command(&root, &extra)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let import = host
        .user_cmd(&["podman", "import", "-", IMAGE])
        .stdin(tar.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(tar.wait().unwrap().success(), "tar of the image root");
    assert!(
        import.status.success(),
        "podman import: {}",
        stderr(&import)
    );
    std::fs::remove_dir_all(&extra).unwrap();
}
