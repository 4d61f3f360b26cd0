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

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const CLI: &str = "/opt/csb-devcontainer-cli/node_modules/.bin/devcontainer";
const IMAGE: &str = "csb-e2e-base:bookworm";

/// Root, bubblewrap, the real Claude Code and the engine's programs; under
/// CI a missing one fails, elsewhere the test is skipped loudly.
fn prerequisites() -> Option<PathBuf> {
    if !require("docker_feature") {
        return None;
    }
    let missing: Vec<&str> = [
        "dockerd",
        "containerd",
        "runc",
        "docker",
        "debootstrap",
        "ip",
    ]
    .into_iter()
    .filter(|t| {
        !["/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .any(|d| Path::new(d).join(t).exists())
    })
    .collect();
    if !missing.is_empty() {
        let msg = format!(
            "end-to-end test `docker_feature` needs {} (scripts/test.sh installs docker.io and debootstrap)",
            missing.join(", ")
        );
        if std::env::var_os("CI").is_some() {
            panic!("{msg} (CI is set: a missing prerequisite is a failure)");
        }
        eprintln!("\n!!!! SKIPPED: {msg} !!!!\n");
        return None;
    }
    real_claude()
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
             --ip6tables=false --userland-proxy=false --log-level=warn"
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

/// The base image's root: the debootstrap cache plus the feature's packages
/// and a non-root user, cached beside it (made once, under a lock).
fn image_root() -> PathBuf {
    let base = debian::base_root();
    let root = PathBuf::from(format!(
        "{}/docker-base-{}",
        debian::ROOT_CACHE,
        base.file_name().unwrap().to_string_lossy()
    ));
    let script = format!(
        r#"set -euo pipefail
exec 9>{cache}/.lock
flock 9
r={root}
if [ -f "$r.complete" ] && [ -d "$r" ]; then exit 0; fi
rm -rf "$r" "$r.tmp" "$r.complete"
cp -a {base} "$r.tmp"
bwrap --bind "$r.tmp" / --dev /dev --proc /proc --ro-bind /sys /sys \
    --ro-bind /etc/resolv.conf /etc/resolv.conf --clearenv \
    --setenv PATH /usr/sbin:/usr/bin:/sbin:/bin --setenv DEBIAN_FRONTEND noninteractive \
    bash -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap passt iproute2 git ca-certificates >/dev/null && rm -rf /var/lib/apt/lists/* && useradd -m -s /bin/bash vscode'
mv "$r.tmp" "$r"
touch "$r.complete"
"#,
        cache = debian::ROOT_CACHE,
        root = root.display(),
        base = base.display(),
    );
    let o = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the image root: {}{}",
        stdout(&o),
        stderr(&o)
    );
    root
}

/// `devcontainer-feature/build.sh`: the static binary staged into the feature.
fn build_feature() {
    let o = Command::new("bash")
        .arg(repo().join("devcontainer-feature/build.sh"))
        .output()
        .unwrap();
    assert!(o.status.success(), "build.sh: {}{}", stdout(&o), stderr(&o));
}

/// A workspace whose .devcontainer/devcontainer.json holds only "image",
/// "features" (the feature as a local folder) and, for a non-root user,
/// "remoteUser".
fn workspace(parent: &Path, name: &str, user: Option<&str>) -> PathBuf {
    let ws = parent.join(name);
    let dc = ws.join(".devcontainer");
    std::fs::create_dir_all(&dc).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(repo().join("devcontainer-feature/src/claude-sandbox"))
        .arg(dc.join("claude-sandbox"))
        .status()
        .unwrap();
    assert!(st.success());
    // installsAfter names features on ghcr.io, which the CLI looks up even
    // when they are not used: no registry is reachable here.
    let meta_path = dc.join("claude-sandbox/devcontainer-feature.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta.as_object_mut().unwrap().remove("installsAfter");
    std::fs::write(&meta_path, serde_json::to_string_pretty(&meta).unwrap()).unwrap();
    let mut config = serde_json::json!({
        "image": IMAGE,
        "features": { "./claude-sandbox": { "claudeSource": "existing" } },
    });
    if let Some(u) = user {
        config["remoteUser"] = u.into();
    }
    std::fs::write(
        dc.join("devcontainer.json"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        repo().join("devcontainer-feature/test/claude-sandbox/test.sh"),
        ws.join("feature-test.sh"),
    )
    .unwrap();
    ws
}

#[test]
fn feature_on_docker_with_the_official_cli_and_no_run_args() {
    let Some(real) = prerequisites() else {
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
    let extra = engine.dir.join("extra");
    let lib = extra.join("usr/libexec/claude-sandbox");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(&real, lib.join("claude")).unwrap();
    let import = format!(
        "tar -C {} -c . -C {} --no-recursion usr/libexec/claude-sandbox usr/libexec/claude-sandbox/claude | docker import - {IMAGE}",
        shell_quote(&root.display().to_string()),
        shell_quote(&extra.display().to_string())
    );
    let o = Command::new("bash")
        .args(["-o", "pipefail", "-c", &import])
        .env("DOCKER_HOST", engine.host())
        .output()
        .unwrap();
    assert!(o.status.success(), "docker import: {}", stderr(&o));
    std::fs::remove_dir_all(&extra).unwrap();
    let t_image = t0.elapsed();

    for (name, user) in [("rootws", None), ("userws", Some("vscode"))] {
        let who = user.unwrap_or("root");
        let ws = workspace(&engine.dir, name, user);
        let wsf = ws.display().to_string();
        let o = engine.devcontainer(&["up", "--workspace-folder", &wsf]);
        assert!(
            o.status.success() && stdout(&o).contains("\"outcome\":\"success\""),
            "devcontainer up ({who}):\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        let id = stdout(&engine.docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=devcontainer.local_folder={wsf}"),
        ]))
        .trim()
        .to_string();
        assert!(!id.is_empty(), "no container for {wsf}");
        // What the feature's metadata set: no privileged, no devices.
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
        let o = exec("id -un; stat -c '%F %t:%T %a' /dev/net/tun");
        assert_eq!(
            stdout(&o).trim(),
            format!("{who}\ncharacter special file a:c8 666"),
            "{}",
            stderr(&o)
        );
        let dir = format!("/workspaces/{name}");
        let o = exec(&format!("cd {dir} && claude --version"));
        assert!(
            o.status.success() && stdout(&o).trim() == expected,
            "claude --version as {who} through the shadow:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        let o = exec("/usr/libexec/claude-sandbox/claude-sandbox doctor");
        assert!(
            o.status.success()
                && stdout(&o).contains("all in place")
                && !stdout(&o).contains("FAIL"),
            "doctor as {who}:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        let o = exec(&format!("cd {dir} && bash feature-test.sh"));
        assert!(
            o.status.success() && !stdout(&o).contains("FAIL"),
            "the feature's test.sh as {who}:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    eprintln!(
        "docker feature e2e: engine up {:.1?}, image imported {:.1?}, total {:.1?}",
        t_engine,
        t_image - t_engine,
        t0.elapsed()
    );
    drop(engine);
}
