//! The devcontainer feature on a real Docker engine with the official
//! devcontainer CLI (issue #14 item 2): a devcontainer.json holding only
//! "image" and the "features" entry (no runArgs) gives a working, sandboxed
//! `claude` for root and for a non-root remoteUser.
//!
//! The test starts its own dockerd: data-root, exec-root, pidfile and socket
//! in a private directory, in a network namespace of its own (only loopback
//! and the engine's bridge: every packet stays in namespaces the test made)
//! and a private mount namespace, so this machine's Docker state, interfaces
//! and iptables are untouched. A Drop guard removes the containers, stops the
//! engine and removes everything, panics included.
//!
//! No image registry is reachable: the base image is imported from the
//! debootstrap cache tests/feature.rs builds, with the feature's packages and
//! the remote user added beforehand (with this machine's network) and the
//! real Claude Code at /usr/libexec/claude-sandbox/claude (claudeSource
//! "existing"), so the image build itself needs no network.
//!
//! In the root container the egress jail is then probed directly (the
//! static probe example as the real binary, `claude shell CMD`): listeners
//! on the container's loopback and on the engine's bridge address are
//! reached from the container and blocked from its sandbox. Last,
//! `devcontainer features test` runs the feature's scenarios
//! (devcontainer-feature/test/claude-sandbox/scenarios.json) on this engine.

mod common;
use common::devcontainer::*;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The engine's bridge address (its containers' gateway), fixed with --bip;
/// in tests/testnet/netprobe.py's TEST_NETWORKS.
const GATEWAY: &str = "172.17.0.1";

/// Root, bubblewrap, the real Claude Code and the engine's programs; under
/// CI a missing one fails, elsewhere the test is skipped loudly.
fn docker_prerequisites() -> Option<PathBuf> {
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
struct Engine {
    dir: TestDir,
    daemon: Child,
    /// The cgroup parent its containers go under (cgroupfs driver).
    cgroup: String,
}

impl Engine {
    fn start() -> Engine {
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

    fn host(&self) -> String {
        format!("unix://{}/docker.sock", self.dir.display())
    }

    fn docker(&self, args: &[&str]) -> Output {
        Command::new("docker")
            .args(args)
            .env("DOCKER_HOST", self.host())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The official CLI against this engine.
    fn devcontainer(&self, args: &[&str]) -> Output {
        Command::new(CLI)
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
fn jail_probe(engine: &Engine, id: &str, ws: &Path) {
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

/// `devcontainer features test` with the standard layout (src/ and test/
/// with test.sh, scenarios.json and a script per scenario), run on a copy of
/// devcontainer-feature/ made offline-able: installsAfter removed (the CLI
/// looks its ghcr.io features up), every scenario's image replaced by the
/// imported base image and claudeSource set to "existing" (the base image
/// carries the real Claude Code; "npm" needs the registry). Only the
/// scenarios run: the autogenerated test.sh and duplicate tests install
/// the feature with its defaults (claudeSource npm), which needs the
/// registry. The CLI's temporary workspaces go to a TMPDIR in the engine's
/// directory.
fn features_test(engine: &Engine) {
    let proj = engine.dir.join("featproj");
    std::fs::create_dir_all(&proj).unwrap();
    for d in ["src", "test"] {
        copy_tree(&repo().join("devcontainer-feature").join(d), &proj.join(d));
    }
    without_installs_after(&proj.join("src/claude-sandbox"));
    let sc_path = proj.join("test/claude-sandbox/scenarios.json");
    let mut sc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sc_path).unwrap()).unwrap();
    let names: Vec<String> = sc.as_object().unwrap().keys().cloned().collect();
    for v in sc.as_object_mut().unwrap().values_mut() {
        v["image"] = IMAGE.into();
        v["features"]["claude-sandbox"]["claudeSource"] = "existing".into();
    }
    std::fs::write(&sc_path, serde_json::to_string_pretty(&sc).unwrap()).unwrap();
    let tmp = engine.dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let o = Command::new(CLI)
        .args([
            "features",
            "test",
            "--skip-autogenerated",
            "--skip-duplicated",
        ])
        .args(["-f", "claude-sandbox", "-p"])
        .arg(&proj)
        .env("DOCKER_HOST", engine.host())
        .env_remove("DOCKER_CONTEXT")
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        o.status.success() && !out.contains("FAIL:"),
        "devcontainer features test:\n{out}"
    );
    for n in &names {
        assert!(out.contains(&format!("Passed:      '{n}'")), "{n}:\n{out}");
    }
    for l in out.lines().filter(|l| l.contains("Passed:")) {
        eprintln!("features test: {}", l.trim());
    }
}

#[test]
fn feature_on_docker_with_the_official_cli_and_no_run_args() {
    let Some(real) = docker_prerequisites() else {
        return;
    };
    let t0 = Instant::now();
    let expected = stdout(&Command::new(&real).arg("--version").output().unwrap())
        .trim()
        .to_string();
    if !Path::new(CLI).exists() {
        // build.sh installs the CLI from the npm registry when missing.
        eprintln!("installing the devcontainer CLI with build.sh");
    }
    build_feature();
    let root = image_root();
    let engine = Engine::start();
    let t_engine = t0.elapsed();

    // The base image: the cached root plus the real Claude Code.
    let extra = image_extra(&engine.dir, &real);
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
    let t_image = t0.elapsed();

    let mut root_container = None;
    for (name, user) in [("rootws", None), ("userws", Some("vscode"))] {
        let who = user.unwrap_or("root");
        let ws = workspace(&engine.dir, name, user);
        let wsf = ws.display().to_string();
        let id = up(
            &|a| engine.devcontainer(a),
            &|a| engine.docker(a),
            &wsf,
            who,
        );
        // What the feature's metadata set: no privileged, no devices, its
        // security options.
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
        let o = exec(
            "id -un; stat -c '%F %t:%T %a' /dev/net/tun; stat -c '%F %t:%T' /dev/net/host-tun",
        );
        assert_eq!(
            stdout(&o).trim(),
            format!("{who}\ncharacter special file a:c8 666\ncharacter special file a:c8"),
            "{}",
            stderr(&o)
        );
        a_user_notices(&exec, name, who, &expected);
        if user.is_none() {
            root_container = Some((id, ws));
        }
    }
    let t_up = t0.elapsed();
    let (id, ws) = root_container.unwrap();
    jail_probe(&engine, &id, &ws);
    let t_jail = t0.elapsed();
    features_test(&engine);
    let t_ftest = t0.elapsed();
    eprintln!(
        "docker feature e2e: engine up {:.1?}, image imported {:.1?}, two `up`s {:.1?}, jail probe {:.1?}, features test {:.1?}, total {:.1?}",
        t_engine,
        t_image - t_engine,
        t_up - t_image,
        t_jail - t_up,
        t_ftest - t_jail,
        t0.elapsed()
    );
    drop(engine);
}
