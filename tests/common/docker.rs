//! A private Docker engine (tests/docker.rs and tests/release.rs; the
//! design is in tests/docker.rs's doc): its own dockerd, data and network
//! namespace, the official CLI against it, the base image imported, what a
//! user notices in a container it brings up, and the jail probe.

use super::devcontainer::*;
use super::{stderr, stdout, TestDir};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The engine's bridge address (its containers' gateway), fixed with --bip;
/// in tests/testnet/netprobe.py's TEST_NETWORKS.
pub(crate) const GATEWAY: &str = "172.17.0.1";

/// Root, bubblewrap, the real Claude Code and the engine's programs; under
/// CI a missing one fails, elsewhere the test is skipped loudly.
pub(crate) fn docker_prerequisites() -> Option<PathBuf> {
    prerequisites(
        "docker_feature",
        &[
            "dockerd",
            "containerd",
            "runc",
            "docker",
            "debootstrap",
            "ip",
        ],
        &["/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"],
        "docker.io and debootstrap",
    )
}

/// A private Docker engine; everything it made is gone when dropped.
pub(crate) struct Engine {
    pub(crate) dir: TestDir,
    pub(crate) daemon: Child,
    /// The cgroup parent its containers go under (cgroupfs driver).
    pub(crate) cgroup: String,
}

impl Engine {
    pub(crate) fn start() -> Engine {
        let dir = TestDir::new("docker", "engine");
        let cgroup = format!("csb-docker-e2e-{}", std::process::id());
        let d = dir.display();
        let script = format!(
            "set -e\nip link set lo up\nexec dockerd --data-root {d}/data --exec-root {d}/exec \
             --pidfile {d}/docker.pid -H unix://{d}/docker.sock --cgroup-parent /{cgroup} \
             --bip {GATEWAY}/16 --ip6tables=false --userland-proxy=false --log-level=warn"
        );
        let log = std::fs::File::create(dir.join("dockerd.log")).unwrap();
        // unshare execs bash, which execs dockerd: the child is the daemon.
        let daemon = Command::new("unshare")
            .args(["--net", "--mount", "--propagation", "private", "bash", "-c"])
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let e = Engine {
            dir,
            daemon,
            cgroup,
        };
        let t0 = Instant::now();
        loop {
            let o = e.docker(&["info", "--format", "{{.ServerVersion}}"]);
            if o.status.success() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "dockerd did not come up: {}",
                std::fs::read_to_string(e.dir.join("dockerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        e
    }

    pub(crate) fn host(&self) -> String {
        format!("unix://{}/docker.sock", self.dir.display())
    }

    pub(crate) fn docker(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .args(args)
            .env("DOCKER_HOST", self.host())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The engine's network namespace (its daemon's).
    pub(crate) fn netns(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.daemon.id()))
    }

    /// The official CLI against this engine, in the engine's network
    /// namespace (where the release rehearsal's registry serves).
    pub(crate) fn devcontainer(&self, args: &[&str]) -> Output {
        Command::new("nsenter")
            .arg(format!("--net={}", self.netns().display()))
            .arg(CLI)
            .args(args)
            .env("DOCKER_HOST", self.host())
            .env_remove("DOCKER_CONTEXT")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let ids = stdout(&self.docker(&["ps", "-aq"]));
        for id in ids.split_whitespace() {
            let _ = self.docker(&["rm", "-f", id]);
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.daemon.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = self.daemon.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        // The engine's mounts lived in its own mount namespace; its cgroups
        // are ours to remove.
        if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
            for c in rd.flatten() {
                let _ = std::fs::remove_dir(c.path().join(&self.cgroup));
            }
        }
        let _ = std::fs::remove_dir(format!("/sys/fs/cgroup/unified/{}", self.cgroup));
        // TestDir's own drop removes data-root, exec-root and socket.
        let _ = &self.dir;
    }
}

/// The egress jail inside the container's sandbox (issue #14 item 2): a
/// listener on the container's own loopback and one on the engine's side of
/// the bridge (the gateway) are reached from the container outside the
/// sandbox (the control) and blocked from inside it ([`probe_the_jail`]).
pub(crate) fn jail_probe(engine: &Engine, id: &str, ws: &Path) {
    let pid = container_pid(&|a| engine.docker(a), id);
    let lo = "127.0.0.1:47101";
    let gw = format!("{GATEWAY}:47102");
    let netns_of = |pid: u32| PathBuf::from(format!("/proc/{pid}/ns/net"));
    let _in_container = Listener::start(&netns_of(pid), lo, "container-loopback");
    let _on_engine = Listener::start(&netns_of(engine.daemon.id()), &gw, "engine-gateway");
    stage_probe(ws);
    let targets = [(lo, "container-loopback"), (gw.as_str(), "engine-gateway")];
    let (_, inside) = probe_the_jail(&|a| engine.docker(a), id, ws, &targets, "");
    // The jail's routes, not a sandbox without network: its blackholes.
    assert!(inside.contains("blackhole 172.16.0.0/12"), "{inside}");
}

/// The base image ([`image_root`] plus the real Claude Code `real`)
/// imported into the engine as [`IMAGE`].
pub(crate) fn import_image(engine: &Engine, real: &Path) {
    let root = image_root();
    let extra = image_extra(&engine.dir, real);
    let import = format!(
        "{} | docker import - {IMAGE}",
        image_tar_command(&root, &extra)
    );
    let o = Command::new("bash")
        .args(["-o", "pipefail", "-c", &import])
        .env("DOCKER_HOST", engine.host())
        .output()
        .unwrap();
    assert!(o.status.success(), "docker import: {}", stderr(&o));
    std::fs::remove_dir_all(&extra).unwrap();
}

/// `devcontainer up` for the workspace `ws` (made by [`workspace`] or
/// [`registry_workspace`]), then what the feature's metadata set (no
/// privileged, no devices, its security options), the container's own
/// /dev/net/tun and what a user notices inside as `user` (its
/// remoteUser; root when `None`). Returns the container's id.
pub(crate) fn up_and_check(
    engine: &Engine,
    ws: &Path,
    user: Option<&str>,
    expected: &str,
) -> String {
    let who = user.unwrap_or("root");
    let name = ws.file_name().unwrap().to_string_lossy().to_string();
    let wsf = ws.display().to_string();
    let id = up(
        &|a| engine.devcontainer(a),
        &|a| engine.docker(a),
        &wsf,
        who,
    );
    let hc = stdout(&engine.docker(&[
        "inspect",
        "-f",
        "{{json .HostConfig.Privileged}} {{json .HostConfig.Devices}} {{json .HostConfig.SecurityOpt}}",
        &id,
    ]));
    assert!(
        hc.starts_with("false ") && hc.contains("seccomp=unconfined"),
        "{hc}"
    );
    assert!(hc.contains(" [] ") || hc.contains(" null "), "{hc}");
    let exec = |script: &str| {
        engine.devcontainer(&["exec", "--workspace-folder", &wsf, "bash", "-lc", script])
    };
    // The entrypoint's own node (Docker lets root make it); the host's,
    // which the feature's mounts bind for engines that do not, beside it.
    let o =
        exec("id -un; stat -c '%F %t:%T %a' /dev/net/tun; stat -c '%F %t:%T' /dev/net/host-tun");
    assert_eq!(
        stdout(&o).trim(),
        format!("{who}\ncharacter special file a:c8 666\ncharacter special file a:c8"),
        "{}",
        stderr(&o)
    );
    a_user_notices(&exec, &name, who, expected);
    id
}
